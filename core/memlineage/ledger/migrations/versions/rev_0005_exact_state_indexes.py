"""Indexes for the ``exact`` index state: the backlog's partial index leaves it out; a per-scope stamp index.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

Memories of a scope the exact plan serves are held by the ledger alone (``index_state = 'exact'``): they are most
rows of a typical store, and the sync never looks them up, so ``ix_ml_memories_backlog`` becomes partial on
``index_state NOT IN ('indexed', 'exact')``. ``ix_ml_memories_stamp`` on ``(user_id, index_state, id)`` answers the
per-scope reads of the query plan (``count_indexable``, ``count_awaiting_ann``, ``scope_stamp``) from the index
alone, instead of reading every row of the scope. Both statements run in the caller's transaction: a failure
leaves the store as it was (issue 16).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TABLE = "ml_memories"
BACKLOG = "ix_ml_memories_backlog"
STAMP = "ix_ml_memories_stamp"


def upgrade() -> None:
    """Recreate the backlog index without ``exact`` rows and add the stamp index (same text as the schema)."""
    schema = op.get_context().version_table_schema
    present = {i["name"] for i in sa.inspect(op.get_bind()).get_indexes(TABLE, schema=schema)}
    if BACKLOG in present:
        op.drop_index(BACKLOG, table_name=TABLE, schema=schema)
    where = sa.column("index_state").not_in([sa.literal_column("'indexed'"), sa.literal_column("'exact'")])
    op.create_index(BACKLOG, TABLE, ["index_state"], schema=schema, sqlite_where=where, postgresql_where=where)
    if STAMP not in present:
        op.create_index(STAMP, TABLE, ["user_id", "index_state", "id"], schema=schema)


def downgrade() -> None:
    """Not supported: MemLineage migrates forward only."""
    raise NotImplementedError
