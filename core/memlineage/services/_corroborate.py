"""Duplicates of live memories on the write path: whether one may merge, and the corroboration it records.

A draft with the same words as a live memory of its scope is merged into it (``WritePath._merge_duplicates`` in
:mod:`memlineage.services.write`) unless that would close a lineage cycle (:func:`would_cycle`). The same source
again is ``seen_again`` (its premises join the same conjunctive support group); an independent source, or the same
one deriving it again from live premises after an old premise was withdrawn, adds a support group
(``corroborated``) that can make a suspect memory active again (:func:`corroborate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memlineage.errors import LineageCycleError
from memlineage.ledger import Connection, Ledger
from memlineage.ledger._queries_graph import set_support_premises
from memlineage.models import Relation, Status, to_epoch
from memlineage.services._concurrency import lock_premises, settle
from memlineage.services._rows import edge_row, event_row
from memlineage.services.draft import Draft

__all__ = ["corroborate", "would_cycle"]


def would_cycle(ledger: Ledger, memory_id: str, premises: Sequence[str], conn: Connection | None = None) -> bool:
    """Whether adding ``premises`` to ``memory_id`` would make it its own ancestor."""
    if not premises:
        return False
    if memory_id in premises:
        return True
    return bool(ledger.walk([memory_id], direction="descendants", conn=conn).keys() & set(premises))


def corroborate(ledger: Ledger, conn: Connection, row: dict[str, Any], d: Draft, now: datetime) -> None:
    """Record a duplicate of the live memory ``row`` (locked by the caller): ``seen_again`` or a new support group."""
    mid = row["id"]
    t = to_epoch(now)
    lock_premises(ledger, conn, [d])
    groups = ledger.support_rows(mid, conn)
    if d.derived_from:
        descendants = ledger.walk([mid], direction="descendants", conn=conn)
        if mid in d.derived_from or descendants.keys() & set(d.derived_from):
            msg = f"corroborating {mid!r} with premises {list(d.derived_from)} would create a lineage cycle"
            raise LineageCycleError(msg)
    own = next(
        (g for g in groups if g["source_kind"] == d.source.kind.value and g["source_name"] == d.source.name),
        None,
    )
    known = set(ledger.premises([mid], conn, support=own["support"]).get(mid, ())) if own else set()
    statuses = ledger.statuses([*known, *d.derived_from], conn) if known or d.derived_from else {}
    live_premises = all(statuses.get(p) == Status.ACTIVE.value for p in d.derived_from)  # vacuous for none
    broken = any(statuses.get(p) != Status.ACTIVE.value for p in known)
    if own is not None and d.derived_from and live_premises and broken:
        # The same source derives it again from live premises after one of its old premises was withdrawn
        # (the user went back to an earlier value and the tool said the same): that is a new derivation, not
        # the same evidence repeated, so it gets its own support group below and the memory serves again.
        own = None
    if own is not None:
        # The same source again is not independent evidence: its premises join the same conjunctive group.
        extra = [p for p in d.derived_from if p not in known]
        if extra and own["premises"] > 0:
            ledger.insert_edges(
                conn,
                [
                    edge_row(mid, p, Relation.WAS_DERIVED_FROM, t, row["user_id"], own["support"], d.activity_id)
                    for p in extra
                ],
            )
            set_support_premises(conn, own["id"], own["premises"] + len(extra))
            # a premise added to a conjunctive group can only lower trust (minimum over all premises)
            ledger.update_memories(conn, [mid], {"trust": min(row["trust"], d.trust)})
        data: dict[str, Any] = {"source": str(d.source), "new_premises": extra if own["premises"] > 0 else []}
        if d.decision is not None:
            data["decision"] = {"action": d.decision.action.value, "reason": d.decision.reason}
        ledger.insert_events(conn, [event_row(t, "seen_again", mid, d.activity_id, row["user_id"], data)])
        if extra:
            settle(ledger, conn, [mid], t)  # an added premise may be withdrawn: the group no longer holds
        return
    group = max((g["support"] for g in groups), default=-1) + 1
    ledger.insert_supports(
        conn,
        [
            {
                "memory_id": mid,
                "support": group,
                "source_kind": d.source.kind.value,
                "source_name": d.source.name,
                "activity_id": d.activity_id,
                "premises": len(d.derived_from),
                "created_at": t,
            }
        ],
    )
    ledger.insert_edges(
        conn,
        [edge_row(mid, p, Relation.WAS_DERIVED_FROM, t, row["user_id"], group, d.activity_id) for p in d.derived_from],
    )
    values: dict[str, Any] = {"trust": max(row["trust"], d.trust)}
    if row["status"] == Status.SUSPECT.value and live_premises:
        values["status"] = Status.ACTIVE.value  # an independent valid source supports it again
        values["index_state"] = "stale"
    ledger.update_memories(conn, [mid], values)
    ledger.insert_events(
        conn,
        [event_row(t, "corroborated", mid, d.activity_id, row["user_id"], {"source": str(d.source), "group": group})],
    )
    if d.derived_from:
        settle(ledger, conn, [mid], t)  # a group resting on a withdrawn premise does not revive it
