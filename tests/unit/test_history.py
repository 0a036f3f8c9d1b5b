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
