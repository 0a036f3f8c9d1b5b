"""Update detection: the rule and LLM reconcilers, and how the manager carries out their decisions."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from memlineage import MemoryManager, Scope, Status
from memlineage.errors import ConfigurationError, InvalidInputError, MemoryNotFoundError
from memlineage.extractors import detect_slot
from memlineage.reconcile import (
    Action,
    Candidate,
    LLMReconciler,
    RuleReconciler,
    Statement,
    may_update,
    near_duplicates,
    slot_of,
    tool_slot,
)
from memlineage.testing import make_manager

S = Scope(user_id="alice", session_id="s1")


def statuses(mm: MemoryManager, *ids: str) -> list[Status]:
    return [mm.require(i, scope=S).status for i in ids]


# ------------------------------------------------------------------------------------------------ slots
@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("My favourite restaurant is Din Tai Fung", "user.favourite.restaurant"),
        ("Haidilao is my favourite restaurant now", "user.favourite.restaurant"),
        ("My daughter Emma's birthday is on March 3.", "emma.birthday"),
        ("My phone number is 555-1234", "user.phone_number"),
        ("My dog is called Rex", "user.dog.name"),
        ("I've just moved to Munich", "user.residence"),
        ("I joined Siemens last month", "user.employer"),
        ("my company is Acme Robotics now", "user.employer"),
        ("My commute is cycling", "user.commute"),
        ("I'm a senior accountant at Deloitte", "user.employer"),
        ("I'm a student advisor at Brightline", "user.employer"),
        ("I'm pescatarian now", "user.diet"),
        ("My budget is 2000 EUR", "user.budget"),
        ("Our trip is now on June 5", "user.trip.date"),
        ("我跳槽到了腾讯", "user.employer"),
        ("我最喜欢的餐厅是海底捞", "user.favourite.餐厅"),
        ("我的狗叫旺财", "user.狗.name"),
        ("我搬到杭州了", "user.residence"),
        # the speaker's own telling, a belief in another clause or another sentence: the value is still the speaker's
        ("I keep telling people I work at Google, not Apple.", "user.employer"),
        ("My wife thinks it's funny and I work at Stripe now.", "user.employer"),
        ("跟你说，我在阿里上班了。", "user.workplace"),
        ("Long story. Mom thinks it's a phase. I live in Oakland now.", "user.residence"),
    ],
)
def test_slots_are_keyed_by_subject_and_attribute(text: str, slot: str) -> None:
    assert detect_slot(text)[0] == slot


@pytest.mark.parametrize(
    "text",
    [
        "My family is great",
        "My day was long",
        "The sky is blue",
        "I love it!",
        # a student is at a school, not an employer; a senior accountant is at one
        "I'm a sophomore at UT Austin, civil engineering.",
        "I'm a senior at Ohio State",
        "I'm a second-year PhD student at MIT",
        # a verb after "is" says what the company or the job does, not which it is
        "I dropped Spanish, my company is relocating me to Seoul next year",
        "my job is killing me this week",
    ],
)
def test_no_slot_for_multi_valued_or_empty_attributes(text: str) -> None:
    assert detect_slot(text) == (None, None)


@pytest.mark.parametrize(
    "text",
    [
        "My mom keeps telling her friends I work at Apple. I've corrected her like five times.",
        "My brother is convinced I live in Denver, but whatever.",
        "I thought I was vegan-curious at best",
        "我奶奶逢人就说我在阿里上班，解释了好几次都没用。",
        "我妈一直以为我住在北京。",
    ],
)
def test_a_belief_about_the_speaker_states_no_value(text: str) -> None:
    # what someone else believes or keeps telling people (or what the speaker once thought) is no slot value
    assert detect_slot(text) == (None, None)


def test_transcript_speaker_is_the_subject() -> None:
    assert slot_of("[8 May 2023] Caroline: I live in Boston")[0] == "caroline.residence"


def test_tool_slot_ignores_argument_order_and_distinguishes_arguments() -> None:
    a = tool_slot("tool:fares", {"from": "PAR", "to": "LYS"})
    assert (
        a
        == tool_slot("tool:fares", {"to": "LYS", "from": "PAR"})
        == tool_slot("tool:fares", '{"to":"LYS","from":"PAR"}')
    )
    assert a != tool_slot("tool:fares", {"from": "PAR", "to": "NCE"})
    assert tool_slot("tool:fares", None) is None


def test_source_rules() -> None:
    assert may_update("user", "user") and may_update("user", "agent")
    assert not may_update("user", "tool:fares")
    assert not may_update("reasoning", "user") and not may_update("agent", "user")
    assert may_update("tool:fares", "tool:fares") and not may_update("tool:fares", "tool:hotels")


def test_near_duplicates_need_a_cue_or_a_state_of_the_speaker() -> None:
    assert near_duplicates("I have 2 kids", "I have 3 kids")
    assert near_duplicates("Correction: the meeting is on Tuesday", "The meeting is on Monday")
    assert not near_duplicates("travel note number 1", "travel note number 2")
    assert not near_duplicates("I went to Rome in May", "I went to Oslo in June")


# ------------------------------------------------------------------------------------------------ rules
def cand(mid: str, content: str, source: str = "user", slot: str | None = None) -> Candidate:
    return Candidate(
        id=mid, content=content, source=source, slot=slot or slot_of(content)[0], slot_value=slot_of(content)[1]
    )


def st(content: str, source: str = "user") -> Statement:
    slot, value = slot_of(content)
    return Statement(content=content, source=source, slot=slot, slot_value=value)


@pytest.mark.parametrize(
    ("old", "new", "action"),
    [
        ("I live in Paris", "I moved to Munich", Action.UPDATE),
        ("I live in Paris", "I live in Paris", Action.DUPLICATE),
        ("I live in Paris.", "Actually, I live in Paris now", Action.DUPLICATE),
        ("I'm planning a trip to Lisbon in May", "Forget what I said about the Lisbon trip", Action.CONTRADICT),
        ("I'm allergic to cats", "I'm not allergic to cats anymore", Action.CONTRADICT),
        ("My office is on the 4th floor of building B", "Sorry, my office is on the 7th floor of building B",
         Action.UPDATE),
        ("I have 2 kids", "I have 3 kids", Action.UPDATE),
        ("我计划五月去里斯本旅行", "里斯本的旅行取消了", Action.CONTRADICT),
        ("我喝茶只喝绿茶", "最近我改喝红茶了", Action.UPDATE),
        ("I went to the park yesterday", "I went to the beach yesterday", Action.NEW),
        ("travel note number 1", "travel note number 2", Action.NEW),
        ("I like jazz", "I prefer aisle seats", Action.NEW),
    ],
)  # fmt: skip
def test_rule_reconciler(old: str, new: str, action: Action) -> None:
    (decision,) = RuleReconciler().decide([(st(new), [cand("m1", old)])])
    assert decision.action is action, decision.reason
    assert decision.target == (None if action is Action.NEW else "m1")


def test_rule_reconciler_withdraws_only_own_statements() -> None:
    agent = cand("m1", "Recommendation: the Lisbon trip hotel is Avenida", source="agent")
    (decision,) = RuleReconciler().decide([(st("Forget the Lisbon trip"), [agent])])
    assert decision.action is Action.NEW


def test_rule_reconciler_rejects_bad_thresholds() -> None:
    with pytest.raises(ConfigurationError):
        RuleReconciler(near_jaccard=0)


# ------------------------------------------------------------------------------------------------ manager
def test_automatic_update_supersedes_and_cascades() -> None:
    mm = make_manager()
    city = mm.remember("I live in Paris", scope=S)
    hotel = mm.remember("Book Hotel Lumière in Paris", scope=S, source="reasoning", derived_from=[city.id])
    noise = mm.remember("I like jazz", scope=S)
    new = mm.remember("Actually I moved to Lyon", scope=S)
    assert statuses(mm, city.id, hotel.id, noise.id, new.id) == [
        Status.SUPERSEDED, Status.SUSPECT, Status.ACTIVE, Status.ACTIVE,
    ]  # fmt: skip
    assert new.supersedes == city.id and new.version == 2 and new.slot == "user.residence"
    (decision,) = mm.explain(new.id, scope=S).decisions
    assert decision.kind == "update_detection" and decision.metadata["decided_by"] == "rules"
    assert decision.metadata["evidence"]["slot"] == "user.residence"
    events = {(e.type, e["memory_id"]) for e in mm.audit(S)}
    assert ("superseded", city.id) in events and ("suspect", hotel.id) in events


def test_withdrawal_retracts_the_premise_and_its_conclusions_turn_suspect() -> None:
    mm = make_manager()
    trip = mm.remember("I'm planning a trip to Lisbon in May", scope=S)
    plan = mm.remember("Hotel Avenida in Lisbon fits the May trip", scope=S, source="agent", derived_from=[trip.id])
    mm.remember("The Lisbon trip is cancelled.", scope=S)
    assert statuses(mm, trip.id, plan.id) == [Status.RETRACTED, Status.SUSPECT]
    assert all(h.id not in (trip.id, plan.id) for h in mm.recall("Lisbon trip hotel", scope=S, k=5))


def test_restatement_is_merged_not_stored_twice() -> None:
    mm = make_manager()
    first = mm.remember("I live in Berlin", scope=S)
    again = mm.remember("I'm living in Berlin", scope=S)
    assert again.id == first.id
    assert mm.stats(S)["memories"] == 1
    (seen,) = [e for e in mm.audit(S) if e.type == "seen_again"]
    assert seen["data"]["decision"]["action"] == "duplicate"


def test_reasoning_never_overrides_the_user() -> None:
    mm = make_manager()
    home = mm.remember("I live in Paris", scope=S)
    mm.remember("I live in Rome", scope=S, source="reasoning")
    assert statuses(mm, home.id) == [Status.ACTIVE]


def test_tool_result_updates_same_tool_same_arguments_only() -> None:
    mm = make_manager()
    lyon1 = mm.remember("fare PAR-LYS: 120 EUR", scope=S, source="tool:fares", metadata={"tool_args": {"to": "LYS"}})
    nice = mm.remember("fare PAR-NCE: 140 EUR", scope=S, source="tool:fares", metadata={"tool_args": {"to": "NCE"}})
    lyon2 = mm.remember("fare PAR-LYS: 95 EUR", scope=S, source="tool:fares", metadata={"tool_args": {"to": "LYS"}})
    assert statuses(mm, lyon1.id, nice.id, lyon2.id) == [Status.SUPERSEDED, Status.ACTIVE, Status.ACTIVE]
    # a user statement never replaces a tool's result
    mm.remember("I think the fare to Lyon is 80 EUR", scope=S)
    assert statuses(mm, lyon2.id) == [Status.ACTIVE]


def test_tool_arguments_are_read_from_the_tool_call_activity() -> None:
    from memlineage.models import Activity

    mm = make_manager()
    ids = []
    for i, price in enumerate(("120 EUR", "95 EUR")):
        act = mm.record_activity(
            Activity(id=f"call-{i}", kind="tool_call", name="fares", scope=S, metadata={"input": "{'to': 'LYS'}"})
        )
        ids.append(mm.remember(f"fare: {price}", scope=S, source="tool:fares", activity_id=act.id).id)
    assert statuses(mm, *ids) == [Status.SUPERSEDED, Status.ACTIVE]


def test_updates_inside_one_batch() -> None:
    mm = make_manager()
    out = mm.remember_many(
        [
            {"content": "I live in Paris", "scope": S},
            {"content": "I like jazz", "scope": S},
            {"content": "I moved to Lyon", "scope": S},
            {"content": "Actually I moved to Nice", "scope": S},
        ]
    )
    assert statuses(mm, *(m.id for m in out)) == [
        Status.SUPERSEDED, Status.ACTIVE, Status.SUPERSEDED, Status.ACTIVE,
    ]  # fmt: skip
    assert out[3].supersedes == out[2].id and out[2].supersedes == out[0].id


def test_an_older_statement_does_not_replace_a_newer_one() -> None:
    from datetime import datetime, timezone

    mm = make_manager()
    new = mm.remember("I live in Lyon", scope=S, valid_from=datetime(2025, 6, 1, tzinfo=timezone.utc))
    old = mm.remember("I live in Paris", scope=S, valid_from=datetime(2024, 1, 1, tzinfo=timezone.utc))
    assert statuses(mm, new.id, old.id) == [Status.ACTIVE, Status.ACTIVE]
    # ...and recall serves the later event first although both are live
    hits = mm.recall("where do I live", scope=S, k=2)
    assert hits.ids[0] == new.id


def test_recency_where_facts_compete_without_detection() -> None:
    mm = make_manager(reconciler=None)
    old = mm.remember("I live in Paris", scope=S)
    new = mm.remember("I live in Lyon", scope=S)
    assert statuses(mm, old.id, new.id) == [Status.ACTIVE, Status.ACTIVE]
    assert mm.recall("I live in Paris", scope=S, k=2).ids == [new.id, old.id]


def test_a_policy_refusal_keeps_both_statements() -> None:
    from memlineage.policy import Policy, PolicyEngine

    deny = Policy.model_validate(
        {"id": "no-auto-updates", "operations": ["update"], "effect": "deny", "reason": "frozen profile"}
    )
    mm = make_manager(policy=PolicyEngine([deny]))
    old = mm.remember("I live in Paris", scope=S)
    mm.remember("I moved to Lyon", scope=S)
    assert statuses(mm, old.id) == [Status.ACTIVE]


def test_undo_errors() -> None:
    mm = make_manager()
    mm.remember("I live in Paris", scope=S)
    new = mm.remember("I moved to Lyon", scope=S)
    (decision,) = mm.explain(new.id, scope=S).decisions
    with pytest.raises(MemoryNotFoundError):
        mm.undo(decision.id, scope=Scope(user_id="mallory"))
    mm.undo(decision.id, scope=S)
    with pytest.raises(InvalidInputError):
        mm.undo(decision.id, scope=S)
    with pytest.raises(MemoryNotFoundError):
        mm.undo("nope", scope=S)


def test_detection_can_be_switched_off_and_rejects_junk() -> None:
    mm = make_manager(reconciler=None)
    old = mm.remember("I live in Paris", scope=S)
    mm.remember("I moved to Lyon", scope=S)
    assert statuses(mm, old.id) == [Status.ACTIVE]
    with pytest.raises(ConfigurationError):
        make_manager(reconciler="magic")


# ------------------------------------------------------------------------------------------------ LLM
class ScriptedModel:
    """A LangChain-like chat model: ``invoke`` returns scripted answers and records prompts."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def invoke(self, prompt: str) -> Any:
        self.prompts.append(prompt)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return answer(prompt)
        return answer


