"""Schema migrations (issue 15): stores created before schema versions are adopted without loss, SQLite migrates on
open, PostgreSQL only through ``memlineage migrate``, a newer schema is refused, and the migrations build exactly
the tables of ``memlineage/ledger/_schema.py``."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from memlineage import MemoryManager, SchemaVersionError, Scope, StorageError
from memlineage.cli import app
from memlineage.index import InMemoryIndex
from memlineage.ledger import HEAD, Ledger, _versions, migrate
from memlineage.ledger._schema import metadata
from memlineage.testing import FakeEmbedder
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

# The ledger's DDL as `create_all` made it before schema versions existed (PostgreSQL spelling; `_ddl` turns it
# into SQLite's). Frozen on purpose: it must not follow later changes of _schema.py.
TODAY_DDL = """
CREATE TABLE ml_activities (
    id VARCHAR(255) NOT NULL, kind VARCHAR(64) NOT NULL, name VARCHAR(255), parent_id VARCHAR(255),
    user_id VARCHAR(255), agent_id VARCHAR(255), session_id VARCHAR(255), started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION, outcome VARCHAR(32), meta JSON NOT NULL,
    run_id VARCHAR(255),
    tool_call_id VARCHAR(255),
    PRIMARY KEY (id),
    CONSTRAINT uq_ml_activities_call UNIQUE (user_id, run_id, tool_call_id)
);
CREATE INDEX ix_ml_activities_parent ON ml_activities (parent_id);
CREATE INDEX ix_ml_activities_run ON ml_activities (user_id, run_id);
CREATE TABLE ml_edges (
    id SERIAL NOT NULL, src VARCHAR(64) NOT NULL, dst VARCHAR(255) NOT NULL, relation VARCHAR(32) NOT NULL,
    support INTEGER NOT NULL, activity_id VARCHAR(255), user_id VARCHAR(255) NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    attribution VARCHAR(16),
    PRIMARY KEY (id)
);
CREATE INDEX ix_ml_edges_dst ON ml_edges (dst, relation);
CREATE INDEX ix_ml_edges_src ON ml_edges (src, relation);
CREATE TABLE ml_events (
    id SERIAL NOT NULL, at DOUBLE PRECISION NOT NULL, type VARCHAR(32) NOT NULL, memory_id VARCHAR(64),
    activity_id VARCHAR(255), user_id VARCHAR(255), data JSON NOT NULL, PRIMARY KEY (id)
);
CREATE INDEX ix_ml_events_memory ON ml_events (memory_id);
CREATE INDEX ix_ml_events_user ON ml_events (user_id, id);
CREATE TABLE ml_memories (
    id VARCHAR(64) NOT NULL, user_id VARCHAR(255) NOT NULL, agent_id VARCHAR(255), session_id VARCHAR(255),
    kind VARCHAR(16) NOT NULL, content TEXT NOT NULL, content_hash VARCHAR(64) NOT NULL, status VARCHAR(16) NOT NULL,
    source_kind VARCHAR(16) NOT NULL, source_name VARCHAR(255), activity_id VARCHAR(255),
    parent_activity_id VARCHAR(255), confidence DOUBLE PRECISION NOT NULL, trust DOUBLE PRECISION NOT NULL,
    context_hash VARCHAR(64), tags JSON NOT NULL, meta JSON NOT NULL, created_at DOUBLE PRECISION NOT NULL,
    recorded_at DOUBLE PRECISION NOT NULL, valid_from DOUBLE PRECISION, valid_to DOUBLE PRECISION,
    expires_at DOUBLE PRECISION, invalidated_at DOUBLE PRECISION, version INTEGER NOT NULL, supersedes VARCHAR(64),
    slot VARCHAR(255), value DOUBLE PRECISION NOT NULL, assessment JSON, embedding BYTEA, embedder VARCHAR(255),
    last_used_at DOUBLE PRECISION, use_count INTEGER NOT NULL, index_state VARCHAR(16) NOT NULL, PRIMARY KEY (id)
);
CREATE INDEX ix_ml_memories_dedup ON ml_memories (user_id, kind, content_hash);
CREATE INDEX ix_ml_memories_expiry ON ml_memories (user_id, expires_at);
CREATE INDEX ix_ml_memories_index_state ON ml_memories (index_state);
CREATE INDEX ix_ml_memories_scope ON ml_memories (user_id, status);
CREATE INDEX ix_ml_memories_slot ON ml_memories (user_id, slot);
CREATE TABLE ml_supports (
    id SERIAL NOT NULL, memory_id VARCHAR(64) NOT NULL, support INTEGER NOT NULL, source_kind VARCHAR(16) NOT NULL,
    source_name VARCHAR(255), activity_id VARCHAR(255), premises INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (id)
);
CREATE INDEX ix_ml_supports_memory ON ml_supports (memory_id);
"""

#: What the first release lacked (added later by `_add_missing_columns`, which never added indexes or constraints).
SKELETON_LACKS = (
    "run_id VARCHAR",
    "tool_call_id VARCHAR",
    "attribution VARCHAR",
    "uq_ml_activities_call",
    "_run ON",
    "expiry ON",
)

ROWS: dict[str, list[dict[str, Any]]] = {
    "ml_memories": [
        {
            "id": "m1", "user_id": "alice", "agent_id": None, "session_id": "s1", "kind": "semantic",
            "content": "Alice lives in Lisbon", "content_hash": "h1", "status": "active", "source_kind": "user",
            "source_name": None, "activity_id": "a1", "parent_activity_id": None, "confidence": 1.0, "trust": 1.0,
            "context_hash": None, "tags": '["home"]', "meta": '{"k": "v"}', "created_at": 1.5, "recorded_at": 1.5,
            "valid_from": 1.5, "valid_to": None, "expires_at": None, "invalidated_at": None, "version": 1,
            "supersedes": None, "slot": "user.home", "value": 0.7, "assessment": None, "embedding": b"\x00\x00\x80?",
            "embedder": "fake", "last_used_at": None, "use_count": 2, "index_state": "indexed",
        },
        {
            "id": "m2", "user_id": "alice", "agent_id": "planner", "session_id": "s1", "kind": "episodic",
            "content": "Flights to Lisbon: 90 EUR", "content_hash": "h2", "status": "suspect", "source_kind": "tool",
            "source_name": "fares", "activity_id": "a2", "parent_activity_id": "a1", "confidence": 0.8, "trust": 0.9,
            "context_hash": "c", "tags": "[]", "meta": "{}", "created_at": 2.0, "recorded_at": 2.0, "valid_from": None,
            "valid_to": None, "expires_at": 99.0, "invalidated_at": None, "version": 1, "supersedes": None,
            "slot": None, "value": 0.4, "assessment": None, "embedding": None, "embedder": None,
            "last_used_at": 3.0, "use_count": 0, "index_state": "pending",
        },
    ],
    "ml_edges": [
        {"src": "m2", "dst": "m1", "relation": "wasDerivedFrom", "support": 0, "activity_id": "a2",
         "user_id": "alice", "created_at": 2.0},
    ],
    "ml_supports": [
        {"memory_id": "m2", "support": 0, "source_kind": "tool", "source_name": "fares", "activity_id": "a2",
         "premises": 1, "created_at": 2.0},
    ],
    "ml_activities": [
        {"id": "a1", "kind": "agent_run", "name": "run", "parent_id": None, "user_id": "alice", "agent_id": None,
         "session_id": "s1", "started_at": 1.0, "ended_at": 4.0, "outcome": "success", "meta": "{}"},
        {"id": "a2", "kind": "tool_call", "name": "fares", "parent_id": "a1", "user_id": "alice", "agent_id": None,
         "session_id": "s1", "started_at": 2.0, "ended_at": None, "outcome": None, "meta": '{"x": 1}'},
    ],
    "ml_events": [
        {"at": 1.5, "type": "created", "memory_id": "m1", "activity_id": "a1", "user_id": "alice", "data": "{}"},
        {"at": 2.0, "type": "created", "memory_id": "m2", "activity_id": "a2", "user_id": "alice", "data": '{"n": 1}'},
    ],
}  # fmt: skip


def _ddl(dialect: str, *, skeleton: bool = False) -> list[str]:
    text = TODAY_DDL
    if dialect == "sqlite":
        text = text.replace("DOUBLE PRECISION", "DOUBLE").replace("BYTEA", "BLOB").replace("SERIAL", "INTEGER")
    lines = text.strip().splitlines()
    if skeleton:
        lines = [line for line in lines if not any(word in line for word in SKELETON_LACKS)]
        lines = [line.replace("PRIMARY KEY (id),", "PRIMARY KEY (id)") for line in lines]
    return [stmt.strip() for stmt in "\n".join(lines).split(";") if stmt.strip()]


def _build_old_store(url: str, *, skeleton: bool = False) -> None:
    """A store as an older release left it: its tables and rows, no version table."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for stmt in _ddl(engine.dialect.name, skeleton=skeleton):
                conn.execute(sa.text(stmt))
            for table, rows in ROWS.items():
                for row in rows:
                    names = ", ".join(row)
                    marks = ", ".join(f":{k}" for k in row)
                    conn.execute(sa.text(f"INSERT INTO {table} ({names}) VALUES ({marks})"), row)  # noqa: S608
    finally:
        engine.dispose()


