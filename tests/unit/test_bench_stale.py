"""The stale-memory benchmark's scenarios, played into MemLineage with FakeEmbedder: nothing stale served.

A regression in supersede / slot supersession / retract cascade / TTL expiry puts a stale memory in the top k
(with FakeEmbedder, the plain-vector baselines serve the stale memory in the top 5 in all four cases below).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from memlineage import Status
from memlineage.testing import make_manager

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stale.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_stale", _BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_stale", module)  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


bench = _load()
SCENARIOS = {sc.id: sc for sc in bench.generate_scenarios()}


def _play(scenario_id: str) -> tuple[list[str], dict[str, Status]]:
    clock = bench.Clock()
    mm = make_manager(clock=clock)
    try:
        runner = bench.MemLineageRunner(mm, clock)
        sc = SCENARIOS[scenario_id]
        runner.play(sc)
        top = runner.ask(sc, 5)
        ids = runner._ids[sc.id]
        statuses = {key: mm.get(ids[key], scope=runner._scope(sc)).status for key in sc.stale}
        return top, statuses
    finally:
        mm.close()


def test_generator_covers_every_update_kind_in_both_languages() -> None:
    scenarios = list(SCENARIOS.values())
    assert 20 <= len(scenarios) <= 40
    assert {s.category for s in scenarios} == {"preference", "correction", "stale_price", "retracted_premise"}
    assert {s.lang for s in scenarios} == {"en", "zh"}
    for sc in scenarios:
        keys = {s.key for s in sc.steps}
        assert set(sc.stale) <= keys and set(sc.current) <= keys
        assert bench.label(sc, f"input: {sc.text_of(sc.current[0])}\noutput: OK.") == sc.current[0]


@pytest.mark.parametrize(
    ("scenario_id", "invalid"),
    [
        ("preference-en-01", Status.SUPERSEDED),  # slot-keyed remember supersedes the old preference
        ("correction-zh-01", Status.SUPERSEDED),  # explicit supersede()
        ("stale_price-en-02", Status.EXPIRED),  # TTL elapsed before the question
        ("retracted_premise-en-01", Status.RETRACTED),  # retract() the premise; its conclusion turns suspect
    ],
)
def test_memlineage_serves_no_stale_memory(scenario_id: str, invalid: Status) -> None:
    top, statuses = _play(scenario_id)
    sc = SCENARIOS[scenario_id]
    served = [k for k in top if k in sc.stale]
    assert served == [], (
        f"{scenario_id}: stale memories served in the top 5: {[sc.text_of(k) for k in served]}"
    )
    assert statuses[sc.stale[0]] is invalid
    if "derived" in sc.stale:
        assert statuses["derived"] is Status.SUSPECT


def test_conclusion_derived_from_expired_price_is_not_served() -> None:
    top, _ = _play("stale_price-en-01")
    assert "derived" not in top
