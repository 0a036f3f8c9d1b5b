"""The core run recorder: memory text, failures as outcomes, premises with attribution, one run per turn."""

from __future__ import annotations

from memlineage import Scope, Status
from memlineage.capture import RunRecorder, ToolCallSpec, cited_ids, is_filler, marker, tool_result_text
from memlineage.models import match_short_id, new_id, short_id


def _attr(mm, memory_id):
    return {
        e["dst"]: e["attribution"] for e in mm.ledger.edges_touching([memory_id]) if e["relation"] == "wasDerivedFrom"
    }


def test_filler_and_markers():
    assert is_filler("Noted. I'll remember that.") and is_filler("Okay, got it!")
    assert not is_filler("Noted: your flight to Lyon costs 95 EUR.")
    ids = ["0000-1a2b3c4d", "0000-99993c4d", "1111-ffff0000"]
    assert cited_ids("per [m:ffff0000] and [m:1a2b3c4d tool:x]", ids) == ["1111-ffff0000", "0000-1a2b3c4d"]
    assert cited_ids("[m:3c4d]", ids) == []  # ambiguous short id cites nothing
    assert marker("1111-ffff0000") == "[m:ffff0000]"
    assert tool_result_text("get_weather", {"city": "Paris"}, " 18C ") == "get_weather(city='Paris') -> 18C"


def test_markers_tell_apart_time_ordered_ids_made_in_the_same_minute():
    ids = [new_id() for _ in range(200)]
    assert ids == sorted(ids)  # UUIDv7: creation order is index order
    assert len({i[:8] for i in ids}) <= 2  # the head is the time: useless as a short form
    text = " ".join(marker(i) for i in reversed(ids))
    assert cited_ids(text, ids) == list(reversed(ids))
    assert short_id(ids[0]) == ids[0][-8:] and marker(ids[0]) == f"[m:{ids[0][-8:]}]"


def test_short_ids_resolve_full_ids_tails_then_older_prefixes():
    old = "1a2b3c4d-aaaa-4bbb-8ccc-0123456789ab"  # a UUIDv4 from an earlier version, cited by its first 8 characters
    new = "01a22e04-ef94-72b7-b305-84a7522acd61"
    assert match_short_id("7522ACD61", [old, new]) == [new]  # tail, case-insensitive
    assert match_short_id("1a2b3c4d", [old, new]) == [old]  # no tail matches: the older prefix form
    assert match_short_id(new.upper(), [old, new]) == [new]
    assert match_short_id("01a2", [new, "01a2ffff-0000"]) == [new, "01a2ffff-0000"]  # ambiguous: both returned
    assert match_short_id("abc", [old, new]) == []  # shorter than 4 characters: exact ids only
    assert cited_ids("see [m:1a2b3c4d]", [old, new]) == [old]


def test_tool_call_derives_from_the_memories_that_supply_its_arguments(mm, alice):
    seat = mm.remember("I prefer aisle seats", scope=alice, source="user")
    rec = RunRecorder(mm)
    run = rec.start_run(alice, "r1", "Find me a flight to Lyon", recalled=[seat])
    rec.model_step(run, text="Checking fares.", tool_calls=[ToolCallSpec("call_1", "fares", {"city": "Lyon"})])
    fare = rec.tool_end(run, "call_1", "95 EUR")
    answer = rec.answer(run, "The flight to Lyon costs 95 EUR.")
    rec.end_run(run)
    assert fare is not None and answer is not None
    assert fare.content == "fares(city='Lyon') -> 95 EUR" and fare.metadata["arguments"] == {"city": "Lyon"}
    assert _attr(mm, fare.id) == {run.user_memory_id: "arguments"}  # not the seat preference
    assert _attr(mm, answer.id) == {fare.id: "results"}
    step = [m for m in mm.find(scope=alice) if m.content == "Checking fares."]
    assert len(step) == 1  # assistant text sent together with tool calls is stored
    report = mm.supersede(seat.id, "I prefer window seats", scope=alice, source="user")
    assert report.suspect == []
    report = mm.supersede(run.user_memory_id, "Find me a flight to Nice", scope=alice, source="user")
    assert set(report.suspect) >= {fare.id, answer.id}


