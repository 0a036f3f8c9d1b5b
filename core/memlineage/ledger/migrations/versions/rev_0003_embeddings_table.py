"""Vectors in their own table: ``ml_embeddings (memory_id, embedding)``, out of ``ml_memories.embedding``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

A cascade rewrites the status of every descendant; with each row's ~1.5 KB float32 vector inline in
``ml_memories``, SQLite rewrote ~1.8 KB per row (an ``UPDATE`` of 10,000 rows: ~150 ms with its WAL, ~50 ms
without the vectors), issue 16. Every stored vector is copied into ``ml_embeddings`` (same bytes, one row per
memory that has one), then the column is dropped (SQLite: by rebuilding the table in batch mode), in the caller's
transaction: a failure leaves the store as it was.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLE = "ml_embeddings"


def upgrade() -> None:
    """Create ``ml_embeddings``, copy the vectors into it, drop ``ml_memories.embedding``."""
    schema = op.get_context().version_table_schema
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    if TABLE not in inspector.get_table_names(schema=schema):
        op.create_table(
            TABLE,
            sa.Column("memory_id", sa.String(64), nullable=False),
            sa.Column("embedding", sa.LargeBinary, nullable=False),
            sa.PrimaryKeyConstraint("memory_id"),
            schema=schema,
        )
    if "embedding" not in {c["name"] for c in inspector.get_columns("ml_memories", schema=schema)}:
        return
    memories = sa.table("ml_memories", sa.column("id"), sa.column("embedding"), schema=schema)
    vectors = sa.table(TABLE, sa.column("memory_id"), sa.column("embedding"), schema=schema)
    have = sa.select(vectors.c.memory_id).where(vectors.c.memory_id == memories.c.id)
    copy = sa.select(memories.c.id, memories.c.embedding).where(memories.c.embedding.is_not(None), ~have.exists())
    bind.execute(sa.insert(vectors).from_select(["memory_id", "embedding"], copy))
    with op.batch_alter_table("ml_memories", schema=schema) as batch:
        batch.drop_column("embedding")


def downgrade() -> None:
    """Not supported: MemLineage migrates forward only."""
    raise NotImplementedError
