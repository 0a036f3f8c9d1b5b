"""The embedded store's Chroma in a child process of its own (the default of :meth:`ChromaIndex.persistent`).

chromadb's Rust binding holds the GIL for the whole of ``Collection.add`` (design notes, "Why ingest stays near
0.5x"): an in-process ``PersistentClient`` stops every other thread of the agent while it writes, so the ledger
write, update detection and the agent's own turn wait for Chroma. :class:`ChromaProcess` runs the same
``PersistentClient`` (the same files, the same on-disk format) in a child Python process started with
``subprocess`` and talks to it over a private ``socket.socketpair`` with :mod:`multiprocessing.connection`'s
pickled messages; no network port is opened, so no other local process can reach the store. While a call waits
for the child, this process runs on.

The child starts with the first call that needs Chroma (a read of Chroma itself), or as soon as the index sync
queues the store's first Chroma write (:meth:`ChromaProcess.prestart`), and takes about a second to import
chromadb; the first request waits for what is left of that. If it
cannot start (no ``sys.executable``, a platform without ``pass_fds``, chromadb failing in the child), the client
falls back to an in-process ``PersistentClient`` over the same directory and logs it at WARNING. A child that dies
under the store (killed, out of memory) fails the call in flight with a ``StorageError`` and is replaced by a fresh
one, as is a child whose call was interrupted before its answer was read. The child exits when this process closes
the socket: on :meth:`ChromaProcess.close`, at interpreter exit, or when this process dies (the socket's end of
file), so it never outlives its parent.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlineage.errors import StorageError

if TYPE_CHECKING:  # type names only: the child imports chromadb, this process only for the fallback
    from chromadb.api import ClientAPI

logger = logging.getLogger(__name__)

#: Environment variable that turns the child process off (``0``): Chroma runs in this process then.
ENV_CHROMA_PROCESS = "MEMLINEAGE_CHROMA_PROCESS"
#: Seconds the first call waits for the child to open its client.
START_TIMEOUT_S = 120.0


class ChildChromaError(Exception):
    """An exception raised in the child, re-raised here under its chromadb type name (``kind``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def wanted() -> bool:
    """Whether an embedded store runs Chroma in a child process.

    Yes on POSIX under a Python interpreter (not a frozen application, nor a host such as uWSGI whose
    ``sys.executable`` is not Python), unless ``MEMLINEAGE_CHROMA_PROCESS`` is ``0``, ``false`` or ``no``.
    """
    name = Path(sys.executable or "").name.lower()
    return (
        os.name == "posix"
        and not getattr(sys, "frozen", False)
        and name.startswith(("python", "pypy"))
        and os.environ.get(ENV_CHROMA_PROCESS, "1").strip().lower() not in {"0", "false", "no"}
    )


class _Collection:
    """The collection calls :class:`~memlineage.index.ChromaIndex` makes, forwarded to the child."""

    def __init__(self, client: ChromaProcess, name: str) -> None:
        self._client = client
        self.name = name

    def _call(self, method: str, **kwargs: object) -> Any:
        return self._client.request("call", self.name, method, kwargs)

    def add(self, **kwargs: object) -> None:
        self._call("add", **kwargs)

    def upsert(self, **kwargs: object) -> None:
        self._call("upsert", **kwargs)

    def update(self, **kwargs: object) -> None:
        self._call("update", **kwargs)

    def delete(self, **kwargs: object) -> None:
        self._call("delete", **kwargs)

    def get(self, **kwargs: object) -> Any:
        return self._call("get", **kwargs)

    def query(self, **kwargs: object) -> Any:
        return self._call("query", **kwargs)

    def count(self) -> int:
        return int(self._call("count"))


class ChromaProcess:
    """A ``PersistentClient`` at ``path`` in a child process; the client surface that ``ChromaIndex`` uses.

    Calls are serialised (one request on the socket at a time) and thread-safe. After :meth:`close`, or once the
    child failed to start, calls go to an in-process ``PersistentClient`` over the same directory.

    Args:
        path: The Chroma directory (created by Chroma if missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()  # the child, or a fresh one after a chdir, opens this very directory
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._local: ClientAPI | None = None  # the in-process fallback client
        self._opens: dict[str, dict[str, object]] = {}  # collections to open once the child is ready
        self._pid = os.getpid()  # a forked copy of this process must not talk to the child over the same socket
        self._started = False  # the child starts with the first request: a store closed before it wrote starts none
        self._at_exit = functools.partial(_close_at_exit, weakref.ref(self))
        atexit.register(self._at_exit)

    @property
    def in_child(self) -> bool:
        """Whether calls go to a child process now (False before the first call, after a fallback or :meth:`close`)."""
        return self._conn is not None

    def _start(self) -> None:
        script = Path(__file__).with_name("_chroma_child.py")
        if not script.exists():
            return
        ours, theirs = socket.socketpair()
        try:
            env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
            self._proc = subprocess.Popen(  # noqa: S603 - our own script, run by this interpreter
                [sys.executable, str(script), str(theirs.fileno()), str(self.path)],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # Ctrl-C reaches this process alone: it flushes, then closes the child
            )
        except OSError as exc:
            ours.close()
            logger.warning("Chroma child process could not start (%s); Chroma runs in this process", exc)
            return
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())

    def _fallback(self, why: str) -> None:
        """Drop the child and serve calls from an in-process client (caller holds the lock)."""
        logger.warning("Chroma child process at %s failed (%s); Chroma runs in this process", self.path, why)
        self._stop_child()

    def _local_client(self) -> ClientAPI:
        if self._local is None:
            from memlineage.index._chroma import persistent_client  # deferred: that module imports this one

            self._local = persistent_client(self.path)
        return self._local

    def _wait_ready(self) -> None:
        assert self._conn is not None
        try:
            if not self._conn.poll(START_TIMEOUT_S):
                self._fallback(f"no answer in {START_TIMEOUT_S:.0f} s")
                return
            answer = self._conn.recv()
        except (EOFError, OSError) as exc:
            self._fallback(f"it exited: {type(exc).__name__}")
            return
        if answer[0] != "ready":
            self._fallback(f"{answer[1]}: {answer[2]}")
            return
        self._ready = True

    def request(self, op: str, name: str, method: str, kwargs: Mapping[str, object]) -> Any:
        """Send one request to the child (or run it in process) and return its result.

        Raises:
            ChildChromaError: Chroma raised in the child (``kind`` is its exception type's name).
        """
        if os.getpid() != self._pid:
            msg = (
                f"the store's Chroma process at {self.path} belongs to the process that opened the store (pid "
                f"{self._pid}); after os.fork(), open the store again in this process"
            )
            raise StorageError(msg)
        with self._lock:
            if not self._started:
                self._started = True
                self._start()
            if self._conn is not None and not self._ready:
                self._wait_ready()
            opens = list(self._opens.items())
            self._opens.clear()
            for opened, request in opens:  # collections asked for while the child was starting
                if (opened, op) != (name, "open"):
                    self._send("open", opened, "", request)
            return self._send(op, name, method, kwargs)

    def prestart(self) -> None:
        """Start the child now without waiting for it (a no-op once started, after a fallback, or in a fork).

        The index sync calls this when it first queues a Chroma write, so the child imports chromadb while the
        write's ledger work runs instead of after it: the first request finds it ready, or waits less.
        """
        if os.getpid() != self._pid:
            return
        with self._lock:
            if not self._started:
                self._started = True
                self._start()

    def _send(self, op: str, name: str, method: str, kwargs: Mapping[str, object]) -> Any:
        """One request, to the child or (after a fallback) to the in-process client; the caller holds the lock."""
        if self._conn is None:
            return _run_local(self._local_client(), op, name, method, kwargs)
        try:
            self._conn.send((op, name, method, dict(kwargs)))
            answer = self._conn.recv()
        except (EOFError, OSError) as exc:
            # the child died (killed, out of memory): this call fails, the next one goes to a fresh child (the
            # in-process client serves only when a child cannot start: Chroma's files must not be shared by a
            # Chroma of this process and the sqlite3 connection that compacts them after an erasure)
            msg = f"the Chroma process at {self.path} exited ({type(exc).__name__}); a new one is started"
            self._replace_child()
            raise StorageError(msg) from exc
        except BaseException:
            # interrupted between a request and its answer (Ctrl-C in a notebook, an async exception): where the
            # stream stands is unknown, and the next call must never read this call's answer, so the child is
            # replaced by a fresh one (a write it had not acknowledged stays pending in the ledger)
            self._replace_child()
            raise
        if answer[0] == "err":
            raise ChildChromaError(answer[1], answer[2])
        return answer[1]

    # ------------------------------------------------------------------ the client surface ChromaIndex uses
    def get_or_create_collection(
        self, name: str, embedding_function: object = None, metadata: Mapping[str, object] | None = None
    ) -> Any:
        """Open (or create) the collection ``name`` with no embedding function; returns its call forwarder."""
        del embedding_function  # vectors always come from the caller
        request: dict[str, object] = {"metadata": dict(metadata) if metadata else None}
        with self._lock:
            if not self._started or (self._conn is not None and not self._ready):  # opened with the first call
                self._opens[name] = request
                return _Collection(self, name)
        local = self.request("open", name, "", request)
        return _Collection(self, name) if local is None else local

    def delete_collection(self, name: str) -> None:
        """Drop the collection ``name``."""
        self.request("drop", name, "", {})

    def close(self) -> None:
        """Ask the child to exit and wait for it (10 s, then kill); release the fallback client. Idempotent.

        In a forked copy of the opening process this only forgets the child: the child serves the original.
        """
        atexit.unregister(self._at_exit)
        if os.getpid() != self._pid:
            self._conn, self._proc, self._local = None, None, None
            return
        with self._lock:
            self._stop_child(graceful=True)
            if self._local is not None:
                from memlineage.index._chroma import close_client  # deferred: that module imports this one

                close_client(self._local)
                self._local = None

    def _replace_child(self) -> None:
        """End the child at once and start a fresh one over the same directory (the caller holds the lock)."""
        self._ready = False  # whatever it was doing is not awaited
        self._stop_child()
        self._start()

    def _stop_child(self, *, graceful: bool = False) -> None:
        conn, proc, ready = self._conn, self._proc, self._ready
        self._conn, self._proc, self._ready = None, None, False
        if proc is not None and not ready and conn is not None:
            # still starting, or replaced after a broken call: nothing it holds is awaited, so it need not finish
            conn.close()
            proc.terminate()
            proc.wait()
            return
        if conn is not None:
            if graceful:
                try:
                    conn.send(("close", "", "", {}))
                    if conn.poll(10):
                        conn.recv()
                except (EOFError, OSError):
                    pass
            conn.close()
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _run_local(client: ClientAPI, op: str, name: str, method: str, kwargs: Mapping[str, object]) -> Any:
    """A request served by an in-process client (the fallback)."""
    if op == "open":
        metadata = kwargs.get("metadata")
        return client.get_or_create_collection(
            name, embedding_function=None, metadata=metadata if isinstance(metadata, dict) else None
        )
    if op == "drop":
        return client.delete_collection(name)
    return getattr(client.get_collection(name, embedding_function=None), method)(**kwargs)


def _close_at_exit(ref: weakref.ReferenceType[ChromaProcess]) -> None:
    """Close the child at interpreter exit, after the index sync's own exit hook applied what it still held."""
    proc = ref()
    if proc is not None:
        proc.close()
