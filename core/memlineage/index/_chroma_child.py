"""The Chroma process of an embedded store: a ``PersistentClient`` served over one inherited socket.

Run as a script by :class:`memlineage.index._chroma_process.ChromaProcess`, never imported by the library, so it
imports nothing of ``memlineage`` (the child starts with chromadb alone). Usage::

    python _chroma_child.py FD PATH

``FD`` is the child's end of a ``socket.socketpair`` (inherited through ``pass_fds``), ``PATH`` the Chroma
directory. The child answers ``("ready", None)`` once the client is open (or ``("err", kind, message)`` and
exits), then serves requests ``(op, name, method, kwargs)`` one at a time until the parent closes the socket
(``EOFError``: the parent exited or died) or asks ``("close", ...)``:

- ``("open", name, "", {"metadata": ...})``: ``get_or_create_collection(name, embedding_function=None, ...)``;
- ``("drop", name, "", {})``: ``delete_collection(name)``;
- ``("call", name, method, kwargs)``: ``collection.<method>(**kwargs)`` for ``add``, ``upsert``, ``update``,
  ``delete``, ``get``, ``query`` and ``count``.

Each answer is ``("ok", result)`` or ``("err", exception type name, message)``.
"""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection

_METHODS = frozenset({"add", "upsert", "update", "delete", "get", "query", "count"})


def _plain(value: object) -> object:
    """Chroma's results as builtins (and numpy arrays), so the parent unpickles them without chromadb's types."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def serve(conn: Connection, path: str) -> None:
    """Open the client at ``path`` and answer requests on ``conn`` until it closes."""
    try:
        import chromadb
        from chromadb.config import Settings

        client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which falls back to an in-process client
        conn.send(("err", type(exc).__name__, str(exc)))
        return
    conn.send(("ready", None))
    collections: dict[str, object] = {}
    while True:
        try:
            op, name, method, kwargs = conn.recv()
        except (EOFError, OSError):  # the parent closed its end, exited or died
            return
        if op == "close":
            conn.send(("ok", None))
            return
        try:
            if op == "open":
                collections[name] = client.get_or_create_collection(name, embedding_function=None, **kwargs)
                result: object = None
            elif op == "drop":
                collections.pop(name, None)
                client.delete_collection(name)
                result = None
            elif op == "call" and method in _METHODS:
                col = collections.get(name)
                if col is None:
                    col = collections[name] = client.get_collection(name, embedding_function=None)
                result = _plain(getattr(col, method)(**kwargs))
            else:
                raise ValueError(f"unknown request {op!r} {method!r}")
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller, typed by name
            if type(exc).__name__ in {"NotFoundError", "InvalidCollectionException"}:
                collections.pop(name, None)  # reopened by name on the next request
            conn.send(("err", type(exc).__name__, str(exc)))
            continue
        conn.send(("ok", result))


if __name__ == "__main__":
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    serve(Connection(int(sys.argv[1])), sys.argv[2])