def _dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the columns the old store had, in id order (JSON read back as text for comparison)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            split = "ml_embeddings" in sa.inspect(conn).get_table_names()  # revision 0003 moved the vectors
            dumped = {}
            for table, rows in ROWS.items():
                cols, source = ", ".join(f"t.{c}" for c in rows[0]), f"{table} t"
                if table == "ml_memories" and split:
                    cols = cols.replace("t.embedding", "e.embedding")
                    source += " LEFT JOIN ml_embeddings e ON e.memory_id = t.id"
                query = sa.text(f"SELECT {cols} FROM {source} ORDER BY t.id")  # noqa: S608
                dumped[table] = [
                    tuple(
                        bytes(v) if isinstance(v, memoryview) else str(v) if isinstance(v, (dict, list)) else v
                        for v in r
                    )
                    for r in conn.execute(query)
                ]
            return dumped
    finally:
        engine.dispose()


def _state(url: str) -> str:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return _versions.schema_state(conn, None)
    finally:
        engine.dispose()


def _is_pg(url: str) -> bool:
    return url.startswith("postgresql")


@pytest.mark.parametrize("skeleton", [False, True], ids=["today", "first-release"])
def test_an_unversioned_store_is_upgraded_without_loss(ledger_url: str, skeleton: bool) -> None:
    _build_old_store(ledger_url, skeleton=skeleton)
    before = _dump(ledger_url)
    assert _state(ledger_url) == _versions.UNVERSIONED
    if _is_pg(ledger_url):
        # Server mode: opening is refused with what to do, and nothing is changed.
        with pytest.raises(SchemaVersionError, match="memlineage migrate"):
            Ledger(ledger_url)
        assert _state(ledger_url) == _versions.UNVERSIONED
        assert migrate(ledger_url) == (_versions.UNVERSIONED, HEAD)
    ledger = Ledger(ledger_url)  # SQLite: migrated on open
    assert ledger.schema_found == (HEAD if _is_pg(ledger_url) else _versions.UNVERSIONED)
    assert _state(ledger_url) == HEAD
    assert _dump(ledger_url) == before
    columns = {c["name"] for c in sa.inspect(ledger.engine).get_columns("ml_activities")}
    assert {"run_id", "tool_call_id"} <= columns
    indexes = {i["name"] for i in sa.inspect(ledger.engine).get_indexes("ml_memories")}
    assert "ix_ml_memories_expiry" in indexes

    # The migrated store works: old memories are read and served, new writes use the added columns.
    alice = Scope(user_id="alice")
    mm = MemoryManager(ledger=ledger, index=InMemoryIndex(), embedder=FakeEmbedder(), policy=None)
    try:
        assert mm.get("m1", scope=alice).content == "Alice lives in Lisbon"
        assert [m.id for m in mm.descendants("m1", scope=alice)] == ["m2"]
        new = mm.remember("Alice moved to Porto", scope=alice, source="user")
        assert mm.get(new.id, scope=alice).status.value == "active"
    finally:
        mm.close()
    # The call-id rule now holds in the database itself (old releases enforced it in code only).
    with pytest.raises(sa.exc.IntegrityError), ledger.engine.begin() as conn:
        for i in (1, 2):
            conn.execute(
                sa.text(
                    "INSERT INTO ml_activities (id, kind, user_id, started_at, meta, run_id, tool_call_id) "
                    "VALUES (:id, 'tool_call', 'alice', 1.0, '{}', 'r', 'c')"
                ),
                {"id": f"dup{i}"},
            )
    ledger.close()
    again = Ledger(ledger_url)
    again.close()
    assert again.schema_found == HEAD  # idempotent: a second open has nothing to do


