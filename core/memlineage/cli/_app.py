"""The ``memlineage`` Typer app, its consoles, the options the commands share, and output helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from memlineage._version import __version__

if TYPE_CHECKING:
    from rich.progress import TaskID

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


@contextmanager
def _progress() -> Iterator[Callable[[str], Callable[[int, int], None]]]:
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

        def bar(description: str) -> Callable[[int, int], None]:
            tasks: list[TaskID] = []  # the bar appears when its step starts

            def update(done: int, total: int) -> None:
                if not tasks:
                    tasks.append(progress.add_task(description, total=None))
                progress.update(tasks[0], completed=done, total=total or None)

            return update

        yield bar


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
