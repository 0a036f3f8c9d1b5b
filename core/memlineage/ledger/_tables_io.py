"""Table-by-table access to the ledger for export and import (:mod:`memlineage.transfer`), generic over the schema.

Every table of the ledger's SQLAlchemy metadata is exported, so a table added by a later migration is carried
without a change here. A column is encoded from its SQLAlchemy type (``LargeBinary`` as base64, everything else as
its JSON value); one user's rows are the rows whose ``user_id`` is that user's or, for a table without one, whose
``memory_id`` names one of the user's memories. A table that has neither cannot be split by user and makes a
one-user export fail rather than leave it out silently.

The export and import code outside the ledger holds tables as opaque :class:`~memlineage.ledger.Table` handles
(their ``name``, and what the functions here do with them): every statement on them is built here.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, Connection, LargeBinary, Select, Table, func, insert, select, text

from memlineage.errors import InvalidInputError
from memlineage.ledger._ledger import Ledger
from memlineage.ledger._schema import memories, metadata
from memlineage.models import Status

__all__ = [
    "LOCAL_COLUMNS",
    "RECORD_TYPES",
    "TableDigest",
    "decode_row",
    "encode_line",
    "encode_values",
    "insert_rows",
    "row_digest",
    "rows_of",
    "snapshot",
    "surrogate_key",
    "table_for_type",
    "table_named",
    "tables",
]

#: The ``type`` of the records of each table in an export; a table not named here uses its own name.
RECORD_TYPES: dict[str, str] = {
    "ml_memories": "memory",
    "ml_embeddings": "embedding",
    "ml_edges": "edge",
    "ml_supports": "support",
    "ml_activities": "activity",
    "ml_events": "event",
}

#: Columns that describe one store's own state rather than the data, left out of exports: ``index_state`` says
#: what this store's vector index holds (the importing store rebuilds its index and sets it again).
LOCAL_COLUMNS: dict[str, frozenset[str]] = {"ml_memories": frozenset({"index_state"})}

#: Statuses whose memories are never in the vector index (an imported row of one starts ``removed``).
_NOT_INDEXED = frozenset({Status.ARCHIVED.value, Status.ERASED.value})


@cache
def _sorted_tables() -> tuple[Table, ...]:
    return tuple(metadata.sorted_tables)


def tables() -> list[Table]:
    """The ledger's tables in dependency order (the order of an export's records)."""
    return list(_sorted_tables())


def table_named(name: str) -> Table:
    """The ledger table called ``name`` (e.g. ``"ml_memories"``).

    Raises:
        KeyError: the ledger has no table of that name.
    """
    return metadata.tables[name]


def record_type(table: Table) -> str:
    """The ``type`` field of ``table``'s records."""
    return RECORD_TYPES.get(table.name, table.name)


@cache
def _types() -> dict[str, Table]:
    return {record_type(table): table for table in _sorted_tables()}


def table_for_type(kind: str) -> Table | None:
    """The table whose records have ``type`` ``kind`` (None: not a table of this release)."""
    return _types().get(kind)


@cache
def surrogate_key(table: Table) -> str | None:
    """The name of ``table``'s integer autoincrement primary key, or None when its key is its own id.

    Such a key is only the row's position in its table: an import into a table that already has rows renumbers
    them, and the content hash leaves it out so that a renumbered copy hashes the same.
    """
    pk = list(table.primary_key.columns)
    if len(pk) == 1 and pk[0].autoincrement is not False and pk[0].type.python_type is int:
        return pk[0].name
    return None


@cache
def exported_columns(table: Table) -> tuple[str, ...]:
    """The columns of ``table`` an export holds (all but :data:`LOCAL_COLUMNS`)."""
    local = LOCAL_COLUMNS.get(table.name, frozenset())
    return tuple(c.name for c in table.columns if c.name not in local)


@cache
def _binary_columns(table: Table) -> frozenset[str]:
    return frozenset(c.name for c in table.columns if isinstance(c.type, LargeBinary))


@cache
def _known_columns(table: Table) -> frozenset[str]:
    return frozenset(c.name for c in table.columns)


