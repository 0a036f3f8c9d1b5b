"""Database locks of the ledger for concurrent writers (PostgreSQL server mode; no-ops or plain reads on SQLite).

The write path reads before it writes (duplicates, a slot's holder, the memory an update replaces, premises), so
several processes on one PostgreSQL ledger must re-check those reads under locks inside the writing transaction
(see :mod:`memlineage.services._concurrency`). These are the locks: advisory locks on keys that have no row yet
(:meth:`Locks.guard` across several transactions, :meth:`Locks.lock_keys` within one), row locks
(:meth:`Locks.lock_rows`) and the cascade's lock on a memory and all its descendants (:meth:`Locks.walk_cascade`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from memlineage.errors import StorageError
from memlineage.ledger._cascade import CascadeWalk
from memlineage.ledger._graph import _chunks
from memlineage.ledger._schema import memories

__all__ = ["Locks"]

_GUARD_ENGINE_LOCK = threading.Lock()


class Locks:
    """Locking half of :class:`~memlineage.ledger.Ledger` (a mixin: it uses the ledger's engine and walks).

    Attributes used: ``engine``, ``is_sqlite`` and ``_lock_space`` (the schema the tables live in, so that every URL
    spelling of one store derives the same advisory lock numbers).
    """

    engine: Engine
    is_sqlite: bool
    _lock_space: str
    _guard_engine: Engine | None = None

    def _guard_connect(self) -> Connection:
        """A connection for :meth:`guard`'s locks, outside the data pool (made on first use, without a pool).

        A guard holds its connection while the writes it protects take theirs: sharing one pool, enough guards at
        once (chat sessions appending in parallel) would hold every connection and starve those writes.
        """
        with _GUARD_ENGINE_LOCK:
            if self._guard_engine is None:
                self._guard_engine = create_engine(self.engine.url, poolclass=NullPool, hide_parameters=True)
            engine = self._guard_engine
        return engine.connect()

    def _close_guards(self) -> None:
        if self._guard_engine is not None:
            self._guard_engine.dispose()
            self._guard_engine = None

    @contextmanager
    def guard(self, keys: Iterable[Sequence[str]]) -> Iterator[None]:
        """Hold database locks on ``keys`` across several transactions (a write's read-check-write window).

        PostgreSQL: transaction-level advisory locks (``pg_advisory_xact_lock``) on a connection of their own
        (outside the data pool, so guards held at once never starve the writes they protect), taken in sorted
        order (no lock cycle between two guards) and released when the block ends, also when the process dies
        (the server ends the session). Another process guarding an equal key waits. SQLite: nothing to do, one
        writer holds the store (``Ledger.transaction`` and the store's writer lock).

        Args:
            keys: Tuples of strings, e.g. ``("content", user_id, agent_id, content_hash)``.

        Raises:
            StorageError: the locks could not be taken.
        """
        numbers = self._lock_numbers(keys)
        if self.is_sqlite or not numbers:
            yield
            return
        try:
            conn = self._guard_connect()
        except SQLAlchemyError as exc:
            msg = f"ledger lock failed: {exc}"
            raise StorageError(msg) from exc
        try:
            trans = conn.begin()
            self._take(conn, numbers)
        except SQLAlchemyError as exc:
            conn.close()
            msg = f"ledger lock failed: {exc}"
            raise StorageError(msg) from exc
        try:
            yield
        finally:
            try:
                trans.rollback()  # nothing was written on this connection; ending it releases the locks
            finally:
                conn.close()

    def lock_keys(self, conn: Connection, keys: Iterable[Sequence[str]]) -> None:
        """Take advisory locks on ``keys`` until ``conn``'s transaction ends (PostgreSQL; no-op on SQLite).

        Use for things that have no row yet (the first holder of a slot). Keys are taken in sorted order.
        """
        numbers = self._lock_numbers(keys)
        if numbers and not self.is_sqlite:
            self._take(conn, numbers)

    def _lock_numbers(self, keys: Iterable[Sequence[str]]) -> list[int]:
        """Signed 64-bit advisory lock numbers for ``keys`` (BLAKE2b of the schema and the key), sorted, unique."""
        out = set()
        for key in keys:
            text = "\x1f".join([self._lock_space, *key]).encode("utf-8", "surrogatepass")
            out.add(int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True))
        return sorted(out)

    @staticmethod
    def _take(conn: Connection, numbers: Sequence[int]) -> None:
        for number in numbers:  # one statement each: the order of taking is the order of the list
            conn.execute(select(func.pg_advisory_xact_lock(number)))

    def lock_rows(self, conn: Connection, ids: Iterable[str], *, share: bool = False) -> dict[str, dict[str, Any]]:
        """Lock memory rows until ``conn``'s transaction ends and return their current values (without vectors).

        PostgreSQL: ``SELECT ... FOR UPDATE`` (``FOR SHARE`` with ``share=True``, which lets other writers read
        and share-lock the rows but makes an ``UPDATE`` of them wait), in id order so that two writers never
        lock the same rows in opposite orders. A row changed by a transaction that committed while this one
        waited is returned as committed. SQLite: a plain read (the writer lock already serialises writers).

        Args:
            conn: The write transaction's connection.
            ids: Memory ids; missing ones are absent from the result.
            share: Lock for share (premises of a write) instead of for update (rows about to change).

        Returns:
            ``{id: row}``.
        """
        found: dict[str, dict[str, Any]] = {}
        cols = [c for c in memories.c if c.name != "embedding"]
        for chunk in _chunks(sorted(set(ids))):
            query = select(*cols).where(memories.c.id.in_(chunk)).order_by(memories.c.id)
            for row in conn.execute(query.with_for_update(read=share)).mappings():
                found[row["id"]] = {**row, "embedding": None}
        return found

    def walk_cascade(self, mid: str, conn: Connection, *, lock: bool) -> CascadeWalk:
        """Walk the descendants of ``mid`` once into the connection's cascade table (see :mod:`._cascade`).

        With ``lock`` on PostgreSQL, every descendant is also locked for update, and the walk repeated until it
        finds nothing unlocked. A conclusion written concurrently share-locks its premises: either it committed
        before the lock was granted (then the repeated walk sees it) or it waits and then finds its premise
        withdrawn. So no descendant escapes the cascade, and the statuses read by the last walk are current. The
        caller locks ``mid`` itself first (:meth:`lock_rows`).

        Args:
            mid: The memory being invalidated.
            conn: The cascade's transaction.
            lock: Take the cascade's row locks (not for a dry run). SQLite needs none: one writer holds the store.

        Returns:
            The filled walk.
        """
        walk = CascadeWalk(conn, mid, sqlite=self.is_sqlite)
        walk.fill()
        if not lock or self.is_sqlite:
            return walk
        locked = {mid}
        while fresh := set(walk.info) - locked:
            self.lock_rows(conn, fresh)
            locked |= fresh
            walk.fill()
        return walk
