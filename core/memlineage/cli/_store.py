"""How a command finds and opens its store: settings, existence checks, read-only snapshots, the writer."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import typer
from rich.markup import escape

from memlineage.cli._app import _Fail, err_console
from memlineage.errors import MemLineageError, StoreLockedError
from memlineage.index import ChromaIndex, InMemoryIndex, OnnxMiniLMEmbedder, VectorIndex, index_metadata
from memlineage.ledger import Ledger, SQLAlchemyError, has_memory_table, hide_url_password
from memlineage.manager import DEFAULT_DIR, MemoryManager, collection_for
from memlineage.models import Scope, Status, match_short_id
from memlineage.policy import builtin_policies
from memlineage.settings import MemLineageSettings
from memlineage.transfer._backup import snapshot_ledger

if TYPE_CHECKING:
    from chromadb.api import ClientAPI


def _settings(
    path: Path | None, ledger_url: str | None, chroma_host: str | None, chroma_port: int | None = None
) -> MemLineageSettings:
    s = MemLineageSettings()
    update: dict[str, Any] = {}
    if path is not None:
        update["home"] = path
    if ledger_url:
        update["ledger_url"] = ledger_url
    if chroma_host:
        update["chroma_host"] = chroma_host
    if chroma_port is not None:
        update["chroma_port"] = chroma_port
    return s.model_copy(update=update) if update else s


def _redacted(text: str, settings: MemLineageSettings | None) -> str:
    """``text`` without the ledger URL's password (every error the CLI prints passes through here)."""
    url = getattr(settings, "ledger_url", None) if settings is not None else None
    if not url:
        return text
    return hide_url_password(text, url)


def _embedder(settings: MemLineageSettings) -> OnnxMiniLMEmbedder | None:
    if settings.embedding_model_dir:
        return OnnxMiniLMEmbedder(settings.embedding_model_dir)
    return None


def _chroma_client(settings: MemLineageSettings) -> ClientAPI | None:
    if not settings.chroma_host:
        return None
    import chromadb  # deferred: heavy, and only a Chroma server needs its HttpClient

    try:
        return chromadb.HttpClient(host=settings.chroma_host, port=settings.chroma_port)
    except Exception as exc:  # chromadb raises ValueError / httpx errors for an unreachable server
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = (
            f"cannot reach the Chroma server at {settings.chroma_host}:{settings.chroma_port} ({first}); check "
            "--chroma-host / --chroma-port (or MEMLINEAGE_CHROMA_HOST / MEMLINEAGE_CHROMA_PORT)"
        )
        raise _Fail(msg) from None


def _has_ledger_tables(url: str, schema: str | None = None) -> bool:
    try:
        return has_memory_table(url, schema)
    except SQLAlchemyError as exc:
        msg = f"cannot reach the ledger at {url!r}: {exc}; check --ledger-url / MEMLINEAGE_LEDGER_URL"
        raise _Fail(msg) from None


def _ensure_exists(settings: MemLineageSettings, create: bool) -> None:
    """Refuse a store that does not exist (a typo must not print an empty result), or create it."""
    if settings.ledger_url:
        if _has_ledger_tables(settings.ledger_url, settings.ledger_schema):
            return
        where = f"the database {settings.ledger_url!r} has no MemLineage tables (ml_memories, ml_events, ...)"
    else:
        home = Path(settings.home or DEFAULT_DIR).expanduser()
        if (home / "ledger.db").is_file():
            return
        where = f"no MemLineage store at {home} (no ledger.db there)"
    if not create:
        msg = (
            f"{where}; point --path / --ledger-url (or MEMLINEAGE_HOME / MEMLINEAGE_LEDGER_URL) at an existing store, "
            "or pass --create to start an empty one"
        )
        raise _Fail(msg)
    if settings.ledger_url:
        # creates the tables; the index fills as memories arrive
        Ledger(settings.ledger_url, schema=settings.ledger_schema).close()
    else:
        MemoryManager.from_settings(settings, embedder=_embedder(settings)).close()


