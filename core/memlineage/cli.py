"""The ``memlineage`` command: a demo plus read-only views (recall, explain, audit, activities, stats) of a store.

Where the store is: ``--path`` / ``--ledger-url`` / ``--chroma-host`` first, then the environment
(``MEMLINEAGE_HOME``, ``MEMLINEAGE_LEDGER_URL``, ``MEMLINEAGE_CHROMA_HOST``/``_PORT``, ``MEMLINEAGE_COLLECTION``,
``MEMLINEAGE_LEDGER_SCHEMA``, ``MEMLINEAGE_EMBEDDING_MODEL_DIR``; see
:class:`~memlineage.settings.MemLineageSettings`), then ``./.memlineage``.
A store that does not exist is an error (exit code 2) unless ``--create`` is given: a typo never yields an empty
result.

Read-only mode (the default for every view): the embedded ledger (``ledger.db``) is copied with SQLite's online
backup API from a ``mode=ro`` connection, which gives a consistent point-in-time snapshot even while an application
holds the store and writes to it; the vector index is rebuilt in memory from the vectors stored in the ledger, so
Chroma's files are never opened. Nothing the command does (usage counts, expiry found by ``recall``) reaches the
store. With a server ledger (``--ledger-url``) the views read the live database: no usage counts are written, but
``recall`` still records the expiries that are due (as every reader does, with ``expired`` events); the index comes
from the Chroma server when ``--chroma-host`` is set, otherwise from the ledger's vectors.
``--live`` opens an embedded store as a writer instead (it takes the writer lock, so it fails while an
application holds the store).
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from memlineage._demo import run_core_demo
from memlineage._version import __version__
from memlineage.errors import MemLineageError, StoreLockedError
from memlineage.index import ChromaIndex, InMemoryIndex, OnnxMiniLMEmbedder, index_metadata
from memlineage.ledger import Ledger
from memlineage.ledger import migrate as migrate_ledger
from memlineage.manager import DEFAULT_DIR, MemoryManager, collection_for
from memlineage.models import SHORT_ID_CHARS, Scope, Status, match_short_id, short_id
from memlineage.policy import builtin_policies
from memlineage.render import explanation_tree
from memlineage.settings import MemLineageSettings
from memlineage.transfer._backup import snapshot_ledger

#: Entry point group under which packages register ``memlineage demo`` stories (``agent``: the LangChain one).
DEMO_GROUP = "memlineage.demos"

app = typer.Typer(help="MemLineage: agent memory with lineage, policies and value.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"memlineage {__version__}")
        raise typer.Exit


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """MemLineage: agent memory with lineage, policies and value."""


PathOpt = Annotated[
    Path | None,
    typer.Option("--path", help="Embedded store directory (default $MEMLINEAGE_HOME, else ./.memlineage)."),
]
LedgerOpt = Annotated[
    str | None,
    typer.Option("--ledger-url", help="SQLAlchemy URL of a server ledger (default $MEMLINEAGE_LEDGER_URL)."),
]
ChromaOpt = Annotated[
    str | None, typer.Option("--chroma-host", help="Chroma server host (default $MEMLINEAGE_CHROMA_HOST).")
]
ChromaPortOpt = Annotated[
    int | None,
    typer.Option("--chroma-port", min=1, max=65535, help="Chroma server port (default $MEMLINEAGE_CHROMA_PORT, 8000)."),
]
CreateOpt = Annotated[bool, typer.Option("--create", help="Create the store when it does not exist yet.")]
LiveOpt = Annotated[
    bool,
    typer.Option(
        "--live/--read-only",
        help="--read-only (default) reads a snapshot and never writes; --live opens the store as its writer.",
    ),
]
UserOpt = Annotated[str, typer.Option("--user", help="user_id of the scope to read.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of readable rows.")]


class _Fail(Exception):
    """A CLI error with its message (exit code 2)."""


def _settings(
    path: Path | None, ledger_url: str | None, chroma_host: str | None, chroma_port: int | None = None
) -> Any:
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


def _redacted(text: str, settings: Any) -> str:
    """``text`` without the ledger URL's password (every error the CLI prints passes through here)."""
    url = getattr(settings, "ledger_url", None) if settings is not None else None
    if not url:
        return text
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return text
    if parsed.password:
        text = text.replace(url, parsed.render_as_string(hide_password=True))
        text = text.replace(str(parsed.password), "***")
    return text


