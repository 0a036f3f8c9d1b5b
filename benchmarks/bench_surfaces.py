"""Memory never breaks the agent: 1,000 generated turns through every surface, with lineage precision and recall.

One seeded conversation (``_conversations.generate``: statements, tool requests, a failing tool, a ~12k-token tool
result, parallel calls, word-for-word repeats, corrections, questions about the past) is played through each
surface of ``_conversation_surfaces.SURFACES`` (classic ``AgentExecutor`` + ``LineageMemory`` + capture callback,
``create_agent`` + ``LineageMiddleware``, ``LineageChatMessageHistory``, memory tools under ``create_agent``,
LlamaIndex ``FunctionAgent`` + ``lineage_memory`` + ``capture_run``, ``ChatMemoryBuffer`` over ``LineageChatStore``)
with scripted models, offline, each on a fresh store with ``open()``'s defaults and the fake embedder. Per surface:

- exceptions that reached the caller of the agent (goal 0) and memory failures the adapters swallowed;
- corrections applied (the corrected statement superseded or withdrawn);
- lineage precision = marked ∩ expected / marked and recall = marked ∩ expected / expected, micro-averaged over the
  corrections, where *marked* are the memories that left ``active`` during the correction turn (other than the
  corrected statements, and other than what rests on a value replaced earlier: catching that late is neither a hit
  nor a false mark) and *expected* are the live dependents of the corrected statement in the oracle; also over the
  applied corrections only (the lineage itself, apart from update detection);
- failed tool calls stored as memories (goal 0), and how often the scripted model could not see a value it needed.

A second, shorter pass (``--fault-turns``, 200 by default) plays the same conversation on a store that fails every
4th write and 5th recall: the adapters must record those failures and let every turn go on (no exception into the
agent).

Run: ``.venv/bin/python benchmarks/bench_surfaces.py [--turns 1000] [--seed 1] [--surfaces a,b] [--store memory|open]
[--fault-turns 200] [--jobs N] [--details]``. Writes ``benchmarks/results/bench_surfaces.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from _conversation_surfaces import SURFACES, new_manager, play  # noqa: E402
from _conversations import generate, summary  # noqa: E402

RESULTS = HERE / "results"
#: ``ChatMemoryBuffer`` re-tokenizes the rest of the history for every message it drops (quadratic in LlamaIndex,
#: not in MemLineage): over 1,000 turns with 12k-token tool results that alone takes hours, so here its budget
#: drops nothing and tokens are counted as 4 characters each (the unit test keeps LlamaIndex's defaults).
OPTIONS: dict[str, dict[str, Any]] = {"llamaindex-chat-store": {"token_limit": 10_000_000, "fast_tokenizer": True}}


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(HERE.parent), "describe", "--always", "--dirty"], capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def measure(surface: str, turns: int, seed: int, store: str, faults: bool = False) -> dict[str, Any]:
    """Play the generated conversation through one surface; its figures (or the error that stopped the harness)."""
    script = generate(seed, turns)
    with tempfile.TemporaryDirectory(prefix="memlineage-surfaces-") as tmp:
        mm = new_manager(store, tmp)
        try:
            return play(surface, script, mm, faults=faults, **OPTIONS.get(surface, {})).as_dict()
        except Exception as exc:  # the harness itself failed: report it, go on with the next surface
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}
        finally:
            mm.close()


def _measure(task: tuple[str, int, int, str, bool]) -> dict[str, Any]:
    return measure(*task)


def _faulty(res: dict[str, Any]) -> dict[str, Any]:
    """The fields of a store-failing pass worth keeping."""
    if "error" in res:
        return res
    return {
        "turns": res["turns"],
        "injected": {k: v for k, v in res["injected_store_failures"].items() if k.startswith("failed")},
        "exceptions_into_agent": res["exceptions_into_agent"],
        "exceptions": [{k: e[k] for k in ("turn", "kind", "error")} for e in res["exceptions"][:5]],
        "swallowed": sum(res["adapter_errors"].values()),
        "adapter_errors": res["adapter_errors"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the frameworks' own, many per turn
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=1000, help="generated user turns per surface")
    ap.add_argument("--seed", type=int, default=1, help="seed of the generated conversation")
    ap.add_argument("--surfaces", default=",".join(SURFACES), help="comma-separated surfaces")
    ap.add_argument("--store", choices=("memory", "open"), default="memory",
                    help="in-memory store with open()'s defaults, or MemoryManager.open(tmpdir)")  # fmt: skip
    ap.add_argument("--details", action="store_true", help="print every correction that was not exact")
    ap.add_argument("--fault-turns", type=int, default=200, help="turns of a second pass on a failing store (0 = skip)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="surfaces played at once (processes)")
    args = ap.parse_args(argv)
    commit = _commit()  # the code measured is the code imported now, not what the tree holds when the run ends
    surfaces = [s for s in args.surfaces.split(",") if s]
    script = generate(args.seed, args.turns)
    info = summary(script)
    print(f"surfaces: seed {args.seed}, {args.turns} turns per surface, store {args.store}; kinds {info['kinds']}")
    print(f"corrections by phrasing: {info['corrections']}")
    head = (
        f"{'surface':<24} {'exc':>4} {'swallowed':>9} {'applied':>9} {'precision':>9} {'recall':>7} "
        f"{'P applied':>9} {'R applied':>9} {'failed kept':>11} {'unseen':>6} {'s':>6}"
    )
    print(head)
    tasks = [(s, args.turns, args.seed, args.store, False) for s in surfaces]
    if args.fault_turns > 0:
        tasks += [(s, args.fault_turns, args.seed, args.store, True) for s in surfaces]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = dict(zip(tasks, pool.map(_measure, tasks)))
    out: dict[str, Any] = {}
    for surface in surfaces:
        res = out[surface] = done[(surface, args.turns, args.seed, args.store, False)]
        if args.fault_turns > 0:
            res["store_failing"] = _faulty(done[(surface, args.fault_turns, args.seed, args.store, True)])
        if "error" in res:
            print(f"{surface:<24} harness error: {res['error']}")
            continue
        unseen = sum(res["branches"].get(b, 0) for b in ("clarify", "unknown"))
        applied = f"{res['corrections_applied']}/{res['corrections']}"
        print(
            f"{surface:<24} {res['exceptions_into_agent']:>4} {sum(res['adapter_errors'].values()):>9} "
            f"{applied:>9} {res['precision']:>9.2f} {res['recall']:>7.2f} {res['precision_applied']:>9.2f} "
            f"{res['recall_applied']:>9.2f} {res['failed_calls_stored']:>11} {unseen:>6} {res['seconds']:>6.0f}"
        )
        for e in res["exceptions"][:3]:
            print(f"    exception at turn {e['turn']} ({e['kind']}): {e['error'][:200]}")
        bad = res.get("store_failing")
        if bad:
            print(f"    store failing ({args.fault_turns} turns, {bad.get('injected', {})}): "
                  f"{bad.get('exceptions_into_agent', bad.get('error'))} exceptions into the agent, "
                  f"{bad.get('swallowed', 0)} failures recorded by the adapters")  # fmt: skip
            for e in bad.get("exceptions", [])[:2]:
                print(f"        exception at turn {e['turn']} ({e['kind']}): {e['error'][:160]}")
        if args.details:
            for row in res["rows"]:
                if not (row["hit"] == row["expected"] == row["marked"]):
                    counts = " ".join(f"{k}={row[k]}" for k in ("applied", "expected", "marked", "hit", "late"))
                    print(f"    turn {row['turn']} {row['template']} {counts}")
                    for m in row["missed"][:3]:
                        print(f"        missed: {m}")
                    for f in row["false"][:3]:
                        print(f"        false:  {f}")
                    for f in row.get("stayed", []):
                        print(f"        stayed: {f}")
    print("exc = exceptions into the agent (goal 0); swallowed = memory failures the adapters logged and counted;")
    print("applied = corrected statement superseded; P/R = lineage precision/recall over all corrections and over")
    print("the applied ones; failed kept = failed tool calls stored as memories (goal 0); unseen = turns where the")
    print("model could not see a value it needed (it asked instead)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {"commit": commit, "script": info, "store": args.store, "surfaces": out}
    (RESULTS / "bench_surfaces.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
