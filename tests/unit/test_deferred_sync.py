"""The background index worker gathers a burst of deferred ids into one call (one Chroma write per agent turn)."""

from __future__ import annotations

import threading
import time

import pytest
from memlineage._indexsync import DeferredIndexSync, InFlightWrite


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.done = threading.Event()

    def __call__(self, ids: list[str]) -> None:
        self.calls.append(list(ids))
        self.done.set()


def test_a_burst_of_deferrals_is_applied_in_one_call() -> None:
    rec = Recorder()
    sync = DeferredIndexSync(rec, linger=1.0)
    for ids in (["a"], ["b", "c"], ["d"]):  # a turn's writes: the user message, a tool result, the answer
        sync.defer(ids)
        time.sleep(0.02)
    assert rec.done.wait(5)
    assert rec.calls == [["a", "b", "c", "d"]]
    sync.close()


def test_without_linger_each_deferral_may_run_alone() -> None:
    rec = Recorder()
    sync = DeferredIndexSync(rec, linger=0.0)
    sync.defer(["a"])
    assert rec.done.wait(5)
    time.sleep(0.05)
    sync.defer(["b"])
    sync.close()
    assert rec.calls == [["a"], ["b"]]


def test_flush_does_not_wait_for_the_linger() -> None:
    rec = Recorder()
    sync = DeferredIndexSync(rec, linger=30.0)
    sync.defer(["a", "b"])
    t0 = time.perf_counter()
    sync.flush()
    assert time.perf_counter() - t0 < 5
    assert rec.calls == [["a", "b"]]
    assert sync.pending == 0
    sync.close()  # the lingering worker wakes, finds nothing and stops
    assert rec.calls == [["a", "b"]]


def test_close_applies_what_lingers_and_later_deferrals_apply_at_once() -> None:
    rec = Recorder()
    sync = DeferredIndexSync(rec, linger=30.0)
    sync.defer(["a"])
    t0 = time.perf_counter()
    sync.close()
    assert time.perf_counter() - t0 < 5
    assert rec.calls == [["a"]]
    sync.defer(["b"])
    assert rec.calls == [["a"], ["b"]]


def test_a_full_batch_is_applied_without_waiting(monkeypatch) -> None:
    import memlineage._indexsync as mod

    monkeypatch.setattr(mod, "BATCH", 3)
    rec = Recorder()
    sync = DeferredIndexSync(rec, linger=30.0)
    sync.defer(["a", "b", "c"])
    assert rec.done.wait(5)
    assert rec.calls == [["a", "b", "c"]]
    sync.close()


def test_only_the_embedded_single_writer_gathers(tmp_path) -> None:
    """In server mode another process reads the shared index: its deferred writes go at once."""
    from memlineage import MemoryManager
    from memlineage._indexsync import LINGER_S
    from memlineage.testing import make_manager

    shared = make_manager()  # no writer lock: other processes may write to and read this store
    assert shared.services.index_sync._deferred._linger == 0.0
    embedded = MemoryManager.open(tmp_path / "store", embedder=shared.services.embedding.embedder)
    try:
        assert embedded.services.index_sync._deferred._linger == LINGER_S > 0
    finally:
        embedded.close()


# ------------------------------------------------------------------ the worker's write pipelined (issue 26)
class GatedIndex:
    """An in-memory index whose first ``add`` waits for ``gate`` (a slow Chroma write), recording every write."""

    def __new__(cls, fail: bool = False):  # noqa: ANN204 - a subclass built at call time, InMemoryIndex is lazy
        from memlineage.index import InMemoryIndex

        class _Gated(InMemoryIndex):
            def __init__(self) -> None:
                super().__init__()
                self.calls: list[tuple[str, list[str]]] = []
                self.entered = threading.Event()
                self.gate = threading.Event()
                self.fail = fail

            def add(self, ids, vectors, metadatas) -> None:  # noqa: ANN001
                self.calls.append(("add", list(ids)))
                if not self.entered.is_set():
                    self.entered.set()
                    assert self.gate.wait(10)
                    if self.fail:
                        raise RuntimeError("chroma is down")
                InMemoryIndex.upsert(self, ids, vectors, metadatas)  # InMemoryIndex.add calls self.upsert

            def upsert(self, ids, vectors, metadatas) -> None:  # noqa: ANN001
                self.calls.append(("upsert", list(ids)))
                super().upsert(ids, vectors, metadatas)

            def delete(self, ids) -> int:  # noqa: ANN001
                self.calls.append(("delete", list(ids)))
                return super().delete(ids)

        return _Gated()


def _states(mm, ids: list[str]) -> set[str]:  # noqa: ANN001
    return {state for _, state in mm.ledger.index_states(ids).values()}