def _embedder(settings: Any) -> Any:
    if settings.embedding_model_dir:
        return OnnxMiniLMEmbedder(settings.embedding_model_dir)
    return None


def _chroma_client(settings: Any) -> Any:
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
    engine = create_engine(url)
    try:
        return inspect(engine).has_table("ml_memories", schema=schema)
    except SQLAlchemyError as exc:
        msg = f"cannot reach the ledger at {url!r}: {exc}; check --ledger-url / MEMLINEAGE_LEDGER_URL"
        raise _Fail(msg) from None
    finally:
        engine.dispose()


def _ensure_exists(settings: Any, create: bool) -> None:
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
def _reader(settings: Any, *, live: bool) -> Iterator[MemoryManager]:
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
            index: Any = ChromaIndex(client, name, owns_client=True)
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


@app.command()
def demo(
    path: Annotated[Path | None, typer.Option(help="Store directory; default a fresh temporary one.")] = None,
    agent: Annotated[
        bool, typer.Option("--agent/--core", help="Run the LangChain AgentExecutor story (needs the langchain extra).")
    ] = True,
    model: Annotated[
        str | None,
        typer.Option(help="Any LangChain init_chat_model spec, e.g. openai:gpt-4o-mini; default: scripted, offline."),
    ] = None,
) -> None:
    """Run the travel-planning story on a fresh embedded store, offline."""
    if path is not None and path.exists() and (not path.is_dir() or any(path.iterdir())):
        # The story starts from nothing; on top of an earlier run its turns would meet that run's memories.
        err_console.print(
            f"[red]error:[/] {path} is not an empty directory; the demo needs a fresh store: remove it or pick "
            "another --path (inspect the earlier run with `memlineage stats --user alice --path ...`)"
        )
        raise typer.Exit(2)
    try:
        if agent:
            # The agent story lives in the LangChain adapter package, which registers it as the entry point
            # ``memlineage.demos:agent``; the core never imports an adapter.
            runner = _demo_runner("agent")
            if runner is not None:
                runner(path, console, model=model)
                return
            console.print("[yellow]langchain extra not installed; running the core story instead[/]")
        with tempfile.TemporaryDirectory(prefix="memlineage-demo-") as tmp:
            run_core_demo(path or Path(tmp), console)
    except MemLineageError as exc:
        err_console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc


def _demo_runner(name: str) -> Any:
    """The demo registered by an installed package under the entry point group ``memlineage.demos``, or None.

    None also when the package is there but its framework is not (the ``langchain`` extra not installed).
    """
    for entry in importlib.metadata.entry_points(group=DEMO_GROUP):
        if entry.name == name:
            try:
                return entry.load()
            except ImportError:
                return None
    return None


@app.command()
def migrate(
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    schema: Annotated[
        str | None,
        typer.Option("--schema", help="PostgreSQL schema of the tables (default $MEMLINEAGE_LEDGER_SCHEMA)."),
    ] = None,
) -> None:
    """Bring a ledger's schema to this release's revision (run once per release in server mode).

    Embedded stores migrate themselves on open; a server (PostgreSQL) ledger whose schema is older is refused on
    open until this command has run. Safe to repeat; concurrent runs wait for each other.
    """
    settings = _settings(path, ledger_url, None)
    url = settings.ledger_url
    if not url:
        db = Path(settings.home or DEFAULT_DIR).expanduser() / "ledger.db"
        if not db.is_file():
            err_console.print(f"[red]error:[/] no MemLineage store at {db.parent} (no ledger.db there)")
            raise typer.Exit(2)
        url = f"sqlite:///{db}"
    try:
        with _progress() as bar:
            bar("migrating the ledger")(0, 0)  # an indeterminate bar: Alembic reports no steps
            found, now = migrate_ledger(url, schema=schema or settings.ledger_schema)
    except (MemLineageError, SQLAlchemyError) as exc:
        err_console.print(f"[red]error:[/] {escape(_redacted(str(exc), settings))}")
        raise typer.Exit(2) from None
    if found == now:
        console.print(f"the ledger is at revision {now} already; nothing to do")
    elif found == "new":
        console.print(f"created the ledger's tables at revision {now}")
    else:
        console.print(f"migrated the ledger from {found} to revision {now}")