def _ids_in(prompt: str) -> list[str]:
    import re

    return re.findall(r"\[([0-9a-f-]{36})\]", prompt)


def test_llm_reconciler_valid_answer_drives_the_decision() -> None:
    def answer(prompt: str) -> str:
        (target,) = _ids_in(prompt)
        return json.dumps({"decisions": [{"statement": 1, "action": "update", "target": target, "reason": "moved"}]})

    model = ScriptedModel(answer)
    mm = make_manager(reconciler=LLMReconciler(model))
    old = mm.remember("Home: Paris 11e", scope=S)  # no rule slot: only the model can tell
    new = mm.remember("Home is Lyon now", scope=S)
    assert statuses(mm, old.id, new.id) == [Status.SUPERSEDED, Status.ACTIVE]
    (decision,) = mm.explain(new.id, scope=S).decisions
    assert decision.metadata["decided_by"] == "llm" and decision.metadata["reason"] == "moved"


def test_llm_reconciler_with_a_langchain_chat_model() -> None:
    from langchain_core.language_models import FakeListChatModel

    reconciler = LLMReconciler(FakeListChatModel(responses=['{"decisions": [{"statement": 1, "action": "new"}]}']))
    mm = make_manager(reconciler=reconciler)
    old = mm.remember("I live in Paris", scope=S)
    mm.remember("I moved to Lyon", scope=S)  # the model says "new": both stay
    assert statuses(mm, old.id) == [Status.ACTIVE] and reconciler.calls == 1


