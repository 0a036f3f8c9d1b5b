"""Erasure steps over :class:`memlineage.ledger._erase.ErasureSet` that name columns, and the WAL truncation.

The column values of an erased memory, the scope terms of the activities an erasure redacts, and the SQLite
checkpoint that makes the redactions physical.
"""

from __future__ import annotations

from sqlalchemy import case

from memlineage.ledger._erase import ErasureSet
from memlineage.ledger._ledger import Ledger
from memlineage.ledger._schema import activities, memories
from memlineage.models import Scope, Status

__all__ = ["redact_erased_activities", "redact_erased_memories", "truncate_wal"]


def redact_erased_memories(erased: ErasureSet, at: float) -> int:
    """Redact the memories of ``erased``: content, hashes, metadata, tags, assessment and slot go; status ``erased``.

    Their index state becomes ``removing``; ``invalidated_at`` becomes ``at`` except on a memory erased before,
    which keeps the time of its first erasure. One ``UPDATE`` joined to the set.

    Returns:
        The number of memories redacted.
    """
    return erased.redact_memories(
        {
            "content": "", "content_hash": "erased", "meta": {}, "tags": [], "assessment": None, "slot": None,
            "status": Status.ERASED.value, "index_state": "removing", "context_hash": None,
            # the time of the first erasure stays on a memory erased before
            "invalidated_at": case((memories.c.status == Status.ERASED.value, memories.c.invalidated_at), else_=at),
        }
    )  # fmt: skip


def redact_erased_activities(erased: ErasureSet, user_id: str, *, scope: Scope | None, keep: str | None) -> int:
    """Redact the activities linked to ``erased`` and, when ``scope`` is given, every activity of that scope.

    Args:
        erased: The erasure set.
        user_id: The user whose activities these are.
        scope: A scope whose every activity is redacted (its user's, agent's and session's when named); None: only
            the activities linked to the set.
        keep: An activity id to leave as it is (the erasure's own).

    Returns:
        The number of activities redacted.
    """
    conditions = None
    if scope is not None:
        conditions = [activities.c.user_id == scope.user_id]
        if scope.agent_id is not None:
            conditions.append(activities.c.agent_id == scope.agent_id)
        if scope.session_id is not None:
            conditions.append(activities.c.session_id == scope.session_id)
    return erased.redact_activities(conditions, user_id, keep=keep)


def truncate_wal(ledger: Ledger) -> None:
    """Checkpoint and truncate a SQLite ledger's write-ahead log (after an erasure, so redactions are physical).

    Takes the write lock once (an empty transaction), then runs ``PRAGMA wal_checkpoint(TRUNCATE)`` on a
    connection of its own. Only for a file-backed SQLite ledger (an in-memory one has no log).

    Raises:
        OperationalError: a reader holds the log (the next checkpoint truncates it).
    """
    with ledger.transaction() as conn:
        conn.exec_driver_sql("SELECT 1")
    with ledger.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
