"""Consistent online backups of an embedded store's ledger (SQLite's online backup API)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import cast

from pydantic import BaseModel, Field

from memlineage.errors import ConfigurationError, InvalidInputError, StorageError
from memlineage.transfer._jsonl import LedgerSource, resolve_ledger

__all__ = ["BackupReport", "backup_ledger_file", "backup_store"]

#: The file of a store directory that a backup holds.
LEDGER_FILE = "ledger.db"


class BackupReport(BaseModel):
    """What a backup wrote."""

    path: str = Field(description="The backup's store directory (open it with MemoryManager.open(path)).")
    ledger: str = Field(description="The ledger file written.")
    memories: int = Field(description="Memory versions in the backup.")
    bytes: int = Field(description="Size of the ledger file.")
    seconds: float = Field(description="Time the copy took.")


def _target(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(directory, ledger file)`` of a backup at ``path``; refuses to overwrite a ledger there."""
    home = Path(path).expanduser()
    if home.exists() and not home.is_dir():
        msg = f"{str(home)!r} is a file; a backup is a store directory: give a new or empty directory"
        raise InvalidInputError(msg)
    if (home / LEDGER_FILE).exists() or (home / "chroma").exists():
        msg = f"{str(home)!r} already holds a store; a backup never overwrites one: give a new or empty directory"
        raise InvalidInputError(msg)
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"cannot create the backup directory {str(home)!r}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    return home, home / LEDGER_FILE


def _copy(src: sqlite3.Connection, home: Path, dest: Path, started: float) -> BackupReport:
    """Copy ``src`` into ``dest`` in one backup step (one read transaction: a consistent point in time)."""
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        dst = sqlite3.connect(partial)
        try:
            src.backup(dst)  # pages=-1: the whole database in one step, under one read lock
            _index_on_open(dst)
            memories = int(dst.execute("SELECT count(*) FROM ml_memories").fetchone()[0])
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
            dst.commit()
        finally:
            dst.close()
        partial.replace(dest)
    except (sqlite3.Error, OSError) as exc:
        partial.unlink(missing_ok=True)
        msg = f"the backup to {str(dest)!r} failed: {exc}"
        raise StorageError(msg) from exc
    return BackupReport(
        path=str(home),
        ledger=str(dest),
        memories=memories,
        bytes=dest.stat().st_size,
        seconds=time.perf_counter() - started,
    )


def _index_on_open(conn: sqlite3.Connection) -> None:
    """Mark the copy's memories so that the store's index is rebuilt when the backup is opened.

    A backup holds the ledger only: every memory the original's Chroma held becomes ``pending`` (written to the
    new Chroma by the repair that runs on open); those kept out of the index (archived, erased) stay out.
    """
    conn.execute(
        "UPDATE ml_memories SET index_state = CASE WHEN index_state IN ('removing', 'removed') THEN 'removed' "
        "ELSE 'pending' END"
    )
    conn.commit()


def backup_store(source: LedgerSource, path: str | os.PathLike[str]) -> BackupReport:
    """Back up the embedded ledger of an open store (a manager or its ledger) while it keeps working.

    Uses SQLite's online backup API on the store's own connection: the copy is one consistent point in time,
    writers are not blocked (WAL) and the store stays open. The backup is a store directory holding ``ledger.db``
    only; the vector index is not copied but rebuilt from the vectors in the ledger when the backup is opened
    (``MemoryManager.open(path)``).

    Args:
        source: A :class:`~memlineage.MemoryManager` or :class:`~memlineage.ledger.Ledger` on SQLite.
        path: A new or empty directory.

    Returns:
        A :class:`BackupReport`.

    Raises:
        ConfigurationError: the ledger is not SQLite (back up PostgreSQL with ``export_store`` or ``pg_dump``).
        InvalidInputError: ``path`` is a file or already holds a store.
        StorageError: the copy failed (nothing is left at ``path/ledger.db``).
    """
    ledger = resolve_ledger(source)
    if not ledger.is_sqlite:
        msg = (
            "backup copies an embedded (SQLite) ledger; for a server ledger use export_store / `memlineage export` "
            "(or the database's own tools, e.g. pg_dump)"
        )
        raise ConfigurationError(msg)
    home, dest = _target(path)
    started = time.perf_counter()
    with ledger.read() as conn:
        raw = cast(sqlite3.Connection, conn.connection.driver_connection)  # the DBAPI driver is untyped
        return _copy(raw, home, dest, started)


def snapshot_ledger(db: str | os.PathLike[str], into: str | os.PathLike[str]) -> Path:
    """Copy the ledger file ``db`` to ``into/ledger.db`` through a read-only connection (SQLite's online backup).

    Consistent while another process holds the store and writes to it; takes no writer lock. The read-only views
    of the CLI and the viewer read such a copy.

    Raises:
        StorageError: ``db`` cannot be opened read-only, or the copy failed.
    """
    source, target = Path(db), Path(into) / "ledger.db"
    try:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        msg = f"cannot open {source} read-only: {exc}"
        raise StorageError(msg) from exc
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    except sqlite3.Error as exc:
        msg = f"cannot read a snapshot of {source}: {exc}"
        raise StorageError(msg) from exc
    finally:
        src.close()
    return target


def backup_ledger_file(db: str | os.PathLike[str], path: str | os.PathLike[str]) -> BackupReport:
    """Back up the ledger file ``db`` of an embedded store that another process may hold and write to.

    Opens ``db`` read-only (``mode=ro``, no writer lock taken) and copies it with SQLite's online backup API, like
    :func:`backup_store`; this is what ``memlineage backup`` runs.

    Raises:
        InvalidInputError: ``db`` does not exist, or ``path`` is a file or already holds a store.
        StorageError: the copy failed.
    """
    source = Path(db).expanduser()
    if not source.is_file():
        msg = f"no ledger at {str(source)!r}"
        raise InvalidInputError(msg)
    home, dest = _target(path)
    started = time.perf_counter()
    try:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        msg = f"cannot open {str(source)!r} to back it up: {exc}"
        raise StorageError(msg) from exc
    try:
        return _copy(src, home, dest, started)
    finally:
        src.close()
