"""OpenTelemetry spans and metrics (memlineage.telemetry), with the SDK's in-memory exporter and reader.

Every test configures its own providers through ``telemetry.configure`` (the global providers can be set only once per
process) and puts the module back as it was afterwards.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from memlineage import MemoryManager, Scope, telemetry
from memlineage.capture import ashield, shield
from memlineage.policy import PolicyEngine, builtin_policies
from memlineage.reconcile import LLMReconciler
from memlineage.testing import make_manager
from memlineage.value import ValueModel

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
USER = "alice@example.com"
ALICE = Scope(user_id=USER, agent_id="travel-bot", session_id="trip-42")
FIRST = "I live in Paris."
CORRECTION = "Actually, I live in Lyon now."
QUERY = "Where do I live?"


@dataclass
class Otel:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.exporter.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        (found,) = self.spans(name)
        return found

    def metrics(self) -> dict[str, list[Any]]:
        """``{metric name: [data points]}`` collected now."""
        out: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data is not None else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    out.setdefault(metric.name, []).extend(metric.data.data_points)
        return out

    def total(self, name: str, **attrs: Any) -> int:
        points = self.metrics().get(name, [])
        want = {f"memlineage.{k}": v for k, v in attrs.items()}
        return sum(p.value for p in points if all(p.attributes.get(k) == v for k, v in want.items()))


@pytest.fixture
def otel() -> Iterator[Otel]:
    saved = telemetry._state, telemetry._salt
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield Otel(exporter, reader, tracer_provider, meter_provider)
    telemetry._state, telemetry._salt = saved
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture
def mm() -> Iterator[MemoryManager]:
    manager = make_manager()
    yield manager
    manager.close()


def attrs(span: ReadableSpan, prefix: str) -> dict[str, Any]:
    """The span's attributes named ``<prefix>.<key>``, by key."""
    return {k[len(prefix) + 1 :]: v for k, v in (span.attributes or {}).items() if k.startswith(prefix + ".")}


def every_value(spans: list[ReadableSpan]) -> list[str]:
    """Every attribute and event attribute value of ``spans`` (and their names), as text."""
    out: list[str] = []
    for s in spans:
        out.append(s.name)
        items = list((s.attributes or {}).items())
        for e in s.events:
            out.append(e.name)
            items += list((e.attributes or {}).items())
        for k, v in items:
            out.append(k)
            out.extend(str(x) for x in (v if isinstance(v, tuple) else (v,)))
        if s.status.description:
            out.append(s.status.description)
    return out


def test_remember_correction_recall_spans(otel: Otel, mm: MemoryManager) -> None:
    old = mm.remember(FIRST, scope=ALICE)
    new = mm.remember(CORRECTION, scope=ALICE)
    mm.flush_index()  # the supersession's index update may still be queued: the count below is the index's
    result = mm.recall(QUERY, scope=ALICE, k=3)
    assert result.ids == [new.id]

    first, second = otel.spans("memlineage.remember")
    assert attrs(first, "memlineage.remember") == {"items": 1, "memories": 1}
    detections = otel.spans("memlineage.update_detection")
    assert [s.parent.span_id if s.parent else None for s in detections] == [
        first.context.span_id,
        second.context.span_id,
    ]
    assert attrs(detections[0], "memlineage.update_detection")["candidates"] == 0
    decided = attrs(detections[1], "memlineage.update_detection")
    assert decided["reconciler"] == "rules" and decided["statements"] == 1 and decided["candidates"] >= 1
    assert decided["actions"] == ("update",) and decided["decided_by"] == ("rules",)
    assert decided["confidences"][0] >= 0.85

    cascade = otel.span("memlineage.cascade")  # the correction superseded the old statement
    assert cascade.parent is not None and cascade.parent.span_id == second.context.span_id
    assert attrs(cascade, "memlineage.cascade") == {"status": "superseded", "dry_run": False, "suspect": 0,
                                                    "unaffected": 0}  # fmt: skip

    recall = otel.span("memlineage.recall")
    got = attrs(recall, "memlineage.recall")
    assert got["k"] == 3 and got["hits"] == 1 and got["plan"] == "exact"
    assert got["candidates"] == 1 and got["withheld"] == 0  # the index no longer offers the superseded "Paris"
    assert mm.get(old.id, scope=ALICE).status.value == "superseded"
    for s in otel.spans():
        assert s.status.status_code is not StatusCode.ERROR


def test_scope_ids_only_hashed(otel: Otel, mm: MemoryManager) -> None:
    mm.remember(FIRST, scope=ALICE)
    mm.remember(CORRECTION, scope=ALICE)
    mm.recall(QUERY, scope=ALICE)
    spans = otel.spans()
    assert spans
    values = every_value(spans)
    for raw in (USER, "travel-bot", "trip-42", FIRST, CORRECTION, QUERY, "Paris", "Lyon"):
        assert not any(raw in v for v in values), raw
    hashed = {k: v for s in spans for k, v in (s.attributes or {}).items() if k.endswith(".hash")}
    assert hashed == {
        "memlineage.user.hash": telemetry.hash_id(USER),
        "memlineage.agent.hash": telemetry.hash_id("travel-bot"),
        "memlineage.session.hash": telemetry.hash_id("trip-42"),
    }
    assert len(hashed["memlineage.user.hash"]) == 16 and hashed["memlineage.user.hash"] != USER


