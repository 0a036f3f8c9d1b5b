"""Index writes in the order their rows were read, the background worker's write pipelined (issue 26).

:class:`OrderedWrites` is the part of :class:`~memlineage.services.index_sync.IndexSync` that writes the vector
index. Two locks order the writes: the sync lock (``_lock``), held while rows are read and the in-memory legs are
brought in line, and the index-write lock (``_write_lock``), taken before the sync lock is let go and released
before it is taken back, so index writes start in the order their rows were read and no two threads wait for each
other's lock. The background worker does not wait for its own write: Chroma writes each batch on a thread of its
own (:class:`~memlineage._indexsync.InFlightWrite`) while the worker marks the previous batch ``indexed`` and reads
the next one; a foreground write, a purge, a fix or a rebuild waits for the write in flight first (:meth:`_ordered`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import numpy as np

from memlineage._indexsync import DeferredIndexSync, InFlightWrite
from memlineage.index import index_metadata
from memlineage.index._base import DOCUMENT_KEY, STAMP_KEY
from memlineage.ledger import Ledger
from memlineage.models import Status
from memlineage.ports import VectorIndex

__all__ = ["OrderedWrites", "chroma_records", "held_metadata", "stored_vectors"]

logger = logging.getLogger(__name__)


def held_metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    """Index metadata plus the row's stamp key, for the legs that hold documents in memory (stripped for Chroma)."""
    meta = index_metadata(row)
    meta[STAMP_KEY] = row.get("stamp_key") or 0
    return meta


def stored_vectors(rows: Sequence[Mapping[str, Any]]) -> list[Sequence[float]]:
    """The stored vectors of ``rows`` (little-endian float32 bytes), as arrays read in place."""
    return [cast(Sequence[float], np.frombuffer(r["embedding"], dtype="<f4")) for r in rows]


