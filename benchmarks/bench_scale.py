"""Recall at scale: MemoryManager vs raw Chroma's filtered query on the same data (ratios, same run).

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_scale.py [--n 100000] [--layouts 1000,1] [--queries 200]``.

For each layout (N memories spread over U users; default 100,000 over 1,000 users, and 100,000 in one user):

1. N synthetic random unit vectors (numpy, 384-d; nothing is embedded) with short texts are stored through
   ``MemoryManager.remember_many`` into a Chroma collection (update detection off: this measures recall, and
   the loading time is reported only for reference).
2. Q queries, each in a random user's scope, k=10, timed three ways on the same ids, vectors and metadata:
   raw Chroma ``collection.query`` with the scope/status ``where`` filter on a collection loaded with what
   MemLineage stored (the primitive; its ``add`` time is printed beside ``remember_many``'s); MemLineage's dense leg
   (``mm.index.query``: exact search over the scope's block for small scopes, the ANN index for large ones);
   ``mm.recall`` end to end (both legs, fusion, ledger guard, reinforcement: what an application calls).
3. recall@10 of the dense leg and of raw Chroma against exact search (numpy over the scope's vectors), so no
   speed is bought with misses.

Writes ``benchmarks/results/bench_scale.json``; prints p50/p95 and the ratios against raw Chroma.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from memlineage import ChromaIndex, MemoryManager, Scope
from memlineage.index import IndexFilter, index_metadata
from memlineage.ledger import Ledger

DIMS = 384
K = 10


class LookupEmbedder:
    """Returns precomputed vectors for known texts (queries), so no side pays for embedding."""

    name = "lookup"
    dims = DIMS

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.table[t].tolist() for t in texts]


def _unit(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) * 1000


def bench_layout(n: int, users: int, queries: int, tmp: Path) -> dict[str, Any]:
    import chromadb
    from chromadb.config import Settings

    vecs = _unit(n, seed=1)
    qvecs = _unit(queries, seed=2)
    owner = [f"user{i % users}" for i in range(n)]
    topics = "flight hotel price seat dinner meeting train budget museum concert".split()
    texts = [f"note {i} about the {topics[i % len(topics)]} for user {i % users}" for i in range(n)]
    table = {f"query {j}": qvecs[j] for j in range(queries)}
    client = chromadb.PersistentClient(path=str(tmp / f"chroma-{users}"), settings=Settings(anonymized_telemetry=False))
    mm = MemoryManager(
        ledger=Ledger(f"sqlite:///{tmp / f'ledger-{users}.db'}"),
        index=ChromaIndex(client, "scale"),
        embedder=LookupEmbedder(table),
        reconciler=None,
    )
    t0 = time.perf_counter()
    for s in range(0, n, 2000):
        mm.remember_many(
            [
                {"content": texts[i], "scope": Scope(user_id=owner[i]), "embedding": vecs[i]}
                for i in range(s, min(n, s + 2000))
            ]
        )
    load_s = time.perf_counter() - t0
    # the ids MemLineage gave each row, for exact search per scope
    rows = mm.ledger.index_summary()
    by_user: dict[str, list[str]] = {}
    for r in rows:
        by_user.setdefault(r["user_id"], []).append(r["id"])
    order = [r["id"] for r in rows]
    full = mm.ledger.memory_rows(order)
    mat = np.stack([np.frombuffer(r["embedding"], dtype="<f4") for r in full])  # ledger vectors, same as indexed
    row_of = {mid: i for i, mid in enumerate(order)}
    # The peer: a Chroma collection holding the same ids, vectors and flat metadata MemLineage indexes. (MemLineage's
    # own collection holds only scopes past exact_max: the exact plan serves the others from the ledger.)
    col = client.get_or_create_collection("raw", embedding_function=None, metadata={"hnsw:space": "cosine"})
    t0 = time.perf_counter()
    for s in range(0, n, 2000):
        col.add(
            ids=order[s : s + 2000],
            embeddings=mat[s : s + 2000],
            metadatas=[index_metadata(r) for r in full[s : s + 2000]],
        )
    raw_load_s = time.perf_counter() - t0
    in_chroma = mm.index.count()
    rng = np.random.default_rng(3)
    asked = [f"user{int(u)}" for u in rng.integers(0, users, size=queries)]
    t0 = time.perf_counter()
    for user in dict.fromkeys(asked):  # warm-up: each scope's vector block and lexical index, as a service has them
        mm.recall("query 0", scope=Scope(user_id=user), k=K, reinforce=False)
    warm_s = time.perf_counter() - t0
    raw_t, dense_t, recall_t = [], [], []
    raw_hit = dense_hit = 0
    for j in range(queries):
        user, q = asked[j], qvecs[j]
        mine = by_user[user]
        idx = np.fromiter((row_of[m] for m in mine), dtype=np.int64, count=len(mine))
        sims = mat[idx] @ q
        truth = {mine[i] for i in np.argsort(-sims)[:K]}
        where = {"$and": [{"user_id": user}, {"status": "active"}]}
        t = time.perf_counter()
        raw = col.query(query_embeddings=[q], n_results=K, where=where, include=["distances"])
        raw_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        dense = mm.index.query(q, K, IndexFilter(user_id=user, statuses=("active",)))
        dense_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        mm.recall(f"query {j}", scope=Scope(user_id=user), k=K)
        recall_t.append(time.perf_counter() - t)
        raw_hit += len(truth & set(raw["ids"][0]))
        dense_hit += len(truth & {h.id for h in dense})
    denom = queries * K
    plans = {"exact": mm.index.exact_queries, "ann": mm.index.ann_queries}
    mm.close()
    out = {
        "n": n,
        "users": users,
        "per_user": n // users,
        "queries": queries,
        "k": K,
        "load_s": load_s,
        "raw_load_s": raw_load_s,
        "memlineage_in_chroma": in_chroma,
        "warm_s": warm_s,
        "plan": "exact" if plans["exact"] >= plans["ann"] else "ann",
        "raw_p50_ms": _pct(raw_t, 50),
        "raw_p95_ms": _pct(raw_t, 95),
        "dense_p50_ms": _pct(dense_t, 50),
        "dense_p95_ms": _pct(dense_t, 95),
        "recall_p50_ms": _pct(recall_t, 50),
        "recall_p95_ms": _pct(recall_t, 95),
        "raw_recall_at_10": raw_hit / denom,
        "dense_recall_at_10": dense_hit / denom,
    }
    out["dense_p50_ratio"] = out["dense_p50_ms"] / out["raw_p50_ms"]
    out["dense_p95_ratio"] = out["dense_p95_ms"] / out["raw_p95_ms"]
    out["recall_p50_ratio"] = out["recall_p50_ms"] / out["raw_p50_ms"]
    out["recall_p95_ratio"] = out["recall_p95_ms"] / out["raw_p95_ms"]
    return out


def label(r: dict[str, Any]) -> str:
    """Row label with the scale: ``100,000 memories / 1,000 users``."""
    return f"{r['n']:,} memories / {r['users']:,} user{'s' if r['users'] != 1 else ''}"


def main() -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="memories per layout (default 100,000)")
    ap.add_argument("--layouts", default="1000,1", help="user counts, comma-separated (default 1000,1)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "bench_scale.json")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as d:
        for users in (int(u) for u in args.layouts.split(",")):
            r = bench_layout(args.n, users, args.queries, Path(d))
            results.append(r)
            print(
                f"{label(r)} (plan {r['plan']}; remember_many {r['load_s']:.0f} s vs raw Chroma add with the same "
                f"metadata {r['raw_load_s']:.0f} s -> ingest {r['raw_load_s'] / r['load_s']:.2f}x, "
                f"{r['memlineage_in_chroma']:,} of MemLineage's memories in Chroma): raw Chroma filtered query p50 "
                f"{r['raw_p50_ms']:.2f} / p95 {r['raw_p95_ms']:.2f} ms, recall@10 vs exact {r['raw_recall_at_10']:.3f}"
                f"\n  dense leg p50 {r['dense_p50_ms']:.2f} / p95 {r['dense_p95_ms']:.2f} ms -> "
                f"{r['dense_p50_ratio']:.2f}x / {r['dense_p95_ratio']:.2f}x, recall@10 vs exact "
                f"{r['dense_recall_at_10']:.3f}"
                f"\n  recall() end to end p50 {r['recall_p50_ms']:.2f} / p95 {r['recall_p95_ms']:.2f} ms -> "
                f"{r['recall_p50_ratio']:.2f}x / {r['recall_p95_ratio']:.2f}x",
                flush=True,
            )
    out = {"layouts": results}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
