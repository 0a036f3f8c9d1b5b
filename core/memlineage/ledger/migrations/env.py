"""Alembic environment of the ledger: runs the shipped migrations on the connection MemLineage hands over.

MemLineage calls this through :func:`memlineage.ledger.migrate` / ``Ledger(...)`` with
``config.attributes["connection"]`` (a connection inside an open transaction) and ``config.attributes["schema"]``
(the PostgreSQL schema, or ``None``). Developers adding a migration run Alembic with ``alembic.ini`` in this folder;
then the URL comes from ``sqlalchemy.url``.
"""

from __future__ import annotations

from alembic import context
from memlineage.ledger._schema import metadata
from memlineage.ledger._versions import VERSION_TABLE
from sqlalchemy import Connection, create_engine


def _run(connection: Connection, schema: str | None) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        version_table_schema=schema,
        # SQLite runs DDL inside the caller's BEGIN IMMEDIATE: a failed migration leaves nothing half done.
        transactional_ddl=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


_given = context.config.attributes.get("connection")
if _given is not None:
    _run(_given, context.config.attributes.get("schema"))
else:  # pragma: no cover - developer tooling (alembic revision --autogenerate)
    _engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "sqlite://")
    with _engine.begin() as _conn:
        _run(_conn, None)
    _engine.dispose()
