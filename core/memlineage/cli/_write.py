"""Write-side commands: ``undo``, ``revalidate``, ``erase``, ``verify``, ``reindex`` and ``sweep``.

Registered on the app by :mod:`memlineage.cli`.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from memlineage.cli._app import (
    ChromaOpt,
    ChromaPortOpt,
    LedgerOpt,
    PathOpt,
    UserOpt,
    _progress,
    _short,
    console,
    err_console,
)
from memlineage.cli._store import _open, _resolve_activity, _resolve_id
from memlineage.models import Scope, short_id

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
