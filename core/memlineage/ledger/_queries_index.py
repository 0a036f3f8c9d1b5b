"""Index-state reads of the index sync that :class:`memlineage.ledger.Ledger`'s methods do not cover."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from memlineage.ledger._schema import INDEXABLE_STATES, memories

__all__ = ["INDEXABLE_STATES", "lexical_rows"]


def lexical_rows(conn: Connection, user_id: str) -> list[dict[str, Any]]:
    """One user's memories that belong in the index (exact, pending, indexed or stale), without their vectors.

    Returns:
        Memory-table rows as dicts.
    """
    query = select(memories).where(memories.c.user_id == user_id, memories.c.index_state.in_(INDEXABLE_STATES))
    return [dict(r) for r in conn.execute(query).mappings()]
