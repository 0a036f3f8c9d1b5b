"""The background index worker gathers a burst of deferred ids into one call (one Chroma write per agent turn)."""

from __future__ import annotations

import threading
import time

from memlineage._indexsync import DeferredIndexSync


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
