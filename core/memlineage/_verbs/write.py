"""Write verbs of :class:`~memlineage.MemoryManager`: remember, supersede, retract, forget, erase, sweep..."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memlineage._forget import memories_erased, scope_erased
from memlineage._twins import async_twin
from memlineage._verbs._calls import verb
from memlineage.lineage import CascadeReport, ErasureReceipt
from memlineage.models import Activity, Memory, MemoryKind, Scope, Source, as_utc
from memlineage.services import Services
from memlineage.services.consolidate import SummarizerLike
from memlineage.services.write import RememberOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from memlineage.consolidation import ConsolidationResult
    from memlineage.value import SweepReport

__all__ = ["RememberOptions", "WriteVerbs"]


class WriteVerbs:
    """The write and lifecycle verbs, each delegating to its service, with their async twins.

    Mixed into :class:`~memlineage.MemoryManager`, which sets ``services``.
    """

    services: Services

    @verb
    def remember(
        self,
        content: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        source: Source | str = "user",
        kind: MemoryKind | str | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        derived_from: Iterable[str] = (),
        confidence: float = 1.0,
        activity_id: str | None = None,
        parent_activity_id: str | None = None,
        valid_from: datetime | None = None,
        ttl: timedelta | float | None = None,
        slot: str | None = None,
        trust: float | None = None,
        context_hash: str | None = None,
        embedding: Sequence[float] | None = None,
        force: bool = False,
        goal: str | None = None,
    ) -> Memory:
        """Store one memory with its lineage (the write gate).

        An exact duplicate (same normalised content, scope and kind among live memories) is a no-op that returns
        the existing memory and records ``seen_again``; when it comes from another source or other premises it is
        recorded as an independent support (corroboration). A ``slot`` already held by another live memory in the
        scope is superseded by this one.

        Args:
            content: The text; non-empty after strip.
            scope: Owner; required.
            source: ``Source`` or ``"user"``, ``"tool:flight_api"``, ``"reasoning"``, ``"agent"``...
            kind: ``episodic``, ``semantic``, ``procedural`` or ``working``; None (default) = ``episodic``, or with a
                value model ``semantic`` when V reaches the store threshold (promotion to long-term memory).
            tags: Labels for policies and filters.
            metadata: JSON-like dict; ``None`` = ``{}``; NaN/inf and keys starting with ``_ml_`` are refused.
            derived_from: Premise memory ids (wasDerivedFrom); must exist in the same scope. A premise that is
                superseded, retracted, expired or suspect when the memory is written (also when that happens while
                the write runs) leaves the new memory ``suspect``, as the cascade would have; an erased one is
                refused.
            confidence: Source confidence in [0, 1].
            activity_id: The activity that generated it (wasGeneratedBy), e.g. a LangChain run id.
            parent_activity_id: That activity's parent run.
            valid_from: When the event happened / the fact became true (default: now).
            ttl: Time to live (``timedelta`` or seconds); after it the memory expires.
            slot: Semantic slot key (e.g. ``"user/seat_preference"``); a new value supersedes the old.
            trust: Trust in [0, 1]; default from the source kind times confidence; always capped by premises.
            context_hash: Hash of the producing context.
            embedding: Precomputed vector (skips the embedder).
            force: With a value model: store even when V is below the store threshold (like "remember ...").
            goal: With a value model: the agent's current goal in words, for the goal-relevance factor.

        Returns:
            The stored (or existing duplicate) memory. With a value model, a candidate whose value V is below the
            store threshold is not stored: it goes to its session's short-term buffer and the returned memory has
            kind ``working`` and is not in the ledger (see :mod:`memlineage.value`).

        Raises:
            InvalidInputError: bad content, scope, source, metadata, confidence or premises.
            ScopeViolationError: a premise belongs to another scope.
            MemoryNotFoundError: a premise does not exist.
            PolicyViolationError: a write policy denied it.
            StorageError: the ledger failed (nothing was written).
        """
        # parsed once, here, into the frozen request the write path carries (no dict of keyword arguments)
        draft = self.services.drafts.draft(
            content=content, scope=scope, source=source, kind=kind, tags=tags, metadata=metadata,
            derived_from=derived_from, confidence=confidence, activity_id=activity_id,
            parent_activity_id=parent_activity_id, valid_from=valid_from, ttl=ttl, slot=slot, trust=trust,
            context_hash=context_hash, embedding=embedding, force=force, goal=goal,
        )  # fmt: skip
        return self.services.writes.write([draft])[0]

    aremember = async_twin(remember)

    @verb
    def remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[Memory]:
        """Batch :meth:`remember`: one ledger transaction and one index write for all items.

        Args:
            items: Mappings with :meth:`remember`'s keyword arguments (``content`` and ``scope`` required).

        Returns:
            One memory per item, in input order.

        Raises:
            Same as :meth:`remember`; on any error nothing is written.
        """
        return self.services.writes.remember_many(items)

    aremember_many = async_twin(remember_many)

    @verb
    def supersede(
        self,
        old_id: str,
        new_content: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        source: Source | str = "user",
        **kwargs: Unpack[RememberOptions],
    ) -> CascadeReport:
        """Store a new value and keep the old one as ``superseded`` (never delete-without-add).

        The new version records ``wasRevisionOf`` the old; the old one's descendants become suspect.
        Keyword arguments are those of :meth:`remember`; kind, tags, slot and metadata default to the old ones.

        Returns:
            A report with ``memory`` (the new version) and ``suspect``.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
            InvalidInputError: the old memory is not live (already superseded, retracted, erased...).
            ConflictError: another writer superseded, retracted or erased it while this call ran (checked under
                the row's lock in the writing transaction); nothing was written: supersede its newest version.
            PolicyViolationError: an update policy denied it (e.g. a tool overwriting a user assertion).
        """
        return self.services.writes.supersede(old_id, new_content, scope=scope, source=source, **kwargs)

    asupersede = async_twin(supersede)

    @verb
    def revise(
        self,
        memory_id: str,
        content: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        source: Source | str | None = None,
        **kwargs: Unpack[RememberOptions],
    ) -> Memory:
        """Write a new version of a memory (``wasRevisionOf``); same as :meth:`supersede` but returns the memory.

        A revision keeps the old version's provenance unless told otherwise: ``source`` defaults to the old
        version's source and ``derived_from`` to its premises (those not erased), so its trust stays the minimum
        over them (a revision never launders an untrusted premise).

        Raises:
            See :meth:`supersede`.
        """
        return self.services.writes.revise(memory_id, content, scope=scope, source=source, **kwargs)

    arevise = async_twin(revise)

    @verb
    def retract(
        self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "retracted",
        activity_id: str | None = None, source: Source | str | None = None,
    ) -> CascadeReport:  # fmt: skip
        """Withdraw a memory; every descendant left without a valid support becomes ``suspect``.

        A conclusion needs all its premises, so one withdrawn premise is enough; a fact corroborated by another
        independent source stays active.

        Args:
            memory_id: The memory to retract.
            scope: Caller's scope; must contain the memory.
            reason: Why (kept in the event log).
            activity_id: The activity that caused it (wasInvalidatedBy); default a new invalidation activity.
            source: Who asks (e.g. ``"agent"``); delete policies see it, so write protection can refuse a
                non-user source withdrawing what the user asserted. None = the application itself.

        Returns:
            A report whose ``suspect`` lists the ids marked suspect.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
            PolicyViolationError: a delete policy denied it.
        """
        return self.services.lifecycle.retract(
            memory_id, scope=scope, reason=reason, activity_id=activity_id, source=source
        )

    aretract = async_twin(retract)

    @verb
    def impact(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> CascadeReport:
        """Dry run of :meth:`retract`: which descendants would become suspect. Changes nothing.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
        """
        return self.services.lifecycle.impact(memory_id, scope=scope)

    aimpact = async_twin(impact)

    @verb
    def revalidate(
        self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "revalidated"
    ) -> Memory:
        """Mark a ``suspect`` (or ``expired``) memory active again after it was checked.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
            InvalidInputError: the memory is not suspect or expired.
        """
        return self.services.lifecycle.revalidate(memory_id, scope=scope, reason=reason)

    arevalidate = async_twin(revalidate)

    @verb
    def undo(
        self, decision_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "decision undone"
    ) -> Memory:
        """Reverse an automatic update decision (``update`` or ``contradict``) made by update detection.

        The memory the decision superseded or retracted is active again, every memory that the decision's cascade
        made suspect and that is still suspect is active again, and the decision activity's outcome becomes
        ``undone``; what the decision generated (the clauses of the old statement it carried over) is retracted, and
        any decision such a clause made is undone with it. A memory comes back active only while one of its support
        groups has every premise active: one that still rests on a premise withdrawn since stays (or, the restored
        memory itself, becomes) ``suspect``. For an undone ``update`` the two statements are taken to be about
        different attributes: the restored memory gives up its slot, the newer one keeps it. Decision ids are in
        ``explain(...).decisions`` and in the ``audit`` events.

        Args:
            decision_id: Id of the ``update_detection`` activity.
            scope: Caller's scope; must own the decision.
            reason: Why (kept in the event log).

        Returns:
            The restored memory.

        Raises:
            MemoryNotFoundError: no such decision in the scope.
            InvalidInputError: already undone, a ``duplicate`` decision (nothing was stored to restore), or the
                memory changed since (it is no longer in the state the decision left it in).
        """
        return self.services.lifecycle.undo(decision_id, scope=scope, reason=reason)

    aundo = async_twin(undo)

    @verb
    def confirm(
        self, decision_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "possible update confirmed"
    ) -> CascadeReport:
        """Carry out a *possible update* that update detection recorded below its confidence threshold.

        The older statement is superseded by the newer one (``wasRevisionOf``), what derives from it turns suspect
        (the cascade, as for ``supersede``), and the decision becomes an applied ``update``, reversible with
        :meth:`undo`. Possible updates are listed by ``explain(...).decisions`` (name ``possible_update``, outcome
        ``pending``) and in ``audit`` (``possible_update`` events).

        Args:
            decision_id: Id of the ``possible_update`` activity.
            scope: Caller's scope; must own the decision.
            reason: Why (kept on the decision and in the event log).

        Returns:
            The cascade report: ``target`` is the superseded statement, ``memory`` the newer one, ``suspect`` what
            turned suspect.

        Raises:
            MemoryNotFoundError: no such decision in the scope.
            InvalidInputError: not a pending possible update, or either statement is no longer live.
            PolicyViolationError: an update policy refuses the change.
        """
        return self.services.lifecycle.confirm(decision_id, scope=scope, reason=reason)

    aconfirm = async_twin(confirm)

    @verb
    def reject(
        self, decision_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "possible update rejected"
    ) -> Activity:
        """Dismiss a *possible update*: both statements stay as they are, and recall no longer ranks by it.

        Args:
            decision_id: Id of the ``possible_update`` activity.
            scope: Caller's scope; must own the decision.
            reason: Why (kept on the decision and in the event log).

        Returns:
            The decision activity, outcome ``rejected``.

        Raises:
            MemoryNotFoundError: no such decision in the scope.
            InvalidInputError: not a pending possible update.
        """
        return self.services.lifecycle.reject(decision_id, scope=scope, reason=reason)

    areject = async_twin(reject)

    @verb
    def forget(
        self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "forgotten",
        source: Source | str | None = None,
    ) -> Memory:  # fmt: skip
        """Archive a memory: out of the index, kept in the ledger (its descendants are not affected).

        ``source`` is who asks (see :meth:`retract`); None = the application itself.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
            PolicyViolationError: a delete policy denied it (e.g. an agent forgetting a user assertion).
        """
        return self.services.lifecycle.forget(memory_id, scope=scope, reason=reason, source=source)

    aforget = async_twin(forget)

    @verb
    def erase(
        self, memory_id: str | None = None, *, scope: Scope | Mapping[str, Any] | str, reason: str = "erasure request",
        source: Source | str | None = None,
    ) -> ErasureReceipt:  # fmt: skip
        """Redact content in the ledger and the index; keep the events (without content) and return a receipt.

        With ``memory_id``: that memory and every version in its revision chain. Without: every memory in
        ``scope`` (all of the user's memories, or one agent's / session's when the scope names one), plus the
        scope's activity metadata (and, for a whole user, the data of every event of the user but earlier
        receipts). Either way the metadata of the activities that generated, used or invalidated an erased memory
        is redacted too: update decisions (their evidence quotes old and new values, withdrawn words), chat
        message occurrences (content blocks, tool-call arguments), tool calls. Consolidated summaries derived from
        what is erased are erased with it (their text restates it); other descendants outside the erased set
        become suspect. Later versions and withdrawals outside the erased set are indexed again without the
        erased words; the process's caches keyed by text are emptied, and the run recorder's open runs of the
        scope (with ``memory_id``: those holding an erased memory) dropped. Set-based: the cost grows with the
        rows erased, a few statements per step (100,000 memories take less time than writing them). ``source`` is
        who asks (see :meth:`retract`); None = the application itself. On PostgreSQL old row versions stay in the
        table files until
        ``mm.ledger.vacuum(full=True)``.

        Raises:
            MemoryNotFoundError: ``memory_id`` is not in the scope.
            PolicyViolationError: a delete policy denied it.
        """
        receipt = self.services.lifecycle.erase(memory_id, scope=scope, reason=reason, source=source)
        if memory_id is None:  # e.g. the run recorder's open runs of the scope hold its turns in the process
            scope_erased(self, Scope.coerce(scope))
        else:  # ... and an open run that holds an erased memory is dropped
            memories_erased(self, Scope.coerce(scope), frozenset(receipt.memory_ids))
        return receipt

    aerase = async_twin(erase)

    @verb
    def expire_due(self, *, scope: Scope | Mapping[str, Any] | str | None = None) -> list[str]:
        """Mark memories whose TTL has passed as ``expired`` (descendants become suspect).

        Args:
            scope: Only this scope's memories; ``None`` = every scope (maintenance jobs).

        Returns:
            The ids that expired now.
        """
        return self.services.cascade.expire_due(scope=scope)

    aexpire_due = async_twin(expire_due)

    @verb
    def flush_reinforcement(self) -> int:
        """Write pending value reinforcements (+0.05 per use) now; returns the number of memories written."""
        return self.services.value.flush()

    aflush_reinforcement = async_twin(flush_reinforcement)

    @verb
    def buffered(self, scope: Scope | Mapping[str, Any] | str) -> list[Any]:
        """The session's short-term buffer: what the write gate kept out of long-term memory, oldest first.

        Returns:
            :class:`~memlineage.value.BufferedItem` list (empty without a value model or session).
        """
        return self.services.value.buffered(Scope.coerce(scope))

    abuffered = async_twin(buffered)

    @verb
    def sweep(
        self, *, now: datetime | None = None, scope: Scope | Mapping[str, Any] | str | None = None
    ) -> SweepReport:
        """The forget gate: archive memories whose decayed value ``V_eff`` fell below the threshold (0.2).

        Archived memories leave the index and stay in the ledger with an ``archived`` event saying why. A
        memory that live memories still derive from is kept and reported in ``protected``.

        Args:
            now: Time to evaluate decay at (default: the clock); pass a future time to simulate.
            scope: Only this user's memories; None = all users (maintenance job).

        Returns:
            A :class:`~memlineage.value.SweepReport` (``archived`` ids with V_eff, ``protected`` ids with
            their live dependants, ``checked``).
        """
        at = as_utc(now, "now") if now is not None else None
        return self.services.value.sweep(now=at, scope=Scope.coerce(scope) if scope is not None else None)

    asweep = async_twin(sweep)

    @verb
    def consolidate(
        self,
        scope: Scope | Mapping[str, Any] | str,
        session_id: str | None = None,
        summarizer: SummarizerLike | None = None,
        *,
        require_overlap: bool = True,
    ) -> ConsolidationResult:
        """Summarise a session into cited semantic memories (seed 002 citation check).

        Args:
            scope: Owner; its ``session_id`` is used when ``session_id`` is None.
            session_id: The session to consolidate.
            summarizer: A LangChain chat model, a LlamaIndex LLM, a callable ``prompt -> str`` or an object
                with ``summarize(messages) -> str``; None = the offline
                :class:`~memlineage.consolidation.RuleBasedConsolidator`.
            require_overlap: Also reject lines sharing no content term with the messages they cite.

        Returns:
            A :class:`~memlineage.consolidation.ConsolidationResult`: ``memories`` written (each
            ``wasDerivedFrom`` the messages it cites), ``accepted`` and ``rejected`` lines with reasons.

        Raises:
            InvalidInputError: no session given.
        """
        return self.services.consolidation.consolidate(scope, session_id, summarizer, require_overlap=require_overlap)

    aconsolidate = async_twin(consolidate)
