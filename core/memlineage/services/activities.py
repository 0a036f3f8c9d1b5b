"""Activities (agent runs, LLM and tool calls) and their links to memories: record, list, find, end, link.

Activities are the PROV ``Activity`` nodes; capture support (:mod:`memlineage.capture`) records them and
annotates how each premise of a captured memory was attributed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from memlineage import telemetry
from memlineage.errors import InvalidInputError, MemoryNotFoundError, ScopeViolationError
from memlineage.ledger import Ledger
from memlineage.models import Activity, Relation, Scope, from_epoch, normalize_metadata, to_epoch
from memlineage.ports import Clock
from memlineage.services._rows import activity_owner, edge_row, event_row, row_activity
from memlineage.services.reads import Reads

__all__ = ["Activities"]

logger = logging.getLogger(__name__)


class Activities:
    """Scope-checked activity records.

    Args:
        ledger: The ledger.
        reads: Reads memories (scope-checked) for :meth:`link`.
        clock: Returns "now".
        write_mutex: The write path's mutex (links and attributions are serialised with writes).
    """

    def __init__(self, *, ledger: Ledger, reads: Reads, clock: Clock, write_mutex: threading.RLock) -> None:
        self.ledger = ledger
        self.reads = reads
        self.clock = clock
        self.write_mutex = write_mutex

    def record_adapter_error(
        self, surface: str, error: BaseException, *, scope: Scope | Mapping[str, Any] | str | None = None
    ) -> None:
        """See :meth:`memlineage.MemoryManager.record_adapter_error`."""
        message = f"{type(error).__name__}: {error}"[:300]
        telemetry.count("memlineage.adapter.errors", surface=surface)
        telemetry.current().error(error)  # the hook's span (see memlineage.capture.shield)
        logger.warning("MemLineage: %s could not record this step (%s); the agent goes on", surface, message)
        try:
            who = Scope.coerce(scope) if scope is not None else None
            if who is None:
                return
            data = {"surface": surface, "error": message}
            with self.ledger.transaction() as conn:
                self.ledger.insert_events(
                    conn, [event_row(to_epoch(self.clock()), "adapter_error", None, None, who.user_id, data)]
                )
        except Exception as exc:  # noqa: BLE001 - the store itself may be what failed; the count and log stay
            logger.warning("MemLineage: could not keep the adapter error as an event either (%s)", type(exc).__name__)

    def record_activity(self, activity: Activity, *, scope: Scope | Mapping[str, Any] | str | None = None) -> Activity:
        """See :meth:`memlineage.MemoryManager.record_activity`."""
        if not isinstance(activity, Activity):
            msg = f"record_activity() takes an Activity, not {type(activity).__name__}"
            raise InvalidInputError(msg)
        owner = activity_owner(activity, scope)
        if activity.scope != owner:
            activity = activity.model_copy(update={"scope": owner})
        with self.ledger.transaction() as conn:
            row = self.ledger.activity_rows([activity.id], conn)[0]
            if row is not None and row["user_id"] != owner.user_id:
                msg = (
                    f"activity id {activity.id!r} cannot be recorded in this scope (activity ids are unique in a "
                    "store); use a new id"
                )
                raise ScopeViolationError(msg)
            if activity.tool_call_id is not None and activity.run_id is not None:
                same = self.ledger.find_activity_rows(
                    owner.user_id, run_id=activity.run_id, tool_call_id=activity.tool_call_id, conn=conn
                )
                if any(r["id"] != activity.id and r["run_id"] == activity.run_id for r in same):
                    msg = (
                        f"tool call {activity.tool_call_id!r} of run {activity.run_id!r} is already recorded; "
                        "find it with find_activities() and update it"
                    )
                    raise InvalidInputError(msg)
            if "started_at" not in activity.model_fields_set:
                # Not given: the store's clock (which may be simulated) starts a new activity, and an update keeps
                # the recorded start, so an activity never ends before it starts on a clock other than the wall's.
                start = from_epoch(row["started_at"]) if row is not None else self.clock()
                activity = activity.model_copy(update={"started_at": start})
            self.ledger.upsert_activity(conn, activity)
            if activity.parent_id and row is None:
                self.ledger.insert_edges(
                    conn,
                    [
                        edge_row(
                            activity.id, activity.parent_id, Relation.WAS_INFORMED_BY,
                            to_epoch(activity.started_at) or 0.0, owner.user_id,
                        )
                    ],
                )  # fmt: skip
        return activity

    def of_scope(
        self,
        scope: Scope | Mapping[str, Any] | str,
        *,
        run_id: str | None = None,
        kinds: Iterable[str] | None = None,
        outcome: str | None = None,
        limit: int | None = None,
    ) -> list[Activity]:
        """See :meth:`memlineage.MemoryManager.activities`."""
        scope = Scope.coerce(scope)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            msg = f"limit must be None or a non-negative int, got {limit!r}"
            raise InvalidInputError(msg)
        kind_set = None
        if kinds is not None:
            kind_set = {kinds} if isinstance(kinds, str) else set(kinds)
            if not all(isinstance(k, str) for k in kind_set):
                msg = f"kinds must be activity kind names such as ['tool_call'], got {kinds!r}"
                raise InvalidInputError(msg)
        if run_id is None and kind_set is not None and len(kind_set) == 1:
            # one kind (a chat history's messages): the ledger filters, so the other activities are never built
            rows = self.ledger.find_activity_rows(
                scope.user_id, kind=next(iter(kind_set)), agent_id=scope.agent_id, session_id=scope.session_id
            )
        else:
            rows = self.ledger.activities_of(
                user_id=scope.user_id, agent_id=scope.agent_id, session_id=scope.session_id
            )
        if run_id is not None:
            if run_id not in {r["id"] for r in rows}:
                msg = f"no activity {run_id!r} in this scope; list the runs with activities(scope, kinds=['agent_run'])"
                raise MemoryNotFoundError(msg)
            children: dict[str, list[str]] = {}
            for r in rows:
                if r["parent_id"]:
                    children.setdefault(r["parent_id"], []).append(r["id"])
            keep, todo = {run_id}, [run_id]
            while todo:
                for child in children.get(todo.pop(), []):
                    if child not in keep:
                        keep.add(child)
                        todo.append(child)
            rows = [r for r in rows if r["id"] in keep]
        if kind_set is not None:
            rows = [r for r in rows if r["kind"] in kind_set]
        if outcome is not None:
            rows = [r for r in rows if r["outcome"] == outcome]
        if limit is not None:
            rows = rows[len(rows) - limit :] if limit else []
        return [row_activity(r) for r in rows]

    def get_activity(self, activity_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Activity | None:
        """See :meth:`memlineage.MemoryManager.get_activity`."""
        scope = Scope.coerce(scope)
        row = self.ledger.activity_rows([activity_id], user_id=scope.user_id)[0]
        act = row_activity(row) if row else None
        return act if act is not None and act.scope is not None and scope.contains(act.scope) else None

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
        """See :meth:`memlineage.MemoryManager.find_activities`."""
        scope = Scope.coerce(scope)
        rows = self.ledger.find_activity_rows(
            scope.user_id, run_id=run_id, tool_call_id=tool_call_id, kind=kind, outcome=outcome,
            session_id=scope.session_id if session_only else None,
        )  # fmt: skip
        acts = [row_activity(r) for r in rows]
        return [a for a in acts if a.scope is not None and scope.contains(a.scope)]

    def end_activity(
        self,
        activity_id: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        outcome: str = "success",
        metadata: Mapping[str, Any] | None = None,
    ) -> Activity:
        """See :meth:`memlineage.MemoryManager.end_activity`."""
        act = self.get_activity(activity_id, scope=scope)
        if act is None:
            msg = f"no activity {activity_id!r} in this scope; record_activity() it first"
            raise MemoryNotFoundError(msg)
        meta = {**act.metadata, **normalize_metadata(metadata)}
        ended = act.model_copy(update={"ended_at": self.clock(), "outcome": outcome, "metadata": meta})
        with self.ledger.transaction() as conn:
            self.ledger.upsert_activity(conn, ended)
        return ended

    def link(
        self,
        memory_id: str,
        activity_id: str,
        relation: Relation | str = Relation.WAS_GENERATED_BY,
        *,
        scope: Scope | Mapping[str, Any] | str,
    ) -> bool:
        """See :meth:`memlineage.MemoryManager.link`."""
        allowed = (Relation.WAS_GENERATED_BY.value, Relation.USED.value)
        rel = relation.value if isinstance(relation, Relation) else relation
        if rel not in allowed:
            msg = f"link() records {' or '.join(allowed)} edges, not {relation!r}"
            raise InvalidInputError(msg)
        scope = Scope.coerce(scope)
        mem = self.reads.require(memory_id, scope=scope)
        act = self.get_activity(activity_id, scope=mem.scope)
        if act is None:
            row = self.ledger.activity_rows([activity_id])[0]
            if row is not None and row["user_id"] not in (None, mem.scope.user_id):
                msg = f"activity {activity_id!r} is not an activity of this scope"
                raise ScopeViolationError(msg)
            msg = f"no activity {activity_id!r} in this scope; record_activity() it first"
            raise MemoryNotFoundError(msg)
        src, dst = (mem.id, act.id) if rel == Relation.WAS_GENERATED_BY.value else (act.id, mem.id)
        t = to_epoch(self.clock())
        user = mem.scope.user_id
        with self.write_mutex, self.ledger.transaction() as conn:
            if any(e["dst"] == dst and e["relation"] == rel for e in self.ledger.edges_touching([src], conn)):
                return False
            self.ledger.insert_edges(conn, [edge_row(src, dst, Relation(rel), t, user)])
            self.ledger.insert_events(conn, [event_row(t, "linked", mem.id, act.id, user, {"relation": rel})])
        return True

    def set_attribution(
        self, memory_id: str, premises: Mapping[str, str], *, scope: Scope, activity_id: str | None = None
    ) -> None:
        """Annotate the wasDerivedFrom edges of a memory with how each premise was attributed (capture only).

        Raises:
            MemoryNotFoundError: no such memory in ``scope``.
        """
        self.reads.require_in_scope(memory_id, scope=scope)  # the scope only: no lineage read
        with self.write_mutex, self.ledger.transaction() as conn:
            self.ledger.set_attribution(conn, memory_id, premises, activity_id)
