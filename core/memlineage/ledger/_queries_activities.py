"""Activity reads of update detection (the activity log's other reads are on :class:`memlineage.ledger.Ledger`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from memlineage.ledger._schema import activities

__all__ = ["activity_meta"]


def activity_meta(conn: Connection, activity_id: str) -> tuple[dict[str, Any] | None, str | None] | None:
    """The metadata and owner of one activity.

    Returns:
        ``(meta, user_id)`` (either may be None), or None when no activity has the id.
    """
    row = conn.execute(select(activities.c.meta, activities.c.user_id).where(activities.c.id == activity_id)).first()
    return None if row is None else (row[0], row[1])
