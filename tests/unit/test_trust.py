"""Trust is the minimum over all premises on every path; user assertions are write-protected (issue 14, kind 5)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from memlineage import MemoryManager, PolicyViolationError, Scope, Status
from memlineage.policy import PolicyEngine, builtin_policies
from memlineage.testing import make_manager

ALICE = Scope(user_id="alice", session_id="s1")
NON_USER = ["tool:crm", "reasoning", "agent", "system", "consolidation", "import"]


@pytest.fixture
def mm() -> Iterator[MemoryManager]:
    manager = make_manager(policy=PolicyEngine(builtin_policies()))
    yield manager
    manager.close()


def _decision_ids(mm: MemoryManager, query: str) -> list[str]:
    return mm.recall(query, scope=ALICE, purpose="decision", k=10).ids


def test_same_source_repeat_with_an_extra_untrusted_premise_lowers_trust(mm: MemoryManager) -> None:
    """The issue's case: the repeat left trust at 0.6 and the conclusion stayed decision-grade."""
    fact = mm.remember("Alice flies to Lisbon on May 3", scope=ALICE, source="user")
    rumour = mm.remember("a forum says Lisbon flights are cheap", scope=ALICE, source="tool:forum", confidence=0.2)
    conclusion = mm.remember("book the Lisbon flight now", scope=ALICE, source="reasoning", derived_from=[fact.id])
    assert conclusion.trust == pytest.approx(0.6)
    again = mm.remember(
        "book the Lisbon flight now", scope=ALICE, source="reasoning", derived_from=[fact.id, rumour.id]
    )
    assert again.id == conclusion.id  # merged into the same group: not independent evidence
    stored = mm.require(conclusion.id, scope=ALICE)
    assert stored.trust == pytest.approx(rumour.trust) and stored.trust < 0.5
    assert conclusion.id not in _decision_ids(mm, "book the Lisbon flight")


def test_revise_keeps_premises_source_and_the_trust_minimum(mm: MemoryManager) -> None:
    """revise() dropped the premises and reset trust to the source default (then served it to decisions)."""
    rumour = mm.remember("a blog says the hotel has a pool", scope=ALICE, source="tool:blog", confidence=0.3)
    plan = mm.remember("pick the hotel with the pool", scope=ALICE, source="reasoning", derived_from=[rumour.id])
    revised = mm.revise(plan.id, "pick the hotel with the pool and gym", scope=ALICE)
    assert revised.derived_from == (rumour.id,)
    assert revised.source == plan.source
    assert revised.trust <= rumour.trust
    assert revised.id not in _decision_ids(mm, "hotel pool gym")
    # the premise still counts: withdrawing it makes the revision suspect
    report = mm.retract(rumour.id, scope=ALICE)
    assert revised.id in report.suspect


def test_revise_can_still_replace_premises_explicitly(mm: MemoryManager) -> None:
    rumour = mm.remember("a blog says the hotel has a pool", scope=ALICE, source="tool:blog", confidence=0.3)
    plan = mm.remember("pick the hotel with the pool", scope=ALICE, source="reasoning", derived_from=[rumour.id])
    checked = mm.remember("the hotel website lists a pool", scope=ALICE, source="user")
    revised = mm.revise(plan.id, "pick the hotel: the pool is confirmed", scope=ALICE, derived_from=[checked.id])
    assert revised.derived_from == (checked.id,)
    assert revised.trust == pytest.approx(0.6)  # reasoning's own trust, no longer capped by the rumour


@pytest.mark.parametrize("source", NON_USER)
def test_no_non_user_source_can_overwrite_or_delete_a_user_assertion(mm: MemoryManager, source: str) -> None:
    pref = mm.remember("I am vegetarian", scope=ALICE, source="user", kind="semantic", slot="user/diet")
    before = mm.stats(ALICE)
    for call in (
        lambda: mm.supersede(pref.id, "the user eats fish", scope=ALICE, source=source),
        lambda: mm.revise(pref.id, "the user eats fish", scope=ALICE, source=source),
        lambda: mm.remember("the user eats fish", scope=ALICE, source=source, kind="semantic", slot="user/diet"),
        lambda: mm.retract(pref.id, scope=ALICE, source=source),
        lambda: mm.forget(pref.id, scope=ALICE, source=source),
        lambda: mm.erase(pref.id, scope=ALICE, source=source),
    ):
        with pytest.raises(PolicyViolationError) as info:
            call()
        assert info.value.decision.policy_id == "builtin.user_write_protection"
    assert mm.require(pref.id, scope=ALICE).status is Status.ACTIVE
    after = mm.stats(ALICE)
    assert after["memories"] == before["memories"] and after["by_status"] == before["by_status"]


@pytest.mark.parametrize("verb", ["retract", "forget", "erase"])
@pytest.mark.parametrize("source", ["user", None])
def test_the_user_and_the_application_may_still_delete(mm: MemoryManager, verb: str, source: str | None) -> None:
    pref = mm.remember("I am vegetarian", scope=ALICE, source="user", kind="semantic")
    getattr(mm, verb)(pref.id, scope=ALICE, source=source)
    assert mm.require(pref.id, scope=ALICE).status in (Status.RETRACTED, Status.ARCHIVED, Status.ERASED)


def test_non_user_sources_may_delete_their_own_memories(mm: MemoryManager) -> None:
    note = mm.remember("agent scratch note", scope=ALICE, source="agent")
    mm.retract(note.id, scope=ALICE, source="agent")
    assert mm.require(note.id, scope=ALICE).status is Status.RETRACTED
