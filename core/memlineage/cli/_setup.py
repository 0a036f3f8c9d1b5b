"""Commands that start or upgrade a store: ``demo`` and ``migrate``.

Registered on the app by :mod:`memlineage.cli`.
"""

from __future__ import annotations

import importlib.metadata
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from memlineage._demo import run_core_demo
from memlineage.cli._app import LedgerOpt, PathOpt, _progress, console, err_console
from memlineage.cli._store import _redacted, _settings
from memlineage.errors import MemLineageError
from memlineage.ledger import SQLAlchemyError
from memlineage.ledger import migrate as migrate_ledger
from memlineage.manager import DEFAULT_DIR

#: Entry point group under which packages register ``memlineage demo`` stories (``agent``: the LangChain one).
DEMO_GROUP = "memlineage.demos"


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


def _demo_runner(name: str) -> Callable[..., object] | None:
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