def test_hash_salt_changes_every_hash(otel: Otel, mm: MemoryManager) -> None:
    plain = telemetry.hash_id(USER)
    telemetry.configure(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, hash_salt="deployment-secret"
    )
    mm.remember(FIRST, scope=ALICE)
    user_hash = otel.span("memlineage.remember").attributes["memlineage.user.hash"]  # type: ignore[index]
    assert user_hash == telemetry.hash_id(USER) != plain


def test_metrics_count_writes_decisions_and_recall_latency(otel: Otel, mm: MemoryManager) -> None:
    mm.remember(FIRST, scope=ALICE)
    mm.remember_many([{"content": CORRECTION, "scope": ALICE}, {"content": "I prefer aisle seats.", "scope": ALICE}])
    mm.recall(QUERY, scope=ALICE)
    mm.recall("seats", scope=ALICE)
    assert otel.total("memlineage.writes") == 3
    assert otel.total("memlineage.update.decisions", action="update", decided_by="rules") == 1
    (latency,) = otel.metrics()["memlineage.recall.duration"]
    assert latency.count == 2 and latency.sum > 0


def test_failed_span_keeps_the_error_type_not_its_message(otel: Otel, mm: MemoryManager) -> None:
    with pytest.raises(Exception, match="premise"):
        mm.remember("derived from nothing", scope=ALICE, derived_from=["no-such-memory-of-alice@example.com"])
    span = otel.span("memlineage.remember")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "memlineage.errors.MemoryNotFoundError"
    assert not span.events  # no exception event: its message may quote ids or content
    assert not any("alice@example.com" in v for v in every_value([span]))


def test_cascade_span_counts_the_descendants_marked(otel: Otel, mm: MemoryManager) -> None:
    fare = mm.remember("The fare to Rome is 120 EUR.", scope=ALICE, source="tool:fares")
    mm.remember("Book the 120 EUR fare.", scope=ALICE, source="agent", derived_from=[fare.id])
    mm.remember("Tell Alice the fare.", scope=ALICE, source="agent", derived_from=[fare.id])
    report = mm.retract(fare.id, scope=ALICE, reason="the fare changed")
    assert len(report.suspect) == 2
    got = attrs(otel.span("memlineage.cascade"), "memlineage.cascade")
    assert got["status"] == "retracted" and got["suspect"] == 2


def test_policy_spans_count_effects() -> None:
    mm = make_manager(policy=PolicyEngine(builtin_policies()))
    try:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        saved = telemetry._state
        telemetry.configure(tracer_provider=provider)
        try:
            guess = mm.remember("the user probably likes jazz music", scope=ALICE, source="reasoning", confidence=0.4)
            mm.remember("the user likes jazz concerts", scope=ALICE, source="user")
            result = mm.recall("jazz", scope=ALICE)
        finally:
            telemetry._state = saved
        assert guess.id not in result.ids
        spans = [s for s in exporter.get_finished_spans() if s.name == "memlineage.policy"]
        ops = [attrs(s, "memlineage.policy")["operation"] for s in spans]
        assert ops.count("write") == 2 and "read" in ops
        (read,) = [attrs(s, "memlineage.policy") for s in spans if attrs(s, "memlineage.policy")["operation"] == "read"]
        assert read == {"operation": "read", "decisions": 1, "withheld": 1, "effects.filter": 1}  # the trust floor
        recall = next(s for s in exporter.get_finished_spans() if s.name == "memlineage.recall")
        assert attrs(recall, "memlineage.recall")["withheld.policy"] >= 1
    finally:
        mm.close()


def test_no_policy_engine_no_policy_span(otel: Otel, mm: MemoryManager) -> None:
    mm.remember(FIRST, scope=ALICE)
    mm.recall(QUERY, scope=ALICE)
    assert otel.spans("memlineage.policy") == []
    assert otel.spans("memlineage.value_gate") == []  # no value model: no gate


def test_value_gate_span_counts_stored_and_buffered(otel: Otel) -> None:
    mm = make_manager(value_model=ValueModel())
    try:
        mm.remember_many(
            [{"content": "thanks!", "scope": ALICE}, {"content": "I am allergic to peanuts.", "scope": ALICE}]
        )
    finally:
        mm.close()
    got = attrs(otel.span("memlineage.value_gate"), "memlineage.value_gate")
    assert {k: got[k] for k in ("drafts", "stored", "buffered")} == {"drafts": 2, "stored": 1, "buffered": 1}
    assert otel.total("memlineage.writes") == 1


def test_extractor_fallback_is_counted(otel: Otel) -> None:
    from memlineage.extractors import LLMExtractor

    extractor = LLMExtractor(ScriptedModel("not json"), max_retries=0)
    features = extractor.extract("I am allergic to peanuts.")
    assert features.extractor.endswith("(fallback)")
    assert otel.total("memlineage.extractor.fallbacks") == 1


