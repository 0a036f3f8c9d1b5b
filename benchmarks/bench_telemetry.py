"""What OpenTelemetry instrumentation costs: remember / recall throughput with telemetry off, on without an SDK, on.

Three modes, each on a fresh in-memory store (SQLite ledger, ``InMemoryIndex``, ``FakeEmbedder``: no model time,
so the instrumentation's share is as large as it gets):

- ``off``: ``telemetry.configure(enabled=False)``, the shim's no-op mode (as when ``opentelemetry-api`` is not
  installed);
- ``api``: the OpenTelemetry API with no SDK configured (its own no-op tracer and meter: the default whenever the
  API is installed, e.g. as a dependency of chromadb);
- ``sdk``: an SDK ``TracerProvider`` with a ``SimpleSpanProcessor`` into an ``InMemorySpanExporter`` and a
  ``MeterProvider`` with an ``InMemoryMetricReader`` (every span is recorded and exported synchronously).

Each mode writes ``--writes`` statements (one ``remember`` per statement, a correction every 10th), then runs
``--recalls`` recalls; the modes are interleaved over ``--rounds`` rounds and the best round is kept. Prints
operations per second and the ratios to ``off``, then the cost of one span (enter, two attributes, exit) and of
one counter increment in each mode, in microseconds (``--spans`` of each, best of the rounds): a remember makes
2-5 spans and 1-2 counter increments, a recall 1-2 spans and one histogram record. On a shared machine the
throughput ratios move by several percent from run to run; the per-span cost is the steadier figure.

Run: ``.venv/bin/python benchmarks/bench_telemetry.py [--writes 150] [--recalls 150] [--rounds 3] [--spans 50000]``.
Writes
``benchmarks/results/bench_telemetry.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memlineage import Scope, telemetry
from memlineage.testing import make_manager

HERE = Path(__file__).resolve().parent
CITIES = ["Paris", "Lyon", "Oslo", "Rome", "Madrid", "Berlin", "Vienna", "Prague", "Lisbon", "Dublin"]


def statements(n: int) -> list[str]:
    out = []
    for i in range(n):
        if i % 10 == 9:
            out.append(f"Actually, my hotel in {CITIES[i % len(CITIES)]} is the Grand {i}.")
        else:
            out.append(f"Note {i}: I want to visit {CITIES[i % len(CITIES)]} and see museum number {i}.")
    return out


def configure(mode: str) -> Any:
    """Point memlineage.telemetry at the mode; returns what must be shut down afterwards."""
    if mode == "off":
        telemetry.configure(enabled=False)
        return None
    if mode == "api":
        telemetry.configure()  # the global providers: none set here, so the API's no-op proxies
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return tracer_provider, meter_provider, exporter


def one_round(mode: str, texts: Sequence[str], recalls: int) -> dict[str, float]:
    providers = configure(mode)
    mm = make_manager()
    scope = Scope(user_id="bench-user", session_id="s1")
    try:
        t0 = time.perf_counter()
        for text in texts:
            mm.remember(text, scope=scope)
        t1 = time.perf_counter()
        for i in range(recalls):
            mm.recall(f"Which museum in {CITIES[i % len(CITIES)]}?", scope=scope, k=5)
        t2 = time.perf_counter()
    finally:
        mm.close()
    spans = 0
    if providers is not None:
        tracer_provider, meter_provider, exporter = providers
        spans = len(exporter.get_finished_spans())
        tracer_provider.shutdown()
        meter_provider.shutdown()
    return {"remember_per_s": len(texts) / (t1 - t0), "recall_per_s": recalls / (t2 - t1), "spans": spans}


def span_cost(mode: str, n: int) -> dict[str, float]:
    """Microseconds per span and per counter increment in ``mode``."""
    providers = configure(mode)
    try:
        t0 = time.perf_counter()
        for i in range(n):
            with telemetry.span("memlineage.bench", items=i) as sp:
                sp.set(done=True)
        t1 = time.perf_counter()
        for _ in range(n):
            telemetry.count("memlineage.writes")
        t2 = time.perf_counter()
    finally:
        if providers is not None:
            providers[0].shutdown()
            providers[1].shutdown()
    return {"span_us": (t1 - t0) / n * 1e6, "count_us": (t2 - t1) / n * 1e6}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=150)
    parser.add_argument("--recalls", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spans", type=int, default=50_000)
    args = parser.parse_args(argv)
    texts = statements(args.writes)
    modes = ("off", "api", "sdk")
    best: dict[str, dict[str, float]] = {}
    saved = telemetry._state
    try:
        one_round("off", texts[:20], 5)  # warm-up: imports, caches
        for _ in range(args.rounds):
            for mode in modes:
                r = one_round(mode, texts, args.recalls)
                b = best.setdefault(mode, r)
                for key in ("remember_per_s", "recall_per_s"):
                    b[key] = max(b[key], r[key])
                b["spans"] = r["spans"]
                c = span_cost(mode, args.spans)
                for key in ("span_us", "count_us"):
                    b[key] = min(b.get(key, c[key]), c[key])
    finally:
        telemetry._state = saved
    base = best["off"]
    print(
        f"{'mode':<5} {'remember/s':>11} {'ratio':>6} {'recall/s':>10} {'ratio':>6} {'spans':>7} {'us/span':>8} "
        f"{'us/count':>8}"
    )
    for mode in modes:
        r = best[mode]
        r["remember_ratio"] = r["remember_per_s"] / base["remember_per_s"]
        r["recall_ratio"] = r["recall_per_s"] / base["recall_per_s"]
        print(
            f"{mode:<5} {r['remember_per_s']:>11.1f} {r['remember_ratio']:>6.3f} {r['recall_per_s']:>10.1f} "
            f"{r['recall_ratio']:>6.3f} {int(r['spans']):>7} {r['span_us']:>8.2f} {r['count_us']:>8.2f}"
        )
    out = HERE / "results" / "bench_telemetry.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"writes": args.writes, "recalls": args.recalls, "modes": best}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
