"""Unit tests of the multi-factor value model and its feature extractors (issue 4)."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.errors import ConfigurationError, InvalidInputError
from memlineage.extractors import (
    GoalRelation,
    InfoType,
    LLMExtractor,
    MemoryFeatures,
    RuleBasedExtractor,
    detect_slot,
    is_forcing_directive,
)
from memlineage.models import Lineage, Memory, Scope, SourceKind
from memlineage.testing import make_manager
from memlineage.value import (
    BufferedItem,
    ReinforcementBatch,
    ShortTermBuffer,
    ValueModel,
    ValueProfile,
    ValueWeights,
    decay_factor,
    rerank_score,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)


@pytest.fixture
def rules() -> RuleBasedExtractor:
    return RuleBasedExtractor()


@pytest.fixture
def model() -> ValueModel:
    return ValueModel()


class CountingExtractor:
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0
        self.inner = RuleBasedExtractor()

    def extract(self, text: str, *, goal: str | None = None) -> MemoryFeatures:
        self.calls += 1
        return self.inner.extract(text, goal=goal)


# ----------------------------------------------------------------------------------------------------
# Factors, English and Chinese
# ----------------------------------------------------------------------------------------------------
class TestGoalRelevance:
    @pytest.mark.parametrize(
        ("text", "goal", "expected"),
        [
            ("I need a flight to Paris on Friday", "book a flight to Paris", GoalRelation.DIRECT),
            ("我要订去上海的机票", "帮用户订去上海的机票", GoalRelation.DIRECT),
            ("The weather was nice in the park", "book a flight to Paris", GoalRelation.NONE),
            ("公园里的天气不错", "帮用户订机票", GoalRelation.NONE),
            (
                "I prefer aisle seats",
                "plan a museum visit",
                GoalRelation.INDIRECT,
            ),  # personal, unrelated goal
            ("我喜欢靠窗的座位", "规划博物馆行程", GoalRelation.INDIRECT),
        ],
    )
    def test_relation_with_goal(self, rules, text, goal, expected):
        assert rules.extract(text, goal=goal).goal_relation is expected

    def test_goal_factor_values_follow_seed(self, model):
        f = MemoryFeatures(info_type=InfoType.FACT)
        scores = {r: model.score(f.model_copy(update={"goal_relation": r})).goal_relevance for r in GoalRelation}
        assert scores == {GoalRelation.DIRECT: 0.9, GoalRelation.INDIRECT: 0.4, GoalRelation.NONE: 0.1}

    def test_goal_similarity_overrides_relation(self, model):
        f = MemoryFeatures(goal_relation=GoalRelation.NONE)
        assert model.score(f, goal_similarity=0.83).goal_relevance == pytest.approx(0.83)
        assert model.score(f, goal_similarity=-0.4).goal_relevance == 0.0

    def test_relevant_text_scores_higher(self, model):
        goal = "fix the login error for the customer"
        related = model.assess("The customer sees a login error after the update", goal=goal)
        unrelated = model.assess("The customer sees a rainbow after the storm", goal="plan a picnic menu")
        assert related.goal_relevance > unrelated.goal_relevance
        assert related.score > unrelated.score


class TestSalience:
    @pytest.mark.parametrize(
        ("plain", "salient"),
        [
            ("The report is due on the shared drive", "Important: the report is due on the shared drive"),
            ("报告放在共享盘里", "重要：报告放在共享盘里"),
            ("报告放在共享盘里", "切记报告放在共享盘里"),
        ],
    )
    def test_directives(self, model, plain, salient):
        assert model.assess(salient).salience > model.assess(plain).salience

    @pytest.mark.parametrize(
        ("text", "valence"),
        [
            ("I am so angry, the delivery is unacceptable!", "negative"),
            ("I'm thrilled, the new design is amazing!", "positive"),
            ("我非常生气，太失望了！", "negative"),
            ("我太开心了，非常满意！", "positive"),
        ],
    )
    def test_emotion(self, rules, model, text, valence):
        f = rules.extract(text)
        assert f.emotion_valence == valence
        assert f.emotion_intensity >= 0.5
        assert model.assess(text).salience >= 0.3

    @pytest.mark.parametrize(
        ("text", "kind"),
        [
            ("The app crashes with error 0xC0000005", "error"),
            ("Login fails with ERR_CONNECTION_REFUSED", "error"),
            ("登录时出现错误码 5003", "error"),
            ("The invoice is due on 2025-04-30", "date"),
            ("发票截止日期是4月30日", "date"),
            ("The refund was $120", "amount"),
            ("退款金额是120元", "amount"),
            ("My MacBook keeps overheating", "product"),
            ("我的 iPhone 15 屏幕碎了", "product"),
        ],
    )
    def test_key_entities(self, rules, text, kind):
        entities = rules.extract(text).entities
        assert any(e.startswith(f"{kind}:") for e in entities), entities

    def test_entities_raise_salience(self, model):
        assert (
            model.assess("The refund of $120 was approved on 2024-05-01").salience
            > model.assess("The refund was approved").salience
        )


class TestUtility:
    @pytest.mark.parametrize(
        ("text", "info_type"),
        [
            ("Always answer in French", InfoType.INSTRUCTION),
            ("以后请用中文回答我", InfoType.INSTRUCTION),
            ("I prefer aisle seats", InfoType.PREFERENCE),
            ("我喜欢靠窗的座位", InfoType.PREFERENCE),
            ("我不吃辣", InfoType.PREFERENCE),
            ("The museum opens at 9 on weekdays", InfoType.FACT),
            ("博物馆工作日九点开门", InfoType.FACT),
            ("Thanks, that was helpful", InfoType.FEEDBACK),
            ("回答得很好", InfoType.FEEDBACK),
            ("thanks!", InfoType.CHITCHAT),
            ("Hi there", InfoType.CHITCHAT),
            ("好的", InfoType.CHITCHAT),
            ("哈哈哈", InfoType.CHITCHAT),
        ],
    )
    def test_info_type(self, rules, text, info_type):
        assert rules.extract(text).info_type is info_type

    def test_utility_order(self, model):
        u = {t: model.score(MemoryFeatures(info_type=t)).utility for t in InfoType}
        assert u[InfoType.INSTRUCTION] == u[InfoType.PREFERENCE] == 0.8
        assert u[InfoType.PREFERENCE] > u[InfoType.FACT] > u[InfoType.FEEDBACK] > u[InfoType.CHITCHAT]


class TestNoveltyAndTrust:
    def test_novelty_is_one_minus_nearest_similarity(self, model):
        seed = ValueModel(profile=ValueProfile(novelty_baseline=0.0))
        assert seed.assess("I prefer aisle seats", nearest_similarity=0.9).novelty == pytest.approx(0.1)
        assert model.assess("I prefer aisle seats").novelty == 1.0
        assert model.assess("I prefer aisle seats", nearest_similarity=0.9).novelty == pytest.approx(0.2)
        assert model.assess("I prefer aisle seats", nearest_similarity=0.5).novelty == 1.0  # s0 = 0.5
        assert model.assess("我喜欢靠窗的座位", nearest_similarity=1.3).novelty == 0.0
        assert (
            model.assess("I prefer aisle seats", nearest_similarity=0.9).score
            < model.assess("I prefer aisle seats").score
        )

    def test_trust_is_a_multiplier(self, model):
        full = model.assess("The flight UA 981 leaves at 10:05 from gate B12")
        tool = model.assess("The flight UA 981 leaves at 10:05 from gate B12", trust=0.5)
        assert tool.score == pytest.approx(full.score * 0.5, abs=1e-6)
        no_trust = ValueModel(profile=ValueProfile(trust_influence=0.0))
        assert no_trust.assess("The flight UA 981 leaves at 10:05", trust=0.1).score == pytest.approx(
            no_trust.assess("The flight UA 981 leaves at 10:05").score
        )

    def test_trust_out_of_range(self, model):
        with pytest.raises(InvalidInputError):
            model.assess("hello world", trust=1.5)


# ----------------------------------------------------------------------------------------------------
# Score, weights, thresholds, forced directive, empty input, cache
# ----------------------------------------------------------------------------------------------------
class TestScoreAndThresholds:
    def test_seed_default_weights_and_formula(self, model):
        w = model.profile.weights
        assert (w.goal, w.salience, w.utility, w.novelty) == (0.4, 0.25, 0.2, 0.15)
        a = model.score(MemoryFeatures(info_type=InfoType.PREFERENCE, goal_relation=GoalRelation.DIRECT))
        assert a.score == pytest.approx(0.4 * 0.9 + 0.25 * 0.0 + 0.2 * 0.8 + 0.15 * 1.0)

    def test_weights_configurable_per_agent(self):
        novelty_heavy = ValueProfile(weights=ValueWeights(goal=0.1, salience=0.1, utility=0.1, novelty=0.7))
        vm = ValueModel(profiles={"researcher": novelty_heavy})
        scope = Scope(user_id="u", agent_id="researcher")
        chit = "thanks!"
        assert vm.assess(chit, scope=scope).score > vm.assess(chit, scope=Scope(user_id="u")).score
        assert vm.profile_for(scope) is novelty_heavy

    def test_invalid_configuration(self):
        with pytest.raises(ValueError):
            ValueWeights(goal=0, salience=0, utility=0, novelty=0)
        with pytest.raises(ValueError):
            ValueProfile(store_threshold=0.1, forget_threshold=0.3)
        with pytest.raises(ConfigurationError):
            ValueModel(extractor=object())  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "text",
        [
            "I prefer aisle seats on long flights",
            "我喜欢靠窗的座位",
            "Always answer in French",
            "我叫张三",
            "Our server crashes with error 0xC0000005 on the XPS-13",
            "我住在上海",
        ],
    )
    def test_valuable_text_passes_write_gate(self, model, text):
        a = model.assess(text)
        assert a.score >= 0.6 and model.should_store(a)

    @pytest.mark.parametrize("text", ["thanks!", "好的", "Hi there", "哈哈哈", "ok cool", "谢谢"])
    def test_chitchat_is_buffered(self, model, text):
        a = model.assess(text)
        assert a.score < 0.6 and not model.should_store(a)

    def test_custom_store_threshold(self):
        strict = ValueModel(profile=ValueProfile(store_threshold=0.95))
        assert not strict.should_store(strict.assess("I prefer aisle seats"))


class TestForcedDirective:
    @pytest.mark.parametrize(
        "text",
        [
            "Remember: ok",
            "Please remember that the gate code is 4471",
            "Don't forget my sister visits",
            "记住：好的",
            "请记住我下周出差",
            "切记带护照",
            "别忘了给妈妈打电话",
        ],
    )
    def test_forces_storage(self, model, text):
        a = model.assess(text)
        assert a.forced and model.should_store(a) and a.score >= 0.6

    @pytest.mark.parametrize("text", ["I don't remember where I parked", "我记不住他的名字", "Do you remember me?"])
    def test_not_a_directive(self, text):
        assert not is_forcing_directive(text)


class TestEmptyInputAndCache:
    @pytest.mark.parametrize("text", ["", "   ", "\n\t", None, 42])
    def test_empty_rejected_before_extractor(self, text):
        counting = CountingExtractor()
        vm = ValueModel(counting)
        with pytest.raises(InvalidInputError):
            vm.assess(text)  # type: ignore[arg-type]
        assert counting.calls == 0

    def test_identical_text_is_cached(self):
        counting = CountingExtractor()
        vm = ValueModel(counting)
        a = vm.assess("I prefer aisle seats")
        b = vm.assess("  i PREFER   aisle seats ")
        assert a == b and counting.calls == 1 and vm.cache_hits == 1
        vm.assess("I prefer aisle seats", goal="book a flight")  # another goal: another extraction
        assert counting.calls == 2

    def test_cache_is_bounded(self):
        counting = CountingExtractor()
        vm = ValueModel(counting, cache_size=2)
        for t in ("a1 b", "a2 b", "a3 b", "a1 b"):
            vm.extract(t)
        assert counting.calls == 4


# ----------------------------------------------------------------------------------------------------
# Slots
# ----------------------------------------------------------------------------------------------------
class TestSlots:
    @pytest.mark.parametrize(
        ("text", "slot"),
        [
            ("My name is Alice Chen", "user.name"),
            ("I live in Berlin now", "user.residence"),
            ("I moved to Tokyo last year", "user.residence"),
            ("I work at Acme Corp", "user.employer"),
            ("I prefer window seats", "user.preference.seat"),
            ("I like aisle seats", "user.preference.seat"),
            ("I like jazz", "user.preference.music"),
            ("我叫张三", "user.name"),
            ("我住在北京", "user.residence"),
            ("我现在住在上海", "user.residence"),
            ("我喜欢靠窗的座位", "user.preference.seat"),
            ("我不吃辣", "user.diet.spicy"),
            ("我喜欢吃辣", "user.diet.spicy"),
            ("I don't eat spicy food", "user.diet.spicy"),
        ],
    )
    def test_detect(self, text, slot):
        assert detect_slot(text)[0] == slot

    def test_values_and_unrelated(self):
        assert detect_slot("I live in Paris.") == ("user.residence", "Paris")
        assert detect_slot("我住在上海")[1] == "上海"
        assert detect_slot("The sky is blue") == (None, None)
        assert detect_slot("I like jazz")[0] != detect_slot("I like window seats")[0]


# ----------------------------------------------------------------------------------------------------
# LLM extractor with scripted fakes
# ----------------------------------------------------------------------------------------------------
VALID = json.dumps(
    {
        "entities": ["UA981", "2025-04-01"],
        "user_directive_intensity": 8,
        "emotional_valence": "negative",
        "emotion_intensity": 6,
        "relation_to_goal": "direct",
        "information_type": "preference",
        "remember": False,
        "slot": "user.preference.seat",
        "slot_value": "aisle",
    }
)


class TestLLMExtractor:
    def test_langchain_fake_valid(self):
        from langchain_core.language_models import FakeListChatModel

        ext = LLMExtractor(FakeListChatModel(responses=[f"```json\n{VALID}\n```"]))
        f = ext.extract("I want an aisle seat on UA981, it's important", goal="book a flight")
        assert f.extractor == "llm" and ext.calls == 1
        assert f.info_type is InfoType.PREFERENCE and f.goal_relation is GoalRelation.DIRECT
        assert f.directive_intensity == 0.8 and f.emotion_valence == "negative" and f.emotion_intensity == 0.6
        assert f.slot == "user.preference.seat" and f.entities == ("UA981", "2025-04-01")

    def test_invalid_json_then_valid_retries_once(self):
        from langchain_core.language_models import FakeListChatModel

        ext = LLMExtractor(FakeListChatModel(responses=["Sure! Here you go: {not json", VALID]))
        f = ext.extract("I want an aisle seat")
        assert f.extractor == "llm" and ext.calls == 2 and ext.fallbacks == 0

    def test_invalid_twice_falls_back_to_rules(self):
        from langchain_core.language_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        bad_schema = json.dumps({"user_directive_intensity": 42, "emotional_valence": "meh"})
        fake = GenericFakeChatModel(messages=iter([AIMessage(content="no json at all"), AIMessage(content=bad_schema)]))
        ext = LLMExtractor(fake)
        f = ext.extract("记住：我对花生过敏")
        assert f.extractor == "rules(fallback)" and ext.calls == 2 and ext.fallbacks == 1
        assert f.forced and f.slot == "user.diet.花生"

    def test_fallback_is_not_cached_but_valid_is(self):
        from langchain_core.language_models import FakeListChatModel

        ext = LLMExtractor(FakeListChatModel(responses=["bad", "bad", VALID, VALID]))
        vm = ValueModel(ext)
        assert vm.assess("I want an aisle seat").extractor == "rules(fallback)"
        assert vm.assess("I want an aisle seat").extractor == "llm"
        assert vm.assess("I want an aisle seat").extractor == "llm"
        assert ext.calls == 3

    def test_a_hung_model_does_not_make_every_later_write_wait(self):
        """Issue 27: one hung call times out; while it still runs, later texts fall back without asking again."""
        release, asked = threading.Event(), []

        def hang(prompt: str) -> str:
            asked.append(prompt)
            release.wait(5)
            return VALID

        ext = LLMExtractor(hang, timeout=0.05)
        with make_manager(value_model=ValueModel(ext)) as mm:
            for n in range(4):
                mm.remember(f"I collect stamps from country number {n}", scope=Scope(user_id="u"))
        assert len(asked) == 1 and ext.fallbacks == 4  # the model was asked once, not four times
        release.set()
        for _ in range(100):
            if not ext._call.busy:
                break
            time.sleep(0.01)
        assert ext.extract("I prefer aisle seats").extractor == "llm" and len(asked) == 2  # asked again once free

    def test_timeout_out_of_range_is_refused(self):
        with pytest.raises(ConfigurationError):
            LLMExtractor(lambda p: VALID, timeout=0)

    def test_llamaindex_mock_llm_echo_falls_back(self):
        from llama_index.core.llms import MockLLM

        f = LLMExtractor(MockLLM()).extract("I prefer aisle seats")
        assert f.extractor == "rules(fallback)" and f.info_type is InfoType.PREFERENCE

    def test_llamaindex_custom_llm_scripted(self):
        from llama_index.core.base.llms.types import CompletionResponse, LLMMetadata
        from llama_index.core.llms import CustomLLM
        from llama_index.core.llms.callbacks import llm_completion_callback

        class ScriptedLLM(CustomLLM):
            answer: str = VALID

            @property
            def metadata(self) -> LLMMetadata:
                return LLMMetadata(model_name="scripted")

            @llm_completion_callback()
            def complete(self, prompt: str, formatted: bool = False, **kwargs) -> CompletionResponse:
                return CompletionResponse(text=self.answer)

            @llm_completion_callback()
            def stream_complete(self, prompt: str, formatted: bool = False, **kwargs):
                yield CompletionResponse(text=self.answer, delta=self.answer)

        f = LLMExtractor(ScriptedLLM()).extract("我想要过道的座位")
        assert f.extractor == "llm" and f.slot == "user.preference.seat"

    def test_callable_and_errors(self):
        calls = []

        def boom(prompt: str) -> str:
            calls.append(prompt)
            raise RuntimeError("model down")

        f = LLMExtractor(boom).extract("I prefer aisle seats")
        assert f.extractor == "rules(fallback)" and len(calls) == 1
        assert LLMExtractor(lambda p: VALID).extract("x y").extractor == "llm"
        with pytest.raises(ConfigurationError):
            LLMExtractor(object())
        with pytest.raises(ConfigurationError):
            LLMExtractor(lambda p: VALID, max_retries=9)

    def test_model_cannot_drop_a_forcing_directive(self):
        f = LLMExtractor(lambda p: VALID).extract("记住：我的护照号码尾号是4471")
        assert f.forced and f.directive_intensity == 1.0

    async def test_async_twin(self):
        f = await LLMExtractor(lambda p: VALID).aextract("I want an aisle seat")
        assert f.extractor == "llm"


# ----------------------------------------------------------------------------------------------------
# Decay, reinforcement, re-ranking, buffers over simulated time
# ----------------------------------------------------------------------------------------------------
def _memory(value: float, *, created: datetime = T0, uses: int = 0, last: datetime | None = None) -> Memory:
    return Memory(
        content="x",
        scope=Scope(user_id="u"),
        lineage=Lineage(source_kind=SourceKind.USER),
        value=value,
        created_at=created,
        recorded_at=created,
        use_count=uses,
        last_used_at=last,
    )


class TestDecayAndReinforcement:
    def test_decay_factor(self):
        assert decay_factor(0, 10) == 1.0
        assert decay_factor(-5, 10) == 1.0
        assert decay_factor(10, 10) == pytest.approx(0.5)
        assert decay_factor(30, 10) == pytest.approx(0.125)

    def test_effective_value_halves_after_half_life(self, model):
        h = model.profile.half_life_seconds
        v = model.effective_value(0.8, last_used_at=T0, now=T0 + timedelta(seconds=h))
        assert v == pytest.approx(0.4)

    def test_half_life_grows_with_use(self, model):
        p = model.profile
        assert p.half_life(0) == p.half_life_seconds
        assert p.half_life(2) == pytest.approx(p.half_life_seconds * 1.5**2)
        assert p.half_life(100) == p.half_life(p.half_life_max_uses)
        later = T0 + 60 * DAY
        assert model.effective_value(0.7, last_used_at=T0, now=later, use_count=5) > model.effective_value(
            0.7, last_used_at=T0, now=later, use_count=0
        )

    def test_forgetting_over_simulated_time(self, model):
        never_used = _memory(0.6)
        # V_eff < 0.2 when 2^(-t/h) < 1/3, i.e. t > h * log2(3) ≈ 142.6 days with h = 90 days
        assert not model.is_forgettable(never_used, T0 + 142 * DAY)
        assert model.is_forgettable(never_used, T0 + 143 * DAY)
        used = _memory(0.6, uses=3, last=T0 + 40 * DAY)
        assert not model.is_forgettable(used, T0 + 90 * DAY)

    def test_reinforcement(self, model):
        assert model.reinforced(0.6) == pytest.approx(0.65)
        assert model.reinforced(0.6, uses=3) == pytest.approx(0.75)
        assert model.reinforced(0.98) == 1.0
        # a reinforced, recently used memory outlives an unused one of the same initial value
        value, last, uses = 0.6, T0, 0
        for day in (10, 20, 30):
            value, last, uses = model.reinforced(value), T0 + day * DAY, uses + 1
        end = T0 + 200 * DAY
        assert model.effective_value(value, last_used_at=last, now=end, use_count=uses) > 0.2
        assert model.effective_value(0.6, last_used_at=T0, now=end) < 0.2

    def test_reinforcement_batch(self):
        written: list[list[tuple[str, int, datetime]]] = []
        batch = ReinforcementBatch(lambda entries: written.append(list(entries)), batch_size=3)
        batch.add(["a", "b"], T0)
        batch.add(["a"], T0 + DAY)
        assert written == [] and batch.pending()["a"] == (2, T0 + DAY)
        batch.add(["c"], T0 + 2 * DAY)
        assert len(written) == 1 and sorted(e[0] for e in written[0]) == ["a", "b", "c"]
        assert batch.flush() == 0 and batch.flushes == 1

    def test_rerank(self, model):
        assert rerank_score(1.0, 0.0) == pytest.approx(0.7)
        assert rerank_score(0.5, 1.0, 0.5) == pytest.approx(0.75)
        assert model.rerank(0.6, 0.9) > model.rerank(0.6, 0.1)
        assert rerank_score(2.0, -1.0) == pytest.approx(0.7)


class TestShortTermBuffer:
    def test_bounded_fifo_per_session(self, model):
        buf = ShortTermBuffer(capacity=3)
        s1, s2 = Scope(user_id="u", session_id="s1"), Scope(user_id="u", session_id="s2")
        a = model.assess("thanks!")
        evicted = [buf.add(BufferedItem(str(i), f"t{i}", s1, a, T0)) for i in range(5)]
        buf.add(BufferedItem("x", "tx", s2, a, T0))
        assert [i.id for i in buf.items(s1)] == ["2", "3", "4"]
        assert [e.id for e in evicted if e] == ["0", "1"] and buf.dropped == 2
        assert buf.get("x", s2) is not None and buf.get("x", s1) is None
        assert len(buf.drain(s1)) == 3 and len(buf) == 1
        assert buf.clear_user("u") == 1 and len(buf) == 0


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(min_size=1, max_size=80).filter(lambda t: t.strip()),
    sim=st.one_of(st.none(), st.floats(-2, 2)),
    trust=st.floats(0, 1),
    weights=st.tuples(*[st.floats(0, 1)] * 4).filter(lambda w: sum(w) > 0.01),
)
def test_score_always_in_unit_interval(text, sim, trust, weights):
    vm = ValueModel(
        profile=ValueProfile(
            weights=ValueWeights(goal=weights[0], salience=weights[1], utility=weights[2], novelty=weights[3])
        )
    )
    try:
        a = vm.assess(text, nearest_similarity=sim, trust=trust)
    except InvalidInputError:
        return  # e.g. lone surrogates
    for x in (a.score, a.goal_relevance, a.salience, a.utility, a.novelty):
        assert 0.0 <= x <= 1.0


async def test_value_model_async_twins():
    vm = ValueModel()
    assert (await vm.aassess("I prefer aisle seats")).info_type == "preference"
    assert (await vm.aextract("我住在上海")).slot == "user.residence"


def test_pronoun_objects_make_no_slot_and_speakers_get_their_own():
    from memlineage.extractors._rules import RuleBasedExtractor

    ex = RuleBasedExtractor()
    assert ex.extract("I love it!").slot is None
    assert ex.extract("我喜欢它").slot is None
    a = ex.extract("[8 May, 2023] Caroline: I love creating art").slot
    b = ex.extract("[9 May, 2023] Melanie: I love creating art").slot
    assert a == "caroline.preference.art" and b == "melanie.preference.art"
    assert ex.extract("user: I prefer aisle seats").slot == "user.preference.seat"
