"""Export to and import from MemLineage's JSON Lines format (see :mod:`memlineage.transfer`)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from pydantic import BaseModel, Field

from memlineage._version import __version__
from memlineage.errors import ConflictError, InvalidInputError, StorageError
from memlineage.ledger import HEAD, Connection, IntegrityError, Ledger
from memlineage.ledger import _tables_io as t
from memlineage.models import Scope

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ExportSummary",
    "ImportConflictError",
    "ImportReport",
    "LedgerSource",
    "ProgressCallback",
    "TransferIntegrityError",
    "export_jsonl",
    "import_store",
    "read_header",
    "resolve_ledger",
    "user_filter",
]

#: The ``format`` of a MemLineage export's header line.
FORMAT = "memlineage-export"
#: The version of the JSON Lines layout this release writes (and the newest it reads).
FORMAT_VERSION = 1
#: Rows inserted per statement on import.
_BATCH = 1000

#: ``on_progress(done, total)``: records handled so far and in all.
ProgressCallback = Callable[[int, int], None]


class HasLedger(Protocol):
    """A store that holds a ledger: a :class:`~memlineage.MemoryManager` (the transfer layer never imports it)."""

    @property
    def ledger(self) -> Ledger:
        """The store's ledger."""
        ...


#: What export, import and backup read or write: a manager (anything with ``.ledger``) or a ledger itself.
LedgerSource: TypeAlias = HasLedger | Ledger


class _Hash(Protocol):
    """A running hash (``hashlib.sha256()``)."""

    def update(self, data: bytes, /) -> None:
        """Feed ``data`` to the hash."""
        ...


class TransferIntegrityError(InvalidInputError):
    """An export file does not match its header (counts, per-table hashes or the body's hash) or is not one.

    Raised before anything is written (or with the import rolled back): the file was changed, truncated or
    damaged after the export.
    """


class ImportConflictError(ConflictError):
    """The target store already holds users (without ``merge``) or memory / activity ids of the file.

    Nothing was imported.
    """


class ExportSummary(BaseModel):
    """What an export wrote."""

    path: str = Field(description="The file written.")
    format: str = Field(description="'jsonl' or 'prov'.")
    user_id: str | None = Field(default=None, description="The user exported; None = the whole store.")
    vectors: bool = Field(description="Whether the memories' vectors are in the file.")
    records: int = Field(description="Records written (rows of every table).")
    tables: dict[str, dict[str, Any]] = Field(description="{table: {'count': n, 'sha256': hex}} of every table.")
    body_sha256: str | None = Field(default=None, description="SHA-256 of the record lines (JSON Lines only).")


class ImportReport(BaseModel):
    """What an import wrote."""

    path: str = Field(description="The file read.")
    records: int = Field(description="Records imported.")
    tables: dict[str, int] = Field(description="Rows inserted per table.")
    users: list[str] = Field(description="Users the file holds.")
    renumbered: list[str] = Field(
        default_factory=list,
        description="Tables whose integer row numbers (edges, supports, events) were reassigned because the "
        "target already had rows there; memory and activity ids are always kept.",
    )
    verified: str = Field(
        description="'hashes': the rows read back from the target hash as in the header (target was empty); "
        "'counts': the rows inserted per table match the header (merge into a store with other rows)."
    )
    reindexed: int | None = Field(default=None, description="Index entries rebuilt afterwards (None: not asked).")


def resolve_ledger(source: LedgerSource) -> Ledger:
    """The :class:`~memlineage.ledger.Ledger` of a manager (anything with ``.ledger``) or the ledger itself.

    Raises:
        InvalidInputError: ``source`` is neither.
    """
    ledger = getattr(source, "ledger", source)
    if not isinstance(ledger, Ledger):
        msg = f"expected a MemoryManager or a Ledger, got {type(source).__name__}"
        raise InvalidInputError(msg)
    return ledger


def user_filter(scope: Scope | Mapping[str, Any] | str | None) -> str | None:
    """The user an export is limited to: a :class:`Scope` (its ``user_id``), a mapping, a user id, or None.

    Raises:
        InvalidInputError: the scope names an agent or a session (an export holds whole users, so that every
            lineage edge it holds has both ends in the file).
    """
    if scope is None:
        return None
    if isinstance(scope, str):
        scope = Scope(user_id=scope)
    elif not isinstance(scope, Scope):
        try:
            scope = Scope.model_validate(scope)
        except ValueError as exc:
            msg = f"scope must be a Scope, a mapping or a user id: {exc}"
            raise InvalidInputError(msg) from None
    if scope.agent_id is not None or scope.session_id is not None:
        msg = (
            "an export holds whole users (all their agents and sessions, so that lineage stays complete); "
            f"pass Scope(user_id={scope.user_id!r}) or the user id alone"
        )
        raise InvalidInputError(msg)
    return scope.user_id