@cache
def _line_prefix(table: Table) -> bytes:
    """What every line of ``table``'s records starts with, up to the row object."""
    return f'{{"type":{json.dumps(record_type(table))},"row":'.encode()


def _dumps(values: Mapping[str, Any]) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 as is."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _digest(canon: bytes) -> int:
    return int.from_bytes(hashlib.sha256(canon).digest(), "big")


def encode_values(table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """Every exported column of a ledger row as a JSON value (``LargeBinary`` as base64)."""
    binary = _binary_columns(table)
    out: dict[str, Any] = {}
    for name in exported_columns(table):
        value = row[name]
        if value is not None and name in binary:
            value = base64.b64encode(bytes(value)).decode("ascii")
        out[name] = value
    return out


def encode_line(table: Table, row: Mapping[str, Any]) -> tuple[bytes, int]:
    """The export line of a ledger row and its content digest (:func:`row_digest`).

    The line is ``{"type": ..., "row": {...}}`` with the row in canonical JSON (sorted keys, no spaces).
    """
    values = encode_values(table, row)
    canon = _dumps(values).encode()
    key = surrogate_key(table)
    digest = _digest(canon) if key is None else _digest(_dumps({k: v for k, v in values.items() if k != key}).encode())
    return _line_prefix(table) + canon + b"}\n", digest


def row_digest(table: Table, values: Mapping[str, Any], line: bytes | None = None) -> int:
    """The SHA-256 (as an integer) of a record's row in canonical JSON, without the table's surrogate key.

    ``line``: the record's line as read; when it is in the exporter's canonical form the row's bytes are hashed
    as they stand (a line in any other form hashes differently, like any other change to the file).
    """
    key = surrogate_key(table)
    if key is None and line is not None:
        prefix = _line_prefix(table)
        body = line.rstrip(b"\r\n")
        if body.startswith(prefix) and body.endswith(b"}"):
            return _digest(body[len(prefix) : -1])
    return _digest(_dumps({k: v for k, v in values.items() if k != key}).encode())


def decode_row(table: Table, values: Mapping[str, Any]) -> dict[str, Any]:
    """The ledger row of an export record's ``row`` (the inverse of :func:`encode_values`).

    Local columns get their defaults: an imported memory's ``index_state`` is ``pending`` (``removed`` when
    archived or erased), so the importing store's index sync writes it.

    Raises:
        InvalidInputError: the record names a column this release does not have, or a binary value is not base64.
    """
    known = _known_columns(table)
    unknown = sorted(k for k in values if k not in known)
    if unknown:
        msg = (
            f"a {record_type(table)!r} record has columns this release of MemLineage does not know "
            f"({', '.join(unknown)}); import it with the release that exported it or a newer one"
        )
        raise InvalidInputError(msg)
    binary = _binary_columns(table)
    row: dict[str, Any] = {}
    for name in exported_columns(table):
        value = values.get(name)
        if value is not None and name in binary:
            try:
                value = base64.b64decode(value, validate=True)
            except (ValueError, TypeError) as exc:
                msg = f"the {name!r} of a {record_type(table)!r} record is not base64"
                raise InvalidInputError(msg) from exc
        row[name] = value
    if table.name == "ml_memories":
        row["index_state"] = "removed" if row.get("status") in _NOT_INDEXED else "pending"
    return row


class TableDigest:
    """Count and content hash of one table's records, independent of their order.

    The hash is the sum modulo 2**256 of the records' SHA-256 (a multiset hash): the same rows hash the same
    whatever order two databases return them in and whatever surrogate numbers they carry. Exact bytes are
    checked separately by the export's ``body_sha256``.
    """

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0

    def add(self, digest: int) -> None:
        """Count one record with its :func:`record_digest`."""
        self.count += 1
        self.total = (self.total + digest) % (1 << 256)

    @property
    def sha256(self) -> str:
        """The table's hash as 64 hex digits."""
        return f"{self.total:064x}"

    def as_dict(self) -> dict[str, Any]:
        """``{"count": n, "sha256": hex}``."""
        return {"count": self.count, "sha256": self.sha256}


def scope_filter(table: Table, user_ids: list[str] | None) -> ColumnElement[bool] | None:
    """The ``WHERE`` term of ``table``'s rows of ``user_ids`` (None: every row).

    Raises:
        InvalidInputError: ``table`` has neither ``user_id`` nor ``memory_id``, so it cannot be split by user.
    """
    if user_ids is None:
        return None
    if "user_id" in table.c:
        return table.c.user_id.in_(user_ids)
    if "memory_id" in table.c:
        owned = select(memories.c.id).where(memories.c.user_id.in_(user_ids))
        return table.c.memory_id.in_(owned)
    msg = f"the ledger table {table.name!r} has no user_id or memory_id column: a one-user export cannot split it"
    raise InvalidInputError(msg)


def _select(table: Table, user_ids: list[str] | None) -> Select[Any]:
    query = select(table)
    cond = scope_filter(table, user_ids)
    if cond is not None:
        query = query.where(cond)
    return query.order_by(*table.primary_key.columns)


def rows_of(conn: Connection, table: Table, user_ids: list[str] | None, batch: int = 2000) -> Iterator[dict[str, Any]]:
    """Stream ``table``'s rows (of ``user_ids``, or all), in primary-key order, ``batch`` rows at a time."""
    result = conn.execution_options(yield_per=batch).execute(_select(table, user_ids))
    for part in result.mappings().partitions():
        for row in part:
            yield dict(row)


def count_rows(conn: Connection, table: Table, user_ids: list[str] | None) -> int:
    """How many of ``table``'s rows (of ``user_ids``, or all) there are."""
    query = select(func.count()).select_from(table)
    cond = scope_filter(table, user_ids)
    if cond is not None:
        query = query.where(cond)
    return int(conn.execute(query).scalar_one())


def users_in(conn: Connection) -> set[str]:
    """Every ``user_id`` any table of the ledger holds."""
    found: set[str] = set()
    for table in tables():
        if "user_id" in table.c:
            query = select(table.c.user_id).where(table.c.user_id.is_not(None)).distinct()
            found.update(str(u) for u in conn.execute(query).scalars())
    return found


def is_empty(conn: Connection) -> bool:
    """Whether no table of the ledger has a row."""
    return all(conn.execute(select(1).select_from(t).limit(1)).first() is None for t in tables())


def any_rows(conn: Connection, table: Table) -> bool:
    """Whether ``table`` has a row."""
    return conn.execute(select(1).select_from(table).limit(1)).first() is not None


def insert_rows(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` into ``table`` as they are, in one ``executemany`` statement.

    Raises:
        IntegrityError: a row collides with one already there (a key or a unique constraint).
    """
    conn.execute(insert(table), rows)


def reset_sequences(conn: Connection, ledger: Ledger) -> None:
    """After rows were inserted with their own integer keys, move PostgreSQL's sequences past them (SQLite: no-op)."""
    if ledger.is_sqlite:
        return
    prep = conn.dialect.identifier_preparer
    schema = ledger._schema
    for table in tables():
        key = surrogate_key(table)
        if key is None:
            continue
        qualified = f"{prep.quote_schema(schema)}.{prep.quote(table.name)}" if schema else prep.quote(table.name)
        conn.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence(:name, :col), COALESCE(MAX({prep.quote(key)}), 1), "  # noqa: S608 - quoted identifiers
                f"MAX({prep.quote(key)}) IS NOT NULL) FROM {qualified}"
            ),
            {"name": qualified, "col": key},
        )


@contextmanager
def snapshot(ledger: Ledger) -> Iterator[Connection]:
    """A read connection that sees one point in time across every table (for a consistent export).

    PostgreSQL: a ``REPEATABLE READ`` transaction. SQLite: an explicit ``BEGIN`` (pysqlite opens no transaction
    for reads, so each ``SELECT`` would otherwise see the latest commit); in WAL mode a reader never blocks the
    writer.
    """
    with ledger.read() as conn:
        if ledger.is_sqlite:
            conn.exec_driver_sql("BEGIN")
        else:
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        try:
            yield conn
        finally:
            conn.rollback()
