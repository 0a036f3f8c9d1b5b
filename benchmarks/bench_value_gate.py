"""The value gate on LoCoMo dev conversations: turns it stores, and what that costs in evidence recall.

Every dialogue turn of a conversation goes through ``MemoryManager.remember`` one by one, in order (content
"[session date] speaker: text", plus the image caption if any, the same document as
benchmarks/bench_locomo.py), in one scope per conversation and one session per LoCoMo session. The
configurations see identical content and vectors (the main ones; more below):

- ``core``     no value model: every turn stored, retrieval without value re-ranking;
- ``default``  ``ValueModel()`` as ``MemoryManager.open()`` has it: every turn with content stored (V decides
  promotion to semantic memory), only content-free small talk buffered, value re-ranking w = 0.1;
- ``no-gate``  value model with store threshold 0: every turn stored and scored, value re-ranking on;
- ``gate``     the seed's gate (``ValueProfile(keep_all=False)``) with its store threshold 0.6: turns below it go
  to the session's short-term buffer (FIFO, 10 items) instead of long-term memory;
- ``gate-s0``  the same with the seed's literal novelty ``1 − cosine`` (``novelty_baseline=0``);
- ``gate@X``   the gate with store threshold X (e.g. ``gate@0.5``; seed §5.4 suggests lowering it when key
  facts are lost).

For every question of categories 1-4 with evidence we recall the top k turns and report evidence recall@k
(share of a question's evidence turns found, averaged) and hit@k (any evidence found), k = 5 and 10; plus how
many turns were stored / buffered and how many evidence turns the gate kept. ``gate`` vs ``no-gate`` isolates
the gate; ``no-gate`` vs ``core`` shows the value re-ranking alone. These are development figures (the 7 dev
conversations).

Run (MiniLM ONNX vectors; ``--embedder fake`` uses memlineage.testing.FakeEmbedder instead)::

    MEMLINEAGE_EMBEDDING_MODEL_DIR=/work/shared/models/all-MiniLM-L6-v2/onnx \\
        .venv/bin/python benchmarks/bench_value_gate.py [--convs 1] [--embedder onnx|fake]

Writes benchmarks/results/value_gate.json and prints a table.

Development figures (7 dev conversations, 4,124 turns, 941 evidence turns, MiniLM, categories 1-4):

    config     stored  ev.kept  recall@10  hit@10
    core         4124  941/941      0.693   0.764
    no-gate      4124  941/941      0.679   0.750
    gate         1392  494/941      0.423   0.489
    gate-s0      1002  347/941      0.300   0.359
    gate@0.55    1932  695/941      0.581   0.651
    gate@0.5     2854  860/941      0.663   0.730

The gate is selective (it keeps 52% of the evidence turns while storing 34% of all turns) but at the seed's
threshold 0.6 it buffers half of what LoCoMo later asks about; at 0.5 it stores 69% of the turns and keeps 91% of
the evidence for 1.6 points of recall@10. LoCoMo asks every question after the whole conversation and counts
small talk as evidence, which is the worst case for a store-or-buffer decision made at write time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_locomo import Question, Turn  # noqa: E402  (one LoCoMo loader for every benchmark)
from bench_locomo import load as load_locomo  # noqa: E402

RESULTS = Path(__file__).parent / "results"
KS = (5, 10)


def load(n_convs: int) -> list[tuple[str, list[Turn], list[Question]]]:
    """The first ``n_convs`` conversations with their category 1-4 questions that have evidence."""
    convs, questions = load_locomo(n_convs)
    return [
        (conv, turns, [q for q in questions if q.conv == conv and q.category in (1, 2, 3, 4)])
        for conv, turns in convs.items()
    ]


class SharedEmbedder:
    """Wraps an embedder with a text → vector cache so that every configuration pays for a text once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self._cache: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self._cache[t] = [float(x) for x in v]
        return [self._cache[t] for t in texts]


