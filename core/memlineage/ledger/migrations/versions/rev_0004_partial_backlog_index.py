"""The index sync's backlog gets a partial index: ``ix_ml_memories_backlog`` replaces ``ix_ml_memories_index_state``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Almost every row is ``indexed``; only the rows the sync still has to handle (``pending``, ``stale``, ``removing``)
and those out of the index by design (``removed``, ``quarantined``) are looked up by state. The full index on
``index_state`` made a cascade delete and insert one entry per marked memory (100,000 of each for a 100,000-memory
cascade) and made ingest write one entry per memory twice; the partial index holds only the rows not ``indexed``
(issue 16). Both statements run in the caller's transaction: a failure leaves the store as it was.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLE = "ml_memories"
OLD = "ix_ml_memories_index_state"
NEW = "ix_ml_memories_backlog"


def upgrade() -> None:
    """Drop the full index on ``index_state`` and create the partial one (same text as the ledger's schema)."""
    schema = op.get_context().version_table_schema
    present = {i["name"] for i in sa.inspect(op.get_bind()).get_indexes(TABLE, schema=schema)}
    if OLD in present:
        op.drop_index(OLD, table_name=TABLE, schema=schema)
    if NEW not in present:
        where = sa.column("index_state") != sa.literal_column("'indexed'")
        op.create_index(NEW, TABLE, ["index_state"], schema=schema, sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    """Not supported: MemLineage migrates forward only."""
    raise NotImplementedError
