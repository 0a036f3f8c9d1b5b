"""SQLAlchemy table definitions of the ledger.

Timestamps are stored as epoch seconds (``DOUBLE PRECISION``) so that SQLite and PostgreSQL compare them the same
way; the model layer converts them to timezone-aware UTC datetimes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Double,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Select,
    String,
    Table,
    Text,
    UniqueConstraint,
    literal_column,
    select,
)

metadata = MetaData()

#: One row per memory version (PROV entity). Content is never edited in place except by erasure.
memories = Table(
    "ml_memories",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("user_id", String(255), nullable=False),
    Column("agent_id", String(255), nullable=True),
    Column("session_id", String(255), nullable=True),
    Column("kind", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("source_kind", String(16), nullable=False),
    Column("source_name", String(255), nullable=True),
    Column("activity_id", String(255), nullable=True),
    Column("parent_activity_id", String(255), nullable=True),
    Column("confidence", Double, nullable=False),
    Column("trust", Double, nullable=False),
    Column("context_hash", String(64), nullable=True),
    Column("tags", JSON, nullable=False),
    Column("meta", JSON, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("recorded_at", Double, nullable=False),
    Column("valid_from", Double, nullable=True),
    Column("valid_to", Double, nullable=True),
    Column("expires_at", Double, nullable=True),
    Column("invalidated_at", Double, nullable=True),
    Column("version", Integer, nullable=False),
    Column("supersedes", String(64), nullable=True),
    Column("slot", String(255), nullable=True),
    Column("value", Double, nullable=False),
    Column("assessment", JSON, nullable=True),
    # The embedder that made the vector (the vector itself is in ml_embeddings).
    Column("embedder", String(255), nullable=True),
    Column("last_used_at", Double, nullable=True),
    Column("use_count", Integer, nullable=False, default=0),
    # Index sync state: 'pending' (needs a full upsert), 'stale' (metadata changed), 'indexed', 'removing' (must be
    # deleted from the index), 'removed' (not in the index by design), 'exact' (served by the exact plan from this
    # ledger's vectors, never written to the ANN index; see ScopedVectorIndex). Repaired on open.
    Column("index_state", String(16), nullable=False),
    # A random 31-bit number per row (migration 0005): summed per scope by Ledger.scope_stamp, so that a process
    # holding a scope in memory sees any insert, removal or (in)activation made by another process.
    Column("stamp_key", Integer, nullable=True),
    Index("ix_ml_memories_scope", "user_id", "status"),
    Index("ix_ml_memories_dedup", "user_id", "kind", "content_hash"),
    Index("ix_ml_memories_slot", "user_id", "slot"),
    Index("ix_ml_memories_expiry", "user_id", "expires_at"),
)

#: Index states of the rows a vector search may return: in the ANN index, on their way there, or held for the
#: exact plan by the ledger alone.
INDEXABLE_STATES = ("exact", "pending", "indexed", "stale")

#: Rows the index sync still has to look at. A partial index holds only these (migrations 0004, 0005): a cascade
#: turning 100,000 ``indexed`` rows ``stale`` adds 100,000 entries instead of also deleting 100,000, and ingest
#: writes no entry for an ``indexed`` or ``exact`` memory. A query reaches the index only if its ``WHERE`` has this
#: very term (SQLite matches the text).
NOT_INDEXED = memories.c.index_state.not_in([literal_column("'indexed'"), literal_column("'exact'")])
Index(
    "ix_ml_memories_backlog",
    memories.c.index_state,
    sqlite_where=NOT_INDEXED,
    postgresql_where=NOT_INDEXED,
)
#: Per-scope reads of the query plan by index state (``count_indexable``, ``count_awaiting_ann``,
#: ``scope_plan_counts``, ``scope_stamp``) from the index alone (migration 0005).
Index("ix_ml_memories_stamp", memories.c.user_id, memories.c.index_state, memories.c.status, memories.c.stamp_key)

#: Each memory's float32 little-endian vector (the index is rebuilt from these), apart from ``ml_memories`` so that
#: a status change does not rewrite ~1.5 KB per row. A memory without a stored vector has no row here; erasure
#: deletes the row (``Ledger.update_memories``). No foreign key, like the other tables: with SQLite's
#: ``foreign_keys=ON`` a batch migration that rebuilds ``ml_memories`` (drop and rename) would trip it.
embeddings = Table(
    "ml_embeddings",
    metadata,
    Column("memory_id", String(64), primary_key=True),
    Column("embedding", LargeBinary, nullable=False),
)

#: ``ml_memories`` with the ``embedding`` column of ``ml_embeddings`` (``NULL`` for a memory without a vector).
memories_with_vectors = memories.outerjoin(embeddings, embeddings.c.memory_id == memories.c.id)
#: The columns of a full memory row: every column of ``ml_memories`` and ``embedding``.
full_memory_columns = [*memories.c, embeddings.c.embedding]


def select_full_memories() -> Select[Any]:
    """``SELECT`` of full memory rows (with ``embedding``) from :data:`memories_with_vectors`; add the ``WHERE``."""
    return select(*full_memory_columns).select_from(memories_with_vectors)


#: Lineage edges between memories: ``src`` <relation> ``dst`` in PROV's argument order (generated, used).
#: For wasDerivedFrom, ``src`` is the derived memory and ``dst`` its premise. ``support`` groups premises into
#: alternative supports: a memory stays valid while all premises of at least one group are valid.
edges = Table(
    "ml_edges",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("src", String(64), nullable=False),
    Column("dst", String(255), nullable=False),
    Column("relation", String(32), nullable=False),
    Column("support", Integer, nullable=False, default=0),
    Column("activity_id", String(255), nullable=True),
    Column("user_id", String(255), nullable=False),
    Column("created_at", Double, nullable=False),
    # How a wasDerivedFrom premise was attributed: 'cited', 'arguments', 'results', 'context' (None = given).
    Column("attribution", String(16), nullable=True),
    Index("ix_ml_edges_src", "src", "relation"),
    Index("ix_ml_edges_dst", "dst", "relation"),
)

#: Support groups of each memory: one row per group; ``independent`` groups have no premises (a direct assertion).
supports = Table(
    "ml_supports",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("memory_id", String(64), nullable=False),
    Column("support", Integer, nullable=False),
    Column("source_kind", String(16), nullable=False),
    Column("source_name", String(255), nullable=True),
    Column("activity_id", String(255), nullable=True),
    Column("premises", Integer, nullable=False),
    Column("created_at", Double, nullable=False),
    Index("ix_ml_supports_memory", "memory_id"),
    # Two corroborations never share a group number (they would merge into one conjunctive group); the writer
    # also numbers groups under the memory's row lock, so this only turns a missed lock into an error.
    UniqueConstraint("memory_id", "support", name="uq_ml_supports_group"),
)

#: Activities: ``id`` is MemLineage's own key; framework ids (``run_id``, ``tool_call_id``) are scoped attributes,
#: so two users' runs with the same ``tool_call_id`` never share a row.
activities = Table(
    "ml_activities",
    metadata,
    Column("id", String(255), primary_key=True),
    Column("kind", String(64), nullable=False),
    Column("name", String(255), nullable=True),
    Column("parent_id", String(255), nullable=True),
    Column("user_id", String(255), nullable=True),
    Column("agent_id", String(255), nullable=True),
    Column("session_id", String(255), nullable=True),
    Column("started_at", Double, nullable=False),
    Column("ended_at", Double, nullable=True),
    Column("outcome", String(32), nullable=True),
    Column("meta", JSON, nullable=False),
    Column("run_id", String(255), nullable=True),
    Column("tool_call_id", String(255), nullable=True),
    Index("ix_ml_activities_parent", "parent_id"),
    Index("ix_ml_activities_run", "user_id", "run_id"),
    UniqueConstraint("user_id", "run_id", "tool_call_id", name="uq_ml_activities_call"),
)

#: Append-only event log.
events = Table(
    "ml_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Double, nullable=False),
    Column("type", String(32), nullable=False),
    Column("memory_id", String(64), nullable=True),
    Column("activity_id", String(255), nullable=True),
    Column("user_id", String(255), nullable=True),
    Column("data", JSON, nullable=False),
    Index("ix_ml_events_user", "user_id", "id"),
    Index("ix_ml_events_memory", "memory_id"),
)
