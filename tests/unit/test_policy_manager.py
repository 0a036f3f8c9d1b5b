"""Policy enforcement inside MemoryManager (in-memory ledger, InMemoryIndex, FakeEmbedder)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from memlineage.errors import InvalidInputError, PolicyViolationError
from memlineage.models import Memory, MemoryKind, Scope, Status
from memlineage.policy import (
    Decision,
    Effect,
    Policy,
    PolicyEngine,
    PolicyTarget,
    builtin_policies,
)
from memlineage.testing import make_manager

ALICE = Scope(user_id="alice", session_id="trip-1")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(clock: Clock) -> PolicyEngine:
    return PolicyEngine(builtin_policies(freshness_by_tag={"flight_price": timedelta(hours=1)}), clock=clock)


@pytest.fixture
def mm(engine: PolicyEngine, clock: Clock):
    manager = make_manager(policy=engine, clock=clock)
    yield manager
    manager.close()


def decision_events(mm, scope: Scope = ALICE) -> list[dict]:
    return [e["data"] for e in mm.audit(scope) if e.type == "policy_decision"]


def test_manager_without_policy_is_unchanged() -> None:
    plain = make_manager()
    guess = plain.remember("maybe the user likes jazz", scope=ALICE, source="reasoning", confidence=0.3)
    assert plain.recall("jazz", scope=ALICE).ids == [guess.id]


def test_policy_list_is_accepted() -> None:
    manager = make_manager(policy=builtin_policies())
    assert isinstance(manager.policy, PolicyEngine)


def test_read_decisions_in_trace_hits_and_audit_log(mm) -> None:
    guess = mm.remember("the user probably likes jazz music", scope=ALICE, source="reasoning", confidence=0.4)
    fact = mm.remember("the user likes jazz concerts", scope=ALICE, source="user")
    result = mm.recall("jazz", scope=ALICE, trace=True)
    assert result.ids == [fact.id]
    excluded = {e.memory_id: e for e in result.trace.excluded}
    assert excluded[guess.id].policy_id == "builtin.source_trust_floor"
    assert "confidence below 0.7" in excluded[guess.id].reason
    assert any(isinstance(d, Decision) and d.memory_id == guess.id for d in result.trace.decisions)
    events = [e for e in mm.audit(ALICE, memory_id=guess.id) if e.type == "policy_decision"]
    assert events and events[0]["data"]["policy_id"] == "builtin.source_trust_floor"
    assert events[0]["data"]["inputs"] == {"memory.confidence": 0.4}


def test_filtering_happens_before_top_k(mm) -> None:
    for i in range(6):
        mm.remember(f"guess {i} about the user's favourite coffee", scope=ALICE, source="reasoning", confidence=0.2)
    good = mm.remember("the user's favourite coffee is a flat white", scope=ALICE, source="user")
    assert mm.recall("favourite coffee", scope=ALICE, k=1).ids == [good.id]


def test_write_protection_on_supersede_changes_nothing(mm) -> None:
    pref = mm.remember("I prefer window seats", scope=ALICE, source="user", kind="semantic", slot="seat")
    before = mm.stats(ALICE)
    with pytest.raises(PolicyViolationError) as info:
        mm.supersede(pref.id, "the user prefers aisle seats", scope=ALICE, source="tool:crm_sync")
    assert info.value.decision.policy_id == "builtin.user_write_protection"
    assert mm.get(pref.id, scope=ALICE).status is Status.ACTIVE
    assert mm.stats(ALICE)["memories"] == before["memories"]
    assert decision_events(mm)[-1]["effect"] == "deny"
    # a new user statement may supersede it
    report = mm.supersede(pref.id, "I prefer aisle seats now", scope=ALICE, source="user")
    assert report.memory is not None and mm.get(pref.id, scope=ALICE).status is Status.SUPERSEDED


def test_write_protection_on_retract_by_tool_source(mm) -> None:
    pref = mm.remember("I am vegetarian", scope=ALICE, source="user", kind="semantic")
    with pytest.raises(PolicyViolationError):
        mm.revise(pref.id, "the user eats fish", scope=ALICE, source="reasoning")
    mm.retract(pref.id, scope=ALICE, reason="user said so")  # no source: the user's own request
    assert mm.get(pref.id, scope=ALICE).status is Status.RETRACTED


def test_poisoning_scenario(mm) -> None:
    """A tool output claims "the user prefers X": it cannot overwrite the user's word and stays low-trust."""
    pref = mm.remember("I prefer green tea", scope=ALICE, source="user", kind="semantic", slot="user/drink")
    # 1. the poisoned tool output tries to take the slot: refused, nothing changes
    with pytest.raises(PolicyViolationError) as info:
        mm.remember(
            "The user prefers energy drinks",
            scope=ALICE,
            source="tool:web_page",
            kind="semantic",
            slot="user/drink",
            confidence=0.4,
        )
    assert info.value.decision.policy_id == "builtin.user_write_protection"
    assert mm.get(pref.id, scope=ALICE).status is Status.ACTIVE
    assert [h.id for h in mm.recall("drink tea", scope=ALICE)] == [pref.id]
    # 2. stored without a slot it is a short-lived episodic memory, not a long-term semantic one
    claim = mm.remember(
        "The user prefers energy drinks", scope=ALICE, source="tool:web_page", kind="semantic", confidence=0.4
    )
    assert claim.kind is MemoryKind.EPISODIC and claim.expires_at is not None
    assert claim.trust < 0.5
    # 3. a conclusion derived from it stays at most as trusted as the tool output (non-amplification)
    conclusion = mm.remember(
        "Recommend energy drinks to the user", scope=ALICE, source="reasoning", confidence=0.95,
        derived_from=[claim.id],
    )  # fmt: skip
    assert conclusion.trust <= claim.trust
    # 4. neither is decision-grade; the user's preference is
    decide = mm.recall("user prefers drinks", scope=ALICE, purpose="decision", k=5, trace=True)
    assert pref.id in decide.ids and claim.id not in decide.ids and conclusion.id not in decide.ids
    reasons = {e.memory_id: e.policy_id for e in decide.trace.excluded}
    assert reasons[conclusion.id] == "builtin.decision_trust_floor"
    # 5. the derived memory cannot overwrite the user's slot either
    with pytest.raises(PolicyViolationError):
        mm.remember("User drink: energy drinks", scope=ALICE, source="reasoning", slot="user/drink",
                    derived_from=[claim.id])  # fmt: skip
    assert mm.get(pref.id, scope=ALICE).status is Status.ACTIVE


