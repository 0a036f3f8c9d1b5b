"""LongMemEval knowledge-update: after a value changed in real multi-session chats, which value is served first?

Data: ``../shared/data/longmemeval`` (Wu et al., ICLR 2025, MIT), the ``knowledge-update`` questions of the oracle
file (evidence sessions only) and of the 60-question LongMemEval_S subset (full haystacks, ~490 turns each).

Split: the knowledge-update question ids sorted; the **first half is the development set** (the default, and the
only one this project tunes on or prints); the second half is kept for acceptance and runs only with
``--split heldout``.

Per question, one user: every turn (user and assistant) is written in session-date order, each at its session's
date; then the question is asked at its date. Turns marked ``has_answer`` are the evidence. For a question that
asks for the latest value, the evidence turns of the latest evidence session hold the **current** value and those of
earlier sessions the **stale** one. Questions about the earlier value ("initially", "before", "when I just
started"...) are scored the other way round (the earliest evidence must be found); abstention questions (``_abs``)
and questions asking both values are left out.

Metrics per system: ``cur@k`` = questions whose top k holds a current-value turn (k = 1, 3, 5); ``stale>cur`` =
questions where a stale-value turn ranks above every current-value turn in the top 10 (lower is better);
``past@5`` = questions about the earlier value whose top 5 holds it; ``decisions`` = automatic update decisions
made (MemLineage rows), and how many of them superseded a stale evidence turn by a current one.

Systems (same MiniLM vectors, one process): see ``_update_harness.py``.

Run: ``.venv/bin/python benchmarks/bench_longmemeval.py [--file oracle|s|both] [--systems ...]``; writes
``benchmarks/results/bench_longmemeval.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _update_harness import History, Message, System, make_systems, rank_of  # noqa: E402
from bench_stale import load_embedder  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "longmemeval"
FILES = {"oracle": "longmemeval_oracle.json.gz", "s": "longmemeval_s_subset60.json.gz"}
RESULTS = Path(__file__).resolve().parent / "results" / "bench_longmemeval.json"
SYSTEMS = ("chroma", "chroma+recency", "ml-core", "ml-langchain")
_PAST = re.compile(
    r"\b(?:initially|originally|at first|previously|used to|before (?:i|my|the)|when i (?:just )?start(?:ed)?|"
    r"in the beginning|at the start)\b",
    re.IGNORECASE,
)
_NOW = re.compile(r"\b(?:now|currently|at the moment|these days|latest)\b", re.IGNORECASE)


def _date(text: str) -> datetime:
    return datetime.strptime(text.split(" (")[0] + " " + text.split(") ")[-1], "%Y/%m/%d %H:%M").replace(
        tzinfo=timezone.utc
    )


def split_ids(questions: Sequence[dict[str, Any]], split: str) -> set[str]:
    """The knowledge-update question ids of one half (``dev`` = first half of the sorted ids)."""
    ids = sorted(q["question_id"] for q in questions if q["question_type"] == "knowledge-update")
    half = len(ids) // 2
    return set(ids[:half] if split == "dev" else ids[half:])


def load(file: str, split: str) -> list[dict[str, Any]]:
    """Knowledge-update questions of ``file`` in ``split`` (ids split on the oracle file, which holds them all)."""
    oracle = json.loads(gzip.open(DATA / FILES["oracle"]).read())
    wanted = split_ids(oracle, split)
    data = oracle if file == "oracle" else json.loads(gzip.open(DATA / FILES[file]).read())
    return sorted((q for q in data if q["question_id"] in wanted), key=lambda q: q["question_id"])


def build(q: dict[str, Any]) -> tuple[History, dict[str, Any]] | None:
    """The question's history and its scoring target, or None when it is left out."""
    qid = q["question_id"]
    if qid.endswith("_abs"):
        return None
    past = bool(_PAST.search(q["question"]))
    if past and _NOW.search(q["question"]):
        return None  # asks both values
    h = History(user=f"lme-{qid}")
    order = sorted(range(len(q["haystack_sessions"])), key=lambda i: _date(q["haystack_dates"][i]))
    evidence: list[list[str]] = []  # per session in date order, the evidence labels
    for n, i in enumerate(order):
        start = _date(q["haystack_dates"][i])
        found = []
        for j, turn in enumerate(q["haystack_sessions"][i]):
            if not turn.get("content", "").strip():
                continue
            label = f"s{n}:t{j}"
            h.messages.append(
                Message(label, turn["role"], turn["content"], start + timedelta(seconds=30 * j), f"{qid}-s{n}")
            )
            if turn.get("has_answer"):
                found.append(label)
        if found:
            evidence.append(found)
    if len(evidence) < 2:
        return None  # no earlier value in the history
    asked = max(_date(q["question_date"]), h.messages[-1].at + timedelta(minutes=1))
    if past:
        target = {"kind": "past", "expect": set(evidence[0]), "stale": set()}
    else:
        target = {"kind": "latest", "expect": set(evidence[-1]), "stale": {x for e in evidence[:-1] for x in e}}
    target.update(question=q["question"], asked=asked, qid=qid)
    return h, target


