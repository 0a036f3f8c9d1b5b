"""Lineage precision: after a correction, is exactly what depended on the corrected memory marked suspect?

Scripted multi-turn agent runs in three domains (travel, shopping, support; three users each) are played through
every capture surface (``benchmarks/_lineage_surfaces.py``: LangChain callback, middleware and classic memory;
LlamaIndex ``capture_run`` and memory block) with real framework agents and scripted models. Every turn's tool
calls take their arguments from facts the user stated earlier, so the true dependencies are known: a tool result
depends on the facts (and earlier results) that supplied its arguments, an answer on its turn's results, an
acknowledgement on nothing. Then each correction (a user fact, or a tool result) is evaluated with
``impact()`` (the dry run of the cascade ``supersede`` / ``retract`` run):

- recall = truly dependent memories marked suspect / truly dependent memories,
- precision = marked memories that truly depended / marked memories,

micro-averaged over all corrections per surface (a correction nothing depends on contributes only to precision).
Goal: recall 100 %, precision >= 0.9 on every surface.

``--baseline REF`` (default ``c75ae41``, the main branch before run capture was unified) plays the same
scenarios with the package source of that git commit (exported with ``git archive`` to a temporary directory and
put first on ``PYTHONPATH``), so today's figures are printed beside the earlier behaviour; ``--baseline none``
skips it.

Run: ``.venv/bin/python benchmarks/bench_lineage.py [--surfaces a,b] [--baseline REF]``. Writes
``benchmarks/results/bench_lineage.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _lineage_surfaces import SURFACES, Call, Turn, find_one  # noqa: E402

RESULTS = HERE / "results"
DEFAULT_BASELINE = "c75ae41"
ACKS = ("Noted. I'll remember that.", "Okay, got it!", "Thanks, noted.", "Got it.")


@dataclass(frozen=True)
class Scenario:
    """One user's conversation and its ground truth.

    Attributes:
        name: Scenario id (also the user id).
        turns: The scripted turns.
        deps: ``{memory key: keys it directly depends on}``; a key is a substring of exactly one memory.
        corrections: Keys of the memories corrected (each evaluated on its own).
    """

    name: str
    turns: tuple[Turn, ...]
    deps: dict[str, tuple[str, ...]]
    corrections: tuple[str, ...]

    def truth(self, key: str) -> set[str]:
        """Keys that depend on ``key``, directly or not."""
        out: set[str] = set()
        frontier = [key]
        while frontier:
            cur = frontier.pop()
            for k, ds in self.deps.items():
                if cur in ds and k not in out:
                    out.add(k)
                    frontier.append(k)
        return out

    def keys(self) -> set[str]:
        return set(self.deps) | {d for ds in self.deps.values() for d in ds}


def _facts(*pairs: str) -> list[Turn]:
    return [Turn(user=u, answer=ACKS[i % len(ACKS)]) for i, u in enumerate(pairs)]


def travel(n: int, city: str, date: str, seat: str, budget: str, code: str, hotel: str) -> Scenario:
    f_city, f_seat = f"I'm flying to {city} on {date}.", f"I prefer {seat} seats."
    f_budget = f"My hotel budget is {budget} EUR a night."
    noise = "I'm vegetarian, by the way."
    flight = f"{code} to {city} on {date}, 120 EUR"
    rooms = f"Hotel {hotel} in {city}, {int(budget) - 10} EUR a night"
    seatmap = f"Seat 14C on {code} is an {seat} seat" if seat[0] in "aeiou" else f"Seat 14A on {code} is a {seat} seat"
    a1, a2, a3 = f"{code} costs 120 EUR.", f"Hotel {hotel} fits your budget.", "I picked that seat for you."
    a4, a5 = f"Your budget is {budget} EUR per night.", "The flight was 120 EUR."
    turns = (
        *_facts(f_city, f_seat, f_budget, noise),
        Turn("Find me a flight.", a1, (Call(f"t{n}-1", "search_flights", {"city": city, "date": date}, flight),)),
        Turn("Find me a hotel within budget.", a2,
             (Call(f"t{n}-2", "search_hotels", {"city": city, "max_price": budget}, rooms),)),
        Turn("Pick a seat on that flight.", a3,
             (Call(f"t{n}-3", "seat_map", {"flight": code, "preference": seat}, seatmap),)),
        Turn("Remind me of my hotel budget.", a4),  # answered from memory: no tool
        Turn("How much was the flight?", a5),
    )  # fmt: skip
    deps = {flight: (f_city,), a1: (flight,), rooms: (f_city, f_budget), a2: (rooms,), seatmap: (f_seat, flight),
            a3: (seatmap,), a4: (f_budget,), a5: (flight,), noise: ()}  # fmt: skip
    return Scenario(f"travel-{n}", turns, deps, (f_city, f_seat, f_budget, noise, flight))


def shopping(n: int, size: str, color: str, address: str, product: str, order: str) -> Scenario:
    f_size, f_color, f_addr = f"My shoe size is {size}.", f"I like {color} sneakers.", f"Ship everything to {address}."
    noise = "I have a dog named Rex."
    found = f"{product} in {color}, size {size}, 89 EUR"
    placed = f"Order {order} for {product} to {address}"
    tracked = f"Order {order} arrives on Friday"
    a1, a2, a3 = f"The {product} costs 89 EUR.", f"Order {order} is placed.", "It arrives on Friday."
    a4 = f"I ship to {address}."
    turns = (
        *_facts(f_size, f_color, f_addr, noise),
        Turn("Find sneakers for me.", a1,
             (Call(f"s{n}-1", "search_products", {"kind": "sneakers", "size": size, "color": color}, found),)),
        Turn("Order them.", a2, (Call(f"s{n}-2", "place_order", {"product": product, "address": address}, placed),)),
        Turn("When will it arrive?", a3, (Call(f"s{n}-3", "track_order", {"order_id": order}, tracked),)),
        Turn("Which address do you have for me?", a4),
    )  # fmt: skip
    deps = {found: (f_size, f_color), a1: (found,), placed: (found, f_addr), a2: (placed,), tracked: (placed,),
            a3: (tracked,), a4: (f_addr,), noise: ()}  # fmt: skip
    return Scenario(f"shopping-{n}", turns, deps, (f_size, f_color, f_addr, noise, found))


def support(n: int, device: str, os_name: str, plan: str, article: str, ticket: str) -> Scenario:
    f_dev, f_os, f_plan = f"My laptop is a {device}.", f"It runs {os_name}.", f"I have the {plan} support plan."
    noise = "I work from home on Mondays."
    kb = f"{article}: update the {device} wifi driver for {os_name}"
    opened = f"Ticket {ticket} opened with {plan} priority"
    a1, a2, a3 = f"Try {article} first.", f"Ticket {ticket} is open.", f"You are on the {plan} plan."
    turns = (
        *_facts(f_dev, f_os, f_plan, noise),
        Turn("My wifi keeps dropping.", a1,
             (Call(f"k{n}-1", "kb_search", {"device": device, "os": os_name, "symptom": "wifi drops"}, kb),)),
        Turn("Open a ticket.", a2, (Call(f"k{n}-2", "open_ticket", {"plan": plan, "article": article}, opened),)),
        Turn("Which support plan am I on?", a3),
    )  # fmt: skip
    deps = {kb: (f_dev, f_os), a1: (kb,), opened: (f_plan, kb), a2: (opened,), a3: (f_plan,), noise: ()}
    return Scenario(f"support-{n}", turns, deps, (f_dev, f_os, f_plan, noise, kb))


def scenarios() -> list[Scenario]:
    """Nine users, 45 corrections."""
    return [
        travel(1, "Paris", "3 May", "aisle", "150", "AF1234", "Lumière"),
        travel(2, "Lisbon", "12 June", "window", "120", "TP202", "Alfama"),
        travel(3, "Oslo", "1 March", "aisle", "180", "SK4711", "Fjord"),
        shopping(1, "42", "green", "12 Rue Cler, Paris", "Runner X", "ORD-981"),
        shopping(2, "38", "white", "4 Oak Lane, Leeds", "Court Classic", "ORD-124"),
        shopping(3, "45", "black", "9 Via Roma, Turin", "Trail Pro", "ORD-555"),
        support(1, "ThinkPad X1", "Windows 11", "premium", "KB-204", "T-7781"),
        support(2, "MacBook Air", "macOS 14", "basic", "KB-318", "T-1203"),
        support(3, "Dell XPS 13", "Ubuntu 24.04", "business", "KB-077", "T-5540"),
    ]


# ====================================================================================== measuring
def measure(surface: str, scens: Sequence[Scenario]) -> dict[str, Any]:
    """Play every scenario through one surface; score every correction with ``impact()``."""
    from memlineage import Scope
    from memlineage.testing import make_manager

    drive = SURFACES[surface]
    tp = marked = true = full = 0
    rows = []
    t0 = time.perf_counter()
    for sc in scens:
        mm = make_manager()
        try:
            scope = Scope(user_id=sc.name, session_id="s1")
            drive(mm, scope, sc.turns, 20)
            ids = {key: find_one(mm, scope, key).id for key in sc.keys()}
            names = {v: k for k, v in ids.items()}
            for key in sc.corrections:
                suspect = set(mm.impact(ids[key], scope=scope).suspect)
                truth = {ids[k] for k in sc.truth(key)}
                hit = len(suspect & truth)
                tp, marked, true = tp + hit, marked + len(suspect), true + len(truth)
                full += hit == len(truth)
                rows.append(
                    {
                        "scenario": sc.name, "corrected": key, "true": len(truth), "marked": len(suspect),
                        "hit": hit, "false": sorted(names.get(i, i) for i in suspect - truth),
                    }
                )  # fmt: skip
        finally:
            mm.close()
    return {
        "corrections": len(rows),
        "recall": tp / true if true else 1.0,
        "precision": tp / marked if marked else 1.0,
        "full_recall_corrections": full,
        "marked": marked,
        "truly_dependent": true,
        "seconds": round(time.perf_counter() - t0, 2),
        "rows": rows,
    }


def run_all(surfaces: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scens = scenarios()
    for surface in surfaces:
        try:
            out[surface] = measure(surface, scens)
        except Exception as exc:  # an older version may not support a surface: report it, go on
            out[surface] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return out


def baseline(ref: str, surfaces: Sequence[str]) -> dict[str, Any]:
    """The same measurement with the package source of git commit ``ref`` (in a subprocess)."""
    repo = HERE.parent
    with tempfile.TemporaryDirectory(prefix="memlineage-baseline-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", ref, "core", "memlineage_langchain", "memlineage_llamaindex"],
            capture_output=True, check=False,
        )  # fmt: skip
        if archive.returncode != 0:
            return {"error": f"git archive {ref} failed: {archive.stderr.decode(errors='replace')[:200]}"}
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([f"{tmp}/core", tmp]))
        cmd = [sys.executable, str(Path(__file__)), "--surfaces", ",".join(surfaces), "--inner"]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=tmp)
        line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), "")
        if proc.returncode != 0 or not line:
            return {"error": f"baseline run failed (rc {proc.returncode}): {proc.stderr[-300:]}"}
        return json.loads(line)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--surfaces", default=",".join(SURFACES), help="comma-separated surfaces")
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git ref of the earlier behaviour, or 'none'")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)  # baseline subprocess: JSON only
    args = ap.parse_args(argv)
    surfaces = [s for s in args.surfaces.split(",") if s]
    if args.inner:
        print(json.dumps(run_all(surfaces)))
        return 0
    current = run_all(surfaces)
    before = baseline(args.baseline, surfaces) if args.baseline != "none" else {}
    n = sum(len(s.corrections) for s in scenarios())
    print(f"lineage precision: {len(scenarios())} scripted users, {n} corrections per surface")
    print(f"{'surface':<22} {'recall':>8} {'precision':>10}   {'baseline ' + args.baseline:>24}")
    ok = True
    for s in surfaces:
        cur, old = current.get(s, {}), before.get(s, {}) if isinstance(before, dict) else {}
        if "error" in cur:
            print(f"{s:<22} error: {cur['error']}")
            ok = False
            continue
        was = f"{old['recall']:.0%} / {old['precision']:.2f}" if "recall" in old else old.get("error", "-")[:24]
        print(f"{s:<22} {cur['recall']:>8.0%} {cur['precision']:>10.2f}   {was:>24}")
        ok &= cur["recall"] == 1.0 and cur["precision"] >= 0.9
    print(f"goal (recall 100 %, precision >= 0.9 on every surface): {'met' if ok else 'NOT met'}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {"corrections": n, "surfaces": current, "baseline": {"ref": args.baseline, "surfaces": before}}
    (RESULTS / "bench_lineage.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