def test_the_worker_reads_the_next_batch_while_the_index_writes_the_previous_one() -> None:
    """The worker hands each batch's index write to a thread of its own: while Chroma writes batch A, the worker
    already reads batch B and brings the in-memory legs in line; B's write starts only after A's has ended, and
    a flush returns once both are written and marked ``indexed``."""
    from memlineage import Scope
    from memlineage.testing import make_manager

    inner = GatedIndex()
    mm = make_manager(index=inner)
    split = mm.index.split_writes
    prepared: list[list[str]] = []

    def recording(upserts, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        prepared.append(list(upserts[0]))
        return split(upserts, *args, **kwargs)

    mm.index.split_writes = recording
    scope = Scope(user_id="alice")
    a = mm.remember_many([{"content": f"first batch note {i}", "scope": scope} for i in range(3)])
    assert inner.entered.wait(10)  # A's write is in flight, held at the gate
    b = mm.remember_many([{"content": f"second batch note {i}", "scope": scope} for i in range(3)])
    deadline = time.monotonic() + 10
    while len(prepared) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    ids_a, ids_b = sorted(m.id for m in a), sorted(m.id for m in b)
    assert [sorted(p) for p in prepared] == [ids_a, ids_b]  # B read while A's write waits
    assert [c for c in inner.calls if c[0] == "add"] == [("add", prepared[0])]  # B's write has not started
    assert recall_ids(mm, "second batch note", scope)  # the in-memory legs serve B already
    inner.gate.set()
    mm.flush_index()
    assert [(kind, sorted(ids)) for kind, ids in inner.calls] == [("add", ids_a), ("add", ids_b)]
    assert _states(mm, ids_a + ids_b) == {"indexed"}
    mm.close()


def recall_ids(mm, text: str, scope) -> list[str]:  # noqa: ANN001
    return mm.recall(text, scope=scope, k=10).ids


def test_a_foreground_index_write_waits_for_the_write_in_flight() -> None:
    """An erasure's delete must come after the worker's add of the same entry, or the add would bring it back."""
    from memlineage import Scope
    from memlineage.testing import make_manager

    inner = GatedIndex()
    mm = make_manager(index=inner)
    scope = Scope(user_id="alice")
    [doomed] = mm.remember_many([{"content": "the door code is 4417", "scope": scope}])
    assert inner.entered.wait(10)
    eraser = threading.Thread(target=mm.erase, args=(doomed.id,), kwargs={"scope": scope})
    eraser.start()
    time.sleep(0.2)
    assert [kind for kind, _ in inner.calls] == ["add"]  # the delete waits for the add in flight
    inner.gate.set()
    eraser.join(10)
    mm.flush_index()
    assert [kind for kind, _ in inner.calls] == ["add", "delete"]
    assert doomed.id not in inner.ids()
    mm.close()


def test_a_failed_write_in_flight_leaves_its_rows_for_repair(caplog) -> None:  # noqa: ANN001
    import logging

    from memlineage import Scope
    from memlineage.testing import make_manager

    inner = GatedIndex(fail=True)
    mm = make_manager(index=inner)
    scope = Scope(user_id="alice")
    mems = mm.remember_many([{"content": f"note {i} kept in the ledger", "scope": scope} for i in range(3)])
    ids = [m.id for m in mems]
    assert inner.entered.wait(10)
    with caplog.at_level(logging.WARNING):
        inner.gate.set()
        mm.flush_index()  # never raises: the ledger is safe
    assert "chroma is down" in caplog.text
    assert _states(mm, ids) == {"pending"}
    assert set(ids) - inner.ids() == set(ids)
    mm.repair()
    assert _states(mm, ids) == {"indexed"}
    assert set(ids) <= inner.ids()
    mm.close()


def test_a_block_loaded_while_the_write_was_in_flight_hands_its_scope_over_once_written() -> None:
    """A scope's block loaded while its rows were still on their way to the ANN index counts them as awaited; once
    the write is finished they are not, and a scope past ``exact_max`` goes to the ANN index as it would have."""
    from memlineage import Scope
    from memlineage.testing import make_manager

    inner = GatedIndex()
    mm = make_manager(index=inner, exact_max=20)
    scope = Scope(user_id="alice")
    mm.remember_many([{"content": f"alice note {i}", "scope": scope} for i in range(15)])
    assert inner.entered.wait(10)  # the first write is held at the gate
    assert mm.index.plan("alice") == "exact"  # loaded now: its 15 rows are awaited
    later = [{"content": f"alice later {i}", "scope": scope} for i in range(10)]  # 25 > exact_max
    writer = threading.Thread(target=mm.remember_many, args=(later,))
    writer.start()  # its index write waits for the one in flight
    time.sleep(0.2)
    inner.gate.set()
    writer.join(10)
    mm.flush_index()
    assert mm.index.plan("alice") == "ann"
    assert recall_ids(mm, "alice later 3", scope)[0] in inner.ids()
    mm.close()


def test_a_write_run_in_the_callers_thread_keeps_its_error_and_lets_an_interrupt_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At interpreter shutdown no thread starts and the write runs in the caller's thread: a failure is kept for the
    finisher (its rows are not marked written), and an interrupt still reaches the caller."""

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", no_thread)

    def fail() -> None:
        raise OSError("chroma went away")

    failed = InFlightWrite(fail, marks=[], gone=[], purge=[])
    failed.start()
    assert isinstance(failed.error, OSError) and not failed.running

    def interrupted() -> None:
        raise KeyboardInterrupt

    stopped = InFlightWrite(interrupted, marks=[], gone=[], purge=[])
    with pytest.raises(KeyboardInterrupt):
        stopped.start()
    assert isinstance(stopped.error, KeyboardInterrupt) and not stopped.running