def test_cited_markers_win_and_filler_is_no_premise(mm, alice):
    city = mm.remember("I'm going to Paris", scope=alice, source="user")
    diet = mm.remember("I am vegetarian", scope=alice, source="user")
    rec = RunRecorder(mm)
    run = rec.start_run(alice, "r1", "Any dinner ideas?", recalled=[city, diet])
    answer = rec.answer(run, f"Try Le Potager {marker(diet.id)}.")
    rec.end_run(run)
    assert _attr(mm, answer.id) == {diet.id: "cited"}
    run2 = rec.start_run(alice, "r2", "I also like jazz")
    ack = rec.answer(run2, "Noted. I'll remember that.")
    rec.end_run(run2)
    assert ack is not None and ack.derived_from == () and ack.metadata["filler"] is True
    run3 = rec.start_run(alice, "r3", "What do you know?", recalled=[ack])
    assert ack.id not in run3.context  # filler never becomes context, hence never a premise


def test_failed_tool_call_is_an_outcome_not_a_memory(mm, alice):
    rec = RunRecorder(mm)
    run = rec.start_run(alice, "r1", "Book a hotel in Paris")
    rec.model_step(run, tool_calls=[ToolCallSpec("call_1", "search_hotels", {"city": "Paris"})])
    rec.tool_error(run, "call_1", "hotel API down")
    answer = rec.answer(run, "Sorry, the hotel search is unavailable.")
    rec.end_run(run)
    assert not [m for m in mm.find(scope=alice) if m.source.kind.value == "tool"]
    (failed,) = mm.find_activities(alice, run_id="r1", outcome="error")
    assert failed.metadata == {"tool_call_id": "call_1", "arguments": {"city": "Paris"}, "error": "hotel API down"}
    assert answer is not None and set(answer.derived_from) == {run.user_memory_id}


def test_two_observers_of_one_turn_write_it_once(mm, alice):
    rec = RunRecorder(mm)
    first = rec.start_run(alice, None, "Weather in Paris?")
    second = rec.start_run(alice, "framework-run", "Weather in Paris?")
    assert first is second
    rec.tool_end(second, "call_1", "Sunny", name="get_weather", arguments={"city": "Paris"})
    rec.tool_end(first, "call_1", "Sunny")  # the same result reported again
    rec.answer(first, "Sunny in Paris.")
    rec.answer(second, "Sunny in Paris.")
    rec.end_run(first)
    assert len(mm.find(scope=alice)) == 3
    assert not [e for e in mm.audit(alice) if e["type"] == "seen_again"]


def test_two_users_same_run_and_call_ids(mm, alice, bob):
    rec = RunRecorder(mm)
    for scope in (alice, bob):
        run = rec.start_run(scope, "r1", "Weather in Paris?")
        rec.tool_end(run, "call_1", f"Sunny for {scope.user_id}", name="get_weather", arguments={"city": "Paris"})
        rec.end_run(run)
    a, b = mm.find_activities(alice, tool_call_id="call_1"), mm.find_activities(bob, tool_call_id="call_1")
    assert len(a) == len(b) == 1 and a[0].id != b[0].id
    assert all(m.status is Status.ACTIVE for m in mm.find(scope=Scope(user_id="alice")))


