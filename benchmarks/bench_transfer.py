"""Export / import benchmark (issue 28): a 10k-memory store exported to JSON Lines and imported into a fresh store,
against ``remember_many`` writing the same store in the same process (ratios, not absolute targets).

Run: ``.venv/bin/python benchmarks/bench_transfer.py [--n 10000] [--pg-url postgresql+psycopg://...]``.

The store: N memories of 10 users with precomputed 384-d vectors (no embedding cost on either side), every fifth
derived from the one before (lineage edges and support groups), the settings ``MemoryManager.open()`` uses
(built-in policies, value model, update detection) over a SQLite ledger and an embedded Chroma index. Timed:

1. ``remember_many`` writing the store (batches of 1,000, until the index sync is done): the baseline.
2. ``export`` of the whole store with vectors (one snapshot, every table, header with per-table hashes).
3. ``import_file`` into a fresh SQLite + Chroma store: the check of the file against its header, the insert, the
   hash checks (ledger part), then the index rebuild (``reindex``, what ``import_file`` runs after it), apart and
   together. With ``--pg-url`` the same into
   a fresh PostgreSQL schema (index in memory).

Records are rows of every table (memories, vectors, edges, supports, events, activities); the ratios compare
memories per second with ``remember_many``'s.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from memlineage import ChromaIndex, MemoryManager, Scope
from memlineage.index import InMemoryIndex
from memlineage.ledger import Ledger
from memlineage.transfer import import_store

DIMS = 384


class LookupEmbedder:
    """Returns precomputed vectors (nothing is embedded on either side)."""

    name = "lookup"
    dims = DIMS

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.table.get(t) or [0.0] * (DIMS - 1) + [1.0] for t in texts]


def _client(path: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def _manager(ledger: Ledger, index: Any, embedder: Any) -> MemoryManager:
    return MemoryManager(ledger=ledger, index=index, embedder=embedder, **MemoryManager.default_options())


def _sqlite_manager(tmp: Path, name: str, embedder: Any) -> MemoryManager:
    return _manager(
        Ledger(f"sqlite:///{tmp / (name + '.db')}"), ChromaIndex(_client(tmp / name), "memlineage"), embedder
    )


def bench(n: int, tmp: Path, pg_url: str | None) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((n, DIMS)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    texts = [f"memory {i}: user {i % 10} noted fact number {i} about topic {i % 97}" for i in range(n)]
    table = {t: v.tolist() for t, v in zip(texts, vecs, strict=True)}
    embedder = LookupEmbedder(table)

    src = _sqlite_manager(tmp, "src", embedder)
    t0 = time.perf_counter()
    last: dict[int, str] = {}
    for start in range(0, n, 1000):
        items = []
        for i in range(start, min(n, start + 1000)):
            item: dict[str, Any] = {
                "content": texts[i],
                "scope": Scope(user_id=f"user{i % 10}"),
                "embedding": vecs[i].tolist(),
                "source": "user",
            }
            if i % 5 == 4 and (i - 10) in last:  # derived from the same user's memory written 10 before
                item["derived_from"] = [last[i - 10]]
                item["source"] = "reasoning"
            items.append(item)
        for i, mem in zip(range(start, min(n, start + 1000)), src.remember_many(items), strict=True):
            last[i] = mem.id
    src.flush_index()
    write_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    summary = src.export(tmp / "store.jsonl")
    export_s = time.perf_counter() - t0
    memories = summary.tables["ml_memories"]["count"]
    records = summary.records
    src.close()

    dst = _sqlite_manager(tmp, "dst", embedder)
    t0 = time.perf_counter()
    report = import_store(dst, tmp / "store.jsonl", reindex=False)  # what import_file does, index rebuild apart
    ledger_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    dst.reindex()
    reindex_s = time.perf_counter() - t0
    import_s = ledger_s + reindex_s
    again = dst.export(tmp / "again.jsonl")
    same = again.tables == summary.tables
    dst.close()

    out: dict[str, Any] = {
        "n": n,
        "memories": memories,
        "records": records,
        "file_mb": (tmp / "store.jsonl").stat().st_size / 1e6,
        "remember_many_s": write_s,
        "remember_many_memories_per_s": n / write_s,
        "export_s": export_s,
        "export_records_per_s": records / export_s,
        "export_memories_per_s": memories / export_s,
        "export_ratio": (memories / export_s) / (n / write_s),
        "import_s": import_s,
        "import_records_per_s": records / import_s,
        "import_memories_per_s": memories / import_s,
        "import_ratio": (memories / import_s) / (n / write_s),
        "import_ledger_s": ledger_s,
        "import_ledger_records_per_s": records / ledger_s,
        "import_reindex_s": reindex_s,
        "import_verified": report.verified,
        "round_trip_hashes_equal": same,
    }
    if pg_url:
        import psycopg

        schema = f"bench_{uuid.uuid4().hex[:10]}"
        dsn = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            pg = _manager(Ledger(pg_url, schema=schema), InMemoryIndex(), embedder)
            t0 = time.perf_counter()
            pg.import_file(tmp / "store.jsonl")
            pg_import_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            pg_summary = pg.export(tmp / "pg.jsonl")
            pg_export_s = time.perf_counter() - t0
            pg.close()
            out.update(
                pg_import_s=pg_import_s,
                pg_import_records_per_s=records / pg_import_s,
                pg_import_ratio=(memories / pg_import_s) / (n / write_s),
                pg_export_s=pg_export_s,
                pg_export_records_per_s=records / pg_export_s,
                pg_hashes_equal=pg_summary.tables == summary.tables,
            )
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return out


def main() -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--pg-url", default=None, help="also import into / export from a PostgreSQL schema")
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "bench_transfer.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        r = bench(args.n, Path(d), args.pg_url)
    print(
        f"remember_many {r['n']:,} memories: {r['remember_many_s']:.1f} s ({r['remember_many_memories_per_s']:.0f}/s); "
        f"store = {r['records']:,} records, {r['file_mb']:.1f} MB of JSON Lines with vectors"
    )
    print(
        f"export: {r['export_s']:.2f} s, {r['export_records_per_s']:.0f} records/s, "
        f"{r['export_memories_per_s']:.0f} memories/s -> {r['export_ratio']:.1f}x remember_many"
    )
    print(
        f"import into SQLite + Chroma (header check, insert, read-back hashes, index rebuild): {r['import_s']:.2f} s, "
        f"{r['import_records_per_s']:.0f} records/s, {r['import_memories_per_s']:.0f} memories/s -> "
        f"{r['import_ratio']:.1f}x remember_many (ledger part {r['import_ledger_s']:.2f} s = "
        f"{r['import_ledger_records_per_s']:.0f} records/s, index rebuild {r['import_reindex_s']:.2f} s); verified by "
        f"{r['import_verified']}, re-export hashes equal: {r['round_trip_hashes_equal']}"
    )
    if "pg_import_s" in r:
        print(
            f"PostgreSQL: import {r['pg_import_s']:.2f} s ({r['pg_import_records_per_s']:.0f} records/s, "
            f"{r['pg_import_ratio']:.1f}x remember_many), export {r['pg_export_s']:.2f} s "
            f"({r['pg_export_records_per_s']:.0f} records/s); hashes equal: {r['pg_hashes_equal']}"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(r, indent=2))
    return r


if __name__ == "__main__":
    main()
