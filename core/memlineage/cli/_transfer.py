"""Moving a store: ``export``, ``import`` and ``backup``.

Registered on the app by :mod:`memlineage.cli`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from memlineage.cli._app import ChromaOpt, ChromaPortOpt, LedgerOpt, PathOpt, _Fail, _progress, console
from memlineage.cli._store import _ensure_exists, _fail, _settings, _writer
from memlineage.errors import MemLineageError
from memlineage.ledger import Ledger, SQLAlchemyError
from memlineage.manager import DEFAULT_DIR
from memlineage.transfer._backup import snapshot_ledger

# ---------------------------------------------------------------------------------------------- export / import
# (issue 28) memlineage.transfer is imported inside the commands: the CLI stays fast to import.


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
