"""Ledger: the SQL source of truth (memories, lineage edges, activities, append-only events).

Internal to MemLineage apart from :class:`Ledger` (to build a :class:`memlineage.MemoryManager` from parts) and
:func:`migrate` (``memlineage migrate``); its methods take SQLAlchemy connections and may change between releases.
"""

from memlineage.ledger._ledger import Ledger
from memlineage.ledger._rows import Event, decode_vector, encode_vector, memory_to_row, row_to_memory
from memlineage.ledger._sql import (
    Connection,
    IntegrityError,
    OperationalError,
    SQLAlchemyError,
    Table,
    has_memory_table,
    hide_url_password,
    url_without_password,
)
from memlineage.ledger._versions import HEAD

__all__ = [
    "HEAD",
    "Connection",
    "Event",
    "IntegrityError",
    "Ledger",
    "OperationalError",
    "SQLAlchemyError",
    "Table",
    "decode_vector",
    "encode_vector",
    "has_memory_table",
    "hide_url_password",
    "memory_to_row",
    "migrate",
    "row_to_memory",
    "url_without_password",
]


def migrate(url: str, *, schema: str | None = None) -> tuple[str, str]:
    """Bring the ledger at ``url`` to this release's schema revision (:data:`HEAD`); safe to run again.

    Server deployments run it once per release, from one process (``memlineage migrate``); concurrent calls on
    PostgreSQL wait for each other (advisory lock), on SQLite for the database's write lock.

    Args:
        url: SQLAlchemy URL of the ledger.
        schema: PostgreSQL schema holding the tables (as for :class:`Ledger`).

    Returns:
        ``(found, now)``: the state found (a revision, ``"new"`` for an empty database, ``"unversioned"`` for a
        store created before schema versions) and the revision it is at now.

    Raises:
        SchemaVersionError: the ledger is at a revision newer than this release knows.
        StorageError: the database cannot be reached or a migration failed (it was rolled back).
    """
    ledger = Ledger(url, schema=schema, upgrade=True)
    try:
        return ledger.schema_found, HEAD
    finally:
        ledger.close()
