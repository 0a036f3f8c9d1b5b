"""Issue 26: the embedded store's Chroma runs in a child process of its own, which never outlives its parent."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from memlineage import MemoryManager, Scope
from memlineage.errors import StorageError
from memlineage.index import ChromaIndex
from memlineage.index._chroma_process import ENV_CHROMA_PROCESS, ChromaProcess
from memlineage.testing import FakeEmbedder

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.name != "posix", reason="the child process is POSIX only (elsewhere Chroma runs in process)"),
]

ROOT = Path(__file__).resolve().parents[2]


def _client(mm: MemoryManager) -> object:
    """The chromadb client under the store's index (the scoped wrapper holds the Chroma index as ``inner``)."""
    return mm.index.inner.client  # type: ignore[attr-defined]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by a parent that died) counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_an_open_store_writes_chroma_from_a_child_process(tmp_path: Path) -> None:
    with MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder()) as mm:
        client = _client(mm)
        assert isinstance(client, ChromaProcess)
        alice = Scope(user_id="alice")
        first = mm.remember("I keep bees on the roof", scope=alice)
        mm.remember_many([{"content": f"note {i} about hives", "scope": alice} for i in range(20)])
        mm.retract(first.id, scope=alice)
        mm.flush_index()
        assert client.in_child and client._proc is not None and client._proc.poll() is None
        assert mm.stats()["index_entries"] == 21 and mm.verify().ok  # status changes reached the child's Chroma
        pid = client._proc.pid
    assert not _alive(pid)  # close() ended the child
    with MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder()) as again:  # the same files, a new child
        assert again.verify().ok and again.stats()["index_entries"] == 21


def test_the_child_starts_when_the_first_write_is_queued_and_a_reading_store_starts_none(tmp_path: Path) -> None:
    """The child imports chromadb while the first write's ledger work and the worker's gathering run: it is started
    when ``remember`` returns, before the worker's first request (the worker waits ``LINGER_S`` for more ids)."""
    with MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder()) as mm:
        client = _client(mm)
        assert isinstance(client, ChromaProcess) and client._proc is None
        mm.recall("anything", scope=Scope(user_id="alice"))  # served by the exact plan: no Chroma read
        assert client._proc is None
        mm.remember("I keep bees on the roof", scope=Scope(user_id="alice"))
        assert client._proc is not None  # started, not awaited
        mm.flush_index()
        assert client.in_child and mm.stats()["index_entries"] == 1


def test_a_store_switched_to_one_process_keeps_chroma_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_CHROMA_PROCESS, "0")
    with MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder()) as mm:
        assert not isinstance(_client(mm), ChromaProcess)
        mm.remember("I keep bees", scope="alice")
        mm.flush_index()
        assert mm.verify().ok
    assert isinstance(ChromaIndex.persistent(tmp_path / "c", process=True).client, ChromaProcess)


def test_a_child_that_cannot_start_falls_back_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python-that-is-not-there"))
    with caplog.at_level(logging.WARNING), MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder()) as mm:
        mm.remember("I keep bees", scope="alice")
        mm.flush_index()
        assert mm.verify().ok and mm.stats()["index_entries"] == 1
        assert not _client(mm).in_child  # type: ignore[attr-defined]
    assert any("Chroma runs in this process" in r.getMessage() for r in caplog.records)


def test_a_child_killed_under_the_store_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder()) as mm:
        alice = Scope(user_id="alice")
        mm.remember("I keep bees", scope=alice)
        mm.flush_index()
        client = _client(mm)
        assert isinstance(client, ChromaProcess) and client._proc is not None
        client._proc.kill()
        client._proc.wait()
        with caplog.at_level(logging.WARNING):
            later = mm.remember("I also keep goats", scope=alice)  # never raises into the caller
            mm.flush_index()
        assert [h.memory.id for h in mm.recall("goats", scope=alice, k=1).hits] == [later.id]
        mm.verify(fix=True)  # what the dead child missed is written by the fresh child that took over
        assert mm.verify().ok and mm.stats()["index_entries"] == 2
    with pytest.raises(StorageError):  # a call that was in flight when the child died is a typed error
        dead = ChromaProcess(tmp_path / "t")
        dead.get_or_create_collection("abc")
        dead.request("call", "abc", "count", {})  # the child is up now
        assert dead._proc is not None
        dead._proc.kill()
        dead._proc.wait()
        dead.request("call", "abc", "count", {})
    dead.close()


