"""Concurrency: threads on one manager, the embedded store's cross-process lock, and writer processes in server mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from memlineage import MemoryManager, Scope, StoreLockedError
from memlineage.index import ChromaIndex
from memlineage.ledger import Ledger
from memlineage.testing import FakeEmbedder

from .conftest import ChromaServer, PgSchema, unique_collection

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "crash_ingest.py"
ENV = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "PYTHONUNBUFFERED": "1"}


# ---------------------------------------------------------------------------------------------------- threads
@pytest.mark.parametrize("exact_max", [None, 50], ids=["exact-plan", "outgrown"])
def test_four_writer_threads_and_a_reader(ledger_url: str, tmp_path: Path, exact_max: int | None) -> None:
    """4 writers + 1 reader on one manager (SQLite file or PostgreSQL, embedded Chroma): exact counts.

    ``outgrown``: both scopes grow past ``exact_max`` while the threads write and read, so their ledger-held
    memories are handed to Chroma in the background meanwhile; at the end every memory is in Chroma.
    """
    per_writer, writers = 40, 4
    mm = MemoryManager(
        ledger=Ledger(ledger_url),
        index=ChromaIndex.persistent(tmp_path / "chroma"),
        embedder=FakeEmbedder(),
        exact_max=exact_max,
    )
    errors: list[BaseException] = []
    written: dict[int, list[str]] = {w: [] for w in range(writers)}
    stop = threading.Event()
    reads = {"n": 0}

    def writer(w: int) -> None:
        try:
            scope = Scope(user_id=f"user{w % 2}", agent_id=f"agent{w}")
            for i in range(per_writer):
                if i % 10 == 9:
                    mems = mm.remember_many([{"content": f"w{w} batch {i} item {j}", "scope": scope} for j in range(3)])
                    written[w].extend(m.id for m in mems)
                else:
                    written[w].append(mm.remember(f"w{w} note {i} about topic{i % 5}", scope=scope).id)
                if i % 20 == 5:  # some lineage work under contention
                    mm.retract(written[w][-1], scope=scope)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                for u in ("user0", "user1"):
                    for hit in mm.recall("note about topic1", scope=Scope(user_id=u), k=5).hits:
                        assert hit.memory.scope.user_id == u
                    mm.audit(u, limit=5)
                    reads["n"] += 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    rt = threading.Thread(target=reader)
    rt.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    stop.set()
    rt.join(timeout=60)
    assert errors == []
    expected = writers * (per_writer + (per_writer // 10) * 2)
    ids = [i for w in written.values() for i in w]
    assert len(ids) == len(set(ids)) == expected
    stats = mm.stats()
    assert stats["memories"] == expected
    retracted = writers * sum(i % 20 == 5 for i in range(per_writer))
    assert stats["by_status"] == {"active": expected - retracted, "retracted": retracted}
    assert mm.verify().ok  # flushes the background index writes first
    stats = mm.stats()
    assert (mm.index.count(), stats["index_exact"]) == (expected, 0)  # Chroma holds every memory, either plan
    assert reads["n"] > 0
    for u in ("user0", "user1"):  # every active memory of a scope can be recalled, whichever plan serves it
        mine = [i for w in written if w % 2 == int(u[-1]) for i in written[w]]
        active = {m.id for m in mm.get_many(mine, scope=u) if m is not None and m.status.value == "active"}
        assert set(mm.recall("note", scope=Scope(user_id=u), k=len(mine)).ids) == active
    mm.close()


# ---------------------------------------------------------------------------------------------- embedded lock
HOLDER = """
import sys
from memlineage import MemoryManager
from memlineage.testing import FakeEmbedder
mm = MemoryManager.open(sys.argv[1], embedder=FakeEmbedder())
mm.remember("held by the first process", scope="u")
print("READY", flush=True)
sys.stdin.read()
mm.close()
print("CLOSED", flush=True)
"""


def _holder(store: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", HOLDER, str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "READY", proc.stderr.read() if proc.stderr else line
    return proc


def _close_pipes(proc: subprocess.Popen[str]) -> None:
    """Close our ends of the holder's pipes once it has exited (they would stay open until garbage collection)."""
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def test_second_writer_process_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = _holder(store)
    try:
        with pytest.raises(StoreLockedError, match="another process") as info:
            MemoryManager.open(store, embedder=FakeEmbedder())
        assert "server mode" in str(info.value)
        t0 = time.monotonic()
        with pytest.raises(StoreLockedError):
            MemoryManager.open(store, embedder=FakeEmbedder(), lock_timeout=0.5)
        assert time.monotonic() - t0 >= 0.4
        # A third process is refused as well, and the refusal leaves no trace.
        other = subprocess.run(  # noqa: S603
            [sys.executable, "-c", "import sys; from memlineage import MemoryManager, StoreLockedError\n"
             "try:\n    MemoryManager.open(sys.argv[1])\nexcept StoreLockedError as e:\n    print('LOCKED', e)",
             str(store)],
            capture_output=True, text=True, env=ENV, timeout=120,
        )  # fmt: skip
        assert other.stdout.startswith("LOCKED"), other.stderr[-2000:]
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()  # EOF on stdin: the holder closes its store
        out = proc.stdout.read()  # through the buffer readline() used (communicate() would bypass it)
        proc.wait(timeout=60)
        _close_pipes(proc)
    assert "CLOSED" in out
    with MemoryManager.open(store, embedder=FakeEmbedder()) as mm:  # released on close
        assert [m.content for m in mm.find(scope="u")] == ["held by the first process"]


def test_lock_is_released_when_the_holder_is_killed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = _holder(store)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    _close_pipes(proc)
    with MemoryManager.open(store, embedder=FakeEmbedder(), lock_timeout=5) as mm:
        assert mm.verify().ok
        assert mm.stats()["memories"] == 1


# ---------------------------------------------------------------------------------------------- server mode
def _server_writers(
    n: int, per: int, pg: PgSchema, server: ChromaServer, collection: str
) -> list[subprocess.CompletedProcess[str]]:
    procs = [
        subprocess.Popen(  # noqa: S603
            [
                sys.executable,
                str(SCRIPT),
                "--ledger-url",
                pg.url,
                "--chroma-port",
                str(server.port),
                "--collection",
                collection,
                "--user",
                f"writer-{w}",
                "--run",
                f"w{w}",
                "--count",
                str(per),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )  # fmt: skip
        for w in range(n)
    ]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def test_four_writer_processes_in_server_mode(pg_schema: PgSchema, chroma_server: ChromaServer) -> None:
    """4 processes on one PostgreSQL schema (created by them, concurrently) and one Chroma collection."""
    writers, per = 4, 50
    collection = unique_collection("procs")
    results = _server_writers(writers, per, pg_schema, chroma_server, collection)
    acked = [line.split()[2] for r in results for line in r.stdout.splitlines() if line.startswith("ACK")]
    assert len(acked) == len(set(acked)) == writers * per
    with MemoryManager.open(
        ledger_url=pg_schema.url, chroma_client=chroma_server.client(), collection=collection, embedder=FakeEmbedder()
    ) as mm:
        assert mm.stats()["memories"] == writers * per
        assert mm.index.count() + mm.stats()["index_exact"] == writers * per
        for w in range(writers):
            assert mm.stats(f"writer-{w}")["memories"] == per
        assert mm.verify().ok
        assert len(mm.get_many(acked, scope="writer-0")) == len(acked)
        assert sum(m is not None for m in mm.get_many(acked, scope="writer-0")) == per
