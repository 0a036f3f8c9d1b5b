r"""Writer process for the crash-safety and multi-process tests: ingest memories and acknowledge each one.

For every memory, once ``remember()`` (or ``remember_many()``) has returned, the script prints one line
``ACK <index> <memory id>`` and flushes stdout, so a parent that kills it with SIGKILL at any moment knows exactly
which writes were acknowledged. It uses the deterministic fake embedder (no model files).

Examples:
    Embedded store (SQLite + Chroma ``PersistentClient`` in STORE)::

        python scripts/crash_ingest.py /tmp/store --start 0 --count 1000

    Server mode (PostgreSQL ledger + Chroma server)::

        python scripts/crash_ingest.py --ledger-url postgresql+psycopg://postgres@127.0.0.1/test \\
            --chroma-port 8000 --collection shared --user writer-1 --count 100
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
    "romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()


def content_for(run: str, i: int) -> str:
    """The text of memory ``i`` of ``run``: unique tokens so that recall can find it exactly."""
    w = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(3)]
    return f"{run} item{i} {w[0]} {w[1]} {w[2]} tok{run}x{i}"


def main(argv: list[str] | None = None) -> int:
    """Run the ingest; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?", help="embedded store directory (omit in full server mode)")
    parser.add_argument("--start", type=int, default=0, help="first item index")
    parser.add_argument("--count", type=int, default=1000, help="number of items")
    parser.add_argument("--run", default="run", help="label mixed into every content (keeps runs distinct)")
    parser.add_argument("--user", default="crash-user", help="user_id of the scope written to")
    parser.add_argument("--ledger-url", default=None, help="SQLAlchemy URL (default: SQLite in the store)")
    parser.add_argument("--chroma-host", default="127.0.0.1")
    parser.add_argument("--chroma-port", type=int, default=None, help="use a Chroma server instead of embedded")
    parser.add_argument("--collection", default="memlineage")
    parser.add_argument("--batch-every", type=int, default=7, help="every Nth write is a remember_many of 3")
    args = parser.parse_args(argv)

    from memlineage import MemoryManager, Scope
    from memlineage.testing import FakeEmbedder

    client = None
    if args.chroma_port is not None:
        import chromadb
        from chromadb.config import Settings

        client = chromadb.HttpClient(
            host=args.chroma_host, port=args.chroma_port, settings=Settings(anonymized_telemetry=False)
        )
    mm = MemoryManager.open(
        Path(args.store) if args.store else None,
        ledger_url=args.ledger_url,
        chroma_client=client,
        collection=args.collection,
        embedder=FakeEmbedder(),
    )
    scope = Scope(user_id=args.user, session_id=args.run)
    out = sys.stdout
    i, end, n = args.start, args.start + args.count, 0
    while i < end:
        n += 1
        if args.batch_every and n % args.batch_every == 0:
            idx = list(range(i, min(i + 3, end)))
            mems = mm.remember_many([{"content": content_for(args.run, j), "scope": scope} for j in idx])
            if len(mems) != len(idx):  # the contract: one memory per item, in order
                sys.stderr.write(f"remember_many returned {len(mems)} memories for items {idx}: {mems}\n")
                return 3
        else:
            idx = [i]
            mems = [mm.remember(content_for(args.run, i), scope=scope)]
        for j, m in zip(idx, mems, strict=True):
            out.write(f"ACK {j} {m.id}\n")
        out.flush()
        i = idx[-1] + 1
    mm.close()
    out.write("DONE\n")
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
