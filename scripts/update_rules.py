"""Which read-time rule demotes what (issue 24): per conflict reason, stale turns demoted versus still-true ones.

Deals the update suites of ``benchmarks/bench_updates.py`` of one language (every suite, or one split) into one
store with ``MemoryManager.open`` defaults, asks every question at k = 3 without reinforcement and reads the
conflicts of each recall's trace. Printed per reason (the text before a value): how often the demoted memory was a
stale turn of an update, the current turn of one, or the still-true turn of a non-update or a past question, split
by whether the scenario was served right; then the totals per kind. A development tool: the fresh suites of a
session are left out with ``--skip`` until their first run has been reported.

Run from the repository root: ``.venv/bin/python scripts/update_rules.py --lang en [--suites all] [--skip test46]
[--json out.json]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_updates as bench  # noqa: E402
from _update_harness import MemLineageCore, rank_of  # noqa: E402
from memlineage import Scope  # noqa: E402


def accounting(suites: str, lang: str, skip: set[str]) -> list[dict[str, Any]]:
    """One row per scenario: its kind, whether it was served right, and the conflicts with the demoted turn's role."""
    scenarios = [s for s in bench.load_suites(suites, lang) if s["suite"] not in skip]
    embedder, _ = bench.load_embedder(False)
    histories, asks = bench.deal(scenarios)
    system = MemLineageCore(embedder)
    system.write(histories)
    rows = []
    try:
        for a in asks:
            sc, h = a["scenario"], a["history"]
            system.clock.now = a["asked"]
            res = system.mm.recall(sc["question"], scope=Scope(user_id=h.user, session_id="ask"), k=3, reinforce=False)
            labels = [h.label_of(x.memory.content) for x in res]
            stale, current = bench._labels(sc, "stale"), bench._labels(sc, "current")
            keep = bench._labels(sc, "keep") or current
            ok = rank_of(labels, stale) > 3 if sc["kind"] == "update" else rank_of(labels, keep) <= 3
            conflicts = []
            for c in res.trace.conflicts:
                older = system.mm.get(c.older, scope=Scope(user_id=h.user))
                label = h.label_of(older.content) if older else None
                role = (
                    "stale" if label in stale
                    else "current" if sc["kind"] == "update" and label in current
                    else "kept" if sc["kind"] != "update" and label in keep
                    else "other"
                )  # fmt: skip
                conflicts.append({"reason": re.split(r":| with ", c.reason)[0], "role": role})
            rows.append({"id": sc["id"], "kind": sc["kind"], "ok": ok, "conflicts": conflicts})
    finally:
        system.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the accounting per reason and the totals (see the module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lang", choices=("en", "zh"), required=True)
    ap.add_argument("--suites", default="all")
    ap.add_argument("--skip", action="append", default=[], help="a suite to leave out (repeatable)")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    rows = accounting(args.suites, args.lang, set(args.skip))
    counts: collections.Counter[tuple[str, str, str, bool]] = collections.Counter()
    for r in rows:
        for key in {(c["reason"], c["role"], r["kind"], r["ok"]) for c in r["conflicts"] if c["role"] != "other"}:
            counts[key] += 1
    for reason in sorted({k[0] for k in counts}):
        print(reason)
        for (_, role, kind, ok), n in sorted((k, n) for k, n in counts.items() if k[0] == reason):
            print(f"    demoted {role:<8} of {kind:<11} {'served right' if ok else 'served wrong':<13} {n:>5}")
    totals = collections.Counter(r["kind"] for r in rows)
    right = collections.Counter(r["kind"] for r in rows if r["ok"])
    print("served right: " + ", ".join(f"{k} {right[k]}/{totals[k]}" for k in sorted(totals)))
    print(f"stale served in the top 3: {totals['update'] - right['update']}/{totals['update']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
