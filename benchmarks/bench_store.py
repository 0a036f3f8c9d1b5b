"""Store benchmark: MemoryManager vs raw Chroma in the same process (ratios, not absolute targets).

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_store.py [--n 10000]``.

1. Ingest N memories with precomputed 384-d vectors: ``remember_many`` (ledger + index) vs ``collection.add``.
2. Recall p50 at N: ``recall`` (query vector precomputed) vs a raw filtered ``collection.query``.
3. Cascade: retracting a root with 1k and 10k descendants (ledger walk + status updates + index metadata).
4. Default embedder vs chromadb's default embedding function on 1,000 short texts (speed ratio, max |diff|).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from memlineage import ChromaIndex, MemoryManager, Scope
from memlineage.index import OnnxMiniLMEmbedder, default_model_dir
from memlineage.ledger import Ledger

DIMS = 384


class LookupEmbedder:
    """Returns precomputed vectors (so both sides pay nothing for embedding)."""

    name = "lookup"
    dims = DIMS

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.table[t] for t in texts]


def _vectors(n: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _client(path: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def bench_ingest_and_recall(n: int, tmp: Path) -> dict[str, Any]:
    vecs = _vectors(n)
    texts = [f"memory number {i} about topic {i % 97}" for i in range(n)]
    users = [f"user{i % 10}" for i in range(n)]
    table = dict(zip(texts, vecs.tolist()))
    queries = _vectors(50, seed=11)
    for j, q in enumerate(queries):
        table[f"query {j}"] = q.tolist()

    # raw Chroma, twice: with three filter keys, and with the same flat metadata MemLineage indexes
    def raw_add(name: str, meta: Any) -> tuple[Any, float]:
        col = _client(tmp / name).get_or_create_collection(
            name, embedding_function=None, metadata={"hnsw:space": "cosine"}
        )
        t0 = time.perf_counter()
        for s in range(0, n, 1000):
            rng = range(s, min(n, s + 1000))
            col.add(ids=[str(i) for i in rng], embeddings=vecs[s : s + 1000], metadatas=[meta(i) for i in rng])
        return col, time.perf_counter() - t0

    now = time.time()
    raw, raw_ingest = raw_add("raw", lambda i: {"user_id": users[i], "status": "active", "kind": "episodic"})
    _, raw_full_ingest = raw_add(
        "rawfull",
        lambda i: {
            "user_id": users[i], "agent_id": "", "session_id": "", "kind": "episodic", "status": "active",
            "source_kind": "user", "created_at": now, "valid_from": now, "value": 0.5,
            "content_hash": f"{i:064x}",
        },
    )  # fmt: skip

    # MemoryManager
    mm = MemoryManager(
        ledger=Ledger(f"sqlite:///{tmp / 'ml.db'}"),
        index=ChromaIndex(_client(tmp / "ml"), "memlineage"),
        embedder=LookupEmbedder(table),
    )
    t0 = time.perf_counter()
    for s in range(0, n, 1000):
        mm.remember_many(
            [
                {"content": texts[i], "scope": Scope(user_id=users[i]), "embedding": vecs[i].tolist()}
                for i in range(s, min(n, s + 1000))
            ]
        )
    ml_ingest = time.perf_counter() - t0

    raw_lat, ml_lat = [], []
    for j, q in enumerate(queries):
        where = {"$and": [{"user_id": f"user{j % 10}"}, {"status": "active"}]}
        t0 = time.perf_counter()
        raw.query(query_embeddings=[q.tolist()], n_results=5, where=where, include=["distances"])
        raw_lat.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        mm.recall(f"query {j}", scope=Scope(user_id=f"user{j % 10}"), k=5)
        ml_lat.append(time.perf_counter() - t0)
    mm.close()
    return {
        "n": n,
        "raw_ingest_per_s": n / raw_ingest,
        "memlineage_ingest_per_s": n / ml_ingest,
        "ingest_throughput_ratio": raw_ingest / ml_ingest,
        "raw_same_metadata_ingest_per_s": n / raw_full_ingest,
        "ingest_throughput_ratio_same_metadata": raw_full_ingest / ml_ingest,
        "raw_recall_p50_ms": statistics.median(raw_lat) * 1000,
        "memlineage_recall_p50_ms": statistics.median(ml_lat) * 1000,
        "recall_latency_ratio": statistics.median(ml_lat) / statistics.median(raw_lat),
    }


def bench_cascade(n_desc: int, tmp: Path) -> dict[str, Any]:
    """A root premise, a fan of n_desc/10 direct conclusions, each with 9 more in a chain (depth 10)."""
    vecs = _vectors(n_desc + 1, seed=3)
    mm = MemoryManager(
        ledger=Ledger(f"sqlite:///{tmp / f'c{n_desc}.db'}"),
        index=ChromaIndex(_client(tmp / f"c{n_desc}"), "cascade"),
        embedder=LookupEmbedder({}),
    )
    scope = Scope(user_id="u")
    [root] = mm.remember_many([{"content": "root premise", "scope": scope, "embedding": vecs[0].tolist()}])
    frontier = [root.id] * (n_desc // 10)
    made = 1
    for level in range(10):
        batch = [
            {
                "content": f"conclusion {level}-{i}",
                "scope": scope,
                "derived_from": [p],
                "embedding": vecs[made + i].tolist(),
            }
            for i, p in enumerate(frontier)
        ]
        made += len(batch)
        frontier = [m.id for m in mm.remember_many(batch)]
    t0 = time.perf_counter()
    with mm.ledger.transaction() as conn:
        suspect, _ = mm.services.cascade.invalidate(
            conn, root.id, __import__("memlineage").Status.RETRACTED, mm.clock(), reason="bench"
        )
    ledger_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mm.services.index_sync.sync([root.id, *suspect])
    index_s = time.perf_counter() - t0
    mm.close()
    return {
        "descendants": len(suspect),
        "cascade_ledger_ms": ledger_s * 1000,
        "index_sync_ms": index_s * 1000,
        "total_ms": (ledger_s + index_s) * 1000,
    }


def bench_embedder(tmp: Path) -> dict[str, Any] | None:
    model_dir = default_model_dir()
    if not (model_dir / "model.onnx").is_file():
        print(f"skip embedder benchmark: no model files in {model_dir}", file=sys.stderr)
        return None
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    root = tmp / "all-MiniLM-L6-v2"
    root.mkdir()
    (root / "onnx").symlink_to(model_dir.resolve(), target_is_directory=True)
    ONNXMiniLM_L6_V2.DOWNLOAD_PATH = root
    ref = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
    ours = OnnxMiniLMEmbedder(model_dir)
    words = "flight hotel price user prefers aisle seat paris lyon booking dinner vegetarian meeting error code".split()
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 12)))) for _ in range(1000)]
    ours.embed(texts[:8]), ref(texts[:8])  # warm-up / load
    t0 = time.perf_counter()
    a = np.array(ours.embed(texts))
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = np.array(ref(texts))
    ref_s = time.perf_counter() - t0
    return {
        "texts": len(texts),
        "memlineage_s": ours_s,
        "chromadb_default_s": ref_s,
        "speedup": ref_s / ours_s,
        "max_abs_diff": float(np.abs(a - b).max()),
    }


def main() -> dict[str, Any]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "bench_store.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        out = {
            "ingest_recall": bench_ingest_and_recall(args.n, tmp),
            "cascade_1k": bench_cascade(1_000, tmp),
            "cascade_10k": bench_cascade(10_000, tmp),
            "embedder": bench_embedder(tmp),
        }
    ir = out["ingest_recall"]
    print(
        f"ingest {ir['n']}: MemoryManager {ir['memlineage_ingest_per_s']:.0f}/s"
        f" vs raw Chroma {ir['raw_ingest_per_s']:.0f}/s"
        f" -> throughput ratio {ir['ingest_throughput_ratio']:.2f}x (target >= 0.8); vs raw Chroma with the same"
        f" flat metadata {ir['raw_same_metadata_ingest_per_s']:.0f}/s -> "
        f"{ir['ingest_throughput_ratio_same_metadata']:.2f}x"
    )
    print(
        f"recall p50: MemoryManager {ir['memlineage_recall_p50_ms']:.2f} ms vs raw filtered query "
        f"{ir['raw_recall_p50_ms']:.2f} ms -> {ir['recall_latency_ratio']:.2f}x"
    )
    for key in ("cascade_1k", "cascade_10k"):
        c = out[key]
        print(
            f"cascade {c['descendants']} descendants: ledger {c['cascade_ledger_ms']:.0f} ms + index sync "
            f"{c['index_sync_ms']:.0f} ms = {c['total_ms']:.0f} ms (target <= 200 ms at 10k)"
        )
    if out["embedder"]:
        e = out["embedder"]
        print(
            f"embedder on {e['texts']} short texts: {e['memlineage_s']:.2f} s vs chromadb default "
            f"{e['chromadb_default_s']:.2f} s -> {e['speedup']:.1f}x faster, max |diff| {e['max_abs_diff']:.1e}"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
