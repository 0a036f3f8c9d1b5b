"""The SQLAlchemy names the rest of MemLineage may see: connection and table handles, database errors, URLs.

Only :mod:`memlineage.ledger` imports SQLAlchemy (the import-linter contract "only the ledger speaks SQL"); code
outside it that runs inside a ledger transaction types the connection it is handed as :data:`Connection`, and
catches database errors under the names re-exported here.
"""

from __future__ import annotations

from sqlalchemy import Connection, Table, create_engine, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError

__all__ = [
    "Connection",
    "IntegrityError",
    "OperationalError",
    "SQLAlchemyError",
    "Table",
    "has_memory_table",
    "hide_url_password",
    "url_without_password",
]


def url_without_password(url: str) -> str:
    """``url`` as SQLAlchemy renders it with its password hidden (``***``).

    Returns:
        The rendered URL.

    Raises:
        ArgumentError: ``url`` is not a database URL (:exc:`ValueError` for some malformed ones).
    """
    return make_url(url).render_as_string(hide_password=True)


def hide_url_password(text: str, url: str) -> str:
    """``text`` with the password of the database URL ``url`` hidden wherever it appears.

    The URL itself becomes its rendering with a hidden password, and any other occurrence of the password
    becomes ``***``. A ``url`` that does not parse, or has no password, leaves ``text`` as it is.

    Returns:
        The redacted text.
    """
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return text
    if parsed.password:
        text = text.replace(url, parsed.render_as_string(hide_password=True))
        text = text.replace(str(parsed.password), "***")
    return text


def has_memory_table(url: str, schema: str | None = None) -> bool:
    """Whether the database at ``url`` holds the ledger's memory table (``ml_memories``) in ``schema``.

    Opens and disposes of an engine of its own.

    Returns:
        True when the table exists.

    Raises:
        SQLAlchemyError: the database cannot be reached.
    """
    engine = create_engine(url)
    try:
        return inspect(engine).has_table("ml_memories", schema=schema)
    finally:
        engine.dispose()