@pytest.mark.parametrize(
    "answer",
    [
        "not json at all",
        '{"decisions": [{"statement": 1, "action": "update", "target": "made-up-id"}]}',
        '{"decisions": [{"statement": 1, "action": "obliterate", "target": null}]}',
        '{"decisions": []}',
        RuntimeError("model down"),
    ],
)
def test_llm_reconciler_falls_back_to_rules(answer: Any) -> None:
    reconciler = LLMReconciler(ScriptedModel(answer))
    mm = make_manager(reconciler=reconciler)
    old = mm.remember("I live in Paris", scope=S)
    new = mm.remember("I moved to Lyon", scope=S)
    assert statuses(mm, old.id) == [Status.SUPERSEDED]  # the rules decided
    assert mm.explain(new.id, scope=S).decisions[0].metadata["decided_by"] == "rules(fallback)"
    assert reconciler.fallbacks == 1


def test_llm_reconciler_timeout_falls_back() -> None:
    release = threading.Event()

    def slow(prompt: str) -> str:
        release.wait(5)
        return '{"decisions": []}'

    reconciler = LLMReconciler(ScriptedModel(slow), timeout=0.05)
    mm = make_manager(reconciler=reconciler)
    old = mm.remember("I live in Paris", scope=S)
    mm.remember("I moved to Lyon", scope=S)
    release.set()
    assert statuses(mm, old.id) == [Status.SUPERSEDED]
    reconciler.close()