def chroma_records(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The index metadata of ``rows`` with each memory's text as its document (Chroma keeps the text)."""
    return [{**held_metadata(r), DOCUMENT_KEY: r["content"]} for r in rows]


class OrderedWrites:
    """The vector-index writes of the index sync (a mixin of :class:`~memlineage.services.index_sync.IndexSync`).

    Attributes the host sets: ``ledger``, ``index``, ``_lock`` (the sync lock, an ``RLock``), ``_write_lock``
    (a ``Lock``), ``_in_flight`` (``None`` at first) and ``_deferred`` (the worker, woken when a write ends).
    """

    ledger: Ledger
    index: VectorIndex
    _lock: threading.RLock
    _write_lock: threading.Lock
    _in_flight: InFlightWrite | None
    _deferred: DeferredIndexSync

    def _write_index(
        self,
        upserts: Sequence[dict[str, Any]],
        stale: Sequence[dict[str, Any]],
        removing: Sequence[dict[str, Any]],
        *,
        fresh: bool,
    ) -> int:
        """Write one sync's rows to the vector index, after the worker's write in flight; returns entries removed.

        A foreground sync (the caller holds the sync lock throughout). Index writes stay in the order their rows
        were read: this one waits for the background worker's write in flight (:meth:`_ordered`). With ``fresh``
        (rows just inserted, never indexed), Chroma's ``add`` (faster than ``upsert``) writes them.
        """
        if not (upserts or stale or removing):
            return 0
        ids = [r["id"] for r in upserts]
        with self._ordered():
            if upserts:
                write = self.index.add if fresh and hasattr(self.index, "add") else self.index.upsert
                write(ids, stored_vectors(upserts), chroma_records(upserts))
            if stale:
                self.index.update_metadata([r["id"] for r in stale], [index_metadata(r) for r in stale])
            return self.index.delete([r["id"] for r in removing])

    @contextmanager
    def _ordered(self) -> Iterator[None]:
        """The index-write lock, once the worker's write in flight has ended: a write made here comes after it."""
        with self._write_lock:
            if self._in_flight is not None:
                self._in_flight.join()
            yield

    def _launch(
        self,
        split: Callable[..., Callable[[], int]],
        upserts: Sequence[dict[str, Any]],
        stale: Sequence[dict[str, Any]],
        removing: Sequence[dict[str, Any]],
        new: frozenset[str],
    ) -> None:
        """The background worker's index write, pipelined (caller holds the sync lock once).

        The loaded blocks are brought in line now (:meth:`~memlineage.index._scoped.ScopedVectorIndex.split_writes`);
        the wrapped index (Chroma) is written on a thread of its own (:class:`~memlineage._indexsync.InFlightWrite`)
        once the previous write has ended, so that writes start in the order their rows were read, and this
        thread goes on to finish the previous write (its ``indexed`` marks) and read the next batch while Chroma
        writes this one. The index-write lock is taken before the sync lock is let go and released before it is
        taken back, as in :meth:`_write_index`; a foreground write waits for the write in flight
        (:meth:`_ordered`).
        """
        later = split(
            ([r["id"] for r in upserts], stored_vectors(upserts), chroma_records(upserts)),
            ([r["id"] for r in stale], [index_metadata(r) for r in stale]),
            [r["id"] for r in removing], new=new,
        )  # fmt: skip
        write = InFlightWrite(
            later,
            marks=[(r["id"], r["status"]) for r in (*upserts, *stale)],
            gone=[r["id"] for r in removing],
            purge=[r["id"] for r in removing if r["status"] == Status.ERASED.value],
            on_end=self._deferred.wake,
        )
        previous = self._swap(write)
        if previous is not None:
            self._finish(previous)

    def _settle(self) -> None:
        """Wait for the worker's write in flight and mark its rows (the queue is idle, or a flush asked)."""
        with self._lock:
            done = self._swap(None)
            if done is not None:
                self._finish(done)

    def _swap(self, start: InFlightWrite | None) -> InFlightWrite | None:
        """Wait for the write in flight to end, start ``start`` in its place (if any); return the ended write.

        The caller holds the sync lock once. The index-write lock is taken before the sync lock is let go and
        released before it is taken back, so the wait holds up neither readers nor a foreground sync's ledger work,
        and a foreground index write that comes after it waits for ``start`` (:meth:`_ordered`).
        """
        self._write_lock.acquire()
        self._lock.release()
        try:
            ended, self._in_flight = self._in_flight, None
            if ended is not None:
                ended.join()
            if start is not None:
                self._in_flight = start
                start.start()
        finally:
            self._write_lock.release()
            self._lock.acquire()
        return ended

    def _finish(self, done: InFlightWrite) -> None:
        """Mark what an ended write wrote (caller holds the sync lock); a failed write leaves its rows for repair."""
        if done.error is not None:
            logger.warning("index update deferred (ledger is safe, repaired on next open): %s", done.error)
            return
        if done.marks or done.gone:
            with self.ledger.transaction() as conn:
                if done.marks:  # only rows whose status is still the one written: a newer change stays stale
                    self.ledger.mark_indexed(conn, done.marks)
                if done.gone:
                    self.ledger.update_memories(conn, done.gone, {"index_state": "removed"})
        written = getattr(self.index, "written_to_inner", None)
        if callable(written) and done.marks:  # a block loaded while they were awaited counts them as local
            written([mid for mid, _ in done.marks])
        self._purge(done.purge)

    def _purge(self, ids: Sequence[str]) -> None:
        """Drop what the index's write log still holds of entries it just deleted (embedded Chroma; erasures).

        Only after the delete succeeded: a log stripped of an entry's records while the entry stays makes a later
        delete of it a no-op in Chroma, and the erased text would stay. So an erasure whose delete failed is
        purged by the repair or ``verify(fix=True)`` that deletes it.
        """
        purge = getattr(self.index, "purge_log", None)
        if callable(purge) and ids:
            with self._ordered():
                purge(ids)
