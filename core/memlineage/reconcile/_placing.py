"""Where recall's hits go once read-time resolution has found competing pairs (:mod:`~memlineage.reconcile._compete`).

A pair is a :class:`Conflict`. For a question about the present the older memory is demoted and the newer one may move
up into the places served (:func:`_served_newer`); for a question about the past the earlier one moves just ahead of
the later one (:func:`_earlier_first`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from memlineage.retrieval import RecallHit

__all__ = ["Conflict"]


@dataclass(frozen=True)
class Conflict:
    """Two recalled memories competing for one query; ``newer`` ranks first, ``older`` is demoted.

    Attributes:
        older: Id of the demoted (earlier) memory.
        newer: Id of the later memory that ranks first.
        reason: Why they compete, in words.
        similarity: Word similarity of their clauses that match the query, in [0, 1] (None for a recorded
            possible update).
        decision: Id of the ``possible_update`` decision that linked them, when one did.
    """

    older: str
    newer: str
    reason: str
    similarity: float | None = None
    decision: str | None = None


def _served_newer(
    kept: list[RecallHit], hits: Sequence[RecallHit], rivals: Mapping[int, Conflict], served: int
) -> list[RecallHit]:
    """Move each newer hit that replaced a demoted one up to the last place served.

    See :func:`~memlineage.reconcile._compete.resolve_conflicts`.
    """
    out = list(kept)
    for i, c in sorted(rivals.items()):
        at = next((n for n, h in enumerate(out) if h.memory.id == c.newer), None)
        above = {h.memory.id for h in hits[:i]}
        place = sum(1 for h in out if h.memory.id in above)  # the older one's place among the kept hits
        target = max(place, served - 1)
        if at is None or at <= target:
            continue
        h = out.pop(at)
        score = out[target].score
        out.insert(target, replace(h, score=score, scores={**h.scores, "newer": 1.0, "final": score}))
    return out


def _earlier_first(hits: Sequence[RecallHit], rivals: Mapping[int, Conflict]) -> list[RecallHit]:
    """For a question about the past: each earlier statement ranks just ahead of the later one that replaced it.

    "What did I drive before the Maverick?" matches the statement naming the Maverick best; the one it replaced
    ("My Jeep's soft top leaks") is the answer. An earlier statement already ahead stays where it is; a moved one
    takes the later one's score (the order stays monotone in score) and the flag ``"earlier"``.
    """
    position = {h.memory.id: n for n, h in enumerate(hits)}
    order = list(range(len(hits)))
    moved: set[int] = set()
    # several earlier statements of one later one ("what dose was I on originally?" pairs the dose started with and,
    # loosely, other topics of the user): each goes just ahead of it, so the best ranked is taken first and ends first
    for i, j in sorted(((i, position[c.newer]) for i, c in rivals.items()), key=lambda ij: (ij[1], ij[0])):
        if order.index(i) < order.index(j):
            continue
        order.remove(i)
        order.insert(order.index(j), i)
        moved.add(i)
    out = [hits[i] for i in order]
    # a moved hit takes the score of the hit now after it, read from the end: along a chain of moves (the earlier
    # statement of an earlier statement) too, the order stays monotone in score
    for p in range(len(out) - 2, -1, -1):
        if order[p] in moved:
            h = out[p]
            out[p] = replace(
                h, score=out[p + 1].score, flags=(*h.flags, "earlier"), scores={**h.scores, "earlier": 1.0}
            )
    return out