def run_config(name: str, conv: str, turns: list[Turn], qs: list[Question], embedder: Any) -> dict[str, Any]:
    from memlineage import MemoryKind, Scope
    from memlineage.testing import make_manager
    from memlineage.value import ValueModel, ValueProfile

    seed_gate = {"keep_all": False}  # the seed's gate: below the threshold → short-term buffer only
    if name.startswith("gate@"):  # e.g. gate@0.5: another store threshold (seed §5.4: lower it if key facts are lost)
        profile = ValueProfile(store_threshold=float(name[5:]), forget_threshold=0.0, **seed_gate)
        value_model = ValueModel(profile=profile)
    else:
        value_model = {
            "core": None,
            "default": ValueModel(),
            "no-gate": ValueModel(profile=ValueProfile(store_threshold=0.0, forget_threshold=0.0)),
            "gate": ValueModel(profile=ValueProfile(**seed_gate)),
            "gate-s0": ValueModel(profile=ValueProfile(novelty_baseline=0.0, **seed_gate)),
        }[name]
    clock = {"now": turns[0].when}
    mm = make_manager(embedder=embedder, value_model=value_model, clock=lambda: clock["now"])
    by_memory: dict[str, str] = {}
    stored, buffered, forced = set(), set(), 0
    t0 = time.perf_counter()
    for turn in turns:
        clock["now"] = turn.when
        mem = mm.remember(turn.doc, scope=Scope(user_id=conv, session_id=f"session_{turn.session}"))
        if mem.kind is MemoryKind.WORKING:
            buffered.add(turn.dia_id)
        else:
            stored.add(turn.dia_id)
            by_memory[mem.id] = turn.dia_id
            forced += bool(mem.assessment and mem.assessment.forced)
    ingest_s = time.perf_counter() - t0
    recall = {k: 0.0 for k in KS}
    hit = {k: 0.0 for k in KS}
    t1 = time.perf_counter()
    for q in qs:
        res = mm.recall(q.text, scope=Scope(user_id=conv), k=max(KS), reinforce=False)
        got = [by_memory.get(h.memory.id) for h in res]
        for k in KS:
            found = set(got[:k]) & set(q.evidence)
            recall[k] += len(found) / len(q.evidence)
            hit[k] += bool(found)
    query_s = time.perf_counter() - t1
    ev = {d for q in qs for d in q.evidence}
    mm.close()
    return {
        "config": name,
        "conv": conv,
        "turns": len(turns),
        "stored": len(stored),
        "buffered": len(buffered),
        "forced": forced,
        "evidence_turns": len(ev),
        "evidence_stored": len(ev & stored),
        "questions": len(qs),
        **{f"recall@{k}": recall[k] / max(1, len(qs)) for k in KS},
        **{f"hit@{k}": hit[k] / max(1, len(qs)) for k in KS},
        "ingest_s": round(ingest_s, 2),
        "query_s": round(query_s, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--convs", type=int, default=1, help="number of dev conversations (1-7, default 1)")
    ap.add_argument("--embedder", choices=("onnx", "fake"), default="onnx")
    ap.add_argument("--configs", default="core,default,no-gate,gate,gate-s0,gate@0.55,gate@0.5")
    args = ap.parse_args(argv)
    if args.embedder == "onnx":
        from memlineage.index import OnnxMiniLMEmbedder

        inner: Any = OnnxMiniLMEmbedder(download=False)
    else:
        from memlineage.testing import FakeEmbedder

        inner = FakeEmbedder()
    embedder = SharedEmbedder(inner)
    rows = []
    for conv, turns, qs in load(args.convs):
        for name in args.configs.split(","):
            rows.append(run_config(name, conv, turns, qs, embedder))
            r = rows[-1]
            print(
                f"{conv} {name:9} stored {r['stored']:4}/{r['turns']:4}  recall@10 {r['recall@10']:.3f}",
                file=sys.stderr,
            )
    # totals per configuration (micro-average over questions)
    table = []
    for name in args.configs.split(","):
        rs = [r for r in rows if r["config"] == name]
        nq = sum(r["questions"] for r in rs)
        tot = {
            "config": name,
            "turns": sum(r["turns"] for r in rs),
            "stored": sum(r["stored"] for r in rs),
            "buffered": sum(r["buffered"] for r in rs),
            "forced": sum(r["forced"] for r in rs),
            "evidence_turns": sum(r["evidence_turns"] for r in rs),
            "evidence_stored": sum(r["evidence_stored"] for r in rs),
            "questions": nq,
        }
        for key in [f"recall@{k}" for k in KS] + [f"hit@{k}" for k in KS]:
            tot[key] = sum(r[key] * r["questions"] for r in rs) / max(1, nq)
        table.append(tot)
    head = f"{'config':9} {'turns':>6} {'stored':>7} {'buffered':>9} {'ev.kept':>8} " + " ".join(
        f"{k:>9}" for k in ["recall@5", "recall@10", "hit@5", "hit@10"]
    )
    print(f"LoCoMo dev, {args.convs} conversation(s), embedder={embedder.name}, categories 1-4")
    print(head)
    for t in table:
        print(
            f"{t['config']:9} {t['turns']:6} {t['stored']:7} {t['buffered']:9} "
            f"{t['evidence_stored']:4}/{t['evidence_turns']:<4}"
            + " ".join(f"{t[k]:9.3f}" for k in ["recall@5", "recall@10", "hit@5", "hit@10"])
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "value_gate.json"
    out.write_text(json.dumps({"args": vars(args), "totals": table, "per_conv": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