def test_rows_that_break_the_new_constraint_are_kept(ledger_url: str, caplog: pytest.LogCaptureFixture) -> None:
    _build_old_store(ledger_url, skeleton=True)
    engine = sa.create_engine(ledger_url)
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE ml_activities ADD COLUMN run_id VARCHAR(255)"))
        conn.execute(sa.text("ALTER TABLE ml_activities ADD COLUMN tool_call_id VARCHAR(255)"))
        conn.execute(sa.text("UPDATE ml_activities SET run_id = 'r', tool_call_id = 'c'"))
    engine.dispose()
    with caplog.at_level(logging.WARNING, logger="memlineage.ledger"):
        found, now = migrate(ledger_url)
    assert (found, now) == (_versions.UNVERSIONED, HEAD)
    assert "uq_ml_activities_call was not added" in caplog.text
    assert len(_dump(ledger_url)["ml_activities"]) == 2


def test_a_failed_migration_changes_nothing(ledger_url: str) -> None:
    # ml_edges lacks a nullable column (added first), ml_events a NOT NULL one (the migration then fails).
    _build_old_store(ledger_url, skeleton=True)
    engine = sa.create_engine(ledger_url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE ml_events"))
        conn.execute(sa.text("CREATE TABLE ml_events (id INTEGER PRIMARY KEY, at DOUBLE PRECISION NOT NULL)"))
    engine.dispose()
    with pytest.raises(StorageError, match="rolled back") as err:
        migrate(ledger_url)
    assert not isinstance(err.value, SchemaVersionError)
    assert _state(ledger_url) == _versions.UNVERSIONED
    engine = sa.create_engine(ledger_url)
    edge_columns = {c["name"] for c in sa.inspect(engine).get_columns("ml_edges")}
    engine.dispose()
    assert "attribution" not in edge_columns


def test_a_schema_from_a_newer_release_is_refused(ledger_url: str) -> None:
    Ledger(ledger_url).close()
    engine = sa.create_engine(ledger_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {_versions.VERSION_TABLE} SET version_num = '9999'"))  # noqa: S608
    engine.dispose()
    with pytest.raises(SchemaVersionError, match="upgrade memlineage"):
        Ledger(ledger_url)
    with pytest.raises(SchemaVersionError, match="upgrade memlineage"):
        migrate(ledger_url)
    assert _state(ledger_url) == "9999"


def test_a_new_ledger_is_created_at_head(ledger_url: str) -> None:
    ledger = Ledger(ledger_url)
    assert ledger.schema_found == _versions.NEW
    ledger.close()
    assert _state(ledger_url) == HEAD
    assert migrate(ledger_url) == (HEAD, HEAD)


def test_the_migrations_build_the_schema_of_the_code(ledger_url: str) -> None:
    """Running every migration on an empty database gives exactly `_schema.metadata` (what new stores get)."""
    engine = sa.create_engine(ledger_url)
    try:
        with engine.begin() as conn:
            _versions.upgrade(conn, None)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"version_table": _versions.VERSION_TABLE})
            diff = [d for d in compare_metadata(context, metadata) if _versions.VERSION_TABLE not in repr(d)]
    finally:
        engine.dispose()
    assert diff == []
    assert _state(ledger_url) == HEAD