def test_llm_reconciler_batches_and_skips_statements_without_candidates() -> None:
    def answer(prompt: str) -> str:
        assert prompt.count("NEW statement") == 2
        return json.dumps({"decisions": [{"statement": 1, "action": "new"}, {"statement": 2, "action": "new"}]})

    model = ScriptedModel(answer)
    mm = make_manager(reconciler=LLMReconciler(model, batch_size=8))
    mm.remember("I live in Paris", scope=S)
    mm.remember_many([{"content": "I moved to Lyon", "scope": S}, {"content": "I moved to Nice", "scope": S}])
    assert len(model.prompts) == 1
    with pytest.raises(ConfigurationError):
        LLMReconciler(object())
    with pytest.raises(ConfigurationError):
        LLMReconciler(model, batch_size=0)


# ------------------------------------------------------------------------------------------------ carry-over
@pytest.mark.parametrize(
    ("old", "new", "kept"),
    [
        (
            "I'm planning a trip to Paris from 3 to 7 May. I prefer aisle seats.",
            "Actually, I'm going to Lyon, not Paris.",
            "I'm planning a trip from 3 to 7 May. I prefer aisle seats.",  # the dates were not corrected
        ),
        ("I live in Berlin with my wife Anna. I work as a nurse.", "Actually I moved to Munich.", "I work as a nurse."),
        ("I am vegan and I love jazz.", "I'm no longer vegan.", "I love jazz."),
        (
            "My favourite restaurant is Chez Marie and my dog is called Rex.",
            "My favourite restaurant is not Chez Marie but Luigi's.",
            "My dog is called Rex.",
        ),
        ("我住在北京，我的狗叫旺财。", "其实我搬到上海了", "我的狗叫旺财。"),
    ],
)
def test_a_correction_keeps_the_other_facts_of_the_statement_it_replaces(old: str, new: str, kept: str) -> None:
    mm = make_manager()
    first = mm.remember(old, scope=S, metadata={"dia_id": "D1:3"})
    plan = mm.remember("Plan built on the old statement", scope=S, source="agent", derived_from=[first.id])
    fix = mm.remember(new, scope=S)
    assert mm.require(first.id, scope=S).status in (Status.SUPERSEDED, Status.RETRACTED)
    assert mm.require(plan.id, scope=S).status is Status.SUSPECT  # the old statement's dependants are caught
    (decision,) = mm.explain(fix.id, scope=S).decisions
    (carried,) = [m for m in mm.find(scope=S) if m.metadata.get("carried_over_from") == first.id]
    assert carried.content == kept and carried.status is Status.ACTIVE and str(carried.source) == "user"
    assert carried.metadata["dia_id"] == "D1:3"  # the old statement's metadata comes along
    assert carried.lineage.activity_id == decision.id  # wasGeneratedBy the decision
    assert carried.id in mm.recall(kept, scope=S, k=3).ids
    # undo makes the old statement whole again: what the decision carried over is withdrawn with it
    mm.undo(decision.id, scope=S)
    assert statuses(mm, first.id, carried.id) == [Status.ACTIVE, Status.RETRACTED]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Paris", "Actually I moved to Lyon"),  # one clause: the whole statement was the fact
        ("I like salt and pepper on my fries", "Actually I like only salt on my fries now"),  # no new subject
        (
            "My trip to Lisbon is in May and my trip to Lisbon is booked.",
            "The Lisbon trip is cancelled.",
        ),  # all touched
        # the value a statement ruled out ("instead of Bruges") is no detail to keep: never "I'm going of Bruges."
        (
            "Change of plans: I'm going to Salzburg instead of Bruges.",
            "Change of plans: I'm going to Bergen instead of Salzburg.",
        ),
        ("I'd rather fly to Oslo rather than Bergen.", "Actually, I'll fly to Tromso, not Oslo."),
    ],
)
def test_nothing_is_carried_over_when_nothing_else_stands(old: str, new: str) -> None:
    mm = make_manager()
    mm.remember(old, scope=S)
    mm.remember(new, scope=S)
    assert [m for m in mm.find(scope=S) if "carried_over_from" in m.metadata] == []


