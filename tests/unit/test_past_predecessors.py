"""A question about the past finds what the speaker said before the statement that names the later value.

"What did I drive before the Maverick?" matches "Traded in the Jeep for a Ford Maverick hybrid" best; the answer is
the earlier "My Jeep Wrangler's soft top leaks", which shares "Jeep" with it and no word of the query. Read-time
resolution pulls that *predecessor* from recall's candidates below the window and ranks it just ahead of the
statement it preceded (``reconcile._successors._predecessors``).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from memlineage import MemoryManager, Scope
from memlineage.reconcile import resolve_conflicts
from memlineage.retrieval import RecallHit
from memlineage.testing import make_manager

T0 = datetime(2025, 1, 1, 9, tzinfo=timezone.utc)

OLD = "My Jeep Wrangler's soft top leaks. Any fix?"
NEW = "Traded in the Jeep for a Ford Maverick hybrid. Mileage is amazing."
FILLERS = ("Quick chicken marinade for tonight?", "How do I fix a squeaky door hinge?", "Best podcast for a long run?")


class Clock:
    """The store's clock, set by each statement's day."""

    now = T0

    def __call__(self) -> datetime:
        return self.now


def _say(mm: MemoryManager, clock: Clock, text: str, days: float) -> str:
    clock.now = T0 + timedelta(days=days)
    return mm.remember(text, scope=Scope(user_id="alice", session_id=f"d{days}")).id


def _resolve(
    query: str, *, fillers: tuple[str, ...] = FILLERS, cosine: float = 0.3
) -> tuple[list[str], list[RecallHit], list[str], str, str]:
    """The statement naming the later value heads the hits; the earlier one waits below the window."""
    clock = Clock()
    manager = make_manager(clock=clock)
    old = _say(manager, clock, OLD, 0)
    others = [_say(manager, clock, text, 10 + n) for n, text in enumerate(fillers)]
    new = _say(manager, clock, NEW, 40)
    head = [
        RecallHit(memory=manager.require(m, scope="alice"), score=s)
        for m, s in zip([new, *others], (0.9, 0.5, 0.4, 0.3))
    ]
    reserve = [RecallHit(memory=manager.require(old, scope="alice"), score=0.2)]
    basis = np.eye(8, dtype=np.float32)
    vectors = {m: basis[n] for n, m in enumerate([new, *others])}
    vectors[old] = cosine * basis[0] + float(np.sqrt(1 - cosine**2)) * basis[7]
    ranked, conflicts = resolve_conflicts(query, head, vectors=vectors, reserve=reserve, served=3)
    return [h.memory.id for h in ranked], ranked, [c.older for c in conflicts], old, new


def test_the_statement_before_the_one_a_past_question_names_ranks_just_ahead_of_it() -> None:
    ids, ranked, older, old, new = _resolve("What did I drive before the Maverick?")
    assert ids[:2] == [old, new]
    assert "earlier" in ranked[0].flags and ranked[0].score == pytest.approx(0.9)
    assert older == [old]


@pytest.mark.parametrize(
    ("query", "fillers", "cosine"),
    [
        ("What do I drive now?", FILLERS, 0.3),  # not a question about the past: the earlier statement stays out
        ("What did I drive before the Maverick?", FILLERS, 0.1),  # sharing a word, but far apart in meaning
        # "Jeep" said by another hit too ties nothing
        ("What did I drive before the Maverick?", ("Jeep or Bronco for off-road?", *FILLERS[1:]), 0.3),
    ],
)
def test_no_predecessor_without_a_past_question_a_shared_word_alone_and_some_closeness(
    query: str, fillers: tuple[str, ...], cosine: float
) -> None:
    ids, _ranked, older, old, _new = _resolve(query, fillers=fillers, cosine=cosine)
    assert old not in ids and old not in older


def test_recall_answers_what_came_before_the_value_a_past_question_names() -> None:
    """End to end on the default embedder: the Jeep statement, ranked below the served hits by the query alone."""
    from memlineage.index import OnnxMiniLMEmbedder, default_model_dir

    if not (default_model_dir() / "model.onnx").is_file():
        pytest.skip("embedding model files not available offline")
    clock = Clock()
    manager = make_manager(clock=clock, embedder=OnnxMiniLMEmbedder(default_model_dir()))
    old = _say(manager, clock, OLD, 0)
    for n, text in enumerate(
        (
            "Consistent bedtime, cool room, no screens 30 minutes before: any other sleep tips?",
            "I work out Monday, Wednesday and Friday at 6 a.m. before work.",
            "What should I eat before a long run?",
            "Which tires are best before winter?",
        )
    ):
        _say(manager, clock, text, 5 + n)
    new = _say(manager, clock, NEW, 40)
    result = manager.recall("What did I drive before the Maverick?", scope="alice", k=3)
    assert result.ids[:2] == [old, new]