class ScriptedModel:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def invoke(self, prompt: str) -> Any:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    "answer",
    [
        "not json at all",
        '{"decisions": [{"statement": 1, "action": "update", "target": "made-up-id"}]}',
        '{"decisions": []}',
        '{"decisions": [{"statement": 2, "action": "new"}]}',
        RuntimeError("model down"),
    ],
)
def test_reconciler_fallback_is_a_warning_and_counted(
    otel: Otel, caplog: pytest.LogCaptureFixture, answer: Any
) -> None:
    reconciler = LLMReconciler(ScriptedModel(answer))
    mm = make_manager(reconciler=reconciler)
    try:
        mm.remember("I live in Paris", scope=ALICE)
        with caplog.at_level(logging.INFO, logger="memlineage"):
            mm.remember("I moved to Lyon", scope=ALICE)
    finally:
        mm.close()
        reconciler.close()
    assert reconciler.fallbacks == 1
    assert otel.total("memlineage.reconciler.fallbacks") == 1
    assert otel.total("memlineage.update.decisions", decided_by="rules(fallback)") == 1
    fallback_logs = [r for r in caplog.records if "LLM reconciler" in r.getMessage()]
    assert fallback_logs and all(r.levelno == logging.WARNING for r in fallback_logs)


def test_shield_spans_and_adapter_errors(otel: Otel, mm: MemoryManager) -> None:
    def step() -> str:
        mm.remember(FIRST, scope=ALICE)
        return "ok"

    def broken() -> None:
        raise RuntimeError(f"could not store {CORRECTION!r} for {USER}")

    assert shield(mm, "Demo.before_agent", step, scope=ALICE) == "ok"
    assert shield(mm, "Demo.after_agent", broken, default="fallback", scope=ALICE) == "fallback"
    ok, failed = otel.spans("memlineage.hook Demo.before_agent") + otel.spans("memlineage.hook Demo.after_agent")
    assert attrs(ok, "memlineage.hook") == {"surface": "Demo.before_agent"}
    assert ok.attributes is not None and ok.attributes["memlineage.user.hash"] == telemetry.hash_id(USER)
    remember = otel.span("memlineage.remember")
    assert remember.parent is not None and remember.parent.span_id == ok.context.span_id  # the hook's own write
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes is not None
    assert failed.attributes["error.type"] == "builtins.RuntimeError"
    assert not any(USER in v or CORRECTION in v for v in every_value(otel.spans()))
    assert otel.total("memlineage.adapter.errors", surface="Demo.after_agent") == 1
    assert mm.stats()["adapter_errors"] == {"Demo.after_agent": 1}


async def test_async_shield_span(otel: Otel, mm: MemoryManager) -> None:
    async def broken() -> None:
        raise ValueError("no")

    assert await ashield(mm, "Demo.aafter_agent", broken, default=1) == 1
    span = otel.span("memlineage.hook Demo.aafter_agent")
    assert span.status.status_code is StatusCode.ERROR
    assert otel.total("memlineage.adapter.errors", surface="Demo.aafter_agent") == 1


def test_noop_mode_records_nothing_and_everything_works(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "_state", telemetry._OFF)
    assert not telemetry.enabled()
    mm = make_manager(policy=PolicyEngine(builtin_policies()), value_model=ValueModel())
    try:
        old = mm.remember(FIRST, scope=ALICE)
        new = mm.remember(CORRECTION, scope=ALICE)
        assert mm.recall(QUERY, scope=ALICE).ids == [new.id]
        assert mm.get(old.id, scope=ALICE).status.value == "superseded"
        assert shield(mm, "Demo.hook", lambda: 1 / 0, default=0) == 0
    finally:
        mm.close()
    assert otel.spans() == []
    assert otel.metrics() == {}


def test_without_opentelemetry_installed_nothing_is_imported(tmp_path: Path) -> None:
    """A process where ``import opentelemetry`` fails: the store works and never tries the API again."""
    script = textwrap.dedent(
        """
        import json, sys
        sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
        from memlineage import Scope, telemetry
        from memlineage.testing import make_manager
        before = telemetry._state
        mm = make_manager()
        s = Scope(user_id="u1")
        mm.remember("I live in Paris.", scope=s)
        new = mm.remember("Actually, I live in Lyon now.", scope=s)
        hits = mm.recall("Where do I live?", scope=s).ids
        print(json.dumps({
            "unresolved_at_import": before is None, "enabled": telemetry.enabled(), "served": hits == [new.id],
            "imported": sorted(m for m in sys.modules if m.startswith("opentelemetry.")),
        }))
        """
    )
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'core'}", "ANONYMIZED_TELEMETRY": "False", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"unresolved_at_import": True, "enabled": False, "served": True, "imported": []}


def test_disabled_by_configure(otel: Otel, mm: MemoryManager) -> None:
    telemetry.configure(enabled=False)
    mm.remember(FIRST, scope=ALICE)
    assert otel.spans() == [] and not telemetry.enabled()