def test_tool_results_are_replaced_whole() -> None:
    mm = make_manager()
    old = mm.remember("Paris: sunny. Lyon: rain.", scope=S, source="tool:weather", metadata={"arguments": {"d": 1}})
    mm.remember("Paris: rain. Lyon: rain.", scope=S, source="tool:weather", metadata={"arguments": {"d": 1}})
    assert [m for m in mm.find(scope=S) if "carried_over_from" in m.metadata] == []
    assert mm.require(old.id, scope=S).status is Status.SUPERSEDED  # the same tool and arguments: a new result


def test_llm_reconciler_pauses_a_model_that_cannot_do_the_task(caplog: pytest.LogCaptureFixture) -> None:
    """Three unusable answers in a row: the rules decide the next batches without a model call, then it is retried."""
    from memlineage.reconcile._llm import PAUSE_BATCHES, UNUSABLE_IN_A_ROW

    said = ["I'm sorry, I can only help with travel."]

    class Model:
        calls = 0

        def invoke(self, prompt: str) -> str:
            return said[0]

    reconciler = LLMReconciler(Model())
    batch = [
        (
            Statement(content="I moved to Lyon", source="user"),
            [Candidate(id="m1", content="I live in Paris", source="user")],
        )
    ]
    with caplog.at_level("WARNING", logger="memlineage"):
        for _ in range(UNUSABLE_IN_A_ROW + PAUSE_BATCHES):
            (decision,) = reconciler.decide(batch)
            assert decision.decided_by == "rules(fallback)"
    assert reconciler.calls == UNUSABLE_IN_A_ROW  # paused after the third
    assert sum("unusable answers in a row" in r.getMessage() for r in caplog.records) == 1
    reconciler.decide(batch)
    assert reconciler.calls == UNUSABLE_IN_A_ROW + 1  # tried again after the pause
    said[0] = json.dumps({"decisions": [{"statement": 1, "action": "new"}]})
    (decision,) = reconciler.decide(batch)
    assert decision.decided_by == "llm" and reconciler._unusable == 0