def test_explain_and_cascade_report_show_the_attribution(mm, alice):
    trip = mm.remember("I'm going to Paris in May", scope=alice, source="user")
    rec = RunRecorder(mm)
    run = rec.start_run(alice, "r1", "Find me a hotel", recalled=[trip])
    rec.model_step(run, tool_calls=[ToolCallSpec("c1", "hotels", {"city": "Paris"})])
    hotel = rec.tool_end(run, "c1", "Hotel Lumière, 90 EUR")
    answer = rec.answer(run, f"Hotel Lumière suits your trip {marker(trip.id)}.")
    rec.end_run(run)
    assert hotel is not None and answer is not None
    ex = mm.explain(answer.id, scope=alice)
    assert ex.attribution == {(answer.id, trip.id): "cited"}  # it cites the trip and nothing else
    ex = mm.explain(hotel.id, scope=alice)
    assert ex.attribution == {(hotel.id, trip.id): "arguments"}
    assert "<arguments>" in ex.to_text() and "(arguments)" in ex.to_mermaid()
    impact = mm.impact(trip.id, scope=alice)
    assert impact.attribution == {hotel.id: "arguments", answer.id: "cited"}
    report = mm.supersede(trip.id, "I'm going to Lyon in May", scope=alice, source="user")
    assert set(report.suspect) == {hotel.id, answer.id} and report.attribution[hotel.id] == "arguments"


def test_an_answer_from_memory_rests_on_the_memory_about_its_topic(mm, alice):
    budget = mm.remember("My hotel budget is 120 EUR a night.", scope=alice, source="user")
    rec = RunRecorder(mm)
    run = rec.start_run(alice, "r1", "Find me a flight.", recalled=[budget])
    rec.model_step(run, tool_calls=[ToolCallSpec("c1", "search_flights", {"city": "Lisbon"})])
    flight = rec.tool_end(run, "c1", "TP202 to Lisbon, 120 EUR")
    rec.answer(run, "TP202 costs 120 EUR.")
    rec.end_run(run)
    assert flight is not None
    run = rec.start_run(alice, "r2", "How much was the flight?", recalled=[budget, flight])
    price = rec.answer(run, "The flight was 120 EUR.")  # 120 is also the budget: the topic decides
    run2 = rec.start_run(alice, "r3", "Remind me of my hotel budget.", recalled=[budget, flight])
    limit = rec.answer(run2, "Your budget is 120 EUR per night.")
    assert price is not None and limit is not None
    assert _attr(mm, price.id) == {flight.id: "content"}
    assert _attr(mm, limit.id) == {budget.id: "content"}


def test_interleaved_runs_of_two_users_with_the_same_ids_stay_apart(mm, alice, bob):
    rec = RunRecorder(mm)
    a = rec.start_run(alice, "run-1", "Weather in Paris?")
    b = rec.start_run(bob, "run-1", "Weather in Oslo?")
    assert a is not b and rec.run(alice, "run-1") is a and rec.run(bob, "run-1") is b
    rec.model_step(a, tool_calls=[ToolCallSpec("call_1", "get_weather", {"city": "Paris"})])
    rec.model_step(b, tool_calls=[ToolCallSpec("call_1", "get_weather", {"city": "Oslo"})])
    oslo = rec.tool_end(b, "call_1", "Snow")
    paris = rec.tool_end(a, "call_1", "Sun")
    rec.answer(b, "It snows in Oslo.")
    rec.answer(a, "It is sunny in Paris.")
    rec.end_run(b)
    rec.end_run(a)
    assert paris is not None and oslo is not None
    assert paris.scope.user_id == "alice" and oslo.scope.user_id == "bob"
    assert paris.derived_from == (a.user_memory_id,) and oslo.derived_from == (b.user_memory_id,)
    (mine,) = mm.find_activities(alice, tool_call_id="call_1")
    assert mine.metadata["arguments"] == {"city": "Paris"} and mine.outcome == "success"


