"""``memlineage serve``: a lineage viewer in the browser (needs the ``viewer`` extra: starlette, uvicorn, jinja2).

Pages: a user's memories (filter by status), a memory's premises and dependents as an SVG graph, the blast radius
of correcting it (:meth:`~memlineage.MemoryManager.impact`), the audit trail, and the automatic update decisions
with their reasons, each undoable (:meth:`~memlineage.MemoryManager.undo`) when the viewer was started with
``allow_writes``. JSON twins live under ``/api/``. Everything is served from this package (no CDN): it works
offline, and its Content-Security-Policy lets the browser load nothing from elsewhere.

Example:
    >>> from memlineage.settings import MemLineageSettings
    >>> from memlineage.viewer import ViewerStore, create_app
    >>> app = create_app(ViewerStore(MemLineageSettings(home="/tmp/store")), default_user="alice")  # doctest: +SKIP
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from memlineage.errors import ConfigurationError
from memlineage.settings import MemLineageSettings
from memlineage.viewer._store import ViewerStore
from memlineage.viewer.app import LOCAL_HOSTS, create_app

__all__ = ["HOST", "LOCAL_HOSTS", "ViewerStore", "create_app", "serve"]

#: The viewer listens on the loopback interface only.
HOST = "127.0.0.1"


def serve(
    settings: MemLineageSettings,
    *,
    port: int = 8765,
    user: str | None = None,
    allow_writes: bool = False,
    echo: Callable[[str], None] = print,
    log_level: str = "warning",
) -> None:
    """Serve the viewer for the store ``settings`` names on ``127.0.0.1:port`` until interrupted.

    Args:
        settings: A :class:`~memlineage.settings.MemLineageSettings`.
        port: TCP port; 0 picks a free one (the URL printed says which).
        user: The user whose pages open first.
        allow_writes: Open the live store and enable undo; otherwise read a snapshot and never write.
        echo: Where the URL line goes.
        log_level: uvicorn's log level.

    Raises:
        ConfigurationError: the port cannot be bound (in use, no permission).
        StoreLockedError: ``allow_writes`` and another process holds the embedded store.
    """
    import uvicorn  # deferred: only serving needs it

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        msg = f"cannot listen on {HOST}:{port}: {exc.strerror or exc}; pick another --port"
        raise ConfigurationError(msg) from None
    store = ViewerStore(settings, allow_writes=allow_writes)
    try:
        app = create_app(store, default_user=user)
        bound = sock.getsockname()[1]
        mode = "undo enabled (live store)" if allow_writes else "read-only"
        echo(f"MemLineage viewer ({mode}) at http://{HOST}:{bound}/  (Ctrl+C to stop)")
        config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        store.close()