def test_the_migrations_form_one_ordered_chain() -> None:
    script = ScriptDirectory(str(_versions.MIGRATIONS_DIR))
    assert script.get_heads() == [HEAD]
    chain = [rev.revision for rev in script.walk_revisions("base", "heads")][::-1]
    assert chain[0] == "0001" and chain[-1] == HEAD
    assert chain == sorted(chain), "revision ids are zero-padded numbers in order"
    for path in (_versions.MIGRATIONS_DIR / "versions").glob("*.py"):
        assert path.name.startswith("rev_"), path
        source = path.read_text()
        assert not any(raw in source for raw in ("sa.text(", "exec_driver_sql", "op.execute(")), "use op.* operations"


def test_a_pg_schema_name_stays_an_identifier(pg_schema: Any) -> None:
    """Ledger(schema=...) quotes the name in the migrations and version table too."""
    crafted = f'{pg_schema.name}_x"; DROP TABLE t; --'[:63]
    ledger = Ledger(pg_schema.admin_url, schema=crafted)
    try:
        with ledger.engine.connect() as conn:
            assert _versions.schema_state(conn, crafted) == HEAD
        assert migrate(pg_schema.admin_url, schema=crafted) == (HEAD, HEAD)
    finally:
        ledger.close()
        engine = sa.create_engine(pg_schema.admin_url)
        with engine.begin() as conn:
            conn.execute(sa.schema.DropSchema(crafted, cascade=True))
        engine.dispose()


