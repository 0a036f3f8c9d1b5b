"""Issue 12's small inputs, on what a user gets: ``MemoryManager.open()`` with defaults and the real MiniLM model.

Nothing here calls ``supersede``, ``retract`` or passes ``slot=``: corrections arrive as plain statements.
"""

from __future__ import annotations

from collections.abc import Iterator
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


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder()


@pytest.fixture
def mm(tmp_path: Path, embedder: OnnxMiniLMEmbedder) -> Iterator[MemoryManager]:
    manager = MemoryManager.open(tmp_path / "store", embedder=embedder)
    yield manager
    manager.close()


def served(mm: MemoryManager, query: str, scope: Scope, k: int = 3) -> list[str]:
    return [h.content for h in mm.recall(query, scope=scope, k=k)]


def test_open_turns_on_the_value_model_and_update_detection(mm: MemoryManager) -> None:
    assert mm.value_model is not None
    assert mm.reconciler is not None and mm.reconciler.name == "rules"


def test_favourite_restaurant_is_keyed_by_attribute_not_value(mm: MemoryManager) -> None:
    s = Scope(user_id="u1")
    old = mm.remember("My favourite restaurant is Din Tai Fung", scope=s)
    new = mm.remember("My favourite restaurant is Haidilao", scope=s)
    assert old.slot == new.slot == "user.favourite.restaurant"
    assert mm.require(old.id, scope=s).status is Status.SUPERSEDED
    assert served(mm, "What is my favourite restaurant?", s) == ["My favourite restaurant is Haidilao"]


def test_a_correction_is_stored_salient_and_replaces_the_preference(mm: MemoryManager) -> None:
    s = Scope(user_id="u2")
    old = mm.remember("I prefer window seats on planes.", scope=s)
    new = mm.remember("Actually I now prefer aisle seats, my knee needs the space.", scope=s)
    assert new.kind.value != "working"  # stored, not buffered
    assert new.slot == "user.preference.seat"
    assert new.assessment is not None and new.assessment.salience >= 0.7
    assert mm.require(old.id, scope=s).status is Status.SUPERSEDED
    hits = served(mm, "Which seat do I prefer on planes?", s)
    assert hits[0].startswith("Actually I now prefer aisle seats")
    assert "I prefer window seats on planes." not in hits


def test_unrelated_chinese_statements_are_both_kept(mm: MemoryManager) -> None:
    s = Scope(user_id="u3")
    coffee = mm.remember("我喜欢喝咖啡。", scope=s)
    home = mm.remember("我住在上海浦东。", scope=s)
    assert home.kind.value != "working" and coffee.kind.value != "working"
    assert home.slot == "user.residence" and coffee.slot != home.slot
    assert "我住在上海浦东。" in served(mm, "我现在住在哪个城市？", s)
    moved = mm.remember("我搬到杭州了。", scope=s)
    assert mm.require(home.id, scope=s).status is Status.SUPERSEDED
    assert served(mm, "我现在住在哪个城市？", s)[0] == moved.content
    assert mm.require(coffee.id, scope=s).status is Status.ACTIVE


def test_repeated_small_talk_cannot_push_out_a_statement(mm: MemoryManager) -> None:
    s = Scope(user_id="u4", session_id="chat")
    unique = mm.remember("My locker code at the gym is 4471.", scope=s)
    for _ in range(10):
        mm.remember("ok thanks", scope=s)
    assert mm.require(unique.id, scope=s).status is Status.ACTIVE
    assert len(mm.buffered(s)) == 1  # ten "ok thanks" hold one place in the short-term buffer
    assert "My locker code at the gym is 4471." in served(mm, "what is my locker code?", s)


def test_users_never_update_each_other(mm: MemoryManager) -> None:
    a, b = Scope(user_id="ann"), Scope(user_id="ben")
    mine = mm.remember("I live in Paris.", scope=a)
    mm.remember("I moved to Munich.", scope=b)
    assert mm.require(mine.id, scope=a).status is Status.ACTIVE
    assert served(mm, "Where do I live?", a)[0] == "I live in Paris."
    assert all("Paris" not in h for h in served(mm, "Where do I live?", b))


def test_explain_shows_the_automatic_decision_and_undo_restores(mm: MemoryManager) -> None:
    s = Scope(user_id="u5")
    city = mm.remember("I live in Lyon.", scope=s)
    plan = mm.remember("Plan: book the Lyon hotel near Part-Dieu.", scope=s, source="reasoning", derived_from=[city.id])
    new = mm.remember("Correction: I live in Grenoble, not Lyon.", scope=s)
    assert mm.require(plan.id, scope=s).status is Status.SUSPECT
    ex = mm.explain(new.id, scope=s)
    (decision,) = ex.decisions
    assert decision.name == "update" and decision.metadata["target"] == city.id
    assert "user.residence" in ex.to_text() and city.id in [r.id for r in ex.revisions]
    mm.undo(decision.id, scope=s)
    assert mm.require(city.id, scope=s).status is Status.ACTIVE
    assert mm.require(plan.id, scope=s).status is Status.ACTIVE
    assert mm.explain(city.id, scope=s).decisions[0].outcome == "undone"