def test_tool_result_ttl_through_manager(mm, clock: Clock) -> None:
    rate = mm.remember("EUR/USD rate is 1.08", scope=ALICE, source="tool:fx", kind="semantic")
    assert rate.kind is MemoryKind.EPISODIC
    assert rate.expires_at == clock.now + timedelta(hours=24)
    assert mm.recall("EUR USD rate", scope=ALICE).ids == [rate.id]
    clock.advance(hours=25)
    assert mm.recall("EUR USD rate", scope=ALICE).ids == []
    assert mm.get(rate.id, scope=ALICE).status is Status.EXPIRED


def test_policy_promotes_a_tool(engine: PolicyEngine, mm) -> None:
    engine.add(
        Policy(
            id="calendar_is_long_term",
            effect="allow",
            operations=("write",),
            target=PolicyTarget(source_names=("calendar",)),
            priority=20,
        )
    )
    meeting = mm.remember("Weekly sync is on Mondays", scope=ALICE, source="tool:calendar", kind="semantic")
    assert meeting.kind is MemoryKind.SEMANTIC and meeting.expires_at is None


def test_missing_refresh_hook_withholds_with_reason(mm, clock: Clock) -> None:
    price = mm.remember("Flight NYC-FCO costs 380 EUR", scope=ALICE, source="tool:flight_api", tags=["flight_price"])
    clock.advance(hours=2)
    result = mm.recall("flight FCO price", scope=ALICE, trace=True)
    assert price.id not in result.ids
    assert "no refresh hook named 'flight_price'" in result.trace.reasons()[price.id]