def test_an_answer_with_no_evidence_rests_on_its_question_not_on_the_whole_context(mm, alice):
    trip = mm.remember("I'm planning a trip to Rome in June.", scope=alice, source="user")
    currency = mm.remember("My home currency is CHF.", scope=alice, source="user")
    rec = RunRecorder(mm)
    run = rec.start_run(alice, "r1", "Have you found me a flight?", recalled=[trip, currency])
    nothing = rec.answer(run, "I haven't searched for one yet.")
    rec.end_run(run)
    run = rec.start_run(alice, "r2", "Book me a hotel there.", recalled=[trip, currency])
    asks = rec.answer(run, "Which dates would you like? I can't see them in my notes.")
    rec.end_run(run)
    run = rec.start_run(alice, "r3", "What's my home currency?", recalled=[trip, currency])
    code = rec.answer(run, "It is CHF.")  # a three-letter code is a distinctive word
    rec.end_run(run)
    assert nothing is not None and asks is not None and code is not None
    assert set(nothing.derived_from) == {rec_user(mm, alice, "Have you found me a flight?")}
    assert set(asks.derived_from) == {rec_user(mm, alice, "Book me a hotel there.")}
    assert _attr(mm, code.id) == {currency.id: "content"}
    report = mm.supersede(trip.id, "I'm planning a trip to Naples in June.", scope=alice, source="user")
    assert not {nothing.id, asks.id, code.id} & set(report.suspect)


def rec_user(mm, scope, text):
    (found,) = [m.id for m in mm.find(scope=scope) if m.content == text]
    return found


def test_a_captured_manager_is_not_kept_alive_by_its_recorder() -> None:
    """The recorder registry's weak key must not be held by the recorder itself: a closed, dropped manager goes."""
    import gc
    import weakref

    from memlineage.capture import RunRecorder
    from memlineage.testing import make_manager

    mm = make_manager()
    recorder = RunRecorder.of(mm)
    assert recorder.manager is mm and RunRecorder.of(mm) is recorder
    gone = weakref.ref(mm)
    mm.close()
    del mm, recorder
    gc.collect()
    assert gone() is None


def test_a_reply_that_asks_back_rests_on_what_it_names_not_on_a_result_sharing_a_word(mm, alice):
    """'Which city are you going to?' shares "city" with a city guide: a question asserts nothing, so no premise."""
    trip = mm.remember("I'm going to Ghent next month.", scope=alice, source="user")
    rec = RunRecorder(mm)
    run = rec.start_run(alice, "r1", "Give me the city guide for where I'm going.", recalled=[trip])
    rec.model_step(run, tool_calls=[ToolCallSpec("g1", "get_city_guide", {"city": "Ghent"})])
    guide = rec.tool_end(run, "g1", "The complete Ghent city guide, every place worth a visit")
    asked = rec.answer(run, "Which city are you going to? I can't find it in my notes.")
    rec.end_run(run)
    run = rec.start_run(alice, "r2", "Which flight should I take?", recalled=[trip, guide])
    named = rec.answer(run, "Should I book the cheapest flight to Ghent?")  # a question that names a value
    rec.end_run(run)
    assert guide is not None and asked is not None and named is not None
    run = rec.start_run(alice, "r3", "What did you find?", recalled=[trip, asked])
    again = rec.answer(run, "I can't find that in my notes.")  # words an earlier question said are no evidence
    rec.end_run(run)
    assert again is not None
    assert set(asked.derived_from) == {rec_user(mm, alice, "Give me the city guide for where I'm going.")}
    assert set(named.derived_from) == {trip.id}
    assert set(again.derived_from) == {rec_user(mm, alice, "What did you find?")}


def test_an_answer_about_a_failed_call_rests_on_its_request_not_on_an_apology(mm, alice):
    """'Sorry, the service is down' shares only discourse words ("sorry") with 'Sorry, I meant Berlin'."""
    meant = mm.remember("Sorry, I meant Berlin, not Amsterdam.", scope=alice, source="user")
    rec = RunRecorder(mm)
    run = rec.start_run(alice, "r1", "Book me a hotel where I'm going.", recalled=[meant])
    rec.model_step(run, tool_calls=[ToolCallSpec("h1", "book_hotel", {"city": "Berlin"})])
    rec.tool_error(run, "h1", "Booking service unavailable (HTTP 503)")
    down = rec.answer(run, "Sorry, the hotel booking service is down right now. Please try again later.")
    rec.end_run(run)
    assert down is not None
    assert set(down.derived_from) == {rec_user(mm, alice, "Book me a hotel where I'm going.")}
    report = mm.supersede(meant.id, "I'm going to Munich.", scope=alice, source="user")
    assert down.id not in set(report.suspect)
