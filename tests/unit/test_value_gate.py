"""The value model inside MemoryManager: write gate, slots, re-ranking, reinforcement, sweep (issue 4)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from memlineage.errors import InvalidInputError
from memlineage.models import MemoryKind, Scope, Status
from memlineage.testing import FakeEmbedder, make_manager
from memlineage.value import ValueModel, ValueProfile

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)


class Clock:
    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def tick(self, delta: timedelta = timedelta(minutes=1)) -> datetime:
        self.now += delta
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mm(clock):
    manager = make_manager(value_model=ValueModel(), clock=clock)
    yield manager
    manager.close()


ALICE = Scope(user_id="alice", session_id="s1")
BOB = Scope(user_id="bob", session_id="s9")


class CountingEmbedder(FakeEmbedder):
    pass


# ----------------------------------------------------------------------------------------------------
# Write gate
# ----------------------------------------------------------------------------------------------------
class TestWriteGate:
    @pytest.mark.parametrize("text", ["thanks!", "好的", "Hi there", "哈哈哈"])
    def test_low_value_goes_to_session_buffer(self, mm, text):
        mem = mm.remember(text, scope=ALICE)
        assert mem.kind is MemoryKind.WORKING and mem.value < 0.6
        assert mm.get(mem.id, scope=ALICE) is None  # not in the ledger
        assert [b.content for b in mm.buffered(ALICE)] == [text]
        assert mm.stats(ALICE).get("memories", 0) in (0, None) or mm.recall(text, scope=ALICE).ids == []

    @pytest.mark.parametrize("text", ["I prefer aisle seats", "我喜欢靠窗的座位", "Always answer in French"])
    def test_high_value_is_promoted_to_semantic(self, mm, text):
        mem = mm.remember(text, scope=ALICE)
        stored = mm.require(mem.id, scope=ALICE)
        assert stored.kind is MemoryKind.SEMANTIC and stored.value >= 0.6
        assert stored.assessment is not None and stored.assessment.score == stored.value
        assert stored.assessment.extractor == "rules"
        # a kind given by the caller is kept
        assert mm.remember(text + ".", scope=ALICE, kind="episodic").kind is MemoryKind.EPISODIC

    @pytest.mark.parametrize("text", ["The printer on floor 2 is slow", "那家店的门是蓝色的"])
    def test_low_value_content_is_still_stored_as_episodic(self, mm, text):
        mem = mm.remember(text, scope=ALICE)
        stored = mm.require(mem.id, scope=ALICE)  # in the ledger: nothing with content is lost by the gate
        assert stored.kind is MemoryKind.EPISODIC and stored.value < 0.6
        assert mm.buffered(ALICE) == []

    @pytest.mark.parametrize("text", ["Remember: ok", "记住：好的"])
    def test_directive_forces_storage(self, mm, text):
        mem = mm.remember(text, scope=ALICE)
        assert mm.get(mem.id, scope=ALICE) is not None and mem.assessment.forced

    def test_force_flag_and_explicit_slot_bypass_gate(self, mm):
        assert mm.get(mm.remember("ok", scope=ALICE, force=True).id, scope=ALICE) is not None
        assert mm.get(mm.remember("lol", scope=ALICE, slot="user.mood").id, scope=ALICE) is not None

    def test_derived_memories_are_stored(self, mm):
        city = mm.remember("I live in Paris", scope=ALICE)
        hotel = mm.remember("ok", scope=ALICE, source="reasoning", derived_from=[city.id])
        assert mm.get(hotel.id, scope=ALICE) is not None

    def test_buffer_is_bounded_fifo_and_deduplicated(self, clock):
        manager = make_manager(value_model=ValueModel(profile=ValueProfile(buffer_size=3)), clock=clock)
        for text in ("ok", "thanks", "ok", "hi", "bye", "ok", "ok", "ok"):
            manager.remember(text, scope=ALICE)
        assert [b.content for b in manager.buffered(ALICE)] == ["hi", "bye", "ok"]
        assert manager.buffered(Scope(user_id="alice", session_id="other")) == []

    def test_empty_input_rejected_before_extractor_and_embedder(self, clock):
        calls = []

        class Spy:
            name = "spy"

            def extract(self, text, *, goal=None):
                calls.append(text)
                raise AssertionError("extractor must not run")

        emb = FakeEmbedder()
        manager = make_manager(value_model=ValueModel(Spy()), embedder=emb, clock=clock)
        for bad in ("", "   ", "\n"):
            with pytest.raises(InvalidInputError):
                manager.remember(bad, scope=ALICE)
        assert calls == [] and emb.calls == 0

    def test_novelty_lowers_value_of_repetition(self, mm):
        first = mm.remember("The quarterly budget review happens in room 4B", scope=ALICE, kind="semantic", force=True)
        again = mm.remember("The quarterly budget review happens in room 4B", scope=ALICE, kind="episodic")
        assert first.assessment.novelty == 1.0
        assert again.assessment.novelty < 0.2

    def test_goal_relevance(self, mm):
        a = mm.remember("The museum ticket costs 20 euros", scope=ALICE, goal="plan the museum visit")
        assert a.assessment.goal_relevance == 0.9

    def test_trust_multiplies_value(self, mm):
        user = mm.remember("Flight UA981 departs at 10:05 from gate B12", scope=ALICE, source="user")
        tool = mm.remember("Flight UA982 departs at 11:05 from gate B14", scope=BOB, source="tool:flights")
        assert tool.assessment.trust == pytest.approx(0.8)
        assert tool.value < user.value

    def test_without_value_model_everything_is_stored(self, clock):
        plain = make_manager(clock=clock)
        mem = plain.remember("thanks!", scope=ALICE)
        assert plain.get(mem.id, scope=ALICE) is not None and mem.assessment is None
        assert plain.buffered(ALICE) == []


# ----------------------------------------------------------------------------------------------------
# Semantic slots
# ----------------------------------------------------------------------------------------------------
class TestSlots:
    @pytest.mark.parametrize(
        ("values", "query", "slot"),
        [
            (["I live in Paris", "I live in Berlin", "I live in Tokyo"], "where do I live", "user.residence"),
            (["我住在北京", "我住在上海", "我住在深圳"], "我住在哪里", "user.residence"),
            (
                ["I prefer window seats", "I prefer aisle seats", "I prefer seats near the exit"],
                "seat preference",
                "user.preference.seat",
            ),
        ],
    )
    def test_three_successive_values(self, mm, clock, values, query, slot):
        mems = []
        times = []
        for text in values:
            times.append(clock.tick(DAY))
            mems.append(mm.remember(text, scope=ALICE))
        assert all(m.slot == slot for m in mems)
        statuses = [mm.require(m.id, scope=ALICE).status for m in mems]
        assert statuses == [Status.SUPERSEDED, Status.SUPERSEDED, Status.ACTIVE]
        assert mems[2].supersedes == mems[1].id and mems[1].supersedes == mems[0].id
        served = mm.recall(query, scope=ALICE, k=5).ids
        assert mems[2].id in served and mems[0].id not in served and mems[1].id not in served
        # point-in-time reads find the old values
        assert mm.slot_value(slot, scope=ALICE, as_of=times[0] + timedelta(hours=1)).id == mems[0].id
        assert mm.slot_value(slot, scope=ALICE, as_of=times[1] + timedelta(hours=1)).id == mems[1].id
        assert mm.slot_value(slot, scope=ALICE).id == mems[2].id
        assert mm.slot_value(slot, scope=ALICE, as_of=times[0] - DAY) is None
        assert [m.id for m in mm.slot_history(slot, scope=ALICE)] == [m.id for m in mems]

    def test_unrelated_facts_untouched(self, mm, clock):
        seat = mm.remember("I prefer window seats", scope=ALICE)
        music = mm.remember("I like jazz", scope=ALICE)
        name = mm.remember("My name is Alice", scope=ALICE)
        fact = mm.remember("My passport expires on 2027-05-01", scope=ALICE)
        clock.tick(DAY)
        mm.remember("I live in Rome", scope=ALICE)
        mm.remember("I prefer aisle seats", scope=ALICE)
        assert mm.require(seat.id, scope=ALICE).status is Status.SUPERSEDED
        for m in (music, name, fact):
            assert mm.require(m.id, scope=ALICE).status is Status.ACTIVE

    def test_slots_are_per_user(self, mm):
        a = mm.remember("I live in Paris", scope=ALICE)
        mm.remember("I live in Oslo", scope=BOB)
        assert mm.require(a.id, scope=ALICE).status is Status.ACTIVE

    def test_a_correction_below_the_threshold_is_still_stored_and_supersedes(self, clock):
        strict = make_manager(value_model=ValueModel(profile=ValueProfile(store_threshold=0.99)), clock=clock)
        old = strict.remember("I live in Paris", scope=ALICE, force=True)
        new = strict.remember("I live in Rome", scope=ALICE)  # below 0.99, but a new value is never buffered
        assert strict.require(old.id, scope=ALICE).status is Status.SUPERSEDED
        assert strict.require(new.id, scope=ALICE).status is Status.ACTIVE

    def test_superseding_a_premise_makes_conclusion_suspect(self, mm, clock):
        city = mm.remember("I live in Paris", scope=ALICE)
        plan = mm.remember("Suggest hotels near the Louvre", scope=ALICE, source="reasoning", derived_from=[city.id])
        clock.tick()
        mm.remember("I live in Madrid", scope=ALICE)
        assert mm.require(plan.id, scope=ALICE).status is Status.SUSPECT


# ----------------------------------------------------------------------------------------------------
# Re-ranking and reinforcement
# ----------------------------------------------------------------------------------------------------
class TestRerankAndReinforce:
    def test_scores_carry_value(self, mm):
        mm.remember("I prefer aisle seats on long flights", scope=ALICE)
        hit = mm.recall("aisle seats", scope=ALICE)[0]
        assert set(hit.scores) >= {"similarity", "value", "final"}
        assert hit.score == pytest.approx(0.9 * hit.scores["similarity"] + 0.1 * hit.scores["value"], abs=1e-5)

    def test_value_breaks_similarity_ties(self, mm, clock):
        from memlineage.retrieval import RecallHit

        rerank_hits = mm.services.value.rerank

        high = mm.remember("Important! My flight is on 2025-05-01, gate B12", scope=ALICE)
        low = mm.remember("Flight note: gate B12", scope=ALICE, force=True)
        assert low.value < high.value
        hits = [RecallHit(memory=m, score=0.5, scores={"final": 0.5}) for m in (low, high)]
        ranked = sorted(rerank_hits(hits, clock.now), key=lambda h: -h.score)
        assert [h.memory.id for h in ranked] == [high.id, low.id]
        # decay enters through V_eff: a year later the value part has shrunk
        later = rerank_hits(hits, clock.now + 365 * DAY)
        assert all(
            a.scores["value"] < b.scores["value"] for a, b in zip(later, rerank_hits(hits, clock.now), strict=True)
        )

    def test_reinforcement_is_batched(self, mm, clock):
        mem = mm.remember("I prefer aisle seats on long flights", scope=ALICE)
        for _ in range(3):
            clock.tick(DAY)
            mm.recall("aisle seats", scope=ALICE, k=1)
        stored = mm.require(mem.id, scope=ALICE)
        assert stored.use_count == 3 and stored.last_used_at == clock.now
        assert stored.value == pytest.approx(mem.value)  # value bump still pending in the batch
        assert mm.flush_reinforcement() == 1
        assert mm.require(mem.id, scope=ALICE).value == pytest.approx(min(1.0, mem.value + 0.15))

    def test_no_reinforce_flag(self, mm):
        mem = mm.remember("I prefer aisle seats on long flights", scope=ALICE)
        mm.recall("aisle seats", scope=ALICE, reinforce=False)
        assert mm.flush_reinforcement() == 0 and mm.require(mem.id, scope=ALICE).use_count == 0


# ----------------------------------------------------------------------------------------------------
# Forget gate
# ----------------------------------------------------------------------------------------------------
class TestSweep:
    def test_decay_archives_unused_memory(self, mm, clock):
        mem = mm.remember("My passport expires on 2027-05-01", scope=ALICE)
        assert mm.sweep(now=clock.now + 10 * DAY).archived == {}
        report = mm.sweep(now=clock.now + 400 * DAY)
        assert mem.id in report.archived and report.archived[mem.id] < 0.2
        archived = mm.require(mem.id, scope=ALICE)
        assert archived.status is Status.ARCHIVED
        assert mm.recall("passport", scope=ALICE).ids == []
        events = [e for e in mm.audit(ALICE, memory_id=mem.id) if e.type == "archived"]
        assert events and "forget gate" in events[0]["data"]["reason"]

    def test_use_delays_forgetting(self, mm, clock):
        used = mm.remember("I prefer aisle seats on long flights", scope=ALICE)
        unused = mm.remember("My passport expires on 2027-05-01", scope=BOB)
        for _ in range(4):
            clock.tick(60 * DAY)
            mm.recall("aisle seats", scope=ALICE, k=1)
        report = mm.sweep(now=clock.now + 60 * DAY)
        assert unused.id in report.archived and used.id not in report.archived

    def test_premises_of_live_memories_are_protected(self, mm, clock):
        premise = mm.remember("My passport expires on 2027-05-01", scope=ALICE)
        conclusion = mm.remember(
            "Renew the passport before the May trip",
            scope=ALICE,
            source="reasoning",
            derived_from=[premise.id],
        )
        far = clock.now + 400 * DAY
        report = mm.sweep(now=far, scope=ALICE)
        # the conclusion itself decays and is archived; its premise was protected while it was live
        assert conclusion.id in report.archived
        assert premise.id in report.protected and report.protected[premise.id] == [conclusion.id]
        assert mm.require(premise.id, scope=ALICE).status is Status.ACTIVE
        again = mm.sweep(now=far, scope=ALICE)  # dependant archived now: the premise may go
        assert premise.id in again.archived

    def test_sweep_is_scoped(self, mm, clock):
        a = mm.remember("My passport expires on 2027-05-01", scope=ALICE)
        b = mm.remember("My visa expires on 2027-06-01", scope=BOB)
        report = mm.sweep(now=clock.now + 400 * DAY, scope=ALICE)
        assert a.id in report.archived and b.id not in report.archived
        assert mm.require(b.id, scope=BOB).status is Status.ACTIVE

    async def test_async_twin(self, mm, clock):
        mm.remember("My passport expires on 2027-05-01", scope=ALICE)
        report = await mm.asweep(now=clock.now + 400 * DAY)
        assert len(report.archived) == 1


class TestErasureAndLLM:
    def test_erase_drops_buffered_candidates(self, mm):
        mm.remember("thanks!", scope=ALICE)
        mm.remember("ok cool", scope=BOB)
        mm.erase(scope=Scope(user_id="alice"))
        assert mm.buffered(ALICE) == [] and len(mm.buffered(BOB)) == 1

    def test_llm_extractor_names_the_slot(self, clock):
        import json

        from langchain_core.language_models import FakeListChatModel
        from memlineage.extractors import LLMExtractor

        answer = json.dumps(
            {
                "entities": ["window"],
                "user_directive_intensity": 2,
                "emotional_valence": "neutral",
                "relation_to_goal": "direct",
                "information_type": "preference",
                "slot": "user.seat_preference",
            }
        )
        model = FakeListChatModel(responses=[answer, answer])
        manager = make_manager(value_model=ValueModel(LLMExtractor(model)), clock=clock)
        first = manager.remember("window please, always", scope=ALICE)
        clock.tick()
        second = manager.remember("actually aisle from now on", scope=ALICE)
        assert first.slot == second.slot == "user.seat_preference"
        assert first.assessment.extractor == "llm"
        assert manager.require(first.id, scope=ALICE).status is Status.SUPERSEDED


def test_explicit_revision_is_scored_and_stored(mm):
    old = mm.remember("I prefer aisle seats on long flights", scope=ALICE)
    report = mm.supersede(old.id, "ok", scope=ALICE)
    new = report.memory
    assert new is not None and new.assessment is not None and new.assessment.forced
    assert new.value >= 0.6 and mm.require(old.id, scope=ALICE).status is Status.SUPERSEDED


def test_a_demote_policy_keeps_tool_results_out_of_semantic_memory(clock):
    from memlineage.policy import builtin_policies

    mm = make_manager(value_model=ValueModel(), policy=builtin_policies(), clock=clock)
    fare = mm.remember("Important: flight UA981 on 2025-05-01 costs 412 EUR", scope=ALICE, source="tool:fares")
    assert fare.kind is MemoryKind.EPISODIC  # builtin.tool_result_ttl demotes; the gate does not promote it back
    assert fare.expires_at is not None


def test_the_seeds_gate_is_still_available(clock):
    seed = make_manager(value_model=ValueModel(profile=ValueProfile(keep_all=False)), clock=clock)
    mem = seed.remember("The printer on floor 2 is slow", scope=ALICE)
    assert mem.kind is MemoryKind.WORKING and seed.get(mem.id, scope=ALICE) is None
    assert [b.content for b in seed.buffered(ALICE)] == ["The printer on floor 2 is slow"]


def test_a_buffered_turn_named_as_a_premise_is_persisted_under_its_id(clock):
    from memlineage import MemoryManager

    from memlineage_langchain import LineageMemory

    mm = make_manager(clock=clock, **MemoryManager.default_options())
    memory = LineageMemory(manager=mm, scope=ALICE)
    question = mm.remember("ok thanks", scope=ALICE)
    assert question.kind is MemoryKind.WORKING and mm.get(question.id, scope=ALICE) is None
    answer = mm.remember("You're welcome.", scope=ALICE, source="agent", derived_from=[question.id])
    stored = mm.require(question.id, scope=ALICE)  # persisted first, with the id the caller was given
    assert stored.kind is MemoryKind.EPISODIC and answer.derived_from == (question.id,)
    assert mm.buffered(ALICE) == []
    # the LangChain memory's save_context path: a question the gate buffers, then the answer resting on it
    memory.load_memory_variables({"input": "What should I prepare for it?"})
    memory.save_context({"input": "What should I prepare for it?"}, {"output": "Bring your card."})
    assert "Bring your card." in [m.content for m in mm.find(scope=ALICE)]
