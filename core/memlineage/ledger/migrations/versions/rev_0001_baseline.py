"""Baseline: the ledger schema as it stood when migrations were introduced.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

A frozen copy of ``memlineage/ledger/_schema.py`` at that time (later schema changes go into later revisions, never
here). It also adopts stores created before versioning: tables that exist are completed (nullable columns,
indexes and the ``uq_ml_activities_call`` constraint added by releases that only ran ``create_all``) instead of
being created, so no row is touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

logger = logging.getLogger("memlineage.ledger")


def _memories() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=True),
        sa.Column("session_id", sa.String(255), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("source_kind", sa.String(16), nullable=False),
        sa.Column("source_name", sa.String(255), nullable=True),
        sa.Column("activity_id", sa.String(255), nullable=True),
        sa.Column("parent_activity_id", sa.String(255), nullable=True),
        sa.Column("confidence", sa.Double, nullable=False),
        sa.Column("trust", sa.Double, nullable=False),
        sa.Column("context_hash", sa.String(64), nullable=True),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("meta", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("recorded_at", sa.Double, nullable=False),
        sa.Column("valid_from", sa.Double, nullable=True),
        sa.Column("valid_to", sa.Double, nullable=True),
        sa.Column("expires_at", sa.Double, nullable=True),
        sa.Column("invalidated_at", sa.Double, nullable=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("supersedes", sa.String(64), nullable=True),
        sa.Column("slot", sa.String(255), nullable=True),
        sa.Column("value", sa.Double, nullable=False),
        sa.Column("assessment", sa.JSON, nullable=True),
        sa.Column("embedding", sa.LargeBinary, nullable=True),
        sa.Column("embedder", sa.String(255), nullable=True),
        sa.Column("last_used_at", sa.Double, nullable=True),
        sa.Column("use_count", sa.Integer, nullable=False),
        sa.Column("index_state", sa.String(16), nullable=False),
    ]


def _edges() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("src", sa.String(64), nullable=False),
        sa.Column("dst", sa.String(255), nullable=False),
        sa.Column("relation", sa.String(32), nullable=False),
        sa.Column("support", sa.Integer, nullable=False),
        sa.Column("activity_id", sa.String(255), nullable=True),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("attribution", sa.String(16), nullable=True),
    ]


def _supports() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("memory_id", sa.String(64), nullable=False),
        sa.Column("support", sa.Integer, nullable=False),
        sa.Column("source_kind", sa.String(16), nullable=False),
        sa.Column("source_name", sa.String(255), nullable=True),
        sa.Column("activity_id", sa.String(255), nullable=True),
        sa.Column("premises", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    ]


def _activities() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("parent_id", sa.String(255), nullable=True),
        sa.Column("user_id", sa.String(255), nullable=True),
        sa.Column("agent_id", sa.String(255), nullable=True),
        sa.Column("session_id", sa.String(255), nullable=True),
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("ended_at", sa.Double, nullable=True),
        sa.Column("outcome", sa.String(32), nullable=True),
        sa.Column("meta", sa.JSON, nullable=False),
        sa.Column("run_id", sa.String(255), nullable=True),
        sa.Column("tool_call_id", sa.String(255), nullable=True),
    ]


def _events() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Double, nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("memory_id", sa.String(64), nullable=True),
        sa.Column("activity_id", sa.String(255), nullable=True),
        sa.Column("user_id", sa.String(255), nullable=True),
        sa.Column("data", sa.JSON, nullable=False),
    ]


#: table -> (columns, indexes as name -> columns, unique constraints as name -> columns), in creation order.
_TABLES: dict[str, tuple[Callable[[], list[sa.Column]], dict[str, list[str]], dict[str, list[str]]]] = {  # type: ignore[type-arg]
    "ml_memories": (
        _memories,
        {
            "ix_ml_memories_scope": ["user_id", "status"],
            "ix_ml_memories_dedup": ["user_id", "kind", "content_hash"],
            "ix_ml_memories_slot": ["user_id", "slot"],
            "ix_ml_memories_index_state": ["index_state"],
            "ix_ml_memories_expiry": ["user_id", "expires_at"],
        },
        {},
    ),
    "ml_edges": (
        _edges,
        {"ix_ml_edges_src": ["src", "relation"], "ix_ml_edges_dst": ["dst", "relation"]},
        {},
    ),
    "ml_supports": (_supports, {"ix_ml_supports_memory": ["memory_id"]}, {}),
    "ml_activities": (
        _activities,
        {"ix_ml_activities_parent": ["parent_id"], "ix_ml_activities_run": ["user_id", "run_id"]},
        {"uq_ml_activities_call": ["user_id", "run_id", "tool_call_id"]},
    ),
    "ml_events": (
        _events,
        {"ix_ml_events_user": ["user_id", "id"], "ix_ml_events_memory": ["memory_id"]},
        {},
    ),
}


def upgrade() -> None:
    """Create the ledger's tables, or complete the tables of a store created before schema versions existed."""
    schema = op.get_context().version_table_schema
    inspector = sa.inspect(op.get_bind())
    existing = set(inspector.get_table_names(schema=schema))
    for table, (columns, indexes, uniques) in _TABLES.items():
        if table not in existing:
            constraints = [sa.UniqueConstraint(*cols, name=name) for name, cols in uniques.items()]
            op.create_table(table, *columns(), *constraints, schema=schema)
            for name, cols in indexes.items():
                op.create_index(name, table, cols, schema=schema)
            continue
        _complete(inspector, schema, table, columns(), indexes, uniques)


