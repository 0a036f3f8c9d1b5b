"""Row builders and readers shared by the services: ledger edge / event rows, scopes and activities of rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memlineage.errors import InvalidInputError, ScopeViolationError
from memlineage.models import Activity, Relation, Scope, Status, from_epoch

__all__ = [
    "LIVE",
    "activity_owner",
    "check_activity_owners",
    "edge_row",
    "event_row",
    "row_activity",
    "row_scope",
    "write_scope",
]

#: Statuses of live memories (served and still part of the lineage).
LIVE = (Status.ACTIVE.value, Status.SUSPECT.value)


def row_scope(row: Mapping[str, Any]) -> Scope:
    """The scope of a ledger memory or activity row (no validation: the ledger holds valid ids)."""
    return Scope.model_construct(user_id=row["user_id"], agent_id=row["agent_id"], session_id=row["session_id"])


def write_scope(request: Scope, original: Scope) -> Scope:
    """A new version keeps the original's agent and takes the request's session when given."""
    return Scope(
        user_id=original.user_id,
        agent_id=original.agent_id,
        session_id=request.session_id or original.session_id,
    )


def row_activity(row: Mapping[str, Any]) -> Activity:
    """The :class:`Activity` of a ledger activity row."""
    scope = row_scope(row) if row["user_id"] else None
    return Activity.model_construct(
        id=row["id"],
        kind=row["kind"],
        name=row["name"],
        parent_id=row["parent_id"],
        scope=scope,
        started_at=from_epoch(row["started_at"]),
        ended_at=from_epoch(row["ended_at"]),
        outcome=row["outcome"],
        metadata=dict(row["meta"] or {}),
        run_id=row.get("run_id"),
        tool_call_id=row.get("tool_call_id"),
    )


def check_activity_owners(rows: Sequence[Mapping[str, Any]], drafts: Sequence[Any]) -> None:
    """Refuse a write whose ``activity_id`` is another user's activity (it would link across users)."""
    owners = {r["id"]: r["user_id"] for r in rows}
    for d in drafts:
        owner = owners.get(d.activity_id or "")
        if owner is not None and owner != d.scope.user_id:
            msg = f"activity {d.activity_id!r} is not an activity of this scope; record one of this scope"
            raise ScopeViolationError(msg)


def activity_owner(activity: Activity, scope: Scope | Mapping[str, Any] | str | None) -> Scope:
    """The scope an activity is recorded under: ``scope`` or ``activity.scope``; they must name one user."""
    if scope is None and activity.scope is None:
        msg = "record_activity() needs a scope: pass scope=... or Activity(scope=...); activities are never global"
        raise InvalidInputError(msg)
    owner = Scope.coerce(scope) if scope is not None else activity.scope
    assert owner is not None
    if activity.scope is not None and activity.scope.user_id != owner.user_id:
        msg = "record_activity(): scope and activity.scope name different users"
        raise ScopeViolationError(msg)
    return activity.scope if activity.scope is not None and scope is None else owner


def edge_row(
    src: str,
    dst: str,
    relation: Relation,
    at: float | None,
    user_id: str,
    support: int = 0,
    activity_id: str | None = None,
) -> dict[str, Any]:
    """A ledger ``edges`` row (``at`` in epoch seconds)."""
    return {
        "src": src,
        "dst": dst,
        "relation": relation.value,
        "support": support,
        "activity_id": activity_id,
        "user_id": user_id,
        "created_at": at or 0.0,
    }


def event_row(
    at: float | None,
    type_: str,
    memory_id: str | None,
    activity_id: str | None,
    user_id: str | None,
    data: dict[str, Any],
) -> dict[str, Any]:
    """A ledger ``events`` row (``at`` in epoch seconds)."""
    return {
        "at": at or 0.0,
        "type": type_,
        "memory_id": memory_id,
        "activity_id": activity_id,
        "user_id": user_id,
        "data": data,
    }
