"""Erasure benchmark: ``erase(scope=...)`` of N memories vs writing them with ``remember_many``, in one process.

Run: ``.venv/bin/python benchmarks/bench_erase.py [--n 100000] [--other 1000] [--exact-max 0]``.

An embedded store (SQLite ledger and Chroma in a temporary directory, as ``MemoryManager.open`` makes it) gets N
memories in one user's scope through ``remember_many`` in batches of 1,000 with precomputed 384-d vectors (the
embedder costs nothing on either side), then ``--other`` memories of a second user. Timed:

* write: the N memories' ``remember_many`` calls plus the index catch-up (``flush_index``);
* erase: ``erase(scope=Scope(user_id=...))`` end to end (ledger, index, Chroma's log purge, WAL truncation) plus
  the index catch-up.

The target (issue: erasure took 5-10 ms per memory): erase time <= write time. The second user's memories must be
untouched (checked).
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
from memlineage import MemoryManager, Scope

DIMS = 384


class LookupEmbedder:
    """Returns precomputed vectors (so neither side pays for embedding); unknown texts get a fixed vector."""

    name = "lookup"
    dims = DIMS

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.default = [1.0 / DIMS**0.5] * DIMS

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.table.get(t, self.default) for t in texts]


def bench(n: int, other: int, exact_max: int | None, tmp: Path) -> dict[str, Any]:
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((n + other, DIMS)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    texts = [f"note {i} about topic {i % 97} and place {i % 13}" for i in range(n + other)]
    kwargs: dict[str, Any] = {} if exact_max is None else {"exact_max": exact_max}
    mm = MemoryManager.open(tmp / "store", embedder=LookupEmbedder({}), **kwargs)
    alice, bob = Scope(user_id="alice", session_id="s1"), Scope(user_id="bob")

    def write(scope: Scope, lo: int, hi: int) -> None:
        for s in range(lo, hi, 1000):
            mm.remember_many(
                [
                    {"content": texts[i], "scope": scope, "embedding": vecs[i].tolist()}
                    for i in range(s, min(hi, s + 1000))
                ]
            )

    write(bob, n, n + other)
    mm.flush_index()
    t0 = time.perf_counter()
    write(alice, 0, n)
    mm.flush_index()
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    receipt = mm.erase(scope=Scope(user_id="alice"), reason="benchmark")
    erase_call_s = time.perf_counter() - t0
    mm.flush_index()
    erase_s = time.perf_counter() - t0
    assert len(receipt.memory_ids) == n, len(receipt.memory_ids)
    assert mm.stats(bob)["memories"] == other
    assert mm.recall(texts[n], scope=bob, k=1).hits, "the other user's memories must stay searchable"
    mm.close()
    return {
        "n": n,
        "other": other,
        "exact_max": exact_max,
        "write_s": write_s,
        "erase_s": erase_s,
        "erase_call_s": erase_call_s,
        "erase_per_memory_ms": erase_s / n * 1000,
        "erase_vs_write": erase_s / write_s,
    }


def main() -> dict[str, Any]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000, help="memories in the erased scope")
    ap.add_argument("--other", type=int, default=1_000, help="memories of a second user (must survive)")
    ap.add_argument("--exact-max", type=int, default=None, help="the store's exact_max (default: the store's own)")
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "bench_erase.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        out = bench(args.n, args.other, args.exact_max, Path(d))
    print(
        f"erase(scope) of {out['n']:,} memories: {out['erase_s']:.2f} s ({out['erase_per_memory_ms']:.3f} ms each; "
        f"the call itself {out['erase_call_s']:.2f} s) vs writing them with remember_many {out['write_s']:.2f} s "
        f"-> {out['erase_vs_write']:.2f}x the write time (target <= 1.0); exact_max={out['exact_max']}",
        file=sys.stdout,
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