def score(system: System, items: Sequence[tuple[History, dict[str, Any]]]) -> dict[str, Any]:
    """Ask every question and score it (see the module docstring)."""
    latest = [x for x in items if x[1]["kind"] == "latest"]
    past = [x for x in items if x[1]["kind"] == "past"]
    out: dict[str, Any] = {"latest": len(latest), "past": len(past), "cur@1": 0, "cur@3": 0, "cur@5": 0}
    out["stale>cur"] = 0
    out["past@5"] = 0
    dec = {"made": 0, "right": 0}
    per_q = []
    for h, t in items:
        labels = system.ask(h, t["question"], t["asked"], 10)
        rc = rank_of(labels, t["expect"])
        if t["kind"] == "latest":
            rs = rank_of(labels, t["stale"])
            for k in (1, 3, 5):
                out[f"cur@{k}"] += rc <= k
            out["stale>cur"] += rs < rc
        else:
            out["past@5"] += rc <= 5
        made = [d for d in system.decisions(h) if d["outcome"] == "applied"]
        dec["made"] += len(made)
        dec["right"] += sum(
            1 for d in made if d["action"] == "update" and d["target"] in t["stale"] and d["statement"] in t["expect"]
        )
        per_q.append({"qid": t["qid"], "kind": t["kind"], "current_rank": rc, "decisions": len(made)})
    out["decisions"] = dec
    out["per_question"] = [{**p, "current_rank": None if math.isinf(p["current_rank"]) else p["current_rank"]}
                           for p in per_q]  # fmt: skip
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", choices=("oracle", "s", "both"), default="both")
    ap.add_argument("--split", choices=("dev", "heldout"), default="dev")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--fake-embedder", action="store_true")
    args = ap.parse_args(argv)
    if not (DATA / FILES["oracle"]).exists():
        print(f"SKIP: LongMemEval data not found at {DATA}")
        return 0
    embedder, label = load_embedder(args.fake_embedder)
    files = ("oracle", "s") if args.file == "both" else (args.file,)
    report: dict[str, Any] = {"embedder": label, "split": args.split, "files": {}}
    for f in files:
        items = [x for x in (build(q) for q in load(f, args.split)) if x is not None]
        rows = {}
        for system in make_systems(args.systems.split(","), embedder):
            t0 = time.perf_counter()
            system.write([h for h, _ in items])
            rows[system.name] = score(system, items)
            rows[system.name]["seconds"] = round(time.perf_counter() - t0, 1)
            system.close()
        report["files"][f] = rows
        n_latest = len([x for x in items if x[1]["kind"] == "latest"])
        n_past = len(items) - n_latest
        print(f"\nLongMemEval {f} knowledge-update ({args.split}): {n_latest} latest-value, {n_past} earlier-value")
        print(f"{'system':<16}{'cur@1':>7}{'cur@3':>7}{'cur@5':>7}{'stale>cur':>11}{'past@5':>8}{'decisions':>16}")
        for name, r in rows.items():
            d = r["decisions"]
            dtext = f"{d['right']}/{d['made']} right" if name.startswith("ml") else "-"
            print(
                f"{name:<16}{r['cur@1']:>7}{r['cur@3']:>7}{r['cur@5']:>7}{r['stale>cur']:>11}{r['past@5']:>8}"
                f"{dtext:>16}"
            )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
