"""The ``exact`` index state: a per-row stamp key, a per-scope stamp index, and a backlog index without ``exact``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

Memories of a scope the exact plan serves are held by the ledger alone (``index_state = 'exact'``): they are most
rows of a typical store, and the sync never looks them up, so ``ix_ml_memories_backlog`` becomes partial on
``index_state NOT IN ('indexed', 'exact')``. Each row gets ``stamp_key``, a random 31-bit number (existing rows
too): ``Ledger.scope_stamp`` sums it per scope, so a process that holds a scope in memory sees an insert, a
removal or an (in)activation made by another process. ``ix_ml_memories_stamp`` on ``(user_id, index_state,
status, stamp_key)`` answers that and the query plan's per-scope counts from the index alone. Everything runs in
the caller's transaction: a failure leaves the store as it was (issue 16).
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
    """Add and fill ``stamp_key``, recreate the backlog index without ``exact`` rows, add the stamp index."""
    bind = op.get_bind()
    schema = op.get_context().version_table_schema
    inspector = sa.inspect(bind)
    if "stamp_key" not in {c["name"] for c in inspector.get_columns(TABLE, schema=schema)}:
        op.add_column(TABLE, sa.Column("stamp_key", sa.Integer(), nullable=True), schema=schema)
    table = sa.table(TABLE, sa.column("stamp_key", sa.Integer), schema=schema)
    if bind.dialect.name == "sqlite":  # random(): a 64-bit integer
        key = sa.func.abs(sa.func.random()) % 2147483648
    else:  # random(): a float in [0, 1)
        key = sa.cast(sa.func.floor(sa.func.random() * 2147483648), sa.Integer)
    bind.execute(table.update().where(table.c.stamp_key.is_(None)).values(stamp_key=key))
    present = {i["name"] for i in inspector.get_indexes(TABLE, schema=schema)}
    if BACKLOG in present:
        op.drop_index(BACKLOG, table_name=TABLE, schema=schema)
    where = sa.column("index_state").not_in([sa.literal_column("'indexed'"), sa.literal_column("'exact'")])
    op.create_index(BACKLOG, TABLE, ["index_state"], schema=schema, sqlite_where=where, postgresql_where=where)
    if STAMP not in present:
        op.create_index(STAMP, TABLE, ["user_id", "index_state", "status", "stamp_key"], schema=schema)


def downgrade() -> None:
    """Not supported: MemLineage migrates forward only."""
    raise NotImplementedError
