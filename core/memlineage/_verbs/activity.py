"""Activity and index-maintenance verbs of :class:`~memlineage.MemoryManager`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memlineage._twins import async_twin
from memlineage._verbs._calls import verb
from memlineage.models import Activity, Relation, Scope
from memlineage.services import Services
from memlineage.services.index_sync import ConsistencyReport

__all__ = ["ActivityVerbs"]


class ActivityVerbs:
    """Activity verbs (record, list, end, link) and index maintenance (repair, verify, reindex).

    Mixed into :class:`~memlineage.MemoryManager`, which sets ``services``.
    """

    services: Services

    def record_adapter_error(
        self, surface: str, error: BaseException, *, scope: Scope | Mapping[str, Any] | str | None = None
    ) -> None:
        """Note that a framework hook could not record something (the agent went on): count, log, event.

        Adapters call this instead of raising into the agent loop. The failure is logged at WARNING, counted per
        surface (``stats()["adapter_errors"]``) and, with a scope, kept as an ``adapter_error`` event of that user
        (error type and message, never the content being written). Never raises.

        Args:
            surface: Which hook failed, e.g. ``"LineageMiddleware.after_agent"``.
            error: What it raised.
            scope: Whose run it was, when known.
        """
        counts: Counter[str] = self.__dict__.setdefault("_adapter_errors", Counter())
        counts[surface] += 1
        self.services.activities.record_adapter_error(surface, error, scope=scope)

    @verb
    def record_activity(self, activity: Activity, *, scope: Scope | Mapping[str, Any] | str | None = None) -> Activity:
        """Insert or update an activity (agent run, LLM call, tool call...) owned by a scope.

        The activity's ``id`` is MemLineage's key: an id already used by another user is refused, so a run can
        never take over another user's activity. Framework ids go into ``run_id`` / ``tool_call_id``, which are
        unique per user and run (:meth:`find_activities` looks them up).

        Args:
            activity: The activity; ``activity.scope`` is its owner unless ``scope`` is given.
            scope: Owner (required unless ``activity.scope`` is set; must agree with it when both are).

        Returns:
            The stored activity (with its scope).

        Raises:
            InvalidInputError: ``activity`` is not an :class:`Activity`, no scope is given, or another activity of
                the user already has this ``run_id`` and ``tool_call_id``.
            ScopeViolationError: the id belongs to another user's activity, or ``scope`` and ``activity.scope``
                name different users.
        """
        return self.services.activities.record_activity(activity, scope=scope)

    arecord_activity = async_twin(record_activity)

    @verb
    def activities(
        self,
        scope: Scope | Mapping[str, Any] | str,
        *,
        run_id: str | None = None,
        kinds: Iterable[str] | None = None,
        outcome: str | None = None,
        limit: int | None = None,
    ) -> list[Activity]:
        """The scope's activities (agent runs, LLM calls, tool calls, invalidations), oldest first.

        A read: nothing is written. ``scope.session_id``, when set, narrows to that session.

        Args:
            scope: Whose activities; never another user's.
            run_id: Only this activity and the activities it informed, transitively (``parent_id`` chain): one
                agent run's LLM and tool calls.
            kinds: Only these kinds (``"tool_call"``, ``"llm_call"``, ``"agent_run"``...).
            outcome: Only this outcome (``"error"`` lists failed calls; ``"success"``, ``"unknown"``...).
            limit: Only the last N (>= 0) after filtering.

        Returns:
            :class:`Activity` records, oldest first; ``metadata`` holds the call's input, tool-call id or error.

        Raises:
            InvalidInputError: bad scope, kinds or limit.
            MemoryNotFoundError: ``run_id`` is not an activity of this scope.
        """
        return self.services.activities.of_scope(scope, run_id=run_id, kinds=kinds, outcome=outcome, limit=limit)

    aactivities = async_twin(activities)

    @verb
    def get_activity(self, activity_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Activity | None:
        """The activity with this id if it is readable in ``scope`` (same user; same agent when one is named).

        Raises:
            InvalidInputError: bad scope.
        """
        return self.services.activities.get_activity(activity_id, scope=scope)

    aget_activity = async_twin(get_activity)

    @verb
    def find_activities(
        self,
        scope: Scope | Mapping[str, Any] | str,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
        kind: str | None = None,
        outcome: str | None = None,
        session_only: bool = False,
    ) -> list[Activity]:
        """The scope's activities matching every given filter, oldest first.

        E.g. ``find_activities(alice, run_id=r, outcome="error")`` lists the failed calls of one run.

        Raises:
            InvalidInputError: bad scope.
        """
        return self.services.activities.find_activities(
            scope, run_id=run_id, tool_call_id=tool_call_id, kind=kind, outcome=outcome, session_only=session_only
        )

    afind_activities = async_twin(find_activities)

    @verb
    def end_activity(
        self,
        activity_id: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        outcome: str = "success",
        metadata: Mapping[str, Any] | None = None,
    ) -> Activity:
        """Close an activity of ``scope`` with an outcome (``success``, ``error``, ``unknown``, ``fallback``).

        Raises:
            MemoryNotFoundError: no such activity in the scope.
            InvalidInputError: bad scope or metadata.
        """
        return self.services.activities.end_activity(activity_id, scope=scope, outcome=outcome, metadata=metadata)

    aend_activity = async_twin(end_activity)

    @verb
    def link(
        self,
        memory_id: str,
        activity_id: str,
        relation: Relation | str = Relation.WAS_GENERATED_BY,
        *,
        scope: Scope | Mapping[str, Any] | str,
    ) -> bool:
        """Record that an activity also generated (``wasGeneratedBy``) or read (``used``) an existing memory.

        For a write absorbed by an exact duplicate (``seen_again``), which keeps the first writer's activity only,
        e.g. a user turn stored by a memory component before the agent run that received it was recorded.
        Idempotent; records a ``linked`` event. Premises are not edited here (use :meth:`remember`).

        Args:
            memory_id: The memory; must be readable in ``scope``.
            activity_id: A recorded activity of the same user (or of none).
            relation: ``wasGeneratedBy`` (memory -> activity) or ``used`` (activity -> memory).
            scope: Caller's scope.

        Returns:
            ``True`` when the edge was added, ``False`` when it already existed.

        Raises:
            InvalidInputError: another relation.
            MemoryNotFoundError: no such memory in the scope, or no such activity.
            ScopeViolationError: the activity belongs to another user.
        """
        return self.services.activities.link(memory_id, activity_id, relation, scope=scope)

    alink = async_twin(link)

    @verb
    def repair(self) -> dict[str, int]:
        """Finish index writes interrupted by a crash (run on open); never fails because of one bad entry.

        When the batch write fails, each entry is retried alone; an entry the index still refuses is
        *quarantined* (``index_state='quarantined'``: kept in the ledger, left out of the index, listed by
        :meth:`verify` and retried by ``verify(fix=True)``), so one bad entry can never block opening the store.

        Returns:
            ``{"upserted": n, "updated": n, "removed": n, "quarantined": n}``.

        Raises:
            StorageError: the ledger failed (an index failure is quarantined instead).
        """
        return self.services.index_sync.repair()

    arepair = async_twin(repair)

    @verb
    def flush_index(self) -> None:
        """Apply now the index status changes that cascades left to the background sync (see design notes).

        Reads never need this: they check every candidate's status against the ledger. Use it before reading
        the index directly (``mm.index``, ``mm.lexical``) or timing it.
        """
        self.services.index_sync.flush()

    aflush_index = async_twin(flush_index)

    @verb
    def verify(self, *, fix: bool = False) -> ConsistencyReport:
        """Check that the index agrees with the ledger: ids, scope, status and content hash.

        The ledger is the source of truth: every memory it marks as indexed must have one index entry with the
        same ``user_id``, ``status`` and ``content_hash``, and the index must hold nothing else. Unfinished index
        writes (a crash between the ledger commit and the index write) are listed as ``pending``.

        Args:
            fix: Also repair what was found: re-index missing or mismatched entries, delete orphans and entries
                that should be gone, then finish pending writes (:meth:`repair`). The report describes the state
                before the fix.

        Returns:
            A :class:`ConsistencyReport`; ``report.ok`` is True when ledger and index agree.

        Raises:
            StorageError: the ledger or the index cannot be read.
        """
        return self.services.index_sync.verify(fix=fix)

    averify = async_twin(verify)

    @verb
    def reindex(self, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the whole index from the ledger (vectors stored in the ledger; re-embedded where missing).

        Args:
            on_progress: Called as ``on_progress(done, total)`` after each batch of entries written (the CLI's
                progress bar).

        Returns:
            Number of entries indexed.
        """
        return self.services.index_sync.reindex(on_progress=on_progress)

    areindex = async_twin(reindex)