def test_memlineage_migrate_command(pg_schema: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MEMLINEAGE_HOME", "MEMLINEAGE_LEDGER_URL", "MEMLINEAGE_LEDGER_SCHEMA"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()
    _build_old_store(pg_schema.url)
    out = runner.invoke(app, ["migrate", "--ledger-url", pg_schema.url])
    assert out.exit_code == 0, out.output
    assert f"migrated the ledger from unversioned to revision {HEAD}" in out.output
    out = runner.invoke(app, ["migrate", "--ledger-url", pg_schema.url])
    assert "nothing to do" in out.output
    # The read-only views refuse an outdated server ledger with the command to run.
    engine = sa.create_engine(pg_schema.url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"DROP TABLE {_versions.VERSION_TABLE}"))  # noqa: S608
    engine.dispose()
    out = runner.invoke(app, ["stats", "--ledger-url", pg_schema.url])
    assert out.exit_code == 2 and "memlineage migrate" in out.output
    # Embedded: a missing store is refused, an existing one is reported.
    out = runner.invoke(app, ["migrate", "--path", str(tmp_path / "none")])
    assert out.exit_code == 2 and "no MemLineage store" in out.output
    _build_old_store(f"sqlite:///{tmp_path / 'ledger.db'}")
    out = runner.invoke(app, ["migrate", "--path", str(tmp_path)])
    assert out.exit_code == 0 and f"to revision {HEAD}" in out.output


