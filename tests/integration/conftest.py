"""Fixtures for server mode: a PostgreSQL schema per test and a Chroma server per session.

PostgreSQL: ``MEMLINEAGE_TEST_PG_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``). Each test
gets its own schema, created before and dropped (CASCADE) after; the URL handed to the code under test pins it with
``options=-csearch_path=<schema>`` so that ``MemoryManager.open(ledger_url=...)`` needs nothing else. When the
server is unreachable the PostgreSQL cases are skipped with the reason, except under ``CI=true`` where they fail.

Chroma: ``chroma run --path <tmp> --host 127.0.0.1 --port <free port>`` from the venv's ``bin``, started once per
session, awaited through ``/api/v2/heartbeat`` and stopped by its PID. Tests isolate themselves by collection name.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from memlineage import MemoryManager
from memlineage.index import ChromaIndex, InMemoryIndex
from memlineage.index._chroma import close_client
from memlineage.testing import FakeEmbedder

PG_URL = os.environ.get("MEMLINEAGE_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REPO = Path(__file__).resolve().parents[2]


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason} (CI=true: server-mode tests must run on CI machines)")
    pytest.skip(reason)


def _psycopg_dsn(url: str) -> str:
    """``postgresql+psycopg://u@h:p/db`` → ``postgresql://u@h:p/db`` (libpq form)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The admin URL of a reachable PostgreSQL (skips, or fails under CI, when unreachable)."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the server extra is installed by `make test`
        _unavailable("psycopg is not installed; pip install 'memlineage[server]'")
    try:
        with psycopg.connect(_psycopg_dsn(PG_URL), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        _unavailable(f"PostgreSQL unreachable at {PG_URL} ({exc}); set MEMLINEAGE_TEST_PG_URL")
    return PG_URL


@dataclass(frozen=True)
class PgSchema:
    """A throwaway schema: ``name``, and ``url`` whose connections use it as their search path."""

    name: str
    url: str
    admin_url: str


def _with_search_path(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_schema(pg_server: str) -> Iterator[PgSchema]:
    """A fresh PostgreSQL schema for one test, dropped afterwards."""
    import psycopg

    name = f"ml_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_psycopg_dsn(pg_server), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield PgSchema(name=name, url=_with_search_path(pg_server, name), admin_url=pg_server)
    finally:
        with psycopg.connect(_psycopg_dsn(pg_server), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on an embedded SQLite file and on a PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    schema: PgSchema = request.getfixturevalue("pg_schema")
    return schema.url


# ---------------------------------------------------------------------------------------------- Chroma server
def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ChromaServer:
    """A running ``chroma run`` process."""

    host: str
    port: int
    pid: int
    path: Path
    proc: subprocess.Popen[bytes]
    clients: list[Any] = field(default_factory=list)

    def client(self) -> Any:
        """A fresh ``chromadb.HttpClient`` to this server (closed after the test by ``_close_chroma_clients``)."""
        import chromadb
        from chromadb.config import Settings

        client = chromadb.HttpClient(host=self.host, port=self.port, settings=Settings(anonymized_telemetry=False))
        self.clients.append(client)
        return client

    def close_clients(self) -> None:
        """Close the clients handed out so far (their sockets would otherwise live until garbage collection)."""
        while self.clients:
            close_client(self.clients.pop())

    def stop(self) -> None:
        """SIGTERM by PID, then SIGKILL after 10 s."""
        if self.proc.poll() is not None:
            return
        os.kill(self.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def chroma_cli() -> str:
    """The ``chroma`` executable next to this interpreter (the venv's), else the one on PATH."""
    here = Path(sys.executable).parent / "chroma"
    if here.exists():
        return str(here)
    found = shutil.which("chroma")
    if found is None:
        _unavailable("the `chroma` CLI is not installed (it ships with chromadb)")
    return str(found)


def start_chroma(path: Path, *, timeout: float = 30.0) -> ChromaServer:
    """Start ``chroma run`` on a free port and wait for its heartbeat.

    Raises:
        RuntimeError: the server exited or did not answer within ``timeout`` seconds (its log is included).
    """
    path.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = path.parent / f"chroma-{port}.log"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    with log.open("wb") as out:  # the server keeps its own descriptor; ours is closed once it has started
        proc = subprocess.Popen(  # noqa: S603 - fixed argv
            [chroma_cli(), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    server = ChromaServer("127.0.0.1", port, proc.pid, path, proc)
    _SERVERS.append(server)
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:  # noqa: S310 - local http
                if resp.status == 200:
                    return server
        except OSError:
            time.sleep(0.1)
    server.stop()
    text = log.read_text(errors="replace")[-2000:]
    msg = f"chroma server did not start on port {port}: {text}"
    raise RuntimeError(msg)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """One Chroma server for the session; tests use unique collection names."""
    try:
        server = start_chroma(tmp_path_factory.mktemp("chroma-server") / "data")
    except RuntimeError as exc:
        _unavailable(str(exc))
    try:
        yield server
    finally:
        server.stop()


#: Chroma servers started in this session (their clients are closed after each test).
_SERVERS: list[ChromaServer] = []


@pytest.fixture(autouse=True)
def _close_chroma_clients() -> Iterator[None]:
    """After each test, close the HTTP clients the Chroma servers handed out during it."""
    yield
    for server in _SERVERS:
        server.close_clients()


def unique_collection(prefix: str = "t") -> str:
    """A collection name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


@pytest.fixture(params=["memory", "ephemeral", "persistent", "server"])
def index_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    """Builds the same kind of index each call (a second call reopens the same collection / directory)."""
    name = unique_collection()
    kind = request.param
    if kind == "memory":
        shared = InMemoryIndex()
        return lambda: shared
    if kind == "ephemeral":
        return lambda: ChromaIndex.ephemeral(name)
    if kind == "persistent":
        return lambda: ChromaIndex.persistent(tmp_path / "chroma", name)
    server: ChromaServer = request.getfixturevalue("chroma_server")
    return lambda: ChromaIndex(server.client(), name)


@pytest.fixture
def server_manager(pg_schema: PgSchema, chroma_server: ChromaServer) -> Iterator[MemoryManager]:
    """A manager in full server mode: PostgreSQL ledger + Chroma server, fake embedder."""
    mm = MemoryManager.open(
        ledger_url=pg_schema.url,
        chroma_client=chroma_server.client(),
        collection=unique_collection("srv"),
        embedder=FakeEmbedder(),
    )
    yield mm
    mm.close()
