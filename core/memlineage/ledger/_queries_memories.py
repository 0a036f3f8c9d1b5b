"""Memory-row reads and writes of the services: exact finds, slot listings, usage counters, TTL and revisions.

Each function runs one statement (or, for :func:`reinforce_values`, one statement per memory, as the value gate
always wrote them) on the connection it is handed, so it joins the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, Connection, Double, bindparam, case, select, update

from memlineage.ledger._schema import memories

__all__ = [
    "active_rows",
    "due_for_expiry",
    "find_rows",
    "generated_by",
    "record_use",
    "reinforce_values",
    "revisions_of",
    "scope_memory_ids",
    "slot_names",
]


def find_rows(
    conn: Connection,
    user_id: str,
    statuses: Sequence[str],
    *,
    agent_id: str | None = None,
    session_id: str | None = None,
    slot: str | None = None,
    kinds: Sequence[str] | None = None,
    newest: int | None = None,
) -> Iterator[tuple[str, list[str] | None]]:
    """The memories of ``user_id`` with one of ``statuses`` matching exact criteria, oldest first.

    Args:
        conn: The connection to read on.
        user_id: The owner.
        statuses: The statuses wanted.
        agent_id: Only memories shared by every agent (``agent_id`` NULL) or this agent's; None: any agent's.
        session_id: Only this session's; None: any session's.
        slot: Only memories holding this slot.
        kinds: Only memories of these kinds; None: any kind.
        newest: Only the last ``newest`` of them in that order (read newest first with a limit, returned oldest
            first); None: all.

    Returns:
        ``(id, tags)`` of each memory, ordered by ``recorded_at`` then id (streamed from the result).
    """
    cond = [memories.c.user_id == user_id, memories.c.status.in_(statuses)]
    if agent_id is not None:
        cond.append(memories.c.agent_id.is_(None) | (memories.c.agent_id == agent_id))
    if session_id is not None:
        cond.append(memories.c.session_id == session_id)
    if slot is not None:
        cond.append(memories.c.slot == slot)
    if kinds is not None:
        cond.append(memories.c.kind.in_(kinds))
    query = select(memories.c.id, memories.c.tags).where(*cond)
    if newest is not None:
        last = query.order_by(memories.c.recorded_at.desc(), memories.c.id.desc()).limit(newest)
        yield from reversed([(r[0], r[1]) for r in conn.execute(last)])
        return
    for r in conn.execute(query.order_by(memories.c.recorded_at, memories.c.id)):
        yield r[0], r[1]


def slot_names(
    conn: Connection,
    statuses: Sequence[str],
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    prefix: str = "",
) -> list[tuple[str, str]]:
    """The distinct slots held by memories with one of ``statuses``.

    Args:
        conn: The connection to read on.
        statuses: The statuses of the holders.
        user_id: Only this user's memories; None: every user's (an admin read).
        agent_id: With ``user_id``: only memories shared by every agent or this agent's.
        prefix: Only slots starting with it (matched literally).

    Returns:
        Sorted ``(user_id, slot)`` pairs.
    """
    cond: list[ColumnElement[bool]] = [memories.c.slot.is_not(None), memories.c.status.in_(list(statuses))]
    if user_id is not None:
        cond.append(memories.c.user_id == user_id)
        if agent_id is not None:
            cond.append(memories.c.agent_id.is_(None) | (memories.c.agent_id == agent_id))
    if prefix:
        cond.append(memories.c.slot.startswith(prefix, autoescape=True))
    query = select(memories.c.user_id, memories.c.slot).where(*cond).distinct()
    return sorted((r[0], r[1]) for r in conn.execute(query))


def record_use(conn: Connection, ids: Sequence[str], at: float | None) -> None:
    """Count one use of each of ``ids`` (``use_count + 1``) and set their ``last_used_at`` to ``at``."""
    conn.execute(
        update(memories).where(memories.c.id.in_(ids)).values(use_count=memories.c.use_count + 1, last_used_at=at)
    )


def reinforce_values(conn: Connection, bumps: Sequence[tuple[str, float]]) -> None:
    """Raise the stored value of each memory by its bump, capped at 1 (one ``UPDATE`` run for every ``(id, bump)``)."""
    if bumps:
        conn.execute(_REINFORCE, [{"mid": memory_id, "bump": bump} for memory_id, bump in bumps])


_BUMP: BindParameter[float] = bindparam("bump", type_=Double())
#: One statement for a batch of bumps (an executemany), compiled once.
_REINFORCE = (
    update(memories)
    .where(memories.c.id == bindparam("mid"))
    .values(value=case((memories.c.value + _BUMP > 1.0, 1.0), else_=memories.c.value + _BUMP))
)


def active_rows(
    conn: Connection, *, user_id: str | None = None, agent_id: str | None = None
) -> Iterator[dict[str, Any]]:
    """The active memories (of ``user_id``, and ``agent_id`` with it; None: every user's) as memory-table rows.

    Returns:
        The rows (without vectors), streamed from the result.
    """
    cond = [memories.c.status == "active"]
    if user_id is not None:
        cond.append(memories.c.user_id == user_id)
        if agent_id is not None:
            cond.append(memories.c.agent_id == agent_id)
    for row in conn.execute(select(memories).where(*cond)).mappings():
        yield dict(row)


def due_for_expiry(
    conn: Connection, at: float | None, statuses: Sequence[str], *, user_id: str | None = None
) -> list[str]:
    """Ids of the memories with one of ``statuses`` whose ``expires_at`` is at or before ``at`` (of ``user_id``)."""
    cond = [memories.c.expires_at.is_not(None), memories.c.expires_at <= at, memories.c.status.in_(statuses)]
    if user_id is not None:
        cond.append(memories.c.user_id == user_id)
    return [r[0] for r in conn.execute(select(memories.c.id).where(*cond))]


def scope_memory_ids(conn: Connection, user_id: str, agent_id: str | None, session_id: str | None) -> list[str]:
    """Every memory of a scope, any status: the user's, or one agent's / session's when given; oldest first."""
    cond = [memories.c.user_id == user_id]
    if agent_id is not None:
        cond.append(memories.c.agent_id == agent_id)
    if session_id is not None:
        cond.append(memories.c.session_id == session_id)
    query = select(memories.c.id).where(*cond).order_by(memories.c.recorded_at, memories.c.id)
    return [r[0] for r in conn.execute(query)]


def revisions_of(conn: Connection, ids: Sequence[str]) -> list[str]:
    """Ids of the memories that supersede one of ``ids`` (their direct revisions)."""
    return [r[0] for r in conn.execute(select(memories.c.id).where(memories.c.supersedes.in_(ids)))]


def generated_by(conn: Connection, activity_id: str, user_id: str, statuses: Sequence[str]) -> list[str]:
    """Ids of ``user_id``'s memories with one of ``statuses`` that ``activity_id`` generated."""
    query = select(memories.c.id).where(
        memories.c.activity_id == activity_id, memories.c.user_id == user_id, memories.c.status.in_(statuses)
    )
    return [r[0] for r in conn.execute(query)]