def _line(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode()


def _atomic_target(path: Path) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"cannot create the directory of {str(path)!r}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    if path.is_dir():
        msg = f"{str(path)!r} is a directory; give the file to write"
        raise InvalidInputError(msg)
    return path


def export_jsonl(
    ledger: Ledger,
    path: Path,
    *,
    user_id: str | None,
    vectors: bool,
    on_progress: ProgressCallback | None,
) -> ExportSummary:
    """Write the ledger (or one user's rows) to ``path`` as JSON Lines; see :func:`memlineage.transfer.export_store`."""
    path = _atomic_target(path)
    users = [user_id] if user_id is not None else None
    digests: dict[str, t.TableDigest] = {}
    body = hashlib.sha256()
    done = 0
    fd, body_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".body", dir=path.parent)
    body_path = Path(body_name)
    try:
        with os.fdopen(fd, "wb") as out, t.snapshot(ledger) as conn:
            chosen = [tb for tb in t.tables() if vectors or tb.name != "ml_embeddings"]
            total = sum(t.count_rows(conn, tb, users) for tb in chosen)
            if on_progress is not None:
                on_progress(0, total)
            for table in chosen:
                digest = digests[table.name] = t.TableDigest()
                for row in t.rows_of(conn, table, users):
                    line, row_hash = t.encode_line(table, row)
                    out.write(line)
                    body.update(line)
                    digest.add(row_hash)
                    done += 1
                    if on_progress is not None and done % 2000 == 0:
                        on_progress(done, total)
        header = {
            "type": "header",
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "memlineage_version": __version__,
            "schema_revision": HEAD,
            "exported_at": datetime.now(timezone.utc).isoformat(),
            "user_id": user_id,
            "vectors": vectors,
            "records": done,
            "tables": {name: d.as_dict() for name, d in digests.items()},
            "body_sha256": body.hexdigest(),
        }
        fd2, final_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        try:
            with os.fdopen(fd2, "wb") as final, body_path.open("rb") as src:
                final.write(_line(header))
                shutil.copyfileobj(src, final, 1 << 20)
                final.flush()
                os.fsync(final.fileno())
            Path(final_name).replace(path)
        except BaseException:
            Path(final_name).unlink(missing_ok=True)
            raise
    except OSError as exc:
        msg = f"cannot write the export to {str(path)!r}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    finally:
        body_path.unlink(missing_ok=True)
    if on_progress is not None:
        on_progress(done, done)
    return ExportSummary(
        path=str(path),
        format="jsonl",
        user_id=user_id,
        vectors=vectors,
        records=done,
        tables=header["tables"],
        body_sha256=header["body_sha256"],
    )


# ---------------------------------------------------------------------------------------------------------- import
def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of a JSON Lines export: format version, user, counts and hashes per table.

    Raises:
        TransferIntegrityError: the file does not start with a MemLineage export header.
        InvalidInputError: the file cannot be read, or a newer release wrote it (a newer format version).
    """
    try:
        with Path(path).open("rb") as f:
            first = f.readline()
    except OSError as exc:
        msg = f"cannot read {str(path)!r}: {exc.strerror or exc}"
        raise InvalidInputError(msg) from exc
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("type") != "header" or header.get("format") != FORMAT:
        msg = f"{str(path)!r} is not a MemLineage export (its first line is no {FORMAT!r} header)"
        raise TransferIntegrityError(msg)
    version = header.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        msg = (
            f"{str(path)!r} has export format version {version!r}; this release reads up to {FORMAT_VERSION}: "
            "upgrade memlineage"
        )
        raise InvalidInputError(msg)
    tables = header.get("tables")
    if not isinstance(tables, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("count"), int) and isinstance(v.get("sha256"), str)
        for v in tables.values()
    ):
        msg = f"the header of {str(path)!r} has no valid 'tables' (count and sha256 per table)"
        raise TransferIntegrityError(msg)
    return header


def _records(path: Path, body: _Hash) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """``(line number, line, record)`` of every line after the header; feeds each line's bytes to ``body``."""
    with path.open("rb") as f:
        f.readline()
        for n, line in enumerate(f, start=2):
            body.update(line)
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if (
                not isinstance(record, dict)
                or not isinstance(record.get("type"), str)
                or not isinstance(record.get("row"), dict)
            ):
                msg = (
                    f"line {n} of {str(path)!r} is not a record (a JSON object with a 'type' and a 'row'): the file "
                    "is damaged"
                )
                raise TransferIntegrityError(msg)
            yield n, line, record


