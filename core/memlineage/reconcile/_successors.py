"""Successors at read time: for each recalled statement, what the same speaker said of it next (or before).

A contender's *successor* is the closest later hit of the same speaker by vector among those that share with it a
word no other hit names (see :func:`_nearest_later`). Read-time conflict resolution
(:mod:`memlineage.reconcile._compete`) lets it contend with the contender however low the query ranks it, and looks
for it in recall's candidates below the window too. For a question about the past, a contender's *predecessor*
(the closest earlier such hit, :func:`_predecessors`) is what it asks for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from memlineage._forget import text_cache
from memlineage.extractors._rules import transcript_speaker
from memlineage.models import Memory
from memlineage.reconcile._about import _COMMON_CJK, _words
from memlineage.reconcile._signals import clauses_of
from memlineage.retrieval import RecallHit

#: How many of a speaker's best-matching statements for a query contend for its answer.
CONTENDERS = 3
#: Cosine at or above which a contender's nearest later statement of the same speaker (among the hits) contends
#: with it although the query ranks it lower (see :func:`memlineage.reconcile._compete.resolve_conflicts`).
SUCCESSOR_COSINE = 0.5
#: How many of a statement's nearest later (and earlier) statements of the same speaker by vector, among the hits,
#: it may compete with under the weakest rule (the query alone says what both are about; see :func:`nearest_pairs`).
NEAREST = 2
#: Cosine at or above which a contender's nearest earlier statement of the same speaker answers a question about
#: the past (see :func:`_predecessors`).
PREDECESSOR_COSINE = 0.2


def _when(m: Memory) -> datetime:
    t = m.valid_from or m.recorded_at or m.created_at
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def speaker(m: Memory) -> tuple[Any, Any]:
    """Who said a memory: its source kind and, for a transcript of named speakers, the speaker's name."""
    return m.source.kind, transcript_speaker(m.content)


def speaker_ranks(hits: Sequence[RecallHit]) -> list[int]:
    """Each hit's rank among the hits of its speaker (:func:`speaker`), as recall ranked them (0 = best)."""
    seen: dict[tuple[Any, Any], int] = {}
    out = []
    for h in hits:
        who = speaker(h.memory)
        out.append(seen.get(who, 0))
        seen[who] = out[-1] + 1
    return out


def _successors(
    head: Sequence[RecallHit], reserve: Sequence[RecallHit], unit: Mapping[str, np.ndarray]
) -> tuple[list[RecallHit], dict[str, str]]:
    """The successors of the top contenders of ``head`` (each speaker's :data:`CONTENDERS` best).

    They are searched among ``head`` and ``reserve``.

    Returns:
        The reserve hits that are such a successor, and each contender's successor as ``{memory id: memory id}``.
    """
    contenders = [i for i, rank in enumerate(speaker_ranks(head)) if rank < CONTENDERS]
    every = [*head, *reserve]
    nearest = _nearest_later(every, contenders, unit)
    wanted = sorted({j for j in nearest.values() if j >= len(head)})
    return [every[j] for j in wanted], {every[i].memory.id: every[j].memory.id for i, j in nearest.items()}


def _nearest_later(hits: Sequence[RecallHit], of: Sequence[int], unit: Mapping[str, np.ndarray]) -> dict[int, int]:
    """The *successor* of each hit of ``of``: the closest later hit by vector among those sharing a word with it alone.

    A later hit of the same speaker qualifies when the two share a content word or key that no other hit names
    ("上海" in "我住在上海浦东" and "来杭州之后…每周回上海开会"; a word many hits say, "每天", "上班", ties
    nothing), and its cosine with the hit is at least :data:`SUCCESSOR_COSINE`.

    Args:
        hits: The hits.
        of: Positions of the hits whose successor is wanted.
        unit: Unit vectors by memory id (hits without one take no part).

    Returns:
        ``{position: position of its successor}``.
    """
    return _nearest(hits, of, unit, later=True, floor=SUCCESSOR_COSINE)


def _predecessors(
    head: Sequence[RecallHit], reserve: Sequence[RecallHit], unit: Mapping[str, np.ndarray]
) -> tuple[list[RecallHit], dict[int, int]]:
    """For a question about the past: what the speaker said before each top contender, of the same thing.

    "What did I drive before the Maverick?" matches "Traded in the Jeep for a Ford Maverick hybrid" best; the
    answer is the speaker's earlier "My Jeep Wrangler's soft top leaks", which shares "Jeep" with it and no word
    of the query. A contender's *predecessor* is the closest earlier statement of the same speaker among ``head``
    and ``reserve`` that shares with it a word no other hit names, at a cosine of at least
    :data:`PREDECESSOR_COSINE` (looser than a successor's: a question about the past has already said that it asks
    for an earlier value).

    Returns:
        The reserve hits that are such a predecessor, and ``{position of a contender: position of its
        predecessor}`` in ``[*head, *pulled]`` (the pulled hits follow ``head`` in the order returned).
    """
    contenders = [i for i, rank in enumerate(speaker_ranks(head)) if rank < CONTENDERS]
    every = [*head, *reserve]
    nearest = _nearest(every, contenders, unit, later=False, floor=PREDECESSOR_COSINE)
    wanted = sorted({j for j in nearest.values() if j >= len(head)})
    place = {j: len(head) + n for n, j in enumerate(wanted)}
    return [every[j] for j in wanted], {i: place.get(j, j) for i, j in nearest.items()}


