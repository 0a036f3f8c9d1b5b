"""The same scripted runs through all five capture surfaces give the same ledger (ids aside).

Surfaces: LangChain ``LineageCaptureCallback`` (with ``LineageMemory``), ``LineageMiddleware``, ``LineageMemory``
alone; LlamaIndex ``capture_run`` (with ``lineage_memory``), ``lineage_memory`` alone. The drivers live in
``benchmarks/_lineage_surfaces.py`` (the lineage benchmark plays its scenarios through them too).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("langchain_classic")
pytest.importorskip("llama_index.core")

from memlineage import MemoryManager, Scope  # noqa: E402
from memlineage.testing import make_manager  # noqa: E402

_DRIVERS = Path(__file__).resolve().parents[2] / "benchmarks" / "_lineage_surfaces.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_lineage_surfaces", _DRIVERS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_lineage_surfaces", module)
    spec.loader.exec_module(module)
    return module


S = _load()
SCOPE = Scope(user_id="alice", session_id="s1")

TRAVEL = [
    S.Turn(user="I'm flying to Paris on 3 May.", answer="Noted. I'll remember that."),
    S.Turn(user="I prefer aisle seats.", answer="Okay, got it!"),
    S.Turn(
        user="Find me a hotel.",
        text="Searching hotels for your trip.",
        calls=(S.Call("call_1", "search_hotels", {"city": "Paris"}, "Hotel Lumière, 90 EUR a night"),),
        answer="Hotel Lumière costs 90 EUR a night.",
    ),
    S.Turn(
        user="And a flight, please.",
        calls=(
            S.Call("call_2", "search_flights", {"city": "Paris", "date": "3 May"}, "AF1234 on 3 May, 120 EUR"),
            S.Call("call_3", "seat_map", {"preference": "aisle"}, "Seat 14C is an aisle seat"),
        ),
        answer="AF1234 costs 120 EUR; seat 14C is free.",
    ),
]


def snapshot(mm: MemoryManager, scope: Scope) -> dict[str, Any]:
    """The ledger of one user without ids: memories with their premises (by content) and tool calls."""
    mems = mm.find(scope=Scope(user_id=scope.user_id))
    by_id = {m.id: m for m in mems}
    out = []
    for m in mems:
        edges = mm.ledger.edges_touching([m.id])
        how = {e["dst"]: e["attribution"] for e in edges if e["relation"] == "wasDerivedFrom"}
        premises = sorted((by_id[p].content, how.get(p)) for p in m.derived_from)
        out.append((str(m.source), m.content, m.status.value, tuple(premises)))
    calls = [
        (
            a.name,
            a.tool_call_id,
            a.outcome,
            json.dumps(a.metadata.get("arguments"), sort_keys=True),
            a.ended_at is not None,
        )
        for a in mm.find_activities(scope, kind="tool_call")
    ]
    return {"memories": sorted(out), "tool_calls": sorted(calls)}


@pytest.fixture(scope="module")
def ledgers() -> dict[str, dict[str, Any]]:
    out = {}
    for name, drive in S.SURFACES.items():
        mm = make_manager()
        try:
            drive(mm, SCOPE, TRAVEL, 20)
            out[name] = snapshot(mm, SCOPE)
            out[name]["seen_again"] = [e["type"] for e in mm.audit(SCOPE) if e["type"] == "seen_again"]
        finally:
            mm.close()
    return out


@pytest.mark.parametrize("surface", sorted(S.SURFACES))
def test_every_surface_records_the_same_ledger(ledgers: dict[str, dict[str, Any]], surface: str) -> None:
    reference = ledgers["langchain-middleware"]
    assert ledgers[surface]["memories"] == reference["memories"]
    assert ledgers[surface]["tool_calls"] == reference["tool_calls"]


@pytest.mark.parametrize("surface", sorted(S.SURFACES))
def test_the_ledger_is_the_one_the_rules_prescribe(ledgers: dict[str, dict[str, Any]], surface: str) -> None:
    mems = {content: (source, premises) for source, content, _, premises in ledgers[surface]["memories"]}
    paris, aisle = "I'm flying to Paris on 3 May.", "I prefer aisle seats."
    hotel = "search_hotels(city='Paris') -> Hotel Lumière, 90 EUR a night"
    flight = "search_flights(city='Paris', date='3 May') -> AF1234 on 3 May, 120 EUR"
    seat = "seat_map(preference='aisle') -> Seat 14C is an aisle seat"
    assert mems[hotel] == ("tool:search_hotels", ((paris, "arguments"),))  # one tool-result text format
    assert mems[flight] == ("tool:search_flights", ((paris, "arguments"),))
    assert mems[seat] == ("tool:seat_map", ((aisle, "arguments"),))
    assert mems["Searching hotels for your trip."] == ("agent", ((paris, "arguments"),))  # text next to a call
    assert mems["Hotel Lumière costs 90 EUR a night."] == ("agent", ((hotel, "results"),))
    assert mems["AF1234 costs 120 EUR; seat 14C is free."][1] == ((flight, "results"), (seat, "results"))
    for ack in ("Noted. I'll remember that.", "Okay, got it!"):  # acknowledgements rest on nothing
        assert mems[ack] == ("agent", ())
    assert all(ack not in str(p) for _, p in mems.values() for ack in ("Noted.", "got it"))  # nor are premises
    calls = {c[1]: c for c in ledgers[surface]["tool_calls"]}
    assert calls["call_2"][3] == json.dumps({"city": "Paris", "date": "3 May"}, sort_keys=True)  # structured args
    assert all(c[2] == "success" and c[4] for c in calls.values())


@pytest.mark.parametrize("surface", ["langchain-callback", "llamaindex-capture"])
def test_memory_and_capture_together_write_each_turn_once(ledgers: dict[str, dict[str, Any]], surface: str) -> None:
    assert ledgers[surface]["seen_again"] == []


FAILING = [
    S.Turn(user="I'm flying to Paris on 3 May.", answer="Noted. I'll remember that."),
    S.Turn(
        user="Book a hotel.",
        calls=(S.Call("call_9", "book_hotel", {"city": "Paris"}, "hotel API down", error=True),),
        answer="Sorry, the booking service is down.",
    ),
]


def _callback_under_create_agent(mm: MemoryManager, scope: Scope, turns: Any, k: int) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from memlineage_langchain import LineageCaptureCallback

    handler = LineageCaptureCallback(mm, scope=scope, raise_error=True)
    for turn in turns:
        agent = create_agent(S._lc_model(turn), S._lc_tools(turns))
        agent.invoke({"messages": [HumanMessage(turn.user)]}, config={"callbacks": [handler]})


@pytest.mark.parametrize(
    "drive",
    [S.run_langchain_middleware, S.run_llamaindex_capture, _callback_under_create_agent],
    ids=["langchain-middleware", "llamaindex-capture", "langchain-callback-create_agent"],
)
def test_a_failed_tool_call_is_an_outcome_never_a_memory_or_premise(drive: Any) -> None:
    mm = make_manager()
    try:
        drive(mm, SCOPE, FAILING, 20)
        assert not [m for m in mm.find(scope="alice") if m.source.kind.value == "tool"]
        (call,) = mm.find_activities(SCOPE, tool_call_id="call_9")
        assert call.outcome == "error" and "hotel API down" in call.metadata["error"]
        assert call.metadata["arguments"] == {"city": "Paris"}
        (answer,) = [m for m in mm.find(scope="alice") if m.content.startswith("Sorry")]
        assert all(mm.require(p, scope="alice").source.kind.value != "tool" for p in answer.derived_from)
    finally:
        mm.close()


def test_lineage_benchmark_scores_one_scenario() -> None:
    """The benchmark's ground truth and scoring, on one travel user through one surface."""
    spec = importlib.util.spec_from_file_location("bench_lineage", _DRIVERS.parent / "bench_lineage.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_lineage", bench)
    spec.loader.exec_module(bench)
    travel = bench.scenarios()[0]
    assert (
        len(travel.truth("I'm flying to Paris on 3 May.")) == 7 and travel.truth("I'm vegetarian, by the way.") == set()
    )
    result = bench.measure("langchain-middleware", [travel])
    assert result["corrections"] == 5 and result["recall"] == 1.0 and result["precision"] >= 0.9
    assert sum(len(bench_scenario.corrections) for bench_scenario in bench.scenarios()) >= 30