@app.command()
def recall(
    query: str,
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    k: Annotated[int, typer.Option(help="Number of results.")] = 5,
    include_suspect: Annotated[bool, typer.Option(help="Also show suspect memories.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Recall memories for QUERY in a user's scope."""
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        # Read-only views never record usage; --live recall is an ordinary reader and records it.
        res = mm.recall(query, scope=Scope(user_id=user), k=k, include_suspect=include_suspect, reinforce=live)
        if as_json:
            rows = [{"score": h.score, **h.memory.model_dump(mode="json")} for h in res]
            typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
            return
        table = Table("score", "id", "status", "source", "content")
        for h in res:
            table.add_row(f"{h.score:.3f}", short_id(h.id), h.memory.status.value, str(h.memory.source), h.content)
        console.print(table)
        if not res and k > 0:
            err_console.print(f"no memory of user {user!r} matches; `memlineage stats --user {user}` shows counts")


#: What ``memlineage explain --format`` accepts.
EXPLAIN_FORMATS = ("tree", "text", "mermaid", "dot", "prov-json")


@app.command()
def explain(
    memory_id: str,
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    fmt: Annotated[str, typer.Option("--format", help="tree, text, mermaid, dot or prov-json.")] = "tree",
) -> None:
    """Print the provenance chain of a memory (MEMORY_ID may be the 8-character short id `recall` prints)."""
    if fmt not in EXPLAIN_FORMATS:
        err_console.print(f"[red]error:[/] unknown --format {fmt!r}; use one of: {', '.join(EXPLAIN_FORMATS)}")
        raise typer.Exit(2)
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        scope = Scope(user_id=user)
        ex = mm.explain(_resolve_id(mm, memory_id, scope), scope=scope)
        if fmt == "mermaid":
            typer.echo(ex.to_mermaid())
        elif fmt == "dot":
            typer.echo(ex.to_dot())
        elif fmt == "prov-json":
            typer.echo(ex.to_json())
        elif fmt == "text":
            typer.echo(ex.to_text())
        else:
            console.print(explanation_tree(ex))


@app.command()
def audit(
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    limit: Annotated[int, typer.Option(help="Last N events.")] = 50,
    event_type: Annotated[
        list[str] | None, typer.Option("--type", help="Only this event type (repeatable), e.g. --type suspect.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a user's event log, one readable row per event (--json: the full events)."""
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        scope = Scope(user_id=user)
        events = mm.audit(scope, limit=limit, types=event_type or None)
        if as_json:
            out = [{**e, "at": e["at"].isoformat()} for e in events]
            typer.echo(json.dumps(out, ensure_ascii=False, indent=2, default=str))
            return
        ids = list(dict.fromkeys(e["memory_id"] for e in events if e["memory_id"]))
        mems = {m.id: m for m in mm.get_many(ids, scope=scope) if m is not None} if ids else {}
        for e in events:
            typer.echo(audit_row(e, mems.get(e["memory_id"] or "")))
        if not events and event_type:
            known = sorted({e.type for e in mm.audit(scope)})
            err_console.print(
                f"no events of type {', '.join(event_type)} for user {user!r}; types in this log: "
                f"{', '.join(known) or 'none'}"
            )
        elif not events:
            err_console.print(f"no events for user {user!r}")


def audit_row(event: Any, memory: Any = None) -> str:
    """One line for an audit event: time, type, short memory id, and what happened in words."""
    data = event["data"] or {}
    if event.type == "policy_decision":
        what = f"{data.get('policy_id')} -> {data.get('effect')} on {data.get('operation')}: {data.get('reason', '')}"
    else:
        parts = []
        if memory is not None:
            parts.append(f"{memory.source}: {_short(memory.content, 60)}")
        if data.get("reason"):
            parts.append(str(data["reason"]))
        elif not parts:
            parts.append(", ".join(f"{k}={v}" for k, v in data.items() if v not in (None, [], {}, "")))
        what = " | ".join(parts)
    mid = short_id(event["memory_id"] or "") or "-"
    return f"{event['at'].isoformat(timespec='seconds')}  {event.type:<15} {mid:<8}  {what}"


@app.command()
def activities(
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    run: Annotated[
        str | None, typer.Option(help="One run (id or its short id, as `activities` prints it) and the calls it made.")
    ] = None,
    kind: Annotated[
        list[str] | None, typer.Option(help="Only this kind (repeatable): agent_run, llm_call, tool_call...")
    ] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only calls that failed (outcome error).")] = False,
    limit: Annotated[int | None, typer.Option(help="Last N activities.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List a user's runs, tool calls and LLM calls with their outcome, input and error."""
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        scope = Scope(user_id=user)
        run_id = _resolve_activity(mm, run, scope) if run else None
        acts = mm.activities(scope, run_id=run_id, kinds=kind, outcome="error" if failed else None, limit=limit)
        if as_json:
            typer.echo(json.dumps([a.model_dump(mode="json") for a in acts], ensure_ascii=False, indent=2))
            return
        # Ids are often time-ordered (UUIDv7: the head is the time): show the shortest tail that tells them apart.
        n = _unique_suffix([a.id for a in acts] + [a.parent_id for a in acts if a.parent_id])
        for a in acts:
            detail = a.metadata.get("error") or a.metadata.get("input") or a.metadata.get("reason") or ""
            parent = f"<- {a.parent_id[-n:]}" if a.parent_id else ""
            typer.echo(
                f"{a.started_at.isoformat(timespec='seconds')}  {a.id[-n:]}  {a.kind:<12} {a.name or '-':<18} "
                f"{a.outcome or '-':<8} {parent:<{n + 3}} {_short(str(detail), 70)}".rstrip()
            )
        if not acts:
            known = sorted({a.kind for a in mm.activities(scope)})
            hint = f"; kinds in this log: {', '.join(known) or 'none'}" if kind else ""
            err_console.print(f"no activities for user {user!r} with these filters{hint}")


@app.command()
def stats(
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    user: Annotated[str | None, typer.Option("--user")] = None,
) -> None:
    """Counts per status, kind and source."""
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        console.print_json(json.dumps(mm.stats(Scope(user_id=user) if user else None)))


# ---------------------------------------------------------------------------------------------- write-side
# These open the store as its writer (an embedded store: not while an application holds it; server mode: any time).
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
ReasonOpt = Annotated[str | None, typer.Option("--reason", help="Why (kept in the event log).")]


def _confirm(what: str, yes: bool) -> None:
    """Ask before a destructive command; without a terminal, refuse unless ``--yes`` was given."""
    if yes:
        return
    if not console.is_terminal:
        err_console.print(f"[red]error:[/] {what}: pass --yes to confirm (no terminal to ask on)")
        raise typer.Exit(2)
    if not typer.confirm(f"{what}?", default=False):
        err_console.print("cancelled; nothing changed")
        raise typer.Exit(1)


@app.command()
def undo(
    decision: Annotated[
        str,
        typer.Argument(help="Decision id, or the short id `activities --kind update_detection` prints."),
    ],
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    reason: ReasonOpt = None,
) -> None:
    """Undo an automatic update decision: the memory it replaced or withdrew is active again."""
    with _open(path, ledger_url, chroma_host, create=False, live=True, chroma_port=chroma_port) as mm:
        scope = Scope(user_id=user)
        restored = mm.undo(_resolve_activity(mm, decision, scope), scope=scope, reason=reason or "undone from the CLI")
        console.print(f"undone; {short_id(restored.id)} is {restored.status.value}: {_short(restored.content, 80)}")


@app.command()
def revalidate(
    memory_id: Annotated[str, typer.Argument(help="A suspect or expired memory's id (short ids work).")],
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    reason: ReasonOpt = None,
) -> None:
    """Mark a suspect or expired memory active again after checking it."""
    with _open(path, ledger_url, chroma_host, create=False, live=True, chroma_port=chroma_port) as mm:
        scope = Scope(user_id=user)
        mem = mm.revalidate(_resolve_id(mm, memory_id, scope), scope=scope, reason=reason or "revalidated (CLI)")
        console.print(f"{short_id(mem.id)} is {mem.status.value}")


@app.command()
def erase(
    user: UserOpt,
    memory_id: Annotated[
        str | None, typer.Argument(help="One memory (and its versions); omit to erase the whole user.")
    ] = None,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    reason: ReasonOpt = None,
    yes: YesOpt = False,
) -> None:
    """Erase a user's memories (or one memory): the content is redacted everywhere; the receipt is printed."""
    what = f"erase memory {memory_id} of user {user!r}" if memory_id else f"erase every memory of user {user!r}"
    _confirm(what, yes)
    with _open(path, ledger_url, chroma_host, create=False, live=True, chroma_port=chroma_port) as mm:
        scope = Scope(user_id=user)
        target = _resolve_id(mm, memory_id, scope) if memory_id else None
        receipt = mm.erase(target, scope=scope, reason=reason or "erasure request (CLI)")
        console.print_json(receipt.model_dump_json())


@app.command()
def verify(
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    fix: Annotated[bool, typer.Option("--fix", help="Repair what was found (re-index, drop orphans).")] = False,
) -> None:
    """Check that the index agrees with the ledger (exit code 1 when it does not and --fix was not given)."""
    with _open(path, ledger_url, chroma_host, create=False, live=True, chroma_port=chroma_port) as mm:
        report = mm.verify(fix=fix)
        summary = {
            "ok": report.ok,
            "ledger_rows": report.ledger_rows,
            "index_entries": report.index_entries,
            **{name: len(ids) for name, ids in report.differences().items()},
            "fixed": report.fixed,
        }
        console.print_json(json.dumps(summary))
        if not report.ok and not fix:
            raise typer.Exit(1)


@app.command()
def reindex(
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
) -> None:
    """Rebuild the vector index from the ledger (its stored vectors; missing ones are embedded again).

    Opens the store as its writer; nothing of the ledger changes (the Chroma collection is dropped and rebuilt).
    """
    with _open(path, ledger_url, chroma_host, create=False, live=True, chroma_port=chroma_port) as mm:
        with _progress() as bar:
            n = mm.reindex(on_progress=bar("rebuilding the index"))
        console.print(f"rebuilt {n} index entries")


@app.command()
def sweep(
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    user: Annotated[str | None, typer.Option("--user", help="Only this user's memories (default: all).")] = None,
    yes: YesOpt = False,
) -> None:
    """Archive memories whose value decayed below the floor (kept in the ledger; live dependants protect them)."""
    _confirm(f"archive decayed memories of {'user ' + repr(user) if user else 'every user'}", yes)
    with _open(path, ledger_url, chroma_host, create=False, live=True, chroma_port=chroma_port) as mm:
        report = mm.sweep(scope=Scope(user_id=user) if user else None)
        console.print(
            f"checked {report.checked}, archived {len(report.archived)}, protected {len(report.protected)} "
            "(live memories derive from them)"
        )


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


def _unique_suffix(ids: list[str], shortest: int = SHORT_ID_CHARS) -> int:
    """Length of the shortest tail (>= ``shortest``) that keeps the distinct ``ids`` distinct."""
    distinct = set(ids)
    n = shortest
    while n < max((len(i) for i in distinct), default=0) and len({i[-n:] for i in distinct}) < len(distinct):
        n += 1
    return n


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@app.command("mcp")
def mcp_command(
    user: Annotated[
        str | None,
        typer.Option("--user", envvar="MEMLINEAGE_MCP_USER", help="user_id whose memory the server serves."),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", envvar="MEMLINEAGE_MCP_AGENT", help="agent_id of the scope (optional).")
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", envvar="MEMLINEAGE_MCP_SESSION", help="session_id recorded on writes (optional)."),
    ] = None,
    transport: Annotated[str, typer.Option("--transport", help="stdio (default) or http (streamable HTTP).")] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="HTTP port; the endpoint is /mcp.")] = 8000,
    allow_user_header: Annotated[
        bool,
        typer.Option(
            "--allow-user-header",
            help="HTTP only: take each request's user from the X-MemLineage-User header (set it in an "
            "authenticating proxy; anyone who can reach the port can claim any user). --user is then the default.",
        ),
    ] = False,
    agent_origin_only: Annotated[
        bool,
        typer.Option("--agent-origin-only", help="Every write is the agent's (the tools' origin='user' is ignored)."),
    ] = False,
    k: Annotated[int, typer.Option("--k", min=1, max=20, help="Default number of search results.")] = 5,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
) -> None:
    r"""Serve a user's memory to MCP clients: search, remember, correct, forget, explain and lineage resources.

    The scope is the server's (--user/--agent/--session), never the model's. An embedded store has one writer
    process: while this server runs, nothing else may open that store for writing (use server mode to share it).
    Needs the mcp extra: pip install 'memlineage\[mcp]'.
    """
    try:
        from memlineage import mcp_server  # deferred: the mcp SDK is an extra, and heavy
    except ImportError as exc:
        hint = escape(f"pip install 'memlineage[mcp]' ({exc})")
        err_console.print(f"[red]error:[/] the MCP server needs the mcp extra: {hint}")
        raise typer.Exit(2) from None
    if transport not in ("stdio", "http"):
        err_console.print(f"[red]error:[/] unknown --transport {transport!r}; use stdio or http")
        raise typer.Exit(2)
    if allow_user_header and transport != "http":
        err_console.print("[red]error:[/] --allow-user-header needs --transport http")
        raise typer.Exit(2)
    if not user and not allow_user_header:
        err_console.print(
            "[red]error:[/] the server needs a user: --user (or MEMLINEAGE_MCP_USER), or --allow-user-header over http"
        )
        raise typer.Exit(2)
    settings = None
    try:
        scope = Scope(user_id=user, agent_id=agent, session_id=session) if user else None
        settings = _settings(path, ledger_url, chroma_host, chroma_port)
        _ensure_exists(settings, create)
        try:
            mm = MemoryManager.from_settings(settings)
        except StoreLockedError as exc:
            msg = (
                f"{exc}\nhint: an embedded store has one writer process; stop the application that holds it, or "
                "use server mode (--ledger-url and --chroma-host) to share the store"
            )
            raise _Fail(msg) from exc
        except (ValueError, ConnectionError) as exc:  # chromadb's HttpClient: an unreachable Chroma server
            if not settings.chroma_host:
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            msg = f"cannot reach the Chroma server at {settings.chroma_host}:{settings.chroma_port} ({first})"
            raise _Fail(msg) from None
    except (_Fail, MemLineageError, SQLAlchemyError) as exc:
        err_console.print(f"[red]error:[/] {escape(_redacted(str(exc), settings))}")
        raise typer.Exit(2) from None
    with mm:
        mcp_server.serve(
            mm,
            scope,
            transport="http" if transport == "http" else "stdio",
            host=host,
            port=port,
            allow_user_header=allow_user_header,
            k=k,
            allow_user_origin=not agent_origin_only,
        )


@app.command()
def serve(
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="TCP port on 127.0.0.1 (0: any free one).")
    ] = 8765,
    user: Annotated[str | None, typer.Option("--user", help="The user whose pages open first.")] = None,
    allow_writes: Annotated[
        bool,
        typer.Option(
            "--allow-writes",
            help="Open the live store as its writer and enable undo (default: read a snapshot, never write).",
        ),
    ] = False,
) -> None:
    """Browse a store in a web browser: memories, lineage graphs, impact, audit trail and update decisions.

    Listens on 127.0.0.1 only. Read-only by default (an embedded store is read from a snapshot, as the other
    views do); --allow-writes opens the live store (and its Chroma server, --chroma-host) as a writer for undo.
    Needs the viewer extra (starlette, uvicorn, jinja2).
    """
    try:
        from memlineage.viewer import serve as run_viewer  # lazy: the CLI stays fast to import
    except ImportError as exc:
        hint = escape(f"pip install 'memlineage[viewer]' ({exc})")
        err_console.print(f"[red]error:[/] the viewer needs the viewer extra: {hint}")
        raise typer.Exit(2) from None
    settings = None
    try:
        settings = _settings(path, ledger_url, chroma_host, chroma_port)
        _ensure_exists(settings, False)
        run_viewer(settings, port=port, user=user, allow_writes=allow_writes, echo=lambda line: typer.echo(line))
    except StoreLockedError as exc:
        err_console.print(f"[red]error:[/] {escape(str(exc))}\nhint: drop --allow-writes to view a snapshot")
        raise typer.Exit(2) from None
    except (_Fail, MemLineageError, SQLAlchemyError) as exc:
        err_console.print(f"[red]error:[/] {escape(_redacted(str(exc), settings))}")
        raise typer.Exit(2) from None


# ---------------------------------------------------------------------------------------------- export / import
# (issue 28) memlineage.transfer is imported inside the commands: the CLI stays fast to import.


@contextmanager
def _progress() -> Iterator[Any]:
    """Progress bars on stderr, one per step: ``bar(description)`` returns an ``on_progress(done, total)``.

    Quiet when stderr is not a terminal (a pipe, a log file, CI).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=not err_console.is_terminal,
    ) as progress:

        def bar(description: str) -> Any:
            tasks: list[Any] = []  # the bar appears when its step starts

            def update(done: int, total: int) -> None:
                if not tasks:
                    tasks.append(progress.add_task(description, total=None))
                progress.update(tasks[0], completed=done, total=total or None)

            return update

        yield bar


def _fail(exc: Exception, settings: Any) -> typer.Exit:
    err_console.print(f"[red]error:[/] {escape(_redacted(str(exc), settings))}")
    return typer.Exit(2)


@contextmanager
def _writer(settings: Any) -> Iterator[MemoryManager]:
    """The store opened as its writer (created when missing), with the lock error explained."""
    try:
        mm = MemoryManager.from_settings(settings, embedder=_embedder(settings))
    except StoreLockedError as exc:
        msg = f"{exc}\nhint: stop the application that holds the store first"
        raise _Fail(msg) from exc
    with mm:
        yield mm


@app.command("export")
def export_store(
    out: Annotated[Path, typer.Argument(help="The file to write (.jsonl, or .json for --format prov).")],
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    user: Annotated[
        str | None, typer.Option("--user", help="Export this user only (default: the whole store).")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="jsonl (importable) or prov (PROV-JSON bundle).")] = "jsonl",
    vectors: Annotated[
        bool, typer.Option("--vectors/--no-vectors", help="Include the memories' vectors (jsonl).")
    ] = True,
) -> None:
    """Export a store or one user's memories, lineage, activities and events to a file.

    Reads a consistent snapshot: an embedded store is copied with SQLite's online backup first (works while an
    application holds it), a server ledger is read in one REPEATABLE READ transaction.
    """
    from memlineage.transfer import export_store as export

    settings = None
    try:
        settings = _settings(path, ledger_url, None)
        _ensure_exists(settings, False)
        with tempfile.TemporaryDirectory(prefix="memlineage-export-") as tmp:
            if settings.ledger_url:
                ledger = Ledger(settings.ledger_url, schema=settings.ledger_schema)
            else:
                home = Path(settings.home or DEFAULT_DIR).expanduser()
                ledger = Ledger(f"sqlite:///{snapshot_ledger(home / 'ledger.db', tmp)}")
            try:
                with _progress() as bar:
                    summary = export(ledger, out, scope=user, format=fmt, vectors=vectors, on_progress=bar("exporting"))  # type: ignore[arg-type]
            finally:
                ledger.close()
    except (_Fail, MemLineageError, SQLAlchemyError) as exc:
        raise _fail(exc, settings) from None
    counts = ", ".join(f"{n} {name.removeprefix('ml_')}" for name, n in _counts(summary.tables).items())
    console.print(f"exported {summary.records} records to {escape(summary.path)} ({counts})")


def _counts(tables: dict[str, Any]) -> dict[str, int]:
    return {name: int(v["count"]) for name, v in tables.items()}


@app.command("import")
def import_store(
    file: Annotated[Path, typer.Argument(help="A .jsonl file written by `memlineage export`.")],
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    merge: Annotated[
        bool, typer.Option("--merge", help="Add to a store that already holds some of the file's users.")
    ] = False,
) -> None:
    """Import an export into a store (created when missing), check it against its header, rebuild the index.

    A file that does not match its header (changed, truncated) is refused; so is a store that already holds the
    file's users, unless --merge. Ids are kept. Opens the store as its writer.
    """
    from memlineage.transfer import import_store as load
    from memlineage.transfer import verify_file

    settings = None
    try:
        settings = _settings(path, ledger_url, chroma_host, chroma_port)
        verify_file(file)  # a file that does not match its header is refused before any store is opened or made
        with _writer(settings) as mm, _progress() as bar:
            report = load(
                mm, file, merge=merge, on_progress=bar("importing"), on_reindex_progress=bar("rebuilding the index")
            )
    except (_Fail, MemLineageError, SQLAlchemyError) as exc:
        raise _fail(exc, settings) from None
    counts = ", ".join(f"{n} {name.removeprefix('ml_')}" for name, n in report.tables.items())
    console.print(
        f"imported {report.records} records for {len(report.users)} user(s) ({counts}); verified by "
        f"{report.verified}; {report.reindexed or 0} index entries rebuilt"
    )


@app.command()
def backup(
    out: Annotated[Path, typer.Argument(help="A new or empty directory: the backup's store directory.")],
    path: PathOpt = None,
) -> None:
    """Copy an embedded store's ledger while an application may hold and write to it (SQLite online backup).

    The backup holds ledger.db only: its vector index is rebuilt from the ledger's vectors when it is opened
    (`memlineage stats --path OUT`, MemoryManager.open(OUT)). For a server ledger use `memlineage export`.
    """
    from memlineage.transfer import backup_ledger_file

    settings = None
    try:
        settings = _settings(path, None, None)
        if settings.ledger_url:
            msg = "backup copies an embedded store's ledger.db; for a server ledger use `memlineage export`"
            raise _Fail(msg)
        _ensure_exists(settings, False)
        home = Path(settings.home or DEFAULT_DIR).expanduser()
        report = backup_ledger_file(home / "ledger.db", out)
    except (_Fail, MemLineageError) as exc:
        raise _fail(exc, settings) from None
    console.print(
        f"backed up {report.memories} memories to {escape(report.path)} ({report.bytes} bytes, "
        f"{report.seconds:.2f} s); the index is rebuilt when it is opened"
    )


if __name__ == "__main__":  # pragma: no cover
    app()