def _complete(
    inspector: sa.Inspector,
    schema: str | None,
    table: str,
    columns: list[sa.Column],  # type: ignore[type-arg]
    indexes: dict[str, list[str]],
    uniques: dict[str, list[str]],
) -> None:
    """Add what an unversioned store's ``table`` lacks: nullable columns, indexes, unique constraints."""
    present = {c["name"] for c in inspector.get_columns(table, schema=schema)}
    for column in columns:
        if column.name in present:
            continue
        if not column.nullable:
            msg = f"{table}.{column.name} (NOT NULL) is missing; this store was not made by MemLineage"
            raise RuntimeError(msg)
        op.add_column(table, column, schema=schema)
    have_index = {i["name"] for i in inspector.get_indexes(table, schema=schema)}
    for name, cols in indexes.items():
        if name not in have_index:
            op.create_index(name, table, cols, schema=schema)
    have_unique = have_index | {u["name"] for u in inspector.get_unique_constraints(table, schema=schema)}
    for name, cols in uniques.items():
        if name in have_unique:
            continue
        if _has_duplicates(schema, table, cols):
            # Older releases checked this rule in code only; keep every row and go on without the constraint.
            logger.warning("%s: rows repeat %s, so the constraint %s was not added", table, cols, name)
        elif op.get_bind().dialect.name == "sqlite":
            # SQLite cannot add a constraint to an existing table; a unique index enforces the same rule.
            op.create_index(name, table, cols, unique=True, schema=schema)
        else:
            op.create_unique_constraint(name, table, cols, schema=schema)


def _has_duplicates(schema: str | None, table: str, cols: list[str]) -> bool:
    """Whether some rows repeat ``cols`` with no NULL among them (NULLs never collide in a unique constraint)."""
    t = sa.table(table, *(sa.column(c) for c in cols), schema=schema)
    query = (
        sa.select(sa.literal(1))
        .select_from(t)
        .where(*(t.c[c].is_not(None) for c in cols))
        .group_by(*(t.c[c] for c in cols))
        .having(sa.func.count() > 1)
        .limit(1)
    )
    return op.get_bind().execute(query).first() is not None


def downgrade() -> None:
    """Not supported: MemLineage migrates forward only."""
    raise NotImplementedError
