"""Write checks that hold with several writers on one ledger (PostgreSQL server mode; issue 14, kind 4).

The write path reads before it writes: the duplicate check, the slot's current holder, the memory an update
replaces, the premises. Another process may change any of these in between. These helpers repeat the checks
*inside* the writing transaction, under database locks, so the outcome is the one a serial order would give:

- :func:`content_keys`: what :meth:`Ledger.guard <memlineage.ledger.Ledger.guard>` holds across the whole write
  gate (duplicate check → insert): two writers of the same words in one scope run one after the other, so the
  second finds the first's memory and merges into it.
- :func:`recheck_targets`: locks each memory a draft supersedes or withdraws (``FOR UPDATE``) and each slot it
  writes (an advisory lock: the first holder has no row to lock yet), then re-reads them. An explicit
  ``supersede`` whose memory is no longer current raises :class:`~memlineage.errors.ConflictError`; a slot write
  (or a detected update) supersedes the slot's *current* holder, so two writers make a chain, never a fork.
- :func:`lock_premises` share-locks the premises (a retraction's ``UPDATE`` waits for the write, or the write
  waits for the retraction and then sees it); :func:`settle` marks what was just written ``suspect`` when a
  premise is withdrawn or suspect, as the cascade would have had the memory existed a moment earlier.

On SQLite the same checks run inside the transaction; the locks are no-ops there because one writer holds the
store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from memlineage._draft import Draft
from memlineage.errors import ConflictError
from memlineage.ledger import Connection, Ledger
from memlineage.lineage import evaluate_cascade
from memlineage.models import Scope, Status
from memlineage.services._rows import LIVE, event_row

__all__ = ["content_keys", "lock_premises", "recheck_targets", "settle"]


def content_keys(drafts: Iterable[Draft]) -> list[tuple[str, ...]]:
    """Guard keys of a write: one per scope (user, agent) and content hash, whatever the kind."""
    return [("content", d.scope.user_id, d.scope.agent_id or "", d.hash) for d in drafts]


def recheck_targets(ledger: Ledger, conn: Connection, drafts: Sequence[Draft]) -> tuple[list[Draft], float | None]:
    """Lock and re-read what each draft replaces, inside the write transaction; adjust the drafts to it.

    Drafts of one batch refer to each other by their ids (:attr:`Draft.id`).

    - ``supersedes`` still current → kept, with the row as it is now. No longer current: an explicit
      ``supersede`` (``strict``) raises; any other draft drops it (and its automatic decision).
    - ``retracts`` no longer current → dropped with its decision (the statement is stored as new).
    - A draft with a slot, except an explicit ``supersede``: when it intended to replace the slot's value (an
      explicit ``slot=``, or a detected update whose target is gone) it supersedes the slot's current holder as
      found under the slot's lock; a second draft of the same slot in the batch supersedes the first.

    Returns:
        The drafts as adjusted, and the latest ``recorded_at`` (epoch seconds) among the ledger rows now
        superseded, or None: a writer that waited for another's lock must record its version after the one it
        replaces.

    Raises:
        ConflictError: an explicit ``supersede`` target was superseded, retracted or erased by another writer.
    """
    batch = {d.id for d in drafts}
    ledger.lock_keys(conn, [("slot", d.scope.user_id, d.scope.agent_id or "", d.slot) for d in drafts if d.slot])
    wanted = {d.supersedes["id"] for d in drafts if d.supersedes} | {d.retracts for d in drafts if d.retracts}
    rows = ledger.lock_rows(conn, wanted - batch)
    claimed: dict[tuple[str, str | None, str], Mapping[str, Any]] = {}
    out: list[Draft] = []
    for d in drafts:
        intended = d.supersedes is not None or not d.auto_slot
        supersedes, retracts = d.supersedes, d.retracts
        if supersedes is not None and supersedes["id"] not in batch:
            row = rows.get(supersedes["id"])
            if row is None or row["status"] not in LIVE:
                if d.strict:
                    msg = (
                        f"memory {supersedes['id']!r} was superseded or withdrawn by another writer meanwhile; "
                        "nothing was written: supersede its newest version"
                    )
                    raise ConflictError(msg)
                row = None
            supersedes = row
        if retracts is not None and retracts not in batch:
            row = rows.get(retracts)
            if row is None or row["status"] not in LIVE:
                retracts = None
        if d.slot and not d.strict:
            key = (d.scope.user_id, d.scope.agent_id, d.slot)
            if key in claimed and intended:
                supersedes = claimed[key]
            elif supersedes is None and intended:
                holder = _slot_holder(ledger, conn, d.scope, d.slot)
                supersedes = holder if holder is not None and holder["content_hash"] != d.hash else None
            version = supersedes["version"] + 1 if supersedes else 1
            claimed[key] = {"id": d.id, "version": version, "slot": d.slot}
        decision = d.decision
        if decision is not None and decision.target not in {supersedes["id"] if supersedes else None, retracts}:
            decision = None  # the automatic decision was about a memory this write no longer replaces
        if (supersedes, retracts, decision) != (d.supersedes, d.retracts, d.decision):
            d = replace(d, supersedes=supersedes, retracts=retracts, decision=decision)
        out.append(d)
    replaced = [d.supersedes["recorded_at"] for d in out if d.supersedes and "recorded_at" in d.supersedes]
    return out, max(replaced, default=None)


def _slot_holder(ledger: Ledger, conn: Connection, scope: Scope, slot: str) -> dict[str, Any] | None:
    """The newest live holder of ``slot`` in ``scope``, locked; None when the slot is free."""
    live = [r["id"] for r in ledger.slot_versions(scope.user_id, scope.agent_id, slot, conn)]
    rows = ledger.lock_rows(conn, live)
    current = [rows[i] for i in live if i in rows and rows[i]["status"] in LIVE]
    return current[-1] if current else None


def lock_premises(ledger: Ledger, conn: Connection, drafts: Sequence[Draft]) -> None:
    """Share-lock the ledger premises of ``drafts`` until the transaction ends (see :meth:`Ledger.lock_rows`)."""
    batch = {d.id for d in drafts}
    ledger.lock_rows(conn, {p for d in drafts for p in d.derived_from} - batch, share=True)


def settle(ledger: Ledger, conn: Connection, ids: Sequence[str], at: float | None) -> list[str]:
    """Mark the active ``ids`` that no support group keeps valid ``suspect``, with a ``suspect`` event each.

    Call after writing ``ids`` (new memories or a memory that got premises), with their premises locked by
    :func:`lock_premises`. Uses the cascade's rule (:func:`memlineage.lineage.evaluate_cascade`): a group is valid
    while none of its premises is superseded, retracted, expired, erased or suspect.

    Returns:
        The ids marked suspect, premises first.
    """
    edges = ledger.derivation_edges(ids, conn)
    if not edges:
        return []
    groups = ledger.support_groups(ids, conn)
    statuses = ledger.statuses(sorted({*ids, *(p for _, p, _ in edges)}), conn)
    suspect = evaluate_cascade([], ids, edges, groups, statuses)
    if not suspect:
        return []
    ledger.update_memories(conn, suspect, {"status": Status.SUSPECT.value, "index_state": "stale"})
    owners = {r["id"]: r["user_id"] for r in ledger.memory_rows(suspect, conn, embedding=False) if r is not None}
    invalid = {p for p, s in statuses.items() if s not in (Status.ACTIVE.value, Status.ARCHIVED.value)}
    invalid |= set(suspect)
    events = []
    for mid in suspect:
        cause = next((p for m, p, _ in edges if m == mid and p in invalid), "")
        why = Status.SUSPECT.value if cause in suspect else statuses.get(cause, Status.SUSPECT.value)
        data = {"reason": f"premise {cause} {why} when this was written", "cause": cause}
        events.append(event_row(at, "suspect", mid, None, owners[mid], data))
    ledger.insert_events(conn, events)
    return suspect