def test_budget_accepts_stale_price_with_warning(engine: PolicyEngine, mm, clock: Clock) -> None:
    engine.add(
        Policy(
            id="expensive_refresh",
            effect="require_refresh",
            target=PolicyTarget(tags=("hotel_price",)),
            condition="memory.age > 600.0",
            refresh="hotel_api",
            cost=3.0,
            priority=65,
        )
    )
    calls: list[str] = []

    def rerun(old: Memory, decision: Decision) -> Memory:
        calls.append(old.id)
        return mm.remember("Hotel Roma costs 140 EUR", scope=ALICE, source="tool:hotel_api", tags=["hotel_price"])

    engine.register_refresh_hook("hotel_api", rerun)
    stale = mm.remember("Hotel Roma costs 120 EUR", scope=ALICE, source="tool:hotel_api", tags=["hotel_price"])
    clock.advance(minutes=30)
    cheap = mm.recall("Hotel Roma price", scope=ALICE, budget=1.0)
    assert cheap.ids == [stale.id] and "stale" in cheap[0].flags and calls == []
    assert cheap[0].decisions[-1].warning
    rich = mm.recall("Hotel Roma price", scope=ALICE, budget=5.0)
    assert rich[0].content == "Hotel Roma costs 140 EUR" and "refreshed" in rich[0].flags and calls == [stale.id]
    assert mm.get(stale.id, scope=ALICE).status is Status.EXPIRED


def test_travel_scenario_freshness_and_dependency_consistency(engine: PolicyEngine, mm, clock: Clock) -> None:
    """Paris → Rome makes the Paris hotel suspect; the Rome flight price goes stale and is refreshed."""
    city = mm.remember("I am travelling to Paris", scope=ALICE, source="user", kind="semantic", slot="trip/city")
    hotel = mm.remember(
        "Hotel Lumière in Paris is booked for the trip",
        scope=ALICE,
        source="tool:hotel_api",
        derived_from=[city.id],
    )
    clock.advance(minutes=10)
    report = mm.supersede(city.id, "I am travelling to Rome", scope=ALICE, source="user")
    rome = report.memory
    assert rome is not None and hotel.id in report.suspect
    price = mm.remember(
        "Flight NYC-FCO for the trip costs 380 EUR",
        scope=ALICE,
        source="tool:flight_api",
        tags=["flight_price"],
        derived_from=[rome.id],
    )
    # dependency consistency: the Paris hotel is not decision-grade, but is served with a flag otherwise
    decide = mm.recall("hotel for the trip", scope=ALICE, purpose="decision", include_suspect=True, trace=True)
    assert hotel.id not in decide.ids
    browse = mm.recall("hotel for the trip", scope=ALICE, include_suspect=True)
    flagged = {h.id: h for h in browse}
    assert hotel.id in flagged and "suspect" in flagged[hotel.id].flags
    assert any(d.policy_id == "builtin.dependency_flag" for d in flagged[hotel.id].decisions)
    # freshness: two hours later the flight price is stale and the refresh hook re-runs the tool
    refreshed: list[str] = []

    def rerun_flight_search(old: Memory, decision: Decision) -> Memory:
        refreshed.append(old.id)
        return mm.remember(
            "Flight NYC-FCO for the trip costs 395 EUR",
            scope=ALICE,
            source="tool:flight_api",
            tags=["flight_price"],
            derived_from=list(old.derived_from),
        )

    engine.register_refresh_hook("flight_price", rerun_flight_search)
    clock.advance(hours=2)
    result = mm.recall("flight for the trip price", scope=ALICE, purpose="decision", trace=True)
    assert refreshed == [price.id]
    top = [h for h in result if "flight_price" in h.memory.tags]
    assert [h.content for h in top] == ["Flight NYC-FCO for the trip costs 395 EUR"]
    assert "refreshed" in top[0].flags
    assert mm.get(price.id, scope=ALICE).status is Status.EXPIRED
    assert hotel.id not in result.ids
    kinds = {(d["policy_id"], d["effect"]) for d in decision_events(mm)}
    assert ("builtin.freshness.flight_price", "require_refresh") in kinds
    assert ("builtin.dependency_flag", "downgrade") in kinds


