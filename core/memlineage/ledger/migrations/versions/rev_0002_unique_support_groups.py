"""Unique support-group numbers: ``uq_ml_supports_group`` on ``ml_supports (memory_id, support)``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Two processes corroborating one memory at once could give both sources the same group number, which merged two
independent sources into one conjunctive group (issue 14). Writers now number groups under the memory's row lock;
the constraint turns a missed lock into an error instead of a merged group. A store that already holds such rows
keeps every row and goes on without the constraint, with a warning: the premise edges of two groups that share a
number cannot be told apart, so they are not renumbered.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

logger = logging.getLogger("memlineage.ledger")

NAME = "uq_ml_supports_group"
TABLE = "ml_supports"
COLUMNS = ["memory_id", "support"]


def upgrade() -> None:
    """Add the constraint (SQLite: by rebuilding the table in batch mode) unless some rows repeat a number."""
    schema = op.get_context().version_table_schema
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    present = {u["name"] for u in inspector.get_unique_constraints(TABLE, schema=schema)}
    present |= {i["name"] for i in inspector.get_indexes(TABLE, schema=schema)}
    if NAME in present:
        return
    t = sa.table(TABLE, *(sa.column(c) for c in COLUMNS), schema=schema)
    query = sa.select(sa.literal(1)).select_from(t).group_by(*(t.c[c] for c in COLUMNS))
    if bind.execute(query.having(sa.func.count() > 1).limit(1)).first() is not None:
        logger.warning("%s: support groups repeat a number, so the constraint %s was not added", TABLE, NAME)
        return
    with op.batch_alter_table(TABLE, schema=schema) as batch:
        batch.create_unique_constraint(NAME, COLUMNS)


def downgrade() -> None:
    """Not supported: MemLineage migrates forward only."""
    raise NotImplementedError
