"""Export, import and backup of a MemLineage store.

* :func:`export_store` writes a whole store or one user as **JSON Lines** (``format="jsonl"``): a header line
  (``{"type": "header", "format": "memlineage-export", "format_version": 1, "tables": {table: {"count": n,
  "sha256": ...}}, "body_sha256": ..., ...}``) and one record per ledger row, ``{"type": ..., "row": {column:
  value}}`` with ``type`` one of ``memory``, ``embedding`` (base64 float32), ``edge``, ``support``, ``activity``,
  ``event``: every memory version in every status with its
  content and hash, the vectors (``vectors=False`` leaves them out), the lineage edges (derivations, revisions,
  invalidations, uses), support groups, activities and the event log. The tables are read generically from the
  ledger's SQLAlchemy metadata, so nothing is missed. ``format="prov"`` writes a W3C PROV-JSON bundle instead
  (for other PROV tools; no vectors or events, not importable).
* :func:`import_store` loads a JSON Lines export into another store, on any backend (SQLite, PostgreSQL): it
  refuses a file that does not match its header (:class:`TransferIntegrityError`) and a store that already
  holds the file's users unless ``merge=True`` (:class:`ImportConflictError`); ids are kept; the index is rebuilt.
* :func:`backup_store` / :func:`backup_ledger_file` copy an embedded store's ledger with SQLite's online backup
  API while the store stays open and written to; the index is rebuilt when the backup is opened.

The per-table ``sha256`` is a hash of the table's rows independent of their order and of the integer row numbers
of edges, supports and events, so two stores holding the same data report the same hashes on any backend;
``body_sha256`` covers the file's exact bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from memlineage.errors import InvalidInputError
from memlineage.models import Scope
from memlineage.transfer._backup import BackupReport, backup_ledger_file, backup_store
from memlineage.transfer._jsonl import (
    FORMAT,
    FORMAT_VERSION,
    ExportSummary,
    ImportConflictError,
    ImportReport,
    LedgerSource,
    ProgressCallback,
    TransferIntegrityError,
    export_jsonl,
    import_store,
    read_header,
    resolve_ledger,
    user_filter,
    verify_file,
)
from memlineage.transfer._prov import export_prov

__all__ = [
    "EXPORT_FORMATS",
    "FORMAT",
    "FORMAT_VERSION",
    "BackupReport",
    "ExportSummary",
    "ImportConflictError",
    "ImportReport",
    "ProgressCallback",
    "TransferIntegrityError",
    "backup_ledger_file",
    "backup_store",
    "export_store",
    "import_store",
    "read_header",
    "verify_file",
]

#: What ``export_store(format=...)`` accepts.
EXPORT_FORMATS = ("jsonl", "prov")


def export_store(
    source: LedgerSource,
    path: str | os.PathLike[str],
    *,
    scope: Scope | Mapping[str, Any] | str | None = None,
    format: Literal["jsonl", "prov"] = "jsonl",  # noqa: A002 - the natural name of the option
    vectors: bool = True,
    on_progress: ProgressCallback | None = None,
) -> ExportSummary:
    """Export a whole store, or one user, to a file.

    The rows are read in one snapshot (a single read transaction), so the file is consistent while other
    writers go on. The file is written beside ``path`` and renamed into place when complete.

    Args:
        source: A :class:`~memlineage.MemoryManager` or a :class:`~memlineage.ledger.Ledger`.
        path: The file to write (replaced if it exists).
        scope: ``None`` for the whole store, else one user: a ``Scope(user_id=...)`` (or its mapping) or the user
            id. An agent or session scope is refused (an export holds whole users so that every lineage edge has both
            ends).
        format: ``"jsonl"`` (importable, see :mod:`memlineage.transfer`) or ``"prov"`` (PROV-JSON bundle).
        vectors: Include the memories' vectors (JSON Lines only). Without them an import embeds the content again.
        on_progress: ``on_progress(done, total)`` as records are written.

    Returns:
        An :class:`ExportSummary` (counts and hashes per table).

    Raises:
        InvalidInputError: unknown ``format``, a scope narrower than a user, or ``path`` is a directory.
        StorageError: the ledger cannot be read or the file cannot be written.
    """
    ledger = resolve_ledger(source)
    user_id = user_filter(scope)
    if format not in EXPORT_FORMATS:
        msg = f"format must be one of {', '.join(EXPORT_FORMATS)}, got {format!r}"
        raise InvalidInputError(msg)
    flush = getattr(source, "flush_reinforcement", None)
    if callable(flush):
        flush()  # usage counts buffered in memory belong in the export
    target = Path(path).expanduser()
    if format == "prov":
        return export_prov(ledger, target, user_id=user_id, on_progress=on_progress)
    return export_jsonl(ledger, target, user_id=user_id, vectors=vectors, on_progress=on_progress)
