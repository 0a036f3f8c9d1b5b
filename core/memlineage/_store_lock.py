"""The writer lock of an embedded store: one writer process, and one open manager per store in a process."""

from __future__ import annotations

import threading
from pathlib import Path

from filelock import FileLock, Timeout

from memlineage.errors import StoreLockedError

__all__ = ["StoreLock", "acquire_lock"]

#: Stores opened by this process (resolved paths): a second open of one of them is refused with that reason.
_OPEN_STORES: set[Path] = set()
_OPEN_STORES_LOCK = threading.Lock()


def acquire_lock(store: Path, timeout: float) -> StoreLock:
    """Take the cross-process writer lock of an embedded store (``.writer.lock``) and register it as open.

    Raises:
        StoreLockedError: the store is open in this process, or another process holds the lock.
    """
    key = store.resolve()
    with _OPEN_STORES_LOCK:
        if key in _OPEN_STORES:
            msg = (
                f"the store at {store} is already open in this process; share that MemoryManager (it is "
                "thread-safe) or close it before opening the store again"
            )
            raise StoreLockedError(msg)
    lock = FileLock(str(store / ".writer.lock"))
    try:
        lock.acquire(timeout=timeout)
    except Timeout as exc:
        msg = (
            f"the store at {store} is open in another process (embedded mode allows one writer process); close "
            "it first, or run in server mode (PostgreSQL ledger_url + Chroma HttpClient) for several processes"
        )
        raise StoreLockedError(msg) from exc
    with _OPEN_STORES_LOCK:
        _OPEN_STORES.add(key)
    return StoreLock(lock, key)


class StoreLock:
    """The writer lock of an embedded store, also registered as open in this process until released."""

    def __init__(self, lock: FileLock, key: Path) -> None:
        self._lock = lock
        self._key = key
        self._held = True

    def release(self) -> None:
        """Release the lock and the registration; idempotent."""
        if not self._held:
            return
        self._held = False
        with _OPEN_STORES_LOCK:
            _OPEN_STORES.discard(self._key)
        self._lock.release()

    def __del__(self) -> None:  # a manager dropped without close() must not keep its store "open" forever
        self.release()
