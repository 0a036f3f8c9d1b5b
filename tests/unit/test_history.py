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


# ---------------------------------------------------------------------------------------------------- hardening (h27)
def test_a_restatement_comes_back_as_said_though_it_merges_into_the_earlier_memory() -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope="alice", session_id="s1")
    said = ["I live in Paris.", "Noted.", "i live in   paris.", "I live in Paris!", "I'm living in Paris."]
    for i, text in enumerate(said):
        history.append([ChatEntry("assistant" if i == 1 else "user", text)])
    turns = history.turns()
    assert [t.text for t in turns] == said
    assert turns[2].memory.id == turns[0].memory.id  # merged underneath: one memory, two occurrences
    assert ChatHistory(mm, scope="alice", session_id="s1").turns(last=1)[0].text == said[-1]


def test_erasing_a_memory_scrubs_every_occurrence_of_its_words() -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope="alice", session_id="s1")
    first, again = history.append(
        [ChatEntry("user", "My passport is X123.", payload={"raw": "X123"}), ChatEntry("user", "my passport is x123.")]
    )
    assert again.memory.id == first.memory.id and again.text == "my passport is x123."
    mm.erase(first.memory.id, scope="alice")
    assert history.turns() == []
    kept = [a.metadata for a in mm.activities("alice", kinds=["chat_message"])]
    assert kept == [{"redacted": True, "position": 0}, {"redacted": True, "position": 1}]
    (later,) = history.append([ChatEntry("user", "hello")])
    assert later.position == 2  # positions are never reused


def test_two_histories_of_one_session_never_interleave() -> None:
    import threading

    mm = make_manager()
    writers = [ChatHistory(mm, scope="alice", session_id="s1") for _ in range(4)]
    start = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def write(n: int, history: ChatHistory) -> None:
        try:
            start.wait()
            for k in range(3):
                history.append([ChatEntry("user", f"question {n}.{k}"), ChatEntry("assistant", f"answer {n}.{k}")])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n, h)) for n, h in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    turns = writers[0].turns()
    assert [t.position for t in turns] == list(range(24))
    for q, a in zip(turns[::2], turns[1::2]):  # every answer right after its own question
        assert (q.role, a.role) == ("user", "assistant")
        assert a.text == q.text.replace("question", "answer")


@pytest.mark.parametrize(
    "bad",
    [
        ChatEntry("user", "a lone surrogate \ud800 here"),
        ChatEntry("tool", "result", name="bad\x00name"),
        ChatEntry("user", "ok", payload=["not", "a", "mapping"]),  # type: ignore[arg-type]
    ],
)
def test_a_bad_entry_in_the_middle_writes_nothing(bad: ChatEntry) -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope="alice", session_id="s1")
    with pytest.raises(InvalidInputError):
        history.append([ChatEntry("user", "first"), bad, ChatEntry("user", "third")])
    assert history.turns() == [] and mm.find(scope="alice") == []


def test_a_write_failing_midway_leaves_no_turn_and_withdraws_what_it_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    from memlineage import StorageError

    mm = make_manager()
    history = ChatHistory(mm, scope="alice", session_id="s1")
    history.append([ChatEntry("user", "kept before")])
    real = mm.remember
    seen: list[str] = []

    def failing(content: str, **kwargs: object) -> object:
        seen.append(content)
        if len(seen) == 2:
            raise StorageError("disk full")
        return real(content, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mm, "remember", failing)
    with pytest.raises(StorageError):
        history.append([ChatEntry("user", "Hotel Lumière at 120 EUR."), ChatEntry("assistant", "Booked it.")])
    monkeypatch.undo()
    assert [t.text for t in history.turns()] == ["kept before"]
    assert [m.content for m in mm.find(scope="alice")] == ["kept before"]  # the stored half is withdrawn
    (after,) = history.append([ChatEntry("user", "next")])
    assert after.position == 3  # the failed batch's positions are not reused