def _nearest(
    hits: Sequence[RecallHit], of: Sequence[int], unit: Mapping[str, np.ndarray], *, later: bool, floor: float
) -> dict[int, int]:
    """The closest later (or earlier) hit of the same speaker sharing a word with it alone, at cosine >= ``floor``."""
    out: dict[int, int] = {}
    words = [_content_words(h.memory.content) for h in hits]
    df: dict[str, int] = {}
    for ws in words:
        for w in ws:
            df[w] = df.get(w, 0) + 1
    for i in of:
        a = hits[i].memory
        va = unit.get(a.id)
        if va is None:
            continue
        when, who = _when(a), speaker(a)
        best = -2.0
        for j, h in enumerate(hits):
            b = h.memory
            vb = unit.get(b.id)
            if vb is None or vb.shape != va.shape or not (when < _when(b) if later else _when(b) < when):
                continue
            if speaker(b) != who:
                continue
            if not any(df[w] == 2 for w in words[i] & words[j]):
                continue  # nearest in meaning is not enough: the two alone among the hits name something
            cosine = float(va @ vb)
            if cosine > best:
                best, out[i] = cosine, j
        if i in out and best < floor:
            del out[i]  # the nearest such statement is still far: nothing else the speaker said is about it
    return out


@text_cache(maxsize=8192)
def _content_words(text: str) -> frozenset[str]:
    """A statement's content words and keys (Chinese bigrams not of two common characters)."""
    terms = frozenset().union(*(c.terms | c.keys for c in clauses_of(text)))
    return frozenset(t for t in _words(terms) if t.isascii() or not set(t) <= _COMMON_CJK)


def _closeness(hit: RecallHit) -> float:
    """A hit's closeness to the query in [0, 1].

    Its cosine to the query when the vector leg found it (not normalised over the candidates, unlike the fused
    relevance), else its final score.
    """
    vector = hit.scores.get("vector")
    if vector is not None and hit.scores.get("vector_rank", 0.0) > 0:
        return max(0.0, 2.0 * float(vector) - 1.0)
    return float(hit.score)


def nearest_pairs(hits: Sequence[RecallHit], unit: Mapping[str, np.ndarray], k: int = NEAREST) -> set[tuple[int, int]]:
    """Pairs ``(earlier, later)`` of hits of one speaker that are near each other in meaning among the hits.

    ``(i, j)`` is in the set when hit ``j`` is among the ``k`` later hits of ``i``'s speaker nearest to ``i`` by
    vector, or ``i`` among the ``k`` earlier ones nearest to ``j``. An update is what its speaker says next *of the
    same thing*: "I live in Montreal, in the Plateau" and a later "i teach 8th grade science at Millbrook Middle" may
    both rank high for "where's home for me?" when nothing else the user said is about home, yet each has later or
    earlier statements nearer in meaning than the other. Hits without a vector take no part; vectors of different
    shapes are not compared.

    Args:
        hits: The hits, any order.
        unit: Unit vectors by memory id.
        k: Neighbours kept on each side, >= 1.

    Returns:
        Positions ``(i, j)`` in ``hits``, ``i`` said before ``j``.
    """
    groups: dict[tuple[int, ...], list[int]] = {}  # vectors of one shape only are compared
    for i, h in enumerate(hits):
        if h.memory.id in unit:
            groups.setdefault(unit[h.memory.id].shape, []).append(i)
    out: set[tuple[int, int]] = set()
    for have in groups.values():
        matrix = np.stack([unit[hits[i].memory.id] for i in have])
        sims = matrix @ matrix.T
        who = [speaker(hits[i].memory) for i in have]
        when = [_when(hits[i].memory) for i in have]
        for x, i in enumerate(have):
            mine = [y for y in range(len(have)) if who[y] == who[x]]
            later = sorted(((float(sims[x, y]), have[y]) for y in mine if when[y] > when[x]), reverse=True)
            earlier = sorted(((float(sims[x, y]), have[y]) for y in mine if when[y] < when[x]), reverse=True)
            out.update((i, j) for _, j in later[:k])
            out.update((j, i) for _, j in earlier[:k])
    return out
