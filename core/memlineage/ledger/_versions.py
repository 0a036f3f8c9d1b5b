"""Schema versions of the ledger: which revision a database is at, and bringing it to :data:`HEAD` with Alembic.

The migrations live in ``migrations/versions`` (shipped in the wheel). A database is in one of three states:

* **new**: no MemLineage table; the tables are created from :mod:`memlineage.ledger._schema` and stamped
  :data:`HEAD` (Alembic's recipe for fresh databases; a test checks that the migrations build the same schema).
* **unversioned**: MemLineage tables without the version table (a store created before migrations existed);
  the baseline migration completes it without touching rows.
* a revision: the version table names it.

Embedded stores (SQLite) are upgraded on open; server stores (PostgreSQL) only by ``memlineage migrate``
(:func:`memlineage.ledger.migrate`), because several processes of several releases may share them.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Column, Connection, MetaData, PrimaryKeyConstraint, String, Table, inspect, select
from sqlalchemy.exc import SQLAlchemyError

from memlineage.errors import SchemaVersionError, StorageError
from memlineage.ledger._schema import metadata

__all__ = [
    "HEAD",
    "NEW",
    "UNVERSIONED",
    "VERSION_TABLE",
    "is_known",
    "outdated",
    "schema_state",
    "stamp_new",
    "upgrade",
]

#: Table holding the revision (Alembic's layout, own name so it never meets an application's ``alembic_version``).
VERSION_TABLE = "ml_schema_version"
#: Newest revision in ``migrations/versions``; ``tests/unit/test_migrations.py`` checks it against Alembic's head.
HEAD = "0005"
#: States of a database that has no revision yet.
NEW = "new"
UNVERSIONED = "unversioned"

MIGRATIONS_DIR = Path(__file__).with_name("migrations")

_version = Table(
    VERSION_TABLE,
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
)


def schema_state(conn: Connection, schema: str | None) -> str:
    """The revision of the ledger reached through ``conn``, or :data:`NEW` / :data:`UNVERSIONED`.

    Raises:
        SchemaVersionError: the version table holds no single revision (a broken or concurrent migration).
    """
    tables = set(inspect(conn).get_table_names(schema=schema))
    if VERSION_TABLE not in tables:
        return UNVERSIONED if tables & set(metadata.tables) else NEW
    version = _version if schema is None else _version.to_metadata(MetaData(), schema=schema)
    revisions = list(conn.execute(select(version.c.version_num)).scalars())
    if len(revisions) != 1:
        msg = f"the ledger's {VERSION_TABLE} table holds {len(revisions)} revisions, not one; repair it by hand"
        raise SchemaVersionError(msg)
    return str(revisions[0])


def stamp_new(conn: Connection) -> None:
    """Create the tables of a new ledger and record :data:`HEAD` (in the connection's transaction)."""
    metadata.create_all(conn)
    _version.create(conn)
    conn.execute(_version.insert().values(version_num=HEAD))


def upgrade(conn: Connection, schema: str | None) -> None:
    """Run the migrations from the ledger's state up to :data:`HEAD`, in the connection's open transaction.

    Raises:
        SchemaVersionError: the ledger is at a revision this release does not know (a newer release wrote it).
    """
    # Deferred: Alembic (and its Mako templates) cost ~0.1 s to import and are needed only when a schema changes.
    from alembic import command
    from alembic.config import Config
    from alembic.util import CommandError

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = conn
    config.attributes["schema"] = schema
    try:
        command.upgrade(config, "head")
    except CommandError as exc:
        msg = (
            f"the ledger's schema is at a revision this release of MemLineage does not know ({exc}); upgrade memlineage"
        )
        raise SchemaVersionError(msg) from exc
    except (SQLAlchemyError, RuntimeError) as exc:
        msg = f"migrating the ledger to revision {HEAD} failed and was rolled back: {exc}"
        raise StorageError(msg) from exc


def is_known(revision: str) -> bool:
    """Whether ``revision`` is one of the shipped migrations (``False``: a newer release wrote it)."""
    from alembic.script import ScriptDirectory  # deferred with Alembic (see upgrade)
    from alembic.util import CommandError

    try:
        return ScriptDirectory(str(MIGRATIONS_DIR)).get_revision(revision) is not None
    except CommandError:
        return False


def outdated(state: str) -> str:
    """The message for a server ledger that must be migrated before use."""
    found = "has no schema version (created before migrations)" if state == UNVERSIONED else f"is at revision {state}"
    return (
        f"the ledger's schema {found}; this release needs revision {HEAD}. Run `memlineage migrate --ledger-url <url>` "
        "(or memlineage.ledger.migrate(url)) once, from one process, then open it again"
    )