# ------------------------------------------------------------------------------------------------ carry-over trust
def test_a_carried_over_clause_keeps_the_statements_trust_and_premises() -> None:
    mm = make_manager()
    web = mm.remember("travel site: Paris trips are cheap this spring", scope=S, source="tool:web")
    relayed = mm.remember(
        "I'm planning a trip to Paris. I prefer aisle seats.", scope=S, source="user", derived_from=[web.id],
        confidence=0.9,
    )  # fmt: skip
    mm.remember("Actually, I'm going to Lyon", scope=S)
    (carried,) = [m for m in mm.find(scope=S) if m.metadata.get("carried_over_from") == relayed.id]
    assert carried.trust == pytest.approx(relayed.trust) and carried.trust < 1.0
    assert carried.lineage.confidence == pytest.approx(0.9)
    assert carried.derived_from == (web.id,)  # what the statement rested on
    report = mm.retract(web.id, scope=S)
    assert carried.id in report.suspect
    assert mm.require(carried.id, scope=S).status is Status.SUSPECT


def _scripted_updates(pairs: list[tuple[str, str]]) -> Any:
    """A chat-model stand-in that updates the candidate holding ``old`` for a statement holding ``new``."""
    import re

    def answer(prompt: str) -> str:
        out = []
        for n, block in enumerate(re.split(r"NEW statement \d+ ", prompt)[1:], start=1):
            head, _, rest = block.partition("EXISTING:")
            found = re.findall(r"\[([0-9a-f-]{36})\] \([^)]*\) (.*)", rest)
            target = next((i for i, text in found for new, old in pairs if new in head and old in text), None)
            act = {"statement": n, "action": "update", "target": target, "confidence": 0.99}
            out.append(act if target else {"statement": n, "action": "new"})
        return json.dumps({"decisions": out})

    return answer