def test_custom_yaml_policy_through_manager(tmp_path, clock: Clock) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        """
layer: domain
policies:
  - id: no_hr_notes_for_agents
    description: HR notes are never served to agents
    target: {tags: [hr]}
    condition: request.agent_id != null
    effect: deny
""",
        encoding="utf-8",
    )
    manager = make_manager(policy=PolicyEngine.from_files(path), clock=clock)
    note = manager.remember("Alice asked for a raise", scope=Scope(user_id="alice"), source="user", tags=["hr"])
    assert manager.recall("raise", scope=Scope(user_id="alice")).ids == [note.id]
    assert manager.recall("raise", scope=Scope(user_id="alice", agent_id="bot")).ids == []


def test_decision_effect_values_roundtrip_from_audit(mm) -> None:
    mm.remember("maybe likes opera", scope=ALICE, source="reasoning", confidence=0.1)
    mm.recall("opera", scope=ALICE)
    data = decision_events(mm)[-1]
    assert Decision.model_validate(data).effect is Effect.FILTER


def test_cross_scope_only_via_audited_admin_call(mm) -> None:
    bob = Scope(user_id="bob")
    secret = mm.remember("Bob's passport number is X123", scope=bob, source="user")
    assert mm.recall("passport number", scope=ALICE).ids == []
    assert mm.get(secret.id, scope=ALICE) is None
    with pytest.raises(InvalidInputError):
        mm.admin_recall("passport number", scope=bob, actor="", reason="")
    result = mm.admin_recall("passport number", scope=bob, actor="support-oncall", reason="ticket 42")
    assert result.ids == [secret.id]
    events = [e for e in mm.audit(bob) if e.type == "admin_access"]
    assert events[0]["data"]["actor"] == "support-oncall" and events[0]["data"]["reason"] == "ticket 42"
    assert [e for e in mm.audit(ALICE) if e.type == "admin_access"] == []


async def test_async_admin_recall_and_recall_with_budget(mm) -> None:
    bob = Scope(user_id="bob")
    note = mm.remember("Bob likes sailing", scope=bob, source="user")
    result = await mm.aadmin_recall("sailing", scope=bob, actor="ops", reason="audit")
    assert result.ids == [note.id]
    assert (await mm.arecall("sailing", scope=bob, budget=0.0)).ids == [note.id]


def test_expired_tool_results_stay_answerable_as_history_not_for_decisions() -> None:
    """Expiry is about decisions, not history: yesterday's recommendation is still found, flagged."""
    from datetime import datetime, timezone

    clock_now = [datetime(2026, 5, 1, 9, tzinfo=timezone.utc)]
    mm = make_manager(policy=builtin_policies(), clock=lambda: clock_now[0])
    alice = Scope(user_id="alice")
    hotel = mm.remember(
        "search_hotels(city='Rome') -> Albergo Centrale, 120 EUR a night", scope=alice, source="tool:search_hotels"
    )
    answer = mm.remember(
        "I recommend the Albergo Centrale in Rome at 120 EUR a night.",
        scope=alice,
        source="agent",
        derived_from=[hotel.id],
    )
    assert hotel.expires_at is not None  # the built-in tool TTL (24 h)
    clock_now[0] += timedelta(days=2)
    plain = mm.recall("hotel recommendation in Rome", scope=alice, k=5)
    assert {h.memory.id for h in plain.hits} == set()  # expired, and what rests on it is suspect
    past = mm.recall("Which hotel did you recommend yesterday?", scope=alice, k=5)
    found = {h.memory.id: h.memory.status for h in past.hits}
    assert found == {hotel.id: Status.EXPIRED, answer.id: Status.SUSPECT}
    flags = {h.memory.id: h.flags for h in past.hits}
    assert "expired" in flags[hotel.id] and "suspect" in flags[answer.id]
    decision = mm.recall("Which hotel did you recommend yesterday?", scope=alice, k=5, purpose="decision")
    assert decision.hits == []
    assert mm.require(hotel.id, scope=alice).status is Status.EXPIRED  # the read changed nothing back
