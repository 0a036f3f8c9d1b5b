"""How the viewer reaches a store: a read-only snapshot (default) or the live store (``--allow-writes``).

Read-only, embedded: the ledger (``ledger.db``) is copied with SQLite's online backup API from a ``mode=ro``
connection into a temporary directory, the same way the CLI's read-only views do, so the store is never written
and an application may hold it meanwhile. The copy is refreshed on the next request after ``ledger.db`` or its WAL
changed. Chroma's files are never opened: the viewer does not search, so its index stays empty.
Read-only, server ledger: the live database is read (the views call no verb that writes). Live
(``allow_writes``): the store is opened as its writer (:meth:`MemoryManager.from_settings`); an embedded store's
writer lock is then held until the viewer stops.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memlineage.errors import StorageError
from memlineage.index import InMemoryIndex, OnnxMiniLMEmbedder
from memlineage.ledger import Ledger
from memlineage.manager import DEFAULT_DIR, MemoryManager
from memlineage.policy import builtin_policies
from memlineage.settings import MemLineageSettings
from memlineage.transfer._backup import snapshot_ledger

__all__ = ["ViewerStore"]


def _embedder(settings: MemLineageSettings) -> OnnxMiniLMEmbedder | None:
    # lazy: the model files are read only when something is embedded, which the read-only views never do
    return OnnxMiniLMEmbedder(settings.embedding_model_dir) if settings.embedding_model_dir else None


class ViewerStore:
    """The manager the viewer's requests use, one request at a time.

    Args:
        settings: A :class:`~memlineage.settings.MemLineageSettings` naming the store.
        allow_writes: Open the live store as a writer (needed by undo); otherwise read without writing.

    Raises:
        StoreLockedError: ``allow_writes`` and another process holds the embedded store.
        StorageError: the store cannot be read.
    """

    def __init__(self, settings: MemLineageSettings, *, allow_writes: bool = False) -> None:
        self.settings = settings
        self.allow_writes = allow_writes
        self._lock = threading.Lock()
        self._mm: MemoryManager | None = None
        self._signature: tuple[Any, ...] | None = None
        self._tmp: str | None = None
        self._closed = False
        with self._lock:
            self._current()  # fail now (locked store, unreadable ledger), not on the first page

    @contextmanager
    def manager(self) -> Iterator[MemoryManager]:
        """The manager to read (or, live, write) with; requests are served one at a time.

        Raises:
            StorageError: the viewer was closed, or the snapshot could not be taken.
        """
        with self._lock:
            yield self._current()

    def close(self) -> None:
        """Close the manager (releasing a writer lock) and remove the snapshot."""
        with self._lock:
            self._closed = True
            self._drop()

    # ------------------------------------------------------------------ internals
    def _home(self) -> Path:
        return Path(self.settings.home or DEFAULT_DIR).expanduser()

    def _current(self) -> MemoryManager:
        if self._closed:
            msg = "the viewer's store is closed"
            raise StorageError(msg)
        if self.allow_writes:
            if self._mm is None:
                self._mm = MemoryManager.from_settings(self.settings, embedder=_embedder(self.settings))
            return self._mm
        if self.settings.ledger_url:
            if self._mm is None:
                self._mm = self._reader(Ledger(self.settings.ledger_url, schema=self.settings.ledger_schema))
            return self._mm
        signature = self._stat()
        if self._mm is None or signature != self._signature:
            self._drop()
            self._tmp = tempfile.mkdtemp(prefix="memlineage-viewer-")
            copy = snapshot_ledger(self._home() / "ledger.db", Path(self._tmp))
            self._mm = self._reader(Ledger(f"sqlite:///{copy}"))
            self._signature = signature
        return self._mm

    def _reader(self, ledger: Ledger) -> MemoryManager:
        return MemoryManager(
            ledger=ledger,
            index=InMemoryIndex(),
            embedder=_embedder(self.settings),
            policy=builtin_policies(),
            repair_on_open=False,
        )

    def _stat(self) -> tuple[Any, ...]:
        """What changes when a writer commits: size and mtime of ``ledger.db`` and of its WAL."""
        out: list[Any] = []
        for name in ("ledger.db", "ledger.db-wal"):
            try:
                st = (self._home() / name).stat()
            except FileNotFoundError:
                out.append(None)
            else:
                out.append((st.st_size, st.st_mtime_ns))
        return tuple(out)

    def _drop(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        self._signature = None
