"""Read verbs of :class:`~memlineage.MemoryManager`: get, find, recall, explain, audit..."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from memlineage._twins import async_twin
from memlineage._verbs._calls import verb
from memlineage.ledger import Event
from memlineage.lineage import Explanation
from memlineage.models import Memory, MemoryKind, Scope
from memlineage.retrieval import RecallResult
from memlineage.services import Services

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ReadVerbs", "RecallOptions"]


class RecallOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`ReadVerbs.recall` besides ``query`` and ``scope`` (for ``admin_recall``)."""

    k: int
    kinds: Iterable[MemoryKind | str] | None
    tags: Iterable[str] | None
    include_suspect: bool
    purpose: str | None
    session_only: bool
    activity_id: str | None
    trace: bool
    reinforce: bool
    budget: float | None


class ReadVerbs:
    """The read verbs, each delegating to its service, with their async twins.

    Mixed into :class:`~memlineage.MemoryManager`, which sets ``services``.
    """

    services: Services

    @verb
    def get(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Memory | None:
        """The memory version with this id, or ``None`` when absent or in another scope.

        Raises:
            InvalidInputError: bad id or scope.
        """
        return self.services.reads.get(memory_id, scope=scope)

    aget = async_twin(get)

    @verb
    def get_many(self, ids: Sequence[str], *, scope: Scope | Mapping[str, Any] | str) -> list[Memory | None]:
        """Batch :meth:`get`, aligned with ``ids`` (``None`` for misses and other scopes' memories)."""
        return self.services.reads.get_many(ids, scope=scope)

    aget_many = async_twin(get_many)

    @verb
    def require(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Memory:
        """Like :meth:`get` but raises.

        Raises:
            MemoryNotFoundError: no memory with that id in the scope (other scopes' memories are reported as
                not found, never as existing).
        """
        return self.services.reads.require(memory_id, scope=scope)

    arequire = async_twin(require)

    @verb
    def find(
        self,
        *,
        scope: Scope | Mapping[str, Any] | str,
        slot: str | None = None,
        tags: Iterable[str] | None = None,
        kinds: Iterable[MemoryKind | str] | None = None,
        include_suspect: bool = True,
        session_only: bool = False,
        limit: int | None = None,
        offset: int = 0,
        newest: int | None = None,
    ) -> list[Memory]:
        """Live memories in ``scope`` matching exact criteria, oldest first; no query, no ranking, no reinforcement.

        Use it to look a memory up by its slot key (``find(scope=s, slot="user/seat")[-1]`` is the current value)
        or to list a session's memories; use :meth:`recall` to search by meaning.

        Args:
            scope: Caller's scope; only its memories are listed.
            slot: Only memories holding this semantic slot key.
            tags: Memories must carry all these tags.
            kinds: Restrict to these memory kinds.
            include_suspect: Also list ``suspect`` memories (default); otherwise ``active`` only.
            session_only: Only memories written in ``scope.session_id``.
            limit: At most this many (``None`` = all).
            offset: Skip this many first.
            newest: Only the last this many of the matches (after ``offset`` / ``limit``), still oldest first: a
                session's recent turns without loading the whole session.

        Raises:
            InvalidInputError: bad scope, kinds, limit, offset or newest.
        """
        return self.services.reads.find(
            scope=scope,
            slot=slot,
            tags=tags,
            kinds=kinds,
            include_suspect=include_suspect,
            session_only=session_only,
            limit=limit,
            offset=offset,
            newest=newest,
        )

    afind = async_twin(find)

    @verb
    def slots(
        self,
        *,
        scope: Scope | Mapping[str, Any] | str | None = None,
        prefix: str = "",
        admin: tuple[str, str] | None = None,
    ) -> list[tuple[str, str]]:
        """Distinct ``(user_id, slot)`` keys held by live memories, sorted; keys only, never content.

        Args:
            scope: Only this scope's slots. ``None`` lists every user's keys, which is a cross-user read: it
                needs ``admin``.
            prefix: Only slot keys starting with this string.
            admin: ``(actor, reason)`` for a cross-user listing; recorded as an ``admin_access`` event.

        Raises:
            ScopeViolationError: ``scope`` is None and no ``admin`` actor and reason were given.
        """
        return self.services.reads.slots(scope=scope, prefix=prefix, admin=admin)

    aslots = async_twin(slots)

    @verb
    def recall(
        self,
        query: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        k: int = 5,
        kinds: Iterable[MemoryKind | str] | None = None,
        tags: Iterable[str] | None = None,
        include_suspect: bool = False,
        purpose: str | None = None,
        session_only: bool = False,
        activity_id: str | None = None,
        trace: bool = False,
        reinforce: bool = True,
        budget: float | None = None,
    ) -> RecallResult:
        """Retrieve the ``k`` best memories for ``query`` within ``scope`` (the retrieval gate).

        Candidates come from the index filtered by scope and status inside the query; read policies run before
        the top-k cut (so ``k`` results come back whenever ``k`` eligible memories exist); a final guard re-checks
        scope and status against the ledger; served memories are reinforced.

        Args:
            query: Query text; non-empty.
            scope: Caller's scope; only its memories are considered.
            k: Number of results, >= 0.
            kinds: Restrict to these memory kinds.
            tags: Memories must carry all these tags.
            include_suspect: Also serve ``suspect`` memories (flagged); ignored for ``purpose="decision"``.
            purpose: ``"decision"`` asks for decision-grade memories only (policies may be stricter).
            session_only: Only memories written in ``scope.session_id``.
            activity_id: The run that reads; records ``used`` edges from it to every served memory.
            trace: Keep the full trace: every withheld candidate with its reason (``trace.excluded``) and the
                stages' wall times (``trace.timings_ms``). Without it ``RecallResult.trace`` holds the candidate
                counts, policy decisions and conflicts only.
            reinforce: Update last use and use count of served memories.
            budget: Refresh budget in policy cost units (>= 0; None = unlimited); a refresh costing more than
                what is left serves the stale memory flagged ``stale`` instead.

        Returns:
            A :class:`~memlineage.retrieval.RecallResult`, best first; ``hit.score`` in [0, 1], higher = better.

        Raises:
            InvalidInputError: bad query, k, kinds or scope.
        """
        return self.services.recall.recall(
            query,
            scope=scope,
            k=k,
            kinds=kinds,
            tags=tags,
            include_suspect=include_suspect,
            purpose=purpose,
            session_only=session_only,
            activity_id=activity_id,
            trace=trace,
            reinforce=reinforce,
            budget=budget,
        )

    arecall = async_twin(recall)

    @verb
    def admin_recall(
        self,
        query: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        actor: str,
        reason: str,
        **kwargs: Unpack[RecallOptions],
    ) -> RecallResult:
        """Explicit, audited cross-scope read: recall in ``scope`` (another user's) on behalf of an operator.

        Writes an ``admin_access`` event (actor, reason, SHA-256 of the query) to that user's log before reading;
        every other read and write stays confined to its caller's scope. Keyword arguments are those of
        :meth:`recall`.

        Raises:
            InvalidInputError: ``actor`` or ``reason`` is empty, or a bad recall argument.
        """
        query = self.services.policy.admin_access(query, scope=Scope.coerce(scope), actor=actor, reason=reason)
        return self.recall(query, scope=Scope.coerce(scope), **kwargs)

    aadmin_recall = async_twin(admin_recall)

    @verb
    def ancestors(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> list[Memory]:
        """Every premise of the memory, transitively, nearest first.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
        """
        return self.services.reads.ancestors(memory_id, scope=scope)

    aancestors = async_twin(ancestors)

    @verb
    def descendants(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> list[Memory]:
        """Every memory derived from this one, transitively, nearest first.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
        """
        return self.services.reads.descendants(memory_id, scope=scope)

    adescendants = async_twin(descendants)

    @verb
    def explain(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Explanation:
        """The provenance chain of a memory down to its source memories and activities.

        Returns:
            An :class:`~memlineage.lineage.Explanation` with ``to_text()``, ``to_mermaid()``, ``to_dot()`` and
            ``to_prov_json()``.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
        """
        return self.services.reads.explain(memory_id, scope=scope)

    aexplain = async_twin(explain)

    @verb
    def audit(
        self,
        scope: Scope | Mapping[str, Any] | str,
        *,
        memory_id: str | None = None,
        types: Iterable[str] | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """The scope's events, oldest first (``created``, ``seen_again``, ``suspect``, ``retracted``, ...).

        Raises:
            MemoryNotFoundError: ``memory_id`` is not in the scope.
        """
        return self.services.reads.audit(scope, memory_id=memory_id, types=types, limit=limit)

    aaudit = async_twin(audit)

    @verb
    def stats(self, scope: Scope | Mapping[str, Any] | str | None = None) -> dict[str, Any]:
        """Counts per status, kind and source, edges, activities, events and index size.

        Returns:
            ``memories``, ``by_status``, ``by_kind``, ``by_source``, ``edges``, ``activities``, ``events``;
            ``index_pending`` (index writes still owed), ``index_exact`` (memories of scopes the exact plan serves,
            held by the ledger and not written to the ANN index) and, store-wide only, ``index_entries`` (entries
            in the ANN index); ``adapter_errors``: framework hooks of this process that could not record a step
            and let the agent go on, by surface (:meth:`record_adapter_error`).
        """
        out = self.services.reads.stats(scope)
        out["adapter_errors"] = dict(self.__dict__.get("_adapter_errors", {}))
        return out

    astats = async_twin(stats)

    @verb
    def slot_history(self, slot: str, *, scope: Scope | Mapping[str, Any] | str) -> list[Memory]:
        """Every version that ever held a semantic slot in the scope, oldest first (superseded included)."""
        return self.services.reads.slot_history(slot, scope=scope)

    aslot_history = async_twin(slot_history)

    @verb
    def slot_value(
        self, slot: str, *, scope: Scope | Mapping[str, Any] | str, as_of: datetime | None = None
    ) -> Memory | None:
        """Point-in-time read of a slot: the version that held it at ``as_of`` (system time; default now).

        A version holds the slot from its ``recorded_at`` until its ``invalidated_at`` (superseded,
        retracted...).

        Returns:
            That memory, or ``None`` when the slot was empty then.
        """
        return self.services.reads.slot_value(slot, scope=scope, as_of=as_of)

    aslot_value = async_twin(slot_value)
