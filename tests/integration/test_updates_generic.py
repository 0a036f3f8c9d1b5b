"""Issue 24's small inputs: corrections said the way people say them, on ``MemoryManager.open()`` defaults.

Each case is a plain conversation over days (a session per day), written with ``remember`` only (no ``supersede``,
no ``slot=``), then a question. The current value must be served before the stale one; non-updates, questions and
conditionals must never withdraw or demote a fact; a question about the past must still find the older value.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from memlineage import MemoryManager, Scope, Status
from memlineage.index import OnnxMiniLMEmbedder, default_model_dir

MODEL_DIR = default_model_dir()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (Path(MODEL_DIR) / "model.onnx").is_file(),
        reason=f"all-MiniLM-L6-v2 ONNX files not found in {MODEL_DIR}; set MEMLINEAGE_EMBEDDING_MODEL_DIR",
    ),
]
START = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mm(tmp_path: Path, embedder: OnnxMiniLMEmbedder, clock: Clock) -> Iterator[MemoryManager]:
    manager = MemoryManager.open(tmp_path / "store", embedder=embedder, clock=clock)
    yield manager
    manager.close()


def say(mm: MemoryManager, clock: Clock, user: str, turns: list[tuple[float, str]]) -> list[str]:
    """Write each ``(day, text)`` as the user's statement in that day's session; return the memory ids."""
    ids = []
    for day, text in turns:
        clock.now = START + timedelta(days=day)
        ids.append(mm.remember(text, scope=Scope(user_id=user, session_id=f"{user}-d{int(day)}")).id)
    return ids


def ask(mm: MemoryManager, clock: Clock, user: str, question: str, k: int = 3) -> list[str]:
    clock.now = clock.now + timedelta(days=1)
    return [h.content for h in mm.recall(question, scope=Scope(user_id=user, session_id="ask"), k=k)]


CORRECTIONS = [
    (
        "blue-one",
        [(0, "We're leaning toward the red Söderhamn sofa from IKEA."), (9, "We ended up going with the blue one.")],
        "Which sofa did we get?",
    ),
    (
        "new-number",
        [(0, "My cell number is 415-555-0192."), (20, "Heads up, my new number is 628-555-0147.")],
        "What's my phone number?",
    ),
    (
        "left-google",
        [(0, "I work at Google as an SRE in Zurich."), (40, "Left Google, joined Stripe last week.")],
        "Where do I work?",
    ),
    ("lily-turned-8", [(0, "My daughter Lily is 7."), (200, "Lily just turned 8!")], "How old is Lily?"),
    (
        "two-turns",
        [
            (0, "My dentist appointment is on Thursday at 3pm."),
            (3, "About the dentist, small change."),
            (3.1, "They moved my appointment to Friday at 10am."),
        ],
        "When is my dentist appointment?",
    ),
    ("zh-correction", [(0, "我住在南京。"), (5, "更正一下，我住在苏州，不是南京。")], "我住在哪里？"),
    (
        "rate",
        [(0, "Our mortgage rate is 6.8% on a 30-year."), (60, "Refi closed today, locked in 5.9% for the mortgage.")],
        "What's our mortgage rate?",
    ),
]


@pytest.mark.parametrize(("name", "turns", "question"), CORRECTIONS, ids=[c[0] for c in CORRECTIONS])
def test_the_current_value_is_served_before_the_stale_one(
    mm: MemoryManager, clock: Clock, name: str, turns: list[tuple[float, str]], question: str
) -> None:
    say(mm, clock, name, turns)
    served = ask(mm, clock, name, question)
    stale, current = turns[0][1], turns[-1][1]
    assert current in served, served
    assert stale not in served or served.index(current) < served.index(stale), served


def test_readme_correction_keeps_the_other_fact_of_the_turn(mm: MemoryManager, clock: Clock) -> None:
    first = "I'm planning a trip to Paris from 3 to 7 May. I'm vegetarian."
    say(mm, clock, "readme", [(0, first), (1, "Actually, I'm going to Lyon, not Paris.")])
    served = ask(mm, clock, "readme", "Where am I travelling?")
    # the correction and the trip's dates it did not correct (carried over without the old city) lead; Paris is gone
    assert "Actually, I'm going to Lyon, not Paris." in served[:2]
    assert "I'm planning a trip from 3 to 7 May. I'm vegetarian." in served[:2]
    assert not any("Paris" in s and "Lyon" not in s for s in served)
    assert any("vegetarian" in s for s in ask(mm, clock, "readme", "Do I have a diet?", k=5))


def test_a_demoted_memory_points_at_the_newer_one_and_the_trace_says_why(mm: MemoryManager, clock: Clock) -> None:
    old, new = say(mm, clock, "why", [(0, "My cell number is 415-555-0192."), (20, "My new number is 628-555-0147.")])
    clock.now += timedelta(days=1)
    result = mm.recall("What's my phone number?", scope=Scope(user_id="why"), k=5, trace=True)
    if mm.get(old, scope=Scope(user_id="why")).status is Status.SUPERSEDED:
        assert old not in result.ids  # decided at write time: the stale one is not served at all
        return
    older = next(h for h in result if h.id == old)
    assert older.newer == new and "older" in older.flags
    assert result.ids.index(new) < result.ids.index(old)
    assert any(c.older == old and c.newer == new and c.reason for c in result.trace.conflicts)


NON_UPDATES = [
    ("siblings", [(0, "My daughter is 7 years old."), (3, "My son is 10 years old.")], "How old is my daughter?"),
    (
        "used-to",
        [(0, "I live in Minneapolis."), (5, "I used to live in Phoenix, the heat was brutal.")],
        "Where do I live?",
    ),
    (
        "hypothetical",
        [(0, "I live in Toronto."), (4, "If I moved to Vancouver, how much more would rent be?")],
        "Where do I live?",
    ),
    ("question", [(0, "I live in Paris."), (2, "Do I live in Berlin now?")], "Where do I live?"),
    ("should", [(0, "I live in Paris."), (2, "Should I live in Berlin instead?")], "Where do I live?"),
    (
        "conditional",
        [(0, "I live in Paris."), (2, "If I live in Berlin next year, what are the taxes?")],
        "Where do I live?",
    ),
    ("friend", [(0, "I live in Paris."), (6, "My friend just moved to Berlin.")], "Where do I live?"),
    (
        "second-pet",
        [(0, "We have a beagle named Max."), (30, "We also got a kitten named Miso.")],
        "What is our dog's name?",
    ),
    (
        "other-context",
        [(0, "I drink coffee every morning."), (8, "In the evenings I drink chamomile tea.")],
        "What do I drink in the morning?",
    ),
    (
        "cancel-question",
        [(0, "My flight to Lisbon is on 3 June."), (4, "Can you check if my flight to Lisbon was cancelled?")],
        "When is my flight to Lisbon?",
    ),
]


@pytest.mark.parametrize(("name", "turns", "question"), NON_UPDATES, ids=[c[0] for c in NON_UPDATES])
def test_non_updates_never_withdraw_or_demote_the_fact(
    mm: MemoryManager, clock: Clock, name: str, turns: list[tuple[float, str]], question: str
) -> None:
    ids = say(mm, clock, name, turns)
    fact = mm.require(ids[0], scope=Scope(user_id=name))
    assert fact.status is Status.ACTIVE
    result = mm.recall(question, scope=Scope(user_id=name), k=3)
    assert ids[0] in result.ids, [h.content for h in result]
    hit = result[result.ids.index(ids[0])]
    assert hit.newer is None and "older" not in hit.flags


def test_a_question_about_the_past_finds_the_older_value(mm: MemoryManager, clock: Clock) -> None:
    say(
        mm,
        clock,
        "past",
        [(0, "I live in Denver, near Washington Park."), (40, "We live in Austin now, moved last month.")],
    )
    assert any("Denver" in s for s in ask(mm, clock, "past", "Where did I live before Austin?"))