def _load_index(mm: MemoryManager) -> None:
    """Fill an in-memory index from the vectors stored in the ledger (re-embedding rows without one); no writes."""
    rows = [
        r
        for r in mm.ledger.all_index_rows()
        if r["status"] not in (Status.ARCHIVED.value, Status.ERASED.value) and r["index_state"] != "removing"
    ]
    missing = [r for r in rows if r["embedding"] is None]
    vectors = (
        dict(zip([r["id"] for r in missing], mm.services.embedding.embed([r["content"] for r in missing])))
        if missing
        else {}
    )
    for start in range(0, len(rows), 2000):
        chunk = rows[start : start + 2000]
        vecs: list[Any] = [
            vectors[r["id"]] if r["embedding"] is None else np.frombuffer(r["embedding"], dtype="<f4") for r in chunk
        ]
        mm.index.upsert([r["id"] for r in chunk], vecs, [index_metadata(r) for r in chunk])


@contextmanager
def _reader(settings: MemLineageSettings, *, live: bool) -> Iterator[MemoryManager]:
    """A manager for the views: a read-only snapshot (default) or the live store."""
    embedder = _embedder(settings)
    if live:
        try:
            mm = MemoryManager.from_settings(settings, embedder=embedder)
        except StoreLockedError as exc:
            msg = f"{exc}\nhint: drop --live to read a snapshot while the application runs"
            raise _Fail(msg) from exc
        with mm:
            yield mm
        return
    with tempfile.TemporaryDirectory(prefix="memlineage-ro-") as tmp:
        if settings.ledger_url:
            ledger = Ledger(settings.ledger_url, schema=settings.ledger_schema)
            client = _chroma_client(settings)
        else:
            home = Path(settings.home or DEFAULT_DIR).expanduser()
            ledger = Ledger(f"sqlite:///{snapshot_ledger(home / 'ledger.db', tmp)}")
            client = None
        if client is not None:
            name = settings.collection or collection_for(settings.ledger_url, settings.ledger_schema)
            index: VectorIndex = ChromaIndex(client, name, owns_client=True)
        else:
            index = InMemoryIndex()
        mm = MemoryManager(
            ledger=ledger, index=index, embedder=embedder, policy=builtin_policies(), repair_on_open=False
        )
        try:
            if client is None:
                _load_index(mm)
            yield mm
        finally:
            mm.close()
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _open(
    path: Path | None,
    ledger_url: str | None,
    chroma_host: str | None,
    *,
    create: bool,
    live: bool,
    chroma_port: int | None = None,
) -> Iterator[MemoryManager]:
    """Resolve the store from options and settings, refuse a missing one, and turn errors into exit code 2.

    The message printed never holds the ledger URL's password.
    """
    settings = None
    try:
        settings = _settings(path, ledger_url, chroma_host, chroma_port)
        _ensure_exists(settings, create)
        with _reader(settings, live=live or False) as mm:
            yield mm
    except (_Fail, MemLineageError, SQLAlchemyError) as exc:
        err_console.print(f"[red]error:[/] {escape(_redacted(str(exc), settings))}")
        raise typer.Exit(2) from None


def _is_server(mm: MemoryManager) -> bool:
    return not mm.ledger.is_sqlite


def _fail(exc: Exception, settings: MemLineageSettings | None) -> typer.Exit:
    err_console.print(f"[red]error:[/] {escape(_redacted(str(exc), settings))}")
    return typer.Exit(2)


@contextmanager
def _writer(settings: MemLineageSettings) -> Iterator[MemoryManager]:
    """The store opened as its writer (created when missing), with the lock error explained."""
    try:
        mm = MemoryManager.from_settings(settings, embedder=_embedder(settings))
    except StoreLockedError as exc:
        msg = f"{exc}\nhint: stop the application that holds the store first"
        raise _Fail(msg) from exc
    with mm:
        yield mm


def _resolve_id(mm: MemoryManager, memory_id: str, scope: Scope) -> str:
    """Accept the short ids ``recall`` prints (:func:`memlineage.models.match_short_id`), unique in the scope."""
    if mm.get(memory_id, scope=scope) is not None or len(memory_id) >= 36:
        return memory_id
    matches = match_short_id(memory_id, mm.ledger.ids_in_scope(scope))
    return matches[0] if len(matches) == 1 else memory_id


def _resolve_activity(mm: MemoryManager, run: str, scope: Scope) -> str:
    """The activity a short id names in the scope (as ``activities`` prints them), else ``run`` itself."""
    matches = match_short_id(run, [a.id for a in mm.activities(scope)])
    return matches[0] if len(matches) == 1 else run