def test_a_carried_over_clause_never_replaces_a_later_memory_and_undo_restores_everything() -> None:
    model = _scripted_updates([("Munich", "Berlin"), ("555-1234", "555-9999")])
    mm = make_manager(reconciler=LLMReconciler(model))
    first = mm.remember("I live in Berlin. My phone number is 555-1234.", scope=S)
    later = mm.remember("My phone number is 555-9999.", scope=S)
    fix = mm.remember("Actually I live in Munich now.", scope=S)
    (carried,) = [m for m in mm.find(scope=S) if m.metadata.get("carried_over_from") == first.id]
    assert carried.content == "My phone number is 555-1234."
    assert statuses(mm, first.id, later.id) == [Status.SUPERSEDED, Status.ACTIVE]
    (decision,) = mm.explain(fix.id, scope=S).decisions
    # a store written before carried-over clauses skipped detection: a clause the decision generated replaced a
    # later memory; undoing the decision undoes that too
    stray = mm.remember("My phone number is 555-1234 again.", scope=S, activity_id=decision.id)
    assert statuses(mm, later.id) == [Status.SUPERSEDED]
    mm.undo(decision.id, scope=S)
    assert statuses(mm, first.id, later.id, carried.id, stray.id) == [
        Status.ACTIVE, Status.ACTIVE, Status.RETRACTED, Status.RETRACTED,
    ]  # fmt: skip


def test_undo_keeps_suspect_what_still_rests_on_a_withdrawn_premise() -> None:
    mm = make_manager()
    web = mm.remember("Berlin weather: sunny all week", scope=S, source="tool:web")
    home = mm.remember("I live in Berlin", scope=S, derived_from=[web.id])
    forecast = mm.remember("the user's home is in the sun", scope=S, source="tool:web")
    plan = mm.remember("Pack sunglasses for home", scope=S, source="agent", derived_from=[home.id, forecast.id])
    fix = mm.remember("Actually I live in Munich now.", scope=S)
    (decision,) = mm.explain(fix.id, scope=S).decisions
    assert statuses(mm, home.id, plan.id) == [Status.SUPERSEDED, Status.SUSPECT]
    mm.retract(forecast.id, scope=S)
    mm.retract(web.id, scope=S)
    restored = mm.undo(decision.id, scope=S)
    # the decision's own withdrawal is undone, but each still rests on a premise withdrawn since
    assert restored.status is Status.SUSPECT
    assert statuses(mm, plan.id) == [Status.SUSPECT]


def test_undo_reactivates_what_every_premise_supports_again() -> None:
    mm = make_manager()
    home = mm.remember("I live in Berlin", scope=S)
    forecast = mm.remember("Berlin weather: sunny all week", scope=S, source="tool:web")
    plan = mm.remember("Pack sunglasses for home", scope=S, source="agent", derived_from=[home.id, forecast.id])
    fix = mm.remember("Actually I live in Munich now.", scope=S)
    (decision,) = mm.explain(fix.id, scope=S).decisions
    assert mm.undo(decision.id, scope=S).status is Status.ACTIVE
    assert statuses(mm, plan.id) == [Status.ACTIVE]