def test_replace_keeps_the_unchanged_beginning_untouched() -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope="alice", session_id="s1")
    old = [
        ChatEntry("user", "I'm planning a trip to Rome."),
        ChatEntry("assistant", "In Rome I suggest the Colosseum."),
    ]
    first = history.append(old)
    answer = mm.remember(
        "Rome tickets cost 18 EUR", scope="alice", source="reasoning", derived_from=[first[0].memory.id]
    )
    assert [t.activity_id for t in history.replace(old)] == [t.activity_id for t in first]  # the same: a no-op
    after = history.replace([*old, ChatEntry("user", "Thanks!")])
    assert [t.activity_id for t in after[:2]] == [t.activity_id for t in first] and after[2].text == "Thanks!"
    assert mm.require(first[0].memory.id, scope="alice").status is Status.ACTIVE
    assert mm.require(answer.id, scope="alice").status is Status.ACTIVE
    changed = history.replace([old[0], ChatEntry("assistant", "Rome is lovely in June.")])
    assert [t.text for t in changed] == ["I'm planning a trip to Rome.", "Rome is lovely in June."]
    assert [t.text for t in history.turns()] == [t.text for t in changed]
    assert mm.require(first[1].memory.id, scope="alice").status is Status.RETRACTED
    with pytest.raises(InvalidInputError):
        history.replace([ChatEntry("user", "new start"), ChatEntry("user", "\ud800")])
    assert [t.text for t in history.turns()] == [t.text for t in changed]  # a bad history changes nothing


def test_a_window_never_starts_with_a_result_whose_call_is_cut_off() -> None:
    history = ChatHistory(make_manager(), scope="alice", session_id="s1")
    history.append(
        [
            ChatEntry("user", "Weather in Rome and Paris?"),
            ChatEntry("assistant", "called get_weather twice", calls={"c1": {"city": "Rome"}, "c2": {"city": "Paris"}}),
            ChatEntry("tool", "Rome: 21C", name="get_weather", call_id="c1"),
            ChatEntry("tool", "Paris: 18C", name="get_weather", call_id="c2"),
            ChatEntry("assistant", "Rome 21C, Paris 18C."),
        ]
    )
    assert [t.role for t in history.turns(last=2)] == ["assistant"]
    assert [t.role for t in history.turns(last=3)] == ["assistant"]
    assert [t.role for t in history.turns(last=4)] == ["assistant", "tool", "tool", "assistant"]


def test_payload_bytes_come_back_exactly() -> None:
    history = ChatHistory(make_manager(), scope="alice", session_id="s1")
    data = {"image": bytes(range(256)), "nested": [{"clip": b"\x00\xff"}], "n": 1.5}
    history.append([ChatEntry("user", "look at this", payload=data)])
    assert history.turns()[0].payload == data


@pytest.mark.parametrize(
    "kwargs", [{"kind": "bogus"}, {"kind": 5}, {"kind": None}, {"on_clear": 3}, {"scope": 5}, {"scope": ""}]
)
def test_bad_construction_is_a_typed_error(kwargs: dict[str, object]) -> None:
    """Issue 27: ``ChatHistory(kind=...)`` and friends raise ``InvalidInputError``, never a raw ``ValueError``."""
    args = {"scope": Scope(user_id="u", session_id="s"), **kwargs}
    with pytest.raises(InvalidInputError):
        ChatHistory(make_manager(), **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "entry",
    [
        ChatEntry(role="assistant", text="calling", calls={"\ud800": {}}),
        ChatEntry(role="tool", text="result", call_id="\ud800"),
        ChatEntry(role="assistant", text="calling", calls={"c1": {"city": "Ber\udc00lin"}}),
        ChatEntry(role="user", text="hi", payload={"\ud800": 1}),
        ChatEntry(role="user", text="hi", payload={"blocks": ["a\x00b"]}),
    ],
    ids=["surrogate-call-id", "surrogate-call_id", "surrogate-argument", "surrogate-payload-key", "nul-in-payload"],
)
def test_text_no_backend_can_store_is_refused_anywhere_in_an_entry(entry: ChatEntry) -> None:
    """Issue 27: a lone surrogate or NUL in a call id, argument or payload is a typed error; nothing is written."""
    mm = make_manager()
    history = ChatHistory(mm, scope=Scope(user_id="u", session_id="s"))
    history.append([ChatEntry(role="user", text="before")])
    with pytest.raises(InvalidInputError):
        history.append([ChatEntry(role="user", text="ok part of the batch"), entry])
    assert [t.text for t in history.turns()] == ["before"]