def test_open_and_settings_put_the_ledger_in_its_schema(pg_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`MemoryManager.open(ledger_schema=...)` / `MEMLINEAGE_LEDGER_SCHEMA` replace building a Ledger by hand."""
    name = f"ml_test_own_{uuid.uuid4().hex[:8]}"
    alice = Scope(user_id="alice")
    try:
        mm = MemoryManager.open(
            ledger_url=pg_server, ledger_schema=name, index=InMemoryIndex(), embedder=FakeEmbedder()
        )
        with mm:
            mem = mm.remember("Alice lives in Lisbon", scope=alice, source="user")
        engine = sa.create_engine(pg_server)
        with engine.connect() as conn:
            assert _versions.schema_state(conn, name) == HEAD
            assert conn.execute(sa.select(sa.func.count()).select_from(sa.table("ml_memories", schema=name))).scalar()
        engine.dispose()
        monkeypatch.setenv("MEMLINEAGE_LEDGER_URL", pg_server)
        monkeypatch.setenv("MEMLINEAGE_LEDGER_SCHEMA", name)
        with MemoryManager.from_settings(index=InMemoryIndex(), embedder=FakeEmbedder()) as again:
            assert again.get(mem.id, scope=alice).content == "Alice lives in Lisbon"
    finally:
        engine = sa.create_engine(pg_server)
        with engine.begin() as conn:
            conn.execute(sa.schema.DropSchema(name, cascade=True, if_exists=True))
        engine.dispose()


def _at(url: str, revision: str) -> None:
    """A store at ``revision``, with the old rows."""
    _build_old_store(url)
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            cfg = Config()
            cfg.set_main_option("script_location", str(_versions.MIGRATIONS_DIR))
            cfg.attributes["connection"] = conn
            cfg.attributes["schema"] = None
            command.upgrade(cfg, revision)
    finally:
        engine.dispose()
    assert _state(url) == revision


def _at_0001(url: str) -> None:
    """A store at revision 0001 (before unique support-group numbers), with the old rows."""
    _at(url, "0001")


def _insert_support(url: str, group: int) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO ml_supports (memory_id, support, source_kind, premises, created_at) "
                    "VALUES ('m2', :g, 'tool', 0, 3.0)"
                ),
                {"g": group},
            )
    finally:
        engine.dispose()


def test_0002_makes_support_group_numbers_unique(ledger_url: str) -> None:
    """Issue 14: two corroborations must never share a group number; 0002 adds the constraint, rows kept."""
    _at_0001(ledger_url)
    before = _dump(ledger_url)
    assert migrate(ledger_url) == ("0001", HEAD)
    assert _dump(ledger_url) == before
    _insert_support(ledger_url, 1)  # a new number is fine
    with pytest.raises(sa.exc.IntegrityError):
        _insert_support(ledger_url, 1)


def test_0002_keeps_a_store_whose_groups_already_repeat(ledger_url: str, caplog: pytest.LogCaptureFixture) -> None:
    _at_0001(ledger_url)
    _insert_support(ledger_url, 0)  # m2 already holds group 0: the race this revision guards against
    with caplog.at_level(logging.WARNING, logger="memlineage.ledger"):
        assert migrate(ledger_url) == ("0001", HEAD)
    assert "uq_ml_supports_group was not added" in caplog.text
    assert len(_dump(ledger_url)["ml_supports"]) == 2


def test_0003_moves_every_vector_to_its_own_table(ledger_url: str) -> None:
    """Issue 16: vectors leave ml_memories for ml_embeddings byte for byte; rows without one get none."""
    _at(ledger_url, "0002")
    rng = np.random.default_rng(3)
    vectors = {f"v{i}": rng.standard_normal(384).astype("<f4").tobytes() for i in range(5)}
    engine = sa.create_engine(ledger_url)
    try:
        with engine.begin() as conn:
            row = dict(ROWS["ml_memories"][0])
            for mid, blob in vectors.items():
                values = {**row, "id": mid, "content_hash": f"h-{mid}", "slot": None, "embedding": blob}
                names, marks = ", ".join(values), ", ".join(f":{k}" for k in values)
                conn.execute(sa.text(f"INSERT INTO ml_memories ({names}) VALUES ({marks})"), values)  # noqa: S608
    finally:
        engine.dispose()
    before = _dump(ledger_url)
    assert migrate(ledger_url) == ("0002", HEAD)
    assert _dump(ledger_url) == before
    engine = sa.create_engine(ledger_url)
    try:
        assert "embedding" not in {c["name"] for c in sa.inspect(engine).get_columns("ml_memories")}
        with engine.connect() as conn:
            stored = {
                r[0]: bytes(r[1]) for r in conn.execute(sa.text("SELECT memory_id, embedding FROM ml_embeddings"))
            }
    finally:
        engine.dispose()
    assert stored == {"m1": b"\x00\x00\x80?", **vectors}  # m2 had no vector
    ledger = Ledger(ledger_url)
    try:
        rows = ledger.memory_rows(["v0", "m2", "v4"])
        assert [r["embedding"] if r else None for r in rows] == [vectors["v0"], None, vectors["v4"]]
    finally:
        ledger.close()
