"""Index status off the critical path: a cascade's status changes reach the vector and lexical indexes later.

A cascade commits its status changes in the ledger (the source of truth) and marks the index entries ``stale`` in
the same transaction; this worker then brings the entries in line on a background thread. Until it has, an index
may still list a withdrawn or suspect memory as ``active``: every read re-checks each candidate's status against
the ledger before serving it (``hybrid_recall``'s guard, the update detector's and the value gate's ledger reads),
so the lag can cost a candidate slot, never serve a memory the ledger has withdrawn. Only transitions that narrow
what may be served are deferred (to suspect, retracted, superseded, expired); a memory becoming active again, a
new memory and an erasure are applied before the call returns. A crash before the worker ran leaves the rows
``stale`` in the ledger: :meth:`~memlineage.MemoryManager.repair` (on open) and ``verify(fix=True)`` finish them.
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable

__all__ = ["DeferredIndexSync", "InFlightWrite"]

logger = logging.getLogger(__name__)

#: Ids applied per call: each call holds the manager's index lock, which foreground index writes wait for.
BATCH = 2000
#: Seconds the worker waits, after the first id of a batch arrives, for more to join it. One Chroma ``upsert`` of an
#: agent turn's three memories costs about what one of a single memory does, and holds the GIL and the index lock
#: while it runs: writing each memory on its own made every foreground write of the turn wait for one. Measured
#: with ``benchmarks/bench_turn.py`` (see the design notes, "Deferred index writes gather"). Used only by a store
#: that is the ledger's single writer: in server mode another process reads the shared index and must not wait.
LINGER_S = 0.5


def _flush_at_exit(ref: weakref.ReferenceType[DeferredIndexSync]) -> None:
    sync = ref()
    if sync is not None:
        try:
            sync.flush()
        except Exception:  # interpreter shutdown: the rows stay pending in the ledger for repair() on open
            logger.warning("deferred index writes not applied at exit; repair() on open finishes them", exc_info=True)


class InFlightWrite:
    """One background index write running on a thread of its own while the worker reads the next batch.

    The deferred worker's own work per batch (reading the rows, building their metadata, marking them ``indexed``
    afterwards) used to wait for Chroma's write of the batch, and Chroma's child process waited for that work in
    turn. The worker now starts each write on its own thread and finishes the previous one (its ledger marks)
    while the next runs: at most one write is in flight, and writes start in the order their rows were read.

    Args:
        write: Writes the batch to the index; returns nothing worth keeping (an exception is kept in
            :attr:`error`, for the finisher to log).
        marks: ``(memory_id, status)`` to mark ``indexed`` once the write succeeded (compare-and-set on the status).
        gone: Ids whose entries the write deleted, to mark ``removed``.
        purge: Erased ids among ``gone`` whose index log is purged after the delete.
        on_end: Called on the write's thread once it has ended (wakes the worker waiting for it).
    """

    def __init__(
        self,
        write: Callable[[], object],
        *,
        marks: list[tuple[str, str]],
        gone: list[str],
        purge: list[str],
        on_end: Callable[[], object] | None = None,
    ) -> None:
        self.marks = marks
        self.gone = gone
        self.purge = purge
        self.error: BaseException | None = None
        self._write = write
        self._on_end = on_end
        self._ended = threading.Event()

    @property
    def running(self) -> bool:
        """Whether the write has not ended yet."""
        return not self._ended.is_set()

    def start(self) -> None:
        """Run the write on a new thread (in the calling thread where none can start: interpreter shutdown)."""
        thread = threading.Thread(target=self._run, name="memlineage-index-write", daemon=True)
        try:
            thread.start()
        except RuntimeError:
            self._run()

    def join(self) -> None:
        """Wait until the write has ended (successfully or not)."""
        self._ended.wait()

    def _run(self) -> None:
        try:
            self._write()
        except BaseException as exc:  # kept for the finisher, which logs it and leaves the rows for repair
            self.error = exc
            if not isinstance(exc, Exception):
                raise  # an interrupt or an exit still ends the caller (a write run in the caller's thread at shutdown)
        finally:
            self._ended.set()
            if self._on_end is not None:
                self._on_end()


class DeferredIndexSync:
    """Apply index syncs for memory ids on one background thread, coalescing ids deferred meanwhile.

    Args:
        apply: Brings the index entries of the given ids in line with the ledger (reads their rows afresh, so
            a batch applied late applies the ledger's current state). Its errors are logged; the rows stay
            ``stale`` in the ledger for repair.
        name: Thread name (shows in thread dumps).
        linger: Seconds (>= 0) the worker gathers ids after the first of a batch arrives, so that one call applies
            what a burst of writes deferred (an agent turn's memories); :meth:`flush`, :meth:`close` and a full
            batch cut it short. Ids still queued when the interpreter exits are applied then. Default 0 (no
            gathering); the embedded store's single writer uses :data:`LINGER_S`.
        settle: Finishes what ``apply`` left in flight (an :class:`InFlightWrite`): called by :meth:`flush` before
            it returns, and by the worker when its queue is still empty once the write has ended (new ids first:
            their batch finishes the previous write while its own runs). Its errors are logged.
        writing: Whether a write ``apply`` started is still running (the worker waits for it or for new ids).
    """

    def __init__(
        self,
        apply: Callable[[list[str]], object],
        *,
        name: str = "memlineage-index-sync",
        linger: float = 0.0,
        settle: Callable[[], object] | None = None,
        writing: Callable[[], bool] | None = None,
    ) -> None:
        self._apply = apply
        self._settle = settle
        self._writing = writing
        self._name = name
        self._linger = max(0.0, float(linger))
        self._pending: dict[str, None] = {}
        self._cond = threading.Condition()
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._at_exit = functools.partial(_flush_at_exit, weakref.ref(self))
        atexit.register(self._at_exit)

    def defer(self, ids: Iterable[str]) -> None:
        """Queue ``ids`` for the background thread (started on first use); returns at once."""
        with self._cond:
            self._pending.update(dict.fromkeys(ids))
            if not self._pending:
                return
            if self._closed:  # after close(): nothing runs in the background any more, apply now
                batch = self._take()
            else:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
                self._cond.notify_all()
                return
        self._run_batch(batch)

    @property
    def pending(self) -> int:
        """Ids queued or being applied now."""
        with self._cond:
            return len(self._pending) + (1 if self._busy else 0)

    def flush(self) -> None:
        """Apply everything deferred so far before returning (in the caller's thread when the queue is idle)."""
        while True:
            with self._cond:
                while self._busy:
                    self._cond.wait()
                if not self._pending:
                    if self._settle is None:
                        return
                    self._busy = True  # the worker waits while this thread finishes the write in flight
                    batch = None
                else:
                    batch = self._take()
            if batch is None:
                self._end_batch(settle=True)
                return
            self._run_batch(batch)

    def close(self) -> None:
        """Flush, then stop the thread. Later :meth:`defer` calls apply synchronously. Idempotent."""
        self.flush()
        atexit.unregister(self._at_exit)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def _take(self) -> list[str]:
        batch = list(self._pending)
        self._pending.clear()
        self._busy = True
        return batch

    def _run_batch(self, batch: list[str]) -> None:
        try:
            for start in range(0, len(batch), BATCH):  # a foreground write waits for one chunk at most
                self._apply(batch[start : start + BATCH])
        except Exception:  # the ledger is safe; repair() on open and verify(fix=True) finish the entries
            logger.warning("deferred index sync of %d entries failed; left for repair", len(batch), exc_info=True)
        with self._cond:  # until new ids come (their batch finishes this write) or the write ends
            while self._writing is not None and not self._pending and not self._closed and self._writing():
                self._cond.wait()
            idle = not self._pending
        self._end_batch(settle=idle)

    def wake(self) -> None:
        """Wake the worker waiting for a write in flight (called when the write ends)."""
        with self._cond:
            self._cond.notify_all()

    def _end_batch(self, *, settle: bool) -> None:
        """Settle the write in flight when asked, then let the next batch (or a flush) run."""
        try:
            if settle and self._settle is not None:
                self._settle()
        except Exception:  # the ledger is safe; repair() on open and verify(fix=True) finish the entries
            logger.warning("finishing a deferred index write failed; left for repair", exc_info=True)
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                deadline = time.monotonic() + self._linger
                while self._pending and not self._closed and len(self._pending) < BATCH:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                if not self._pending:  # a flush() applied them meanwhile
                    continue
                batch = self._take()
            self._run_batch(batch)