def test_the_child_never_outlives_its_parent(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path[:0] = [{str(ROOT / "core")!r}, {str(ROOT)!r}]
        from memlineage import MemoryManager
        from memlineage.testing import FakeEmbedder
        mm = MemoryManager.open({str(tmp_path / "s")!r}, embedder=FakeEmbedder())
        mm.remember("I keep bees", scope="alice")
        mm.flush_index()
        print(mm.index.inner.client._proc.pid, flush=True)
        os._exit(0)  # no close(), no atexit: as if the process were killed
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)
    with MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder()) as mm:
        assert mm.verify().ok and mm.stats()["index_entries"] == 1


def test_a_host_that_is_not_python_keeps_chroma_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from memlineage.index._chroma_process import wanted

    assert wanted()
    monkeypatch.setattr(sys, "executable", "/usr/bin/uwsgi")  # an embedding host: running it would not run Python
    assert not wanted()
    monkeypatch.setattr(sys, "executable", "/opt/app/python3.12")
    monkeypatch.setattr(sys, "frozen", True, raising=False)  # a frozen application (PyInstaller)
    assert not wanted()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_copy_neither_uses_nor_stops_the_child(tmp_path: Path) -> None:
    with MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder()) as mm:
        mm.remember("I keep bees", scope="alice")
        mm.flush_index()
        client = _client(mm)
        assert isinstance(client, ChromaProcess)
        pid = os.fork()
        if pid == 0:  # the forked copy: a typed error, and its close() leaves the parent's child alone
            code = 0
            try:
                client.request("call", "memlineage", "count", {})
                code = 1
            except StorageError:
                client.close()
            except BaseException:  # noqa: BLE001 - anything else is a failure, reported by the exit code
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert mm.stats()["index_entries"] == 1 and mm.verify().ok  # the parent's child still serves it


def test_a_call_interrupted_before_its_answer_never_hands_that_answer_to_the_next(tmp_path: Path) -> None:
    client = ChromaProcess(tmp_path / "c")
    try:
        client.get_or_create_collection("abc")
        client.request("call", "abc", "add", {"ids": ["1"], "embeddings": [[1.0, 0.0]], "documents": ["bees"]})
        conn = client._conn
        assert conn is not None
        real_recv = conn.recv

        def interrupted() -> object:
            raise KeyboardInterrupt  # Ctrl-C after the request went out, before its answer was read

        conn.recv = interrupted  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            client.request("call", "abc", "count", {})
        conn.recv = real_recv  # type: ignore[method-assign]
        got = client.request("call", "abc", "get", {"ids": ["1"], "include": ["documents"]})
        assert got["ids"] == ["1"] and got["documents"] == ["bees"]  # its own answer, not the count's
        assert client.in_child and client._conn is not conn  # a fresh child took over
    finally:
        client.close()


def test_an_erasure_whose_chroma_delete_failed_is_finished_by_verify_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log of an entry is purged only once Chroma deleted it: purged first, the later delete was a no-op and the
    erased text stayed in Chroma."""
    with MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder(), reconciler=None) as mm:
        mm.remember_many([{"content": f"my colleague Bob{i} plays tennis", "scope": "u1"} for i in range(20)])
        mm.flush_index()
        real_delete = ChromaIndex.delete
        calls = {"n": 0}

        def fails_once(self: ChromaIndex, ids: list[str]) -> int:
            calls["n"] += 1
            if calls["n"] == 1:
                raise StorageError("Chroma delete failed: simulated")
            return real_delete(self, ids)

        monkeypatch.setattr(ChromaIndex, "delete", fails_once)
        mm.erase(scope="u1")
        assert not mm.verify().ok  # the entries are still there, pending their removal
        mm.verify(fix=True)
        assert mm.verify().ok and mm.index.inner.count() == 0  # type: ignore[attr-defined]
        docs = mm.index.inner._call("get", "get", include=["documents"])["documents"]  # type: ignore[attr-defined]
        assert not any("Bob" in (d or "") for d in docs)


def test_a_store_opened_by_a_relative_path_keeps_its_chroma_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with MemoryManager.open("store", embedder=FakeEmbedder()) as mm:
        mm.remember("I keep bees", scope="alice")
        mm.flush_index()
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        client = _client(mm)
        assert isinstance(client, ChromaProcess) and client._proc is not None
        client._proc.kill()  # its replacement must open the same directory, not one under the new cwd
        client._proc.wait()
        mm.remember("I also keep goats", scope="alice")
        mm.flush_index()
        mm.verify(fix=True)
        assert mm.verify().ok and mm.stats()["index_entries"] == 2
    assert not (elsewhere / "store").exists()
