"""Policy-engine overhead: recall over 10k memories with 10 active policies vs with none.

Run: ``.venv/bin/python benchmarks/bench_policy.py [--n 10000] [--queries 200] [--k 5]``.

Setup: one user's store (in-memory SQLite ledger, ``InMemoryIndex``, ``FakeEmbedder``: offline and
deterministic) with a realistic mix of sources (user, tool, reasoning with varying confidence), tool prices
that
go stale, suspect memories (their premise was retracted) and low-trust derived memories. The same store is
read
with ``policy=None`` and with a :class:`PolicyEngine` holding 10 policies (7 built-in read/write policies,
2 freshness policies, 1 custom CEL policy); the two configurations alternate query by query so drift hits
both.
Half the queries ask for ``purpose="decision"``. The policy run includes everything enforcement costs: the
batch evaluation before the top-k cut, decision events written to the ledger, and hit annotation.

Also reported: the engine alone (``filter_read`` over 100 candidates), in µs per candidate.

Target: recall overhead <= 10 % (ratio <= 1.10). Prints the ratios; exits 0 either way (a benchmark, not a
test).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from memlineage import Scope
from memlineage.policy import Policy, PolicyEngine, PolicyRequest, PolicyTarget, builtin_policies
from memlineage.testing import make_manager

TOPICS = [
    "flight", "hotel", "restaurant", "museum", "train", "weather", "budget", "visa", "beach", "concert",
    "coffee", "meeting", "gift", "doctor", "gym", "book", "movie", "garden", "car", "insurance",
]  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def build_engine(clock: Clock) -> PolicyEngine:
    policies = builtin_policies(
        freshness_by_tag={"flight_price": timedelta(hours=1), "hotel_price": timedelta(hours=6)}
    )
    policies.append(
        Policy(
            id="no_hr_notes_for_agents",
            description="HR notes are never served to agents",
            target=PolicyTarget(tags=("hr",)),
            condition="request.agent_id != null",
            effect="deny",
            layer="domain",
        )
    )
    engine = PolicyEngine(policies, clock=clock)
    assert len(engine) == 10, len(engine)
    return engine


def build_store(n: int, clock: Clock, seed: int = 3) -> tuple[Any, Scope]:
    rng = random.Random(seed)
    mm = make_manager(clock=clock)
    scope = Scope(user_id="u1", session_id="s1")
    items: list[dict[str, Any]] = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        r = rng.random()
        if r < 0.5:
            item = {"content": f"user note {i}: I like the {topic} option number {i % 53}", "source": "user"}
        elif r < 0.75:
            tag = "flight_price" if topic == "flight" else "hotel_price" if topic == "hotel" else topic
            item = {"content": f"tool result {i}: {topic} costs {100 + i % 400} EUR", "source": "tool:search",
                    "tags": [tag]}  # fmt: skip
        else:
            conf = round(rng.uniform(0.5, 1.0), 2)
            text = f"reasoning {i}: maybe the user wants the {topic} plan {i % 31}"
            item = {"content": text, "source": "reasoning",
                    "confidence": conf}  # fmt: skip
        if rng.random() < 0.01:
            item.setdefault("tags", []).append("hr")
        item["scope"] = scope
        items.append(item)
    for start in range(0, n, 1000):
        mm.remember_many(items[start : start + 1000])
    # premises retracted later: 2 % of the store becomes suspect
    premises = [mm.remember(f"premise {j}: the trip is to city {j}", scope=scope, source="user") for j in range(20)]
    for j in range(n // 50):
        p = premises[j % len(premises)]
        mm.remember(f"derived {j}: {TOPICS[j % len(TOPICS)]} plan for city {j % 20}", scope=scope,
                    source="reasoning", confidence=0.9, derived_from=[p.id])  # fmt: skip
    for p in premises[:10]:
        mm.retract(p.id, scope=scope, reason="corrected")
    clock.now += timedelta(hours=2)  # prices become stale
    return mm, scope


def time_recalls(mm: Any, engine: PolicyEngine, scope: Scope, queries: list[str], k: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"none": [], "policies": []}
    for i, q in enumerate(queries):
        purpose = "decision" if i % 2 else None
        order = ("none", "policies") if i % 2 == 0 else ("policies", "none")
        for name in order:
            mm.policy = None if name == "none" else engine
            t0 = time.perf_counter()
            mm.recall(q, scope=scope, k=k, purpose=purpose, reinforce=False)
            out[name].append(time.perf_counter() - t0)
    return out


def time_engine(mm: Any, engine: PolicyEngine, scope: Scope, reps: int = 200) -> float:
    ids = [row for row in mm.ledger.ids_in_scope(scope)][:100]
    mems = [m for m in mm.ledger.memories(ids) if m is not None]
    request = PolicyRequest(scope=scope, purpose="decision")
    now = mm.clock()
    t0 = time.perf_counter()
    for _ in range(reps):
        engine.filter_read(mems, request, now=now)
    return (time.perf_counter() - t0) / reps / len(mems) * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    args = ap.parse_args(argv)

    clock = Clock()
    t0 = time.perf_counter()
    mm, scope = build_store(args.n, clock)
    build_s = time.perf_counter() - t0
    engine = build_engine(clock)
    rng = random.Random(11)
    queries = [f"{rng.choice(TOPICS)} {rng.choice(TOPICS)} option plan cost" for _ in range(args.queries)]
    time_recalls(mm, engine, scope, queries[:10], args.k)  # warm-up (caches, lexical index)
    times = time_recalls(mm, engine, scope, queries, args.k)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    mean = {k: statistics.fmean(v) * 1000 for k, v in times.items()}
    per_candidate_us = time_engine(mm, engine, scope)
    result = {
        "n": args.n,
        "queries": args.queries,
        "k": args.k,
        "policies": len(engine),
        "build_s": round(build_s, 1),
        "recall_ms_median": {k: round(v, 3) for k, v in med.items()},
        "recall_ms_mean": {k: round(v, 3) for k, v in mean.items()},
        "ratio_median": round(med["policies"] / med["none"], 3),
        "ratio_mean": round(mean["policies"] / mean["none"], 3),
        "engine_us_per_candidate": round(per_candidate_us, 2),
    }
    mm.close()
    if args.json:
        print(json.dumps(result))
    else:
        print(f"store: {args.n} memories (+{args.n // 50 + 20} lineage), built in {build_s:.1f} s")
        print(f"recall k={args.k}, {args.queries} queries, {len(engine)} policies vs none")
        print(
            f"  median  none {med['none']:.3f} ms   policies {med['policies']:.3f} ms   ratio {result['ratio_median']}"
        )
        print(
            f"  mean    none {mean['none']:.3f} ms   policies {mean['policies']:.3f} ms   ratio {result['ratio_mean']}"
        )
        print(f"  engine alone: {per_candidate_us:.2f} µs per candidate (filter_read, 100 candidates, 10 policies)")
        verdict = "OK" if result["ratio_median"] <= 1.10 else "ABOVE TARGET"
        print(f"target ratio <= 1.10: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
