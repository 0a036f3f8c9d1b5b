"""The cascade: invalidating a memory (retract, supersede, expire, erase) and what it does to its descendants.

A descendant left without a valid support becomes ``suspect`` (seed semantics: a conclusion needs all premises
of one support group; a fact corroborated by another independent support stays active); see
:func:`memlineage.lineage.evaluate_cascade`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from memlineage.errors import MemoryNotFoundError
from memlineage.ledger import Ledger
from memlineage.ledger._schema import memories
from memlineage.lineage import plan_cascade
from memlineage.models import Activity, Relation, Scope, Status, new_id, to_epoch
from memlineage.ports import Clock, IndexSyncer
from memlineage.services._rows import LIVE, edge_row, event_row, row_scope

__all__ = ["Cascade"]


class Cascade:
    """Invalidation with its cascade, expiry and archiving.

    Implements the ports :class:`~memlineage.ports.Expirer` and :class:`~memlineage.ports.Archiver`.

    Args:
        ledger: The ledger.
        clock: Returns "now".
        syncer: Brings the index in line after each transaction.
    """

    def __init__(self, *, ledger: Ledger, clock: Clock, syncer: IndexSyncer) -> None:
        self.ledger = ledger
        self.clock = clock
        self.syncer = syncer

    def invalidate(
        self,
        conn: Connection,
        mid: str,
        status: Status,
        now: datetime,
        *,
        reason: str,
        activity_id: str | None = None,
        dry_run: bool = False,
    ) -> tuple[list[str], list[str]]:
        """Set ``mid`` to an invalidating status and mark unsupported descendants suspect (in ``conn``).

        Returns:
            ``(suspect_ids, unaffected_descendant_ids)``.
        """
        t = to_epoch(now)
        if dry_run:
            row, info = self.ledger.memory_rows([mid], conn)[0], self.ledger.cascade_info(mid, conn)
        else:  # lock it and its descendants: a conclusion written concurrently is either seen here or waits
            row, info = self.ledger.lock_cascade(mid, conn)
        if row is None:  # pragma: no cover - callers check
            raise MemoryNotFoundError(mid)
        suspect, unaffected, every_active = plan_cascade(self.ledger, conn, mid, status, info=info)
        if dry_run:
            return suspect, unaffected
        inv_activity = activity_id or new_id()
        if activity_id is None or self.ledger.activity_rows([activity_id], conn)[0] is None:
            self.ledger.upsert_activity(
                conn,
                Activity(
                    id=inv_activity, kind="invalidation", name=status.value, started_at=now, ended_at=now,
                    scope=row_scope(row), metadata={"reason": reason, "target": mid},
                ),
            )  # fmt: skip
        self.ledger.update_memories(conn, [mid], {"status": status.value, "invalidated_at": t, "index_state": "stale"})
        self.ledger.insert_edges(conn, [edge_row(mid, inv_activity, Relation.WAS_INVALIDATED_BY, t, row["user_id"])])
        target_event = event_row(t, status.value, mid, inv_activity, row["user_id"], {"reason": reason})
        self.ledger.insert_events(conn, [target_event])
        if suspect:  # set-based: one INSERT ... SELECT of the events and one UPDATE over the walk (or bound chunks)
            cause = {"reason": f"premise {mid} {status.value}", "cause": mid}
            event = event_row(t, "suspect", None, inv_activity, row["user_id"], cause)
            self.ledger.mark_suspect(conn, mid, suspect, every_active=every_active, event=event)
        return suspect, unaffected

    def attribution(self, target: str, suspect: Sequence[str]) -> dict[str, str]:
        """For each suspect memory, the attribution of its premise edge into the invalidated chain."""
        if not suspect:
            return {}
        chain = {target, *suspect}
        out: dict[str, str] = {}
        for src, dst, how in self.ledger.attributed_premises(target):  # suspects are descendants of the target
            if src in chain and src != target and dst in chain:
                out.setdefault(src, how)
        return out

    def archive(self, ids: Sequence[str], reason: str) -> None:
        """Archive ``ids``: out of the index, kept in the ledger with an ``archived`` event (no cascade)."""
        if not ids:
            return
        t = to_epoch(self.clock())
        rows = [r for r in self.ledger.memory_rows(list(ids)) if r]
        with self.ledger.transaction() as conn:
            self.ledger.update_memories(
                conn, [r["id"] for r in rows], {"status": Status.ARCHIVED.value, "index_state": "removing"}
            )
            self.ledger.insert_events(
                conn, [event_row(t, "archived", r["id"], None, r["user_id"], {"reason": reason}) for r in rows]
            )
        self.syncer.sync([r["id"] for r in rows])

    def expire_due(self, *, scope: Scope | Mapping[str, Any] | str | None = None) -> list[str]:
        """Mark memories whose TTL has passed as ``expired`` (descendants become suspect).

        Args:
            scope: Only this scope's memories; ``None`` = every scope (maintenance jobs).

        Returns:
            The ids that expired now.
        """
        t = to_epoch(self.clock())
        cond = [memories.c.expires_at.is_not(None), memories.c.expires_at <= t, memories.c.status.in_(LIVE)]
        if scope is not None:
            cond.append(memories.c.user_id == Scope.coerce(scope).user_id)
        with self.ledger.read() as conn:
            due = [r[0] for r in conn.execute(select(memories.c.id).where(*cond))]
        return self.expire(due)

    def expire(self, ids: Sequence[str], reason: str = "ttl elapsed") -> list[str]:
        """Mark ``ids`` expired now (their unsupported descendants become suspect); returns ``ids``."""
        if not ids:
            return []
        now = self.clock()
        touched: list[str] = []
        with self.ledger.transaction() as conn:
            for mid in ids:
                suspect, _ = self.invalidate(conn, mid, Status.EXPIRED, now, reason=reason)
                touched.extend([mid, *suspect])
        self.syncer.defer(touched)  # status changes only: off the critical path (memlineage._indexsync)
        return list(ids)
