"""The cascade: invalidating a memory (retract, supersede, expire, erase) and what it does to its descendants.

A descendant left without a valid support becomes ``suspect`` (seed semantics: a conclusion needs all premises
of one support group; a fact corroborated by another independent support stays active); see
:func:`memlineage.lineage.evaluate_cascade`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from memlineage import telemetry
from memlineage._gcpause import gc_paused
from memlineage.errors import MemoryNotFoundError
from memlineage.ledger import Connection, Ledger
from memlineage.ledger._queries_memories import due_for_expiry
from memlineage.lineage import plan_cascade
from memlineage.models import Activity, Relation, Scope, Status, new_id, to_epoch
from memlineage.ports import Clock, IndexSyncer
from memlineage.services._rows import LIVE, edge_row, event_row, row_scope

__all__ = ["Cascade", "Invalidation"]


class Invalidation(NamedTuple):
    """What one invalidation did (or, for a dry run, would do) below the invalidated memory."""

    suspect: list[str]
    """Descendants marked suspect, in the report's order (see :class:`memlineage.lineage.CascadeReport`)."""
    unaffected: list[str]
    """The other descendants (corroborated, or already inactive), sorted."""
    attribution: dict[str, str]
    """For each suspect, how it rested on the invalidated chain (only when asked for)."""


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

    @telemetry.traced("memlineage.cascade")
    @gc_paused()  # a large cascade allocates a row per descendant: no full collection in the middle
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
        attribute: bool = False,
    ) -> Invalidation:
        """Set ``mid`` to an invalidating status and mark unsupported descendants suspect (in ``conn``).

        The descendants are walked once (:class:`memlineage.ledger._cascade.CascadeWalk`); deciding, marking and
        attributing join that walk. The target is written first, so on SQLite the transaction holds the write lock
        before it reads the graph (a later upgrade could fail on a snapshot another process moved past).

        Args:
            conn: The transaction (a read connection for ``dry_run``).
            mid: The memory to invalidate.
            status: Its new status (retracted, superseded, expired, erased).
            now: The store's time.
            reason: Recorded on the events and the invalidation activity.
            activity_id: The activity that invalidates (created when absent or unknown).
            dry_run: Decide only; nothing is written (``impact``).
            attribute: Also read how each suspect rested on the chain (:attr:`Invalidation.attribution`).

        Returns:
            The suspects (in :class:`~memlineage.lineage.CascadeReport`'s order), the other descendants and, with
            ``attribute``, the attributions.
        """
        t = to_epoch(now)
        if dry_run:
            row = self.ledger.memory_rows([mid], conn, embedding=False)[0]
        else:  # locked: a conclusion written concurrently is either seen by the walk or waits (see walk_cascade)
            row = self.ledger.lock_rows(conn, [mid]).get(mid)
        if row is None:  # pragma: no cover - callers check
            raise MemoryNotFoundError(mid)
        inv_activity = activity_id or new_id()
        if not dry_run:
            if activity_id is None or self.ledger.activity_rows([activity_id], conn)[0] is None:
                self.ledger.upsert_activity(
                    conn,
                    Activity(
                        id=inv_activity, kind="invalidation", name=status.value, started_at=now, ended_at=now,
                        scope=row_scope(row), metadata={"reason": reason, "target": mid},
                    ),
                )  # fmt: skip
            values = {"status": status.value, "invalidated_at": t, "index_state": "stale"}
            self.ledger.update_memories(conn, [mid], values)
            edge = edge_row(mid, inv_activity, Relation.WAS_INVALIDATED_BY, t, row["user_id"])
            self.ledger.insert_edges(conn, [edge])
            self.ledger.insert_events(
                conn, [event_row(t, status.value, mid, inv_activity, row["user_id"], {"reason": reason})]
            )
        telemetry.current().scope(
            user_id=row["user_id"], agent_id=row.get("agent_id"), session_id=row.get("session_id")
        )
        return self._below(conn, mid, row["user_id"], status, t, inv_activity, dry_run=dry_run, attribute=attribute)

    def below(self, conn: Connection, mid: str, status: Status, now: datetime, *, activity_id: str) -> list[str]:
        """The cascade below ``mid``, already invalidated with ``status`` in ``conn`` (erasure): returns suspects.

        Descendants left without a valid support become ``suspect``, each with an event of ``activity_id``.
        """
        row = self.ledger.memory_rows([mid], conn, embedding=False)[0]
        if row is None:  # pragma: no cover - callers pass rows of the transaction
            raise MemoryNotFoundError(mid)
        return self._below(conn, mid, row["user_id"], status, to_epoch(now), activity_id).suspect

    def _below(
        self, conn: Connection, mid: str, user_id: str, status: Status, t: float | None, activity_id: str, *,
        dry_run: bool = False, attribute: bool = False,
    ) -> Invalidation:  # fmt: skip
        walk = self.ledger.walk_cascade(mid, conn, lock=not dry_run)
        suspect, unaffected, every_active = plan_cascade(walk, status)
        attribution = walk.attribution(suspect) if attribute else {}
        if suspect and not dry_run:  # set-based: one INSERT ... SELECT and one UPDATE joined to the walk
            cause = {"reason": f"premise {mid} {status.value}", "cause": mid}
            event = event_row(t, "suspect", None, activity_id, user_id, cause)
            walk.mark_suspect(suspect, every_active=every_active, event=event)
        walk.close()
        telemetry.current().set(status=status.value, dry_run=dry_run, suspect=len(suspect), unaffected=len(unaffected))
        return Invalidation(suspect, unaffected, attribution)

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
        user = Scope.coerce(scope).user_id if scope is not None else None
        with self.ledger.read() as conn:
            due = due_for_expiry(conn, t, LIVE, user_id=user)
        return self.expire(due)

    def expire(self, ids: Sequence[str], reason: str = "ttl elapsed") -> list[str]:
        """Mark ``ids`` expired now (their unsupported descendants become suspect); returns ``ids``."""
        if not ids:
            return []
        now = self.clock()
        touched: list[str] = []
        with self.ledger.transaction() as conn:
            for mid in ids:
                touched.extend([mid, *self.invalidate(conn, mid, Status.EXPIRED, now, reason=reason).suspect])
        self.syncer.defer(touched)  # status changes only: off the critical path (memlineage._indexsync)
        return list(ids)