def test_a_replace_whose_append_fails_leaves_the_old_history_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The new turns are appended before the old ones are cleared: a failing write changes nothing visible."""
    from memlineage.errors import StorageError

    mm = make_manager()
    history = ChatHistory(mm, scope=Scope(user_id="alice", session_id="s1"))
    history.append(
        [ChatEntry("user", "I live in Paris"), ChatEntry("assistant", "Noted, Paris."), ChatEntry("user", "Book it")]
    )
    before = [(t.role, t.text) for t in history.turns()]

    def broken(*args: object, **kwargs: object) -> None:
        raise StorageError("disk full")

    monkeypatch.setattr(mm, "remember", broken)
    new = [ChatEntry("user", "I live in Paris"), ChatEntry("assistant", "Noted, Paris!"), ChatEntry("user", "Book it")]
    with pytest.raises(StorageError):
        history.replace(new)
    monkeypatch.undo()
    assert [(t.role, t.text) for t in history.turns()] == before
    assert all(m.status is Status.ACTIVE for m in mm.find(scope=Scope(user_id="alice")))
    history.replace(new)  # and once it works, the new history is there, in order
    assert [t.text for t in history.turns()] == ["I live in Paris", "Noted, Paris!", "Book it"]


def test_a_sessions_lock_lives_as_long_as_its_histories() -> None:
    """Histories of one session share a lock; once none is left it goes (no growth with the sessions seen)."""
    import gc

    from memlineage import history as history_module

    mm = make_manager()
    scope = Scope(user_id="alice", session_id="s1")
    first, second = ChatHistory(mm, scope=scope), ChatHistory(mm, scope=scope)
    assert first._lock is second._lock
    for n in range(50):
        ChatHistory(mm, scope=Scope(user_id="alice", session_id=f"gone-{n}"))
    gc.collect()
    held = history_module._SESSION_LOCKS[mm]
    assert len(held) == 1  # only the session whose histories are still alive
    del first, second
    gc.collect()
    assert len(held) == 0


class _Counting:
    """Counts the full reads of the session's occurrences (``manager.activities``)."""

    def __init__(self, mm: object) -> None:
        self.reads = 0
        self._inner = mm.activities  # type: ignore[attr-defined]

    def __call__(self, *args: object, **kwargs: object) -> object:
        self.reads += 1
        return self._inner(*args, **kwargs)


def test_a_long_session_is_not_read_whole_for_every_message(monkeypatch: pytest.MonkeyPatch) -> None:
    mm = make_manager()
    history = ChatHistory(mm, scope="alice", session_id="s1")
    history.append([ChatEntry("user", "I live in Paris."), ChatEntry("assistant", "Noted.")])
    counting = _Counting(mm)
    monkeypatch.setattr(mm, "activities", counting)
    history.turns()  # one full read at most: what the append knew is still true
    for i in range(5):
        history.append([ChatEntry("user", f"Question {i} about Paris?"), ChatEntry("assistant", f"Answer {i}.")])
    assert [t.text for t in history.turns()][-2:] == ["Question 4 about Paris?", "Answer 4."]
    assert counting.reads <= 1
    assert [t.position for t in history.turns()] == list(range(12))


def test_what_another_writer_did_is_seen() -> None:
    """Another object of the same session appends, clears; an erasure redacts: every change reaches the reader."""
    mm = make_manager()
    reader = ChatHistory(mm, scope="alice", session_id="s1")
    writer = ChatHistory(mm, scope="alice", session_id="s1")
    reader.append([ChatEntry("user", "My passport number is X123.")])
    assert [t.text for t in reader.turns()] == ["My passport number is X123."]
    writer.append([ChatEntry("assistant", "Saved.")])
    assert [t.text for t in reader.turns()] == ["My passport number is X123.", "Saved."]
    reader.append([ChatEntry("user", "Thanks.")])  # positions continue after the other writer's message
    assert [t.position for t in reader.turns()] == [0, 1, 2]
    first = reader.turns()[0]
    mm.erase(first.memory.id, scope="alice")
    assert reader._known is None  # the erasure emptied what the reader held, wording included
    assert [t.text for t in reader.turns()] == ["Saved.", "Thanks."]
    writer.clear()
    assert reader.turns() == []
    reader.append([ChatEntry("user", "New start.")])
    assert [(t.text, t.position) for t in reader.turns()] == [("New start.", 3)]


def test_histories_made_per_request_leave_no_trace_behind() -> None:
    """Each ChatHistory registers for erasures; those that went are dropped, so a history per request never piles up."""
    import gc

    from memlineage import _forget

    mm = make_manager()
    before = len(_forget._clearers)
    for _ in range(3000):
        ChatHistory(mm, scope="alice", session_id="s1")
    gc.collect()
    assert len(_forget._clearers) - before < 1100