def _table_of(record: Mapping[str, Any], n: int) -> t.Table:
    table = t.table_for_type(record["type"])
    if table is None:
        msg = (
            f"line {n} is a {record['type']!r} record, which this release of MemLineage does not know; import the "
            "file with the release that exported it or a newer one"
        )
        raise InvalidInputError(msg)
    return table


def _mismatch(path: Path, wrong: list[str], *, written: bool) -> TransferIntegrityError:
    what = "the import was rolled back" if written else "nothing was imported"
    return TransferIntegrityError(f"{str(path)!r} does not match its header, {what}: " + "; ".join(wrong))


def _declared(header: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return header["tables"].get(name) or {"count": 0, "sha256": t.TableDigest().sha256}


def verify_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check an export against its header without a store: counts per table, record count and the body's SHA-256.

    Returns:
        The header.

    Raises:
        TransferIntegrityError: the file is not an export, or does not match its header.
        InvalidInputError: the file cannot be read, or a newer release wrote it.
    """
    header = read_header(path)
    _scan(Path(path), header)
    return header


def _scan(path: Path, header: Mapping[str, Any]) -> tuple[set[str], int]:
    """Check the record lines' hash (``body_sha256``) and the count per table before anything is written.

    Returns the file's users and its number of records. The per-table content hashes are checked as the rows
    are inserted (one more pass would cost as much).
    """
    counts: dict[str, int] = {}
    body = hashlib.sha256()
    users: set[str] = set()
    records = 0
    for n, _line_bytes, record in _records(path, body):
        table = _table_of(record, n)
        counts[table.name] = counts.get(table.name, 0) + 1
        user = record["row"].get("user_id")
        if isinstance(user, str):
            users.add(user)
        records += 1
    wrong = [
        f"{name}: {counts.get(name, 0)} records, header says {_declared(header, name)['count']}"
        for name in sorted(set(header["tables"]) | set(counts))
        if counts.get(name, 0) != _declared(header, name)["count"]
    ]
    if header.get("records") != records:
        wrong.append(f"{records} records, header says {header.get('records')!r}")
    if body.hexdigest() != header.get("body_sha256"):
        wrong.append("the record lines' SHA-256 differs from the header's body_sha256")
    if wrong:
        raise _mismatch(path, wrong, written=False)
    if header.get("user_id") is not None and users - {header["user_id"]}:
        msg = f"{str(path)!r} is an export of user {header['user_id']!r} but holds other users' rows"
        raise TransferIntegrityError(msg)
    return users, records


def import_store(
    target: LedgerSource,
    path: str | os.PathLike[str],
    *,
    merge: bool = False,
    reindex: bool = True,
    on_progress: ProgressCallback | None = None,
    on_reindex_progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import a JSON Lines export into a store; see :mod:`memlineage.transfer`.

    The file is checked against its header first (the count per table and the hash of every record line); a
    difference raises :class:`TransferIntegrityError` before anything is written. The rows are then inserted in
    one transaction with their ids, checked against the header's per-table content hashes, and, when the target
    was empty, read back and hashed again; any difference rolls the whole import back. Afterwards the target's
    index is rebuilt from the imported vectors (``target.reindex()``; memories exported without vectors are
    embedded again by the target's embedder).

    Args:
        target: A :class:`~memlineage.MemoryManager` (its index is rebuilt) or a
            :class:`~memlineage.ledger.Ledger` (the index follows when a manager next opens it: rows are
            ``pending``).
        path: The ``.jsonl`` file written by :func:`export_store`.
        merge: Import into a store that already holds some of the file's users. Without it such a store is
            refused; a store holding only other users is always accepted. Memory and activity ids must be new
            to the store either way.
        reindex: Rebuild the manager's index afterwards (default). Ignored for a bare ledger.
        on_progress: ``on_progress(done, total)`` as records are inserted.
        on_reindex_progress: ``on_progress(done, total)`` as the index is rebuilt.

    Returns:
        An :class:`ImportReport`.

    Raises:
        TransferIntegrityError: the file does not match its header, is not an export, or the target returned
            other rows than the file holds (rolled back).
        ImportConflictError: the store holds the file's users (without ``merge``) or one of its ids.
        InvalidInputError: the file is unreadable, from a newer release, or has unknown tables or columns.
        StorageError: the target's database failed (rolled back).
    """
    ledger = resolve_ledger(target)
    file = Path(path)
    header = read_header(file)
    users, total = _scan(file, header)
    if on_progress is not None:
        on_progress(0, total)
    counts: dict[str, int] = {}
    renumbered: list[str] = []
    with ledger.transaction() as conn:
        empty = t.is_empty(conn)
        if not empty:
            overlap = users & t.users_in(conn)
            if overlap and not merge:
                shown = ", ".join(sorted(overlap)[:5]) + (" ..." if len(overlap) > 5 else "")
                msg = (
                    f"the target store already holds user(s) {shown} of {str(file)!r}; nothing was imported. Pass "
                    "merge=True (memlineage import --merge) to add the file's rows to theirs, or import into an "
                    "empty store"
                )
                raise ImportConflictError(msg)
        keep = {tb.name: empty or not t.any_rows(conn, tb) for tb in t.tables()}
        body = hashlib.sha256()
        batch: list[dict[str, Any]] = []
        current: t.Table | None = None
        done = 0

        def flush() -> None:
            nonlocal done
            if not batch or current is None:  # rows are batched only once a table is current
                return
            try:
                t.insert_rows(conn, current, batch)
            except IntegrityError as exc:
                msg = (
                    f"the target store already holds {t.record_type(current)} rows of {str(file)!r} (the same ids "
                    "or keys: this file, or part of it, was imported before); nothing was imported"
                )
                raise ImportConflictError(msg) from exc
            counts[current.name] = counts.get(current.name, 0) + len(batch)
            done += len(batch)
            batch.clear()
            if on_progress is not None:
                on_progress(done, total)

        digests: dict[str, t.TableDigest] = {}
        drop: str | None = None
        for n, line, record in _records(file, body):
            table = _table_of(record, n)
            if table is not current:
                flush()
                current = table
                key = t.surrogate_key(table)
                drop = key if key is not None and not keep[table.name] else None
                if drop is not None:
                    renumbered.append(table.name)
            values = record["row"]
            digests.setdefault(table.name, t.TableDigest()).add(t.row_digest(table, values, line))
            row = t.decode_row(table, values)
            if drop is not None:
                row.pop(drop, None)
            batch.append(row)
            if len(batch) >= _BATCH:
                flush()
        flush()
        # the content hashes, and the bytes again: the file may have changed since it was scanned
        wrong = [
            f"{name}: content hash differs from the header's"
            for name in sorted(set(header["tables"]) | set(digests))
            if digests.get(name, t.TableDigest()).sha256 != _declared(header, name)["sha256"]
        ]
        if body.hexdigest() != header.get("body_sha256"):
            wrong.append("the file changed while it was imported")
        if wrong:
            raise _mismatch(file, wrong, written=True)
        t.reset_sequences(conn, ledger)
        if empty:
            _verify_read_back(conn, file, header)
            verified = "hashes"
        else:
            wrong = [
                f"{name}: {counts.get(name, 0)} rows, header says {want['count']}"
                for name, want in header["tables"].items()
                if counts.get(name, 0) != want["count"]
            ]
            if wrong:
                msg = f"the import of {str(file)!r} inserted other counts than its header: " + "; ".join(wrong)
                raise TransferIntegrityError(msg)
            verified = "counts"
    rebuilt = None
    if reindex and hasattr(target, "reindex") and target is not ledger:
        rebuilt = target.reindex(on_progress=on_reindex_progress)
    return ImportReport(
        path=str(file),
        records=done,
        tables=counts,
        users=sorted(users),
        renumbered=sorted(set(renumbered)),
        verified=verified,
        reindexed=rebuilt,
    )


def _verify_read_back(conn: Connection, file: Path, header: Mapping[str, Any]) -> None:
    """Hash every table as the target returns it and compare with the header (the target was empty before)."""
    wrong: list[str] = []
    for table in t.tables():
        want = header["tables"].get(table.name)
        if want is None:  # not exported (vectors left out): nothing must have been written there
            want = {"count": 0, "sha256": t.TableDigest().sha256}
        digest = t.TableDigest()
        for row in t.rows_of(conn, table, None):
            digest.add(t.encode_line(table, row)[1])
        if digest.count != want["count"] or digest.sha256 != want["sha256"]:
            wrong.append(f"{table.name} ({digest.count} rows read back, {want['count']} in the file)")
    if wrong:
        msg = (
            f"the rows the target returned after importing {str(file)!r} differ from the file, so the import was "
            "rolled back: " + "; ".join(wrong)
        )
        raise TransferIntegrityError(msg)
