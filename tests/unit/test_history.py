"""memlineage.history.ChatHistory: the framework-neutral session history behind the LangChain/LlamaIndex ones."""

from __future__ import annotations

import pytest
from memlineage import InvalidInputError, Scope, Status
from memlineage.history import ChatEntry, ChatHistory
from memlineage.testing import make_manager
from memlineage.value import ValueModel


def test_every_message_is_kept_even_when_a_value_gate_would_buffer_it() -> None:
    mm = make_manager(value_model=ValueModel())
    history = ChatHistory(mm, scope="alice", session_id="s1")
    history.append([ChatEntry("user", "ok"), ChatEntry("assistant", "ok"), ChatEntry("user", "hmm")])
    assert [(t.role, t.text) for t in history.turns()] == [("user", "ok"), ("assistant", "ok"), ("user", "hmm")]
    assert [t.position for t in history.turns()] == [0, 1, 2]
    assert [t.text for t in history.turns(last=1)] == ["hmm"] and history.turns(last=0) == []


def test_bad_entries_write_nothing() -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope=Scope(user_id="alice", session_id="s1"))
    with pytest.raises(InvalidInputError):
        history.append([ChatEntry("user", "fine"), ChatEntry("user", "   ")])
    with pytest.raises(InvalidInputError):
        history.append([ChatEntry("robot", "beep")])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        ChatHistory(mm, scope="alice", session_id="s1", on_clear="delete")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="two sessions"):
        ChatHistory(mm, scope={"user_id": "alice", "session_id": "x"}, session_id="trip-2")
    assert ChatHistory(mm, scope=Scope(user_id="alice", session_id="s1"), session_id="s1").scope.session_id == "s1"
    assert history.turns() == [] and mm.find(scope="alice") == []


def test_erased_messages_leave_the_history_and_forget_mode_archives() -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope="alice", session_id="s1", on_clear="forget")
    first, second = history.append([ChatEntry("user", "my passport is X123"), ChatEntry("assistant", "Saved.")])
    mm.erase(first.memory.id, scope="alice")
    assert [t.text for t in history.turns()] == ["Saved."]
    assert history.clear() == [second.memory.id]
    assert mm.require(second.memory.id, scope="alice").status is Status.ARCHIVED
    assert history.turns() == []


def test_a_correction_marks_the_answer_that_used_the_fact_not_the_acknowledgement() -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope=Scope(user_id="alice", session_id="s1"))
    plan, ack, ask, answer = history.append(
        [
            ChatEntry("user", "I'm planning a trip to Rome in June."),
            ChatEntry("assistant", "Noted."),
            ChatEntry("user", "Suggest a hotel."),
            ChatEntry("assistant", "In Rome I suggest Albergo Centrale."),
        ]
    )
    assert ack.memory.derived_from == ()  # an acknowledgement rests on nothing
    assert set(answer.memory.derived_from) == {ask.memory.id, plan.memory.id}  # it repeats what the plan said
    history.append([ChatEntry("user", "Actually, I'm going to Naples, not Rome.")])
    assert mm.require(plan.memory.id, scope="alice").status is Status.SUPERSEDED
    assert mm.require(answer.memory.id, scope="alice").status is Status.SUSPECT
    assert mm.require(ack.memory.id, scope="alice").status is Status.ACTIVE


def test_a_tool_result_rests_on_the_message_that_supplied_its_argument() -> None:
    """Not on the user turn that asked: the statement that named the city is the premise, the request is not."""
    mm = make_manager()
    history = ChatHistory(mm, scope=Scope(user_id="alice", session_id="s1"))
    plan, _, ask, call, weather, answer = history.append(
        [
            ChatEntry("user", "I'm planning a trip to Rome in June."),
            ChatEntry("assistant", "Noted."),
            ChatEntry("user", "How's the weather where I'm going?"),
            ChatEntry("assistant", "called get_weather", calls={"c1": {"city": "Rome"}}),
            ChatEntry("tool", "21C and sunny", name="get_weather", call_id="c1"),
            ChatEntry("assistant", "It's 21C and sunny there."),
        ]
    )
    assert set(weather.memory.derived_from) == {plan.memory.id}
    assert plan.memory.id in call.memory.derived_from
    assert weather.memory.id in answer.memory.derived_from
    # the next batch still knows the call's arguments (kept with the message occurrence)
    (late,) = history.append([ChatEntry("tool", "Rain later", name="get_weather", call_id="c1")])
    assert set(late.memory.derived_from) == {plan.memory.id}
    history.append([ChatEntry("user", "Sorry, I meant Naples, not Rome.")])
    for turn in (weather, call, answer, late):
        assert mm.require(turn.memory.id, scope="alice").status is Status.SUSPECT
    assert mm.require(ask.memory.id, scope="alice").status is Status.ACTIVE


def test_an_answer_repeating_a_number_rests_on_the_result_about_its_topic() -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope=Scope(user_id="alice", session_id="s1"))
    turns = history.append(
        [
            ChatEntry("user", "Find me a flight."),
            ChatEntry("assistant", "called search_flights", calls={"c1": {"city": "Oslo"}}),
            ChatEntry("tool", "search_flights(city='Oslo') -> SK100 at 519 EUR", name="search_flights", call_id="c1"),
            ChatEntry("user", "Convert 519 EUR to my home currency."),
            ChatEntry("assistant", "called convert", calls={"c2": {"amount": "519", "to": "CHF"}}),
            ChatEntry("tool", "convert(amount='519', to='CHF') -> 519 EUR = 498 CHF", name="convert", call_id="c2"),
            ChatEntry("user", "What was the cheapest flight you found?"),
            ChatEntry("assistant", "The cheapest flight was SK100 at 519 EUR."),
        ]
    )
    flight, conversion, answer = turns[2], turns[5], turns[7]
    assert flight.memory.id in answer.memory.derived_from
    assert conversion.memory.id not in answer.memory.derived_from


def test_malformed_call_fields_are_refused_before_anything_is_written() -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope=Scope(user_id="alice", session_id="s1"))
    for bad in (
        ChatEntry("assistant", "called x", calls=[("c1", {})]),  # type: ignore[arg-type]
        ChatEntry("tool", "ok", name="x", call_id=7),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidInputError):
            history.append([ChatEntry("user", "hello there"), bad])
    assert history.turns() == []
