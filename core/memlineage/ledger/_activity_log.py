"""Activities and the event log of the ledger (a mixin of :class:`~memlineage.ledger.Ledger`).

Activities are PROV activities (agent runs, tool and model calls, update decisions, chat messages); events are the
append-only log of what happened to each memory. Writes take the caller's transaction; reads take an optional
connection, as everywhere in the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from functools import cache
from typing import Any

from sqlalchemy import Connection, String, Update, bindparam, cast, func, insert, select, update

from memlineage.ledger._graph import _chunks
from memlineage.ledger._rows import Event
from memlineage.ledger._schema import activities, events
from memlineage.models import Activity, from_epoch, to_epoch

__all__ = ["ActivityLog"]


class ActivityLog:
    """Activity rows and the event log; needs ``_maybe``."""

    def _maybe(self, conn: Connection | None) -> AbstractContextManager[Connection]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def upsert_activity(self, conn: Connection, act: Activity, *, new: bool = False) -> None:
        """Insert or update an activity row (portable: update, then insert when nothing matched).

        Args:
            conn: The write transaction.
            act: The activity.
            new: ``act.id`` was just generated (no row can have it): insert without trying an update first.
        """
        row = _activity_row(act)
        if not new:
            result = conn.execute(_activity_update(), {"_id": act.id, **{f"_{k}": v for k, v in row.items()}})
            if result.rowcount:
                return
        conn.execute(insert(activities), {"id": act.id, **row})

    def activity_rows(
        self, ids: Sequence[str], conn: Connection | None = None, *, user_id: str | None = None
    ) -> list[dict[str, Any] | None]:
        """Activity rows in input order, ``None`` for misses (and, with ``user_id``, for other users' rows)."""
        found: dict[str, dict[str, Any]] = {}
        with self._maybe(conn) as c:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                for row in c.execute(select(activities).where(activities.c.id.in_(chunk))).mappings():
                    if user_id is None or row["user_id"] == user_id:
                        found[row["id"]] = dict(row)
        return [found.get(i) for i in ids]

    def activities_of(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        session_id: str | None = None,
        conn: Connection | None = None,
    ) -> list[dict[str, Any]]:
        """A user's activity rows (optionally one agent's or one session's), oldest first."""
        return self.find_activity_rows(user_id, agent_id=agent_id, session_id=session_id, conn=conn)

    def find_activity_rows(
        self,
        user_id: str,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
        kind: str | None = None,
        outcome: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        conn: Connection | None = None,
    ) -> list[dict[str, Any]]:
        """One user's activity rows matching every given filter, oldest first."""
        cond = _activity_filter(
            user_id, run_id=run_id, tool_call_id=tool_call_id, kind=kind, outcome=outcome, agent_id=agent_id,
            session_id=session_id,
        )  # fmt: skip
        query = select(activities).where(*cond).order_by(activities.c.started_at, activities.c.id)
        with self._maybe(conn) as c:
            return [dict(r) for r in c.execute(query).mappings()]

    def activity_stamp(
        self,
        user_id: str,
        *,
        kind: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        ids: Sequence[str] | None = None,
        conn: Connection | None = None,
    ) -> tuple[int, int, int, int]:
        """A fingerprint of one user's activity rows matching the filters, in one aggregate read (no row is built).

        ``(rows, ended, total outcome length, total metadata length)``: a row added, ended, given another outcome
        or another metadata (a redaction, a ``cleared_by``) changes it. The parts add up over disjoint sets of rows,
        so a writer can tell whether the rows it knew plus the rows it wrote are all there is.
        """
        cond = _activity_filter(user_id, kind=kind, agent_id=agent_id, session_id=session_id)
        if ids is not None:
            cond.append(activities.c.id.in_(list(ids)))
        query = select(
            func.count(),
            func.count(activities.c.ended_at),
            func.coalesce(func.sum(func.length(activities.c.outcome)), 0),
            func.coalesce(func.sum(func.length(cast(activities.c.meta, String))), 0),
        ).where(*cond)
        with self._maybe(conn) as c:
            row = c.execute(query).one()
        return (int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    def events(
        self,
        *,
        user_id: str | None,
        memory_id: str | None = None,
        types: Iterable[str] | None = None,
        limit: int | None = None,
        conn: Connection | None = None,
    ) -> list[Event]:
        """Events, oldest first, for one user (``None`` = every user: admin only) and optionally one memory."""
        cond = []
        if user_id is not None:
            cond.append(events.c.user_id == user_id)
        if memory_id is not None:
            cond.append(events.c.memory_id == memory_id)
        if types is not None:
            cond.append(events.c.type.in_(list(types)))
        query = select(events).where(*cond).order_by(events.c.id)
        if limit is not None:
            query = query.order_by(None).order_by(events.c.id.desc()).limit(limit)
        with self._maybe(conn) as c:
            rows = [dict(r) for r in c.execute(query).mappings()]
        if limit is not None:
            rows.reverse()
        return [Event({**r, "at": from_epoch(r["at"])}) for r in rows]


def _activity_row(act: Activity) -> dict[str, Any]:
    """The columns of an activity row but its id."""
    scope = act.scope
    return {
        "kind": act.kind,
        "name": act.name,
        "parent_id": act.parent_id,
        "user_id": scope.user_id if scope else None,
        "agent_id": scope.agent_id if scope else None,
        "session_id": scope.session_id if scope else None,
        "started_at": to_epoch(act.started_at),
        "ended_at": to_epoch(act.ended_at),
        "outcome": act.outcome,
        "meta": act.metadata,
        "run_id": act.run_id,
        "tool_call_id": act.tool_call_id,
    }


@cache
def _activity_update() -> Update:
    """The update of an activity by id, built once (bound parameters ``_id`` and ``_<column>``)."""
    columns = [c.name for c in activities.c if c.name != "id"]
    values: dict[str, Any] = {c: bindparam(f"_{c}") for c in columns}
    return update(activities).where(activities.c.id == bindparam("_id")).values(values)


def _activity_filter(user_id: str, **equal: str | None) -> list[Any]:
    """``WHERE`` terms for one user's activity rows: each given column (not None) equal to its value."""
    return [activities.c.user_id == user_id, *(activities.c[col] == v for col, v in equal.items() if v is not None)]
