"""The ledger: the source of truth for memories, lineage edges, activities and the event log (SQLAlchemy 2.0).

Works on any SQLAlchemy URL; the embedded default is a SQLite file in WAL mode, the scale-out default PostgreSQL
(``postgresql+psycopg://...``). SQL stays portable: graph walks are recursive CTEs whose cost grows with the
affected set, not with the store.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import (
    Connection,
    Engine,
    case,
    create_engine,
    delete,
    event,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool
from sqlalchemy.schema import CreateSchema
from sqlalchemy.sql.elements import ColumnElement

from memlineage.errors import ConflictError, InvalidInputError, SchemaVersionError, StorageError
from memlineage.ledger import _versions
from memlineage.ledger._activity_log import ActivityLog
from memlineage.ledger._graph import GraphQueries, _chunks
from memlineage.ledger._locks import Locks
from memlineage.ledger._memory_cache import MemoryReader
from memlineage.ledger._rows import Event, memory_to_row, row_to_memory
from memlineage.ledger._schema import (
    NOT_INDEXED,
    activities,
    edges,
    embeddings,
    events,
    memories,
    metadata,
    select_full_memories,
    supports,
)
from memlineage.models import (
    Memory,
    Scope,
    Status,
)

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Event", "Ledger", "memory_to_row", "row_to_memory"]

logger = logging.getLogger(__name__)

#: PostgreSQL advisory lock key held while creating the tables ("mlineage" as a number).
_DDL_LOCK_KEY = 0x6D6C696E65616765
#: PostgreSQL's identifier limit (NAMEDATALEN - 1).
_MAX_IDENTIFIER = 63
#: SQLSTATEs of a transaction PostgreSQL aborted because of another one: deadlock, serialization failure.
_CONFLICT_STATES = frozenset({"40P01", "40001"})


class Ledger(GraphQueries, Locks, ActivityLog):
    """SQL ledger of memories, lineage edges, activities and events.

    Setup:
        Any SQLAlchemy URL; ``sqlite:///path/ledger.db`` (WAL, busy timeout 30 s), ``sqlite://`` (in memory,
        one shared connection) or ``postgresql+psycopg://user@host/db``.

    Instantiate:
        >>> ledger = Ledger("sqlite://")

    Use:
        Writes go through :meth:`transaction`; reads are batch-first and keep input order (R7).

    Args:
        url: SQLAlchemy database URL.
        schema: Optional PostgreSQL schema to create the tables in (tests use one schema each). Any name; it is
            quoted as an identifier by SQLAlchemy, never pasted into SQL.
        echo: Log SQL statements (parameters are never logged: they hold memory content).
        upgrade: Migrate an older schema to this release's revision. ``None`` (default): yes for SQLite (the
            embedded store, opened under its writer lock), no for a server database, where several processes and
            releases may share the schema: run ``memlineage migrate`` (:func:`memlineage.ledger.migrate`) instead.
            A new database gets the current tables either way.

    Raises:
        InvalidInputError: ``schema`` is not a non-empty string of at most 63 characters without NUL.
        SchemaVersionError: the schema is older and ``upgrade`` is off (server default), or newer than this
            release knows. Nothing was changed.
        StorageError: the database cannot be opened, or the tables cannot be created or migrated. Messages of this
            and every other ledger error never include SQL parameters (content, metadata), only the statement shape.
    """

    def __init__(
        self, url: str = "sqlite://", *, schema: str | None = None, echo: bool = False, upgrade: bool | None = None
    ) -> None:
        self.url = url
        self._lock = threading.RLock()
        # Memories built from rows, reused while a row reads the same (see _memory_cache)
        self._reader = MemoryReader()
        kwargs: dict[str, Any] = {"echo": echo, "future": True}
        self.is_sqlite = url.startswith("sqlite")
        self._schema = schema
        if self.is_sqlite:
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            if url in ("sqlite://", "sqlite:///:memory:"):
                kwargs["poolclass"] = StaticPool
        else:
            kwargs["pool_pre_ping"] = True
        # In-memory SQLite shares one connection between threads: a read closing it would roll back another
        # thread's open write transaction, so reads take the writer lock there too.
        self._shared_connection = kwargs.get("poolclass") is StaticPool
        if schema is not None:
            if not isinstance(schema, str) or not 0 < len(schema) <= _MAX_IDENTIFIER or "\x00" in schema:
                msg = f"schema must be a non-empty name of at most {_MAX_IDENTIFIER} characters without NUL"
                raise InvalidInputError(msg)
            kwargs["execution_options"] = {"schema_translate_map": {None: schema}}
        # SQL parameters hold memory content and metadata: keep them out of logs and exception messages.
        kwargs["hide_parameters"] = True
        try:
            self.engine: Engine = create_engine(url, **kwargs)
        except SQLAlchemyError as exc:
            raise StorageError(_open_failure(url, exc)) from exc
        try:
            if self.is_sqlite:
                event.listen(self.engine, "connect", _sqlite_pragmas)
            #: Schema state found on open: a revision, ``"new"`` or ``"unversioned"`` (see ``_versions``).
            self.schema_found = self._prepare_schema(upgrade)
        except SQLAlchemyError as exc:
            self.engine.dispose()
            raise StorageError(_open_failure(url, exc)) from exc
        except BaseException:
            self.engine.dispose()
            raise

    @property
    def shared_connection(self) -> bool:
        """Whether every thread shares one connection (in-memory SQLite: no write-ahead log)."""
        return self._shared_connection

    def _prepare_schema(self, upgrade: bool | None) -> str:
        """Create a new ledger, or check (and, when allowed, migrate) an existing one; returns the state found."""
        schema = None if self.is_sqlite else self._schema
        with self._write_lock(), self._immediate() if self.is_sqlite else self.engine.begin() as conn:
            if not self.is_sqlite:
                # Processes opening a fresh database at once would race on CREATE SCHEMA / TABLE and on migrations.
                conn.execute(select(func.pg_advisory_xact_lock(_DDL_LOCK_KEY)))
                if schema:
                    conn.execute(CreateSchema(schema, if_not_exists=True))
            # Lock keys name the schema the tables live in, so that every URL spelling of one store agrees.
            self._lock_space = (
                "" if self.is_sqlite else schema or str(conn.execute(select(func.current_schema())).scalar())
            )
            state = _versions.schema_state(conn, schema)
            if state == _versions.NEW:
                _versions.stamp_new(conn)
            elif state != _versions.HEAD:
                if upgrade if upgrade is not None else self.is_sqlite:
                    _versions.upgrade(conn, schema)
                elif state != _versions.UNVERSIONED and not _versions.is_known(state):
                    msg = (
                        f"the ledger's schema is at revision {state}, newer than this release knows; upgrade memlineage"
                    )
                    raise SchemaVersionError(msg)
                else:
                    raise SchemaVersionError(_versions.outdated(state))
        return state

    @contextmanager
    def _immediate(self) -> Iterator[Connection]:
        """A SQLite transaction begun with ``BEGIN IMMEDIATE``: DDL included, all or nothing, one process at a time.

        pysqlite opens no transaction before DDL, so a failed migration would stay half applied; with the driver's
        own transaction handling off for this connection, the explicit ``BEGIN IMMEDIATE`` takes SQLite's write
        lock (other processes wait up to the busy timeout) and the whole schema change commits or rolls back once.
        """
        with self.engine.connect() as conn:
            raw = cast("sqlite3.Connection", conn.connection.driver_connection)  # the DBAPI driver is untyped
            previous = raw.isolation_level
            raw.isolation_level = None
            try:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.rollback()
                    raise
                conn.commit()
            finally:
                raw.isolation_level = previous

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction; committed on success, rolled back on any error.

        Raises:
            StorageError: the database failed (the original error is chained).
        """
        try:
            with self._write_lock(), self.engine.begin() as conn:
                yield conn
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) in _CONFLICT_STATES:
                msg = "the write collided with a concurrent one and was rolled back (nothing was written); retry it"
                raise ConflictError(msg) from exc
            msg = f"ledger write failed and was rolled back: {exc}"
            raise StorageError(msg) from exc
        except SQLAlchemyError as exc:
            msg = f"ledger write failed and was rolled back: {exc}"
            raise StorageError(msg) from exc

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        # SQLite allows one writer; serialising in-process writers avoids busy retries. PostgreSQL needs no lock.
        if self.is_sqlite:
            with self._lock:
                yield
        else:
            yield

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only connection."""
        try:
            with self._lock if self._shared_connection else nullcontext(), self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as exc:
            msg = f"ledger read failed: {exc}"
            raise StorageError(msg) from exc

    def vacuum(self, *, full: bool = False) -> None:
        """Rewrite the tables so that redacted values leave the database files (run after :meth:`erase`).

        SQLite: ``VACUUM`` (the whole file is rewritten). PostgreSQL: ``VACUUM`` of the ledger's tables, or
        ``VACUUM (FULL)`` with ``full=True``, which rewrites them into new files (only that removes old row
        versions from disk; it takes an exclusive lock on each table while it runs).

        Raises:
            StorageError: the database refused (e.g. no privilege to vacuum the tables).
        """
        try:
            if self.is_sqlite:
                with self._write_lock(), self.engine.connect() as conn:
                    conn.exec_driver_sql("VACUUM")
                return
            quote = self.engine.dialect.identifier_preparer
            prefix = f"{quote.quote_schema(self._schema)}." if self._schema else ""
            tables = ", ".join(prefix + quote.quote(t.name) for t in metadata.sorted_tables)
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql(f"VACUUM {'(FULL) ' if full else ''}{tables}")
        except SQLAlchemyError as exc:
            msg = f"ledger vacuum failed: {exc}"
            raise StorageError(msg) from exc

    def close(self) -> None:
        """Dispose of the connection pool (and the locks' connections)."""
        self._close_guards()
        self.engine.dispose()

    # ------------------------------------------------------------------ writes
    def insert_memories(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert memory rows (with ``content_hash``, ``index_state``, ``embedding``, ``embedder``).

        The vectors (``embedding``, float32 bytes or ``None``) go to ``ml_embeddings`` in the same transaction.
        """
        if rows:
            conn.execute(insert(memories), [_without_embedding(r) for r in rows])
            vectors = [{"memory_id": r["id"], "embedding": r["embedding"]} for r in rows if r.get("embedding")]
            if vectors:
                conn.execute(insert(embeddings), vectors)

    def insert_vectors(self, conn: Connection, vectors: Sequence[tuple[str, bytes]]) -> None:
        """Store the vectors of memories that have none yet (``(memory_id, float32 bytes)`` pairs)."""
        if vectors:
            conn.execute(insert(embeddings), [{"memory_id": mid, "embedding": vec} for mid, vec in vectors])

    def insert_edges(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert lineage edge rows (src, dst, relation, support, activity_id, user_id, created_at)."""
        if rows:
            conn.execute(insert(edges), list(rows))

    def insert_supports(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert support-group rows."""
        if rows:
            conn.execute(insert(supports), list(rows))

    def insert_events(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append events (at, type, memory_id, activity_id, user_id, data)."""
        if rows:
            conn.execute(insert(events), [r if r.get("data") else {**r, "data": {}} for r in rows])

    def update_memories(self, conn: Connection, ids: Sequence[str], values: Mapping[str, Any]) -> int:
        """Set the same column ``values`` on every memory in ``ids``; returns the number of rows changed.

        ``embedding`` may only be set to ``None`` (erasure): it deletes the memories' vectors.
        """
        changed = 0
        values = dict(values)
        if "embedding" in values:
            if values.pop("embedding") is not None:
                msg = "update_memories only deletes vectors (embedding=None); a memory's vector is never replaced"
                raise InvalidInputError(msg)
            for chunk in _chunks(list(ids)):
                result = conn.execute(delete(embeddings).where(embeddings.c.memory_id.in_(chunk)))
                changed += result.rowcount or 0
            if not values:
                return changed
            changed = 0
        if values.get("index_state") == "stale":
            # Only an indexed entry can go stale: a pending one still needs its full write, a removed one stays out,
            # an exact one (held by the ledger for the exact plan) never had an ANN entry to bring up to date.
            values["index_state"] = case((memories.c.index_state == "indexed", "stale"), else_=memories.c.index_state)
        elif values.get("index_state") == "removing":
            # An exact row has no ANN entry to delete: it is removed at once (the sync drops it from memory).
            values["index_state"] = case((memories.c.index_state == "exact", "removed"), else_="removing")
        for chunk in _chunks(list(ids)):
            result = conn.execute(update(memories).where(memories.c.id.in_(chunk)).values(**values))
            changed += result.rowcount or 0
        return changed

    # ------------------------------------------------------------------ reads
    def memory_rows(
        self, ids: Sequence[str], conn: Connection | None = None, *, embedding: bool = True
    ) -> list[dict[str, Any] | None]:
        """Rows for ``ids`` in input order; ``None`` for ids that do not exist.

        Args:
            ids: Memory ids.
            conn: Optional connection to read in.
            embedding: Include the stored vector (``embedding`` is ``None`` in the rows otherwise).
        """
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(ids))
        query = select_full_memories() if embedding else select(memories)
        with self._maybe(conn) as c:
            for chunk in _chunks(unique):
                result = c.execute(query.where(memories.c.id.in_(chunk)))
                keys = list(result.keys())  # once: dict(row_mapping) builds a key view per row
                for values in result:
                    row = dict(zip(keys, values, strict=True))
                    found[row["id"]] = row
        if not embedding:
            for row in found.values():
                row["embedding"] = None
        return [found.get(i) for i in ids]

    def memories(self, ids: Sequence[str], conn: Connection | None = None) -> list[Memory | None]:
        """Memories for ``ids`` in input order (``None`` for misses), with their original premises."""
        with self._maybe(conn) as c:
            return self._reader.read(c, ids, self._original_premises)

    def _original_premises(self, ids: Sequence[str], conn: Connection) -> dict[str, tuple[str, ...]]:
        return self.premises(ids, conn, support=0)

    def find_duplicates(
        self, user_id: str, agent_id: str | None, pairs: Iterable[tuple[str, str]], conn: Connection | None = None
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """Live memories in the scope with the same ``(kind, content_hash)`` (newest first wins)."""
        wanted = list(dict.fromkeys(pairs))
        out: dict[tuple[str, str], dict[str, Any]] = {}
        if not wanted:
            return out
        live = [Status.ACTIVE.value, Status.SUSPECT.value]
        with self._maybe(conn) as c:
            for chunk in _chunks(wanted):
                hashes = list({h for _, h in chunk})
                query = (
                    select(memories)
                    .where(
                        memories.c.user_id == user_id,
                        _agent_eq(agent_id),
                        memories.c.content_hash.in_(hashes),
                        memories.c.status.in_(live),
                    )
                    .order_by(memories.c.recorded_at)
                )
                for row in c.execute(query).mappings():
                    key = (row["kind"], row["content_hash"])
                    if key in chunk or key in wanted:
                        out[key] = dict(row)
        return out

    def slot_versions(
        self, user_id: str, agent_id: str | None, slot: str, conn: Connection | None = None
    ) -> list[dict[str, Any]]:
        """Every version that ever held ``slot`` in the scope, oldest first."""
        with self._maybe(conn) as c:
            query = (
                select(memories)
                .where(memories.c.user_id == user_id, _agent_eq(agent_id), memories.c.slot == slot)
                .order_by(memories.c.recorded_at)
            )
            return [dict(r) for r in c.execute(query).mappings()]

    def ids_in_scope(
        self,
        scope: Scope,
        *,
        statuses: Iterable[str] | None = None,
        conn: Connection | None = None,
        session_only: bool = False,
    ) -> list[str]:
        """Ids of memories readable in ``scope`` (optionally restricted to some statuses), oldest first."""
        cond = [memories.c.user_id == scope.user_id]
        if scope.agent_id is not None:
            cond.append(or_(memories.c.agent_id.is_(None), memories.c.agent_id == scope.agent_id))
        if session_only and scope.session_id is not None:
            cond.append(memories.c.session_id == scope.session_id)
        if statuses is not None:
            cond.append(memories.c.status.in_(list(statuses)))
        with self._maybe(conn) as c:
            query = select(memories.c.id).where(*cond).order_by(memories.c.recorded_at, memories.c.id)
            return [r[0] for r in c.execute(query)]

    def index_backlog(self, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Rows whose index state is not settled ('pending', 'stale' or 'removing')."""
        with self._maybe(conn) as c:
            query = select_full_memories().where(
                NOT_INDEXED, memories.c.index_state.in_(["pending", "stale", "removing"])
            )
            return [dict(r) for r in c.execute(query).mappings()]

    def index_summary(self, conn: Connection | None = None) -> list[dict[str, Any]]:
        """``id``, ``user_id``, ``status``, ``content_hash`` and ``index_state`` of every memory (for verify)."""
        cols = [memories.c.id, memories.c.user_id, memories.c.status, memories.c.content_hash, memories.c.index_state]
        with self._maybe(conn) as c:
            return [dict(r) for r in c.execute(select(*cols)).mappings()]

    def all_index_rows(self, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Every row that belongs in the index (index state not 'removed')."""
        with self._maybe(conn) as c:
            query = select_full_memories().where(memories.c.index_state != "removed")
            return [dict(r) for r in c.execute(query).mappings()]

    def set_attribution(
        self, conn: Connection, memory_id: str, premises: Mapping[str, str], activity_id: str | None
    ) -> None:
        """Record how each premise of ``memory_id`` was attributed, on its wasDerivedFrom edges not yet annotated."""
        for premise, how in premises.items():
            cond = [edges.c.src == memory_id, edges.c.dst == premise, edges.c.relation == "wasDerivedFrom"]
            conn.execute(update(edges).where(*cond, edges.c.attribution.is_(None)).values(attribution=how))

    def counts(self, user_id: str | None = None) -> dict[str, Any]:
        """Row counts per status / kind / source kind, plus edges, activities and events.

        ``index_pending`` counts rows the index sync still owes a write; ``index_exact`` rows held by the ledger
        alone for the exact plan (never written to the ANN index, see ``memlineage.services.index_sync``).
        """
        with self.read() as c:
            cond = [memories.c.user_id == user_id] if user_id else []
            by_status: dict[str, int] = dict(
                c.execute(select(memories.c.status, func.count()).where(*cond).group_by(memories.c.status)).all()
            )
            by_kind: dict[str, int] = dict(
                c.execute(select(memories.c.kind, func.count()).where(*cond).group_by(memories.c.kind)).all()
            )
            by_source: dict[str, int] = dict(
                c.execute(
                    select(memories.c.source_kind, func.count()).where(*cond).group_by(memories.c.source_kind)
                ).all()
            )
            ecount = c.execute(
                select(func.count()).select_from(edges).where(*([edges.c.user_id == user_id] if user_id else []))
            ).scalar_one()
            acount = c.execute(
                select(func.count())
                .select_from(activities)
                .where(*([activities.c.user_id == user_id] if user_id else []))
            ).scalar_one()
            evcount = c.execute(
                select(func.count()).select_from(events).where(*([events.c.user_id == user_id] if user_id else []))
            ).scalar_one()
            pending = c.execute(
                select(func.count())
                .select_from(memories)
                .where(NOT_INDEXED, memories.c.index_state.in_(["pending", "stale", "removing"]), *cond)
            ).scalar_one()
            exact = c.execute(
                select(func.count()).select_from(memories).where(memories.c.index_state == "exact", *cond)
            ).scalar_one()
        return {
            "memories": sum(by_status.values()),
            "by_status": by_status,
            "by_kind": by_kind,
            "by_source": by_source,
            "edges": ecount,
            "activities": acount,
            "events": evcount,
            "index_pending": pending,
            "index_exact": exact,
        }

    @contextmanager
    def _maybe(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
        else:
            with self.read() as c:
                yield c


def _open_failure(url: str, exc: SQLAlchemyError) -> str:
    """Say why the ledger could not be opened and what to do: a missing schema or database, rights, or reachability."""
    try:
        parsed = make_url(url)
        shown = parsed.render_as_string(hide_password=True)
    except (SQLAlchemyError, ValueError):  # pragma: no cover - create_engine parsed it already
        parsed, shown = None, url
    orig = getattr(exc, "orig", None)
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    first = (str(orig or exc).strip().splitlines() or [""])[0]
    where = f"cannot open the ledger at {shown!r}"
    if state == "3F000":  # invalid_schema_name: the search_path names no existing schema
        options = str(parsed.query.get("options", "")) if parsed is not None else ""
        found = re.search(r"search_path\s*=\s*([^\s,]+)", options)
        schema = found.group(1) if found else "<schema>"
        return (
            f"{where}: the PostgreSQL schema {schema!r} in the URL's search_path does not exist ({first}); create it "
            f'first (psql: CREATE SCHEMA "{schema}";) or drop options=-csearch_path=... to use the default schema; '
            "MemLineage then creates its tables there"
        )
    missing_db = re.search(r'database "([^"]+)" does not exist', first)
    if state == "3D000" or missing_db:
        name = missing_db.group(1) if missing_db else (parsed.database if parsed is not None else "<db>")
        host = f" -h {parsed.host}" if parsed is not None and parsed.host else ""
        user = f" -U {parsed.username}" if parsed is not None and parsed.username else ""
        return f"{where}: the database {name!r} does not exist; create it first (createdb{host}{user} {name})"
    if state == "42501":  # insufficient_privilege
        return (
            f"{where}: the database user may not create MemLineage's tables ({first}); run once as a user with CREATE "
            "on the schema (GRANT CREATE ON SCHEMA <schema> TO <user>), then the tables exist for everyone"
        )
    if state in ("28000", "28P01") or "password authentication failed" in first:
        return f"{where}: authentication failed ({first}); check the user name and password in the URL"
    return f"{where}: {first}; check the URL and that the database is reachable"


def _without_embedding(row: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a memory row without its vector (stored in ``ml_embeddings``); a C-level copy, not a comprehension."""
    out = dict(row)
    out.pop("embedding", None)
    return out


#: ``stamp_key`` layout (31 bits, a PostgreSQL ``integer``): the creation time in slots of 1/32 s, modulo 2^21 (a
#: cycle of about 18 hours), above 10 random bits.
STAMP_SLOTS_PER_S = 32
STAMP_TIME_BITS = 21
STAMP_RANDOM_BITS = 10


def new_stamp_key(now_ns: int | None = None) -> int:
    """A 31-bit ``stamp_key`` for a new memory row (summed per scope by ``Ledger.scope_stamp``).

    The high 21 bits are the creation time (1/32 s slots, wrapping every ~18 hours), the low 10 bits random. Keys
    in creation order keep ``ix_ml_memories_stamp`` (``user_id, index_state, status, stamp_key``) in the order the
    rows were written, so a status change over many rows written together (a cascade) rewrites neighbouring index
    pages instead of pages at random (measured on 100k descendants: the cascade's ``UPDATE`` 1.3 s with random keys,
    0.65 s with keys in creation order). Two rows get the same key only when written in the same slot of the cycle
    with the same random bits, so a stamp still misses a removal plus an insert about once in 2^31.

    A row stored without one counts as 0 on both sides of the comparison (the SQL sums and the in-memory tallies).

    Args:
        now_ns: The creation time in nanoseconds since the epoch (default: now).

    Returns:
        An integer in ``[0, 2**31)``.
    """
    ns = time.time_ns() if now_ns is None else now_ns
    slot = (ns * STAMP_SLOTS_PER_S // 1_000_000_000) % (1 << STAMP_TIME_BITS)
    return (slot << STAMP_RANDOM_BITS) | random.getrandbits(STAMP_RANDOM_BITS)


def _agent_eq(agent_id: str | None) -> ColumnElement[bool]:
    return memories.c.agent_id.is_(None) if agent_id is None else memories.c.agent_id == agent_id


def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    cur = dbapi_conn.cursor()
    try:
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA secure_delete=ON")
    finally:
        cur.close()
