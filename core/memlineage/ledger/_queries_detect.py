"""The scope reads of update detection (:mod:`memlineage._detect`): candidate rows of a draft's scope.

Three shapes, each built once (cached) with bound parameters, so a read costs its execution only: the live rows
holding a slot (``slot``), the newest live user statements (``recent``) and live rows among given ids (``ids``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import Connection, Select, bindparam, select

from memlineage.ledger._schema import memories
from memlineage.models import SourceKind

__all__ = ["DETECT_COLUMNS", "scope_query", "scope_rows"]

#: The columns update detection reads (never the embedding blobs).
DETECT_COLUMNS = (
    memories.c.id, memories.c.user_id, memories.c.agent_id, memories.c.kind, memories.c.status,
    memories.c.source_kind, memories.c.source_name, memories.c.content, memories.c.slot, memories.c.valid_from,
    memories.c.recorded_at, memories.c.session_id,
)  # fmt: skip


@cache
def scope_query(shape: str, agent_null: bool, limit: int | None) -> Select[Any]:
    """The candidate read of one shape (``slot``, ``recent`` or ``ids``), with bound parameters.

    The live rows of a scope (``:user``, the agent, ``:live`` statuses), then ``slot = :slot``, the ``limit``
    newest (``ORDER BY recorded_at DESC``) or ``id IN :ids``: the same SQL as the statement built with the values.
    """
    agent = memories.c.agent_id.is_(None) if agent_null else memories.c.agent_id == bindparam("agent")
    mine = (memories.c.user_id == bindparam("user"), agent, memories.c.status.in_(bindparam("live", expanding=True)))
    query = select(*DETECT_COLUMNS)
    if shape == "slot":
        return query.where(*mine, memories.c.slot == bindparam("slot"))
    if shape == "ids":
        return query.where(*mine, memories.c.id.in_(bindparam("ids", expanding=True)))
    # the recent read serves user statements, which only revise user statements: tool results and answers in a
    # chat do not crowd them out of the window
    user_said = memories.c.source_kind == SourceKind.USER.value
    return query.where(*mine, user_said).order_by(memories.c.recorded_at.desc()).limit(limit)


def scope_rows(
    conn: Connection,
    shape: str,
    user: str,
    agent: str | None,
    live: Sequence[str],
    *,
    limit: int | None = None,
    slot: str | None = None,
    ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Run the ``shape`` read of a scope (:func:`scope_query`) on ``conn``.

    Args:
        conn: The connection to read on.
        shape: ``"slot"`` (needs ``slot``), ``"recent"`` (needs ``limit``) or ``"ids"`` (needs ``ids``).
        user: The scope's user.
        agent: The scope's agent (None: rows without an agent).
        live: The statuses that count as live.
        limit: How many of the newest user statements (``recent``).
        slot: The slot held (``slot``).
        ids: The ids wanted (``ids``).

    Returns:
        The rows, with the columns of :data:`DETECT_COLUMNS` (newest first for ``recent``).
    """
    params: dict[str, object] = {"user": user, "live": list(live)}
    if shape == "slot":
        params["slot"] = slot
    elif shape == "ids":
        params["ids"] = list(ids or ())
    if agent is not None:
        params["agent"] = agent
    return [dict(r) for r in conn.execute(scope_query(shape, agent is None, limit), params).mappings()]
