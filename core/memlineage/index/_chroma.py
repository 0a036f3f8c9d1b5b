"""Chroma-backed vector index: an embedded ``PersistentClient`` or an injected client such as ``HttpClient``.

The embedded client runs in a child process of its own by default (:mod:`memlineage.index._chroma_process`).

chromadb is imported lazily, inside this module's functions, so that ``import memlineage`` stays light.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from memlineage.errors import MissingDependencyError, StorageError
from memlineage.index._base import DOCUMENT_KEY, IndexFilter, IndexHit, Vector

if TYPE_CHECKING:  # type names only: chromadb is imported at run time on first use
    from chromadb import Collection
    from chromadb.api import ClientAPI

__all__ = ["ChromaIndex"]

logger = logging.getLogger(__name__)

#: Chroma's maximum batch is large but finite; stay well under it.
BATCH = 4000


def _import_chromadb() -> Any:
    try:
        import chromadb  # deferred: heavy; a store with another index never loads it
    except ImportError as exc:  # pragma: no cover - chromadb is a core dependency
        msg = "chromadb is not installed; run: pip install memlineage"
        raise MissingDependencyError(msg) from exc
    return chromadb


def persistent_client(path: str | Path) -> ClientAPI:
    """An in-process ``PersistentClient`` at ``path`` with anonymized telemetry off.

    Raises:
        MissingDependencyError: chromadb is not installed.
    """
    chromadb = _import_chromadb()
    from chromadb.config import Settings  # deferred with chromadb (above)

    return cast("ClientAPI", chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False)))


def _matrix(vectors: Sequence[Sequence[float]]) -> npt.NDArray[np.float32]:
    """Vectors as one float32 array (Chroma's native input; no per-float Python conversion)."""
    return np.asarray(vectors, dtype=np.float32)


def chroma_where(where: IndexFilter) -> dict[str, Any]:
    """Translate an :class:`IndexFilter` into a Chroma ``where`` clause (never empty)."""
    clauses: list[dict[str, Any]] = [{"user_id": where.user_id}]
    if where.agent_id is not None:
        clauses.append({"agent_id": {"$in": ["", where.agent_id]}})
    if where.session_id is not None:
        clauses.append({"session_id": where.session_id})
    if len(where.statuses) == 1:
        clauses.append({"status": where.statuses[0]})
    else:
        clauses.append({"status": {"$in": list(where.statuses)}})
    if where.kinds is not None:
        clauses.append({"kind": {"$in": list(where.kinds)}})
    clauses.extend({"tags": {"$contains": tag}} for tag in where.tags)
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


#: How Chroma's SQLite log encodes ``Operation.DELETE`` (ADD 0, UPDATE 1, UPSERT 2, DELETE 3).
_LOG_DELETE = 3


class ChromaIndex:
    """A :class:`~memlineage.index.VectorIndex` on one Chroma collection with cosine distance.

    Setup:
        ``pip install memlineage`` (chromadb is a core dependency).

    Instantiate:
        >>> ChromaIndex.persistent("/tmp/store/chroma")  # doctest: +SKIP
        >>> ChromaIndex(chromadb.HttpClient(host="127.0.0.1", port=8000))  # doctest: +SKIP

    Use:
        The collection is created with ``embedding_function=None``; MemLineage passes vectors explicitly, so the
        embedder is recorded in provenance and the index can be rebuilt from the ledger.

    Args:
        client: A chromadb client, any kind (``PersistentClient``, ``EphemeralClient``, ``HttpClient``).
        collection: Collection name (3-512 chars of ``[a-zA-Z0-9._-]``).
        owns_client: :meth:`close` closes ``client`` too (for a client made for this index, e.g. from settings);
            by default an injected client stays open.

    Raises:
        StorageError: the collection cannot be opened.
    """

    def __init__(self, client: ClientAPI, collection: str = "memlineage", *, owns_client: bool = False) -> None:
        self.client = client
        self.collection_name = collection
        self._owns_client = owns_client  # persistent() sets it too: close() releases the client then
        self._path: Path | None = None  # directory of an embedded client (persistent()), for purge_log()
        self._col = self._open()

    @classmethod
    def persistent(
        cls, path: str | Path, collection: str = "memlineage", *, process: bool | None = None
    ) -> ChromaIndex:
        """Open an embedded ``PersistentClient`` at ``path`` (anonymized telemetry off).

        Args:
            path: The Chroma directory.
            collection: The collection's name.
            process: Run the client in a child process of its own (:class:`~memlineage.index._chroma_process.
                ChromaProcess`), so that Chroma's writes, which hold the GIL in process, do not stop this
                process's threads. Default: yes on POSIX unless ``MEMLINEAGE_CHROMA_PROCESS=0``; the client falls
                back to this process (logged at WARNING) where the child cannot start.
        """
        from memlineage.index._chroma_process import ChromaProcess, wanted

        in_child = process if process is not None else wanted()
        client = cast("ClientAPI", ChromaProcess(path)) if in_child else persistent_client(path)
        index = cls(client, collection)
        index._owns_client = True
        index._path = Path(path).resolve()
        return index

    def prestart(self) -> None:
        """Start the client's Chroma child process now, without waiting for it (other clients: nothing to do)."""
        start = getattr(self.client, "prestart", None)
        if callable(start):
            start()

    def purge_log(self, ids: Sequence[str]) -> int:
        """Physically remove what Chroma's write log still holds about deleted entries (embedded client only).

        Chroma keeps every add / update / upsert (vector, metadata: tags, session id, content hash) in its
        ``embeddings_queue`` table until its vector segment persists, and freed SQLite pages keep old bytes.
        After :meth:`delete`, this drops those records for ``ids`` (the delete records stay, so replaying the log
        still removes the entries from an older vector snapshot), then rewrites ``chroma.sqlite3`` with
        ``secure_delete`` and ``VACUUM``. A no-op for server clients (the server owns its files).

        Returns:
            Number of log records removed.

        Raises:
            StorageError: the database could not be rewritten.
        """
        db = None if self._path is None else self._path / "chroma.sqlite3"
        if db is None or not ids or not db.exists():
            return 0
        removed = 0
        try:
            with closing(sqlite3.connect(db, timeout=30)) as con:
                con.execute("PRAGMA secure_delete = ON")
                unique = list(dict.fromkeys(ids))
                for start in range(0, len(unique), 500):
                    chunk = unique[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    cur = con.execute(
                        f"DELETE FROM embeddings_queue WHERE operation != ? AND id IN ({marks})",  # noqa: S608
                        [_LOG_DELETE, *chunk],
                    )
                    removed += max(cur.rowcount, 0)
                con.commit()
                con.execute("VACUUM")
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            msg = f"could not compact Chroma's log after a deletion: {type(exc).__name__}: {exc}"
            raise StorageError(msg) from exc
        return removed

    def close(self) -> None:
        """Release an embedded client this index opened (an injected client stays open). Idempotent.

        Chroma caches one in-memory system per path and process; without this, reopening the store in the same
        process after another process wrote to it would serve that stale cache ("Error finding id").
        """
        if self._owns_client:
            self._owns_client = False
            close_client(self.client)

    @classmethod
    def ephemeral(cls, collection: str = "memlineage") -> ChromaIndex:
        """An in-process ``EphemeralClient`` (tests)."""
        chromadb = _import_chromadb()
        from chromadb.config import Settings  # deferred with chromadb (above)

        return cls(chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False)), collection)

    def _call(self, what: str, method: str, /, **kwargs: object) -> Any:
        """Call ``method`` of the collection; reopen it once by name when Chroma no longer knows its id.

        Another process sharing the collection may have dropped and recreated it (``reindex``): the handle held
        here then names a collection id that does not exist any more, and the collection of the same name is the
        one to use.
        """
        for attempt in (1, 2):
            try:
                return getattr(self._col, method)(**kwargs)
            except Exception as exc:
                if attempt == 1 and _collection_gone(exc):
                    logger.info("Chroma collection %s was recreated elsewhere; reopening it", self.collection_name)
                    self._col = self._open()
                    continue
                msg = f"Chroma {what} failed: {exc}"
                raise StorageError(msg) from exc
        raise AssertionError  # pragma: no cover - the loop returns or raises

    def _open(self) -> Collection:
        try:
            return self.client.get_or_create_collection(
                self.collection_name, embedding_function=None, metadata={"hnsw:space": "cosine"}
            )
        except Exception as exc:
            msg = f"cannot open Chroma collection {self.collection_name!r}: {exc}"
            raise StorageError(msg) from exc

    def upsert(
        self, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[Mapping[str, Any]]
    ) -> None:
        """Insert or replace entries (batched)."""
        self._write("upsert", ids, vectors, metadatas)

    def add(
        self, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[Mapping[str, Any]]
    ) -> None:
        """Insert entries known to be new (about twice as fast as :meth:`upsert` in Chroma)."""
        self._write("add", ids, vectors, metadatas)

    def _write(
        self,
        what: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
    ) -> None:
        for start in range(0, len(ids), BATCH):
            end = start + BATCH
            metas = [dict(m) for m in metadatas[start:end]]
            docs = [m.pop(DOCUMENT_KEY, None) for m in metas]  # the memory's text, as Chroma's document
            extra: dict[str, Any] = {"documents": docs} if all(isinstance(d, str) for d in docs) else {}
            self._call(
                what, what, ids=list(ids[start:end]), embeddings=_matrix(vectors[start:end]), metadatas=metas, **extra
            )

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Merge metadata into existing entries; Chroma skips ids missing from the collection."""
        if not ids:
            return
        pairs = [(i, dict(m)) for i, m in zip(ids, metadatas)]
        for start in range(0, len(pairs), BATCH):
            chunk = pairs[start : start + BATCH]
            self._call("update", "update", ids=[i for i, _ in chunk], metadatas=[m for _, m in chunk])

    def delete(self, ids: Sequence[str]) -> int:
        """Delete entries; an empty ``ids`` is a no-op returning 0 (never an empty list to Chroma)."""
        if not ids:
            return 0
        present = self._present(ids)
        if not present:
            return 0
        todo = sorted(present)
        for start in range(0, len(todo), BATCH):
            self._call("delete", "delete", ids=todo[start : start + BATCH])
        return len(todo)

    def _present(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), BATCH):
            res = self._call("get", "get", ids=unique[start : start + BATCH], include=[])
            found.update(res["ids"])
        return found

    def query(self, vector: Vector, k: int, where: IndexFilter) -> list[IndexHit]:
        """Top-``k`` by cosine similarity (1 - Chroma's cosine distance), highest first."""
        if k <= 0:
            return []
        res = self._call(
            "query",
            "query",
            query_embeddings=[list(map(float, vector))],
            n_results=k,
            where=chroma_where(where),
            include=["distances"],
        )
        ids = res["ids"][0] if res["ids"] else []
        dists = res["distances"][0] if res.get("distances") else [1.0] * len(ids)
        return [IndexHit(i, 1.0 - float(d)) for i, d in zip(ids, dists)]

    def get_metadata(self, ids: Sequence[str]) -> list[dict[str, Any] | None]:
        """Metadata per id in input order, ``None`` where absent."""
        if not ids:
            return []
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), BATCH):
            res = self._call("get", "get", ids=unique[start : start + BATCH], include=["metadatas"])
            found.update({i: dict(m or {}) for i, m in zip(res["ids"], res["metadatas"] or [])})
        return [found.get(i) for i in ids]

    def get_vectors(self, ids: Sequence[str]) -> list[list[float] | None]:
        """Stored vectors per id in input order, ``None`` where absent."""
        if not ids:
            return []
        res = self._call("get", "get", ids=list(dict.fromkeys(ids)), include=["embeddings"])
        found = {i: list(map(float, e)) for i, e in zip(res["ids"], res["embeddings"])}
        return [found.get(i) for i in ids]

    def ids(self) -> set[str]:
        """Every id in the collection."""
        out: set[str] = set()
        offset = 0
        while True:
            res = self._call("get", "get", include=[], limit=BATCH, offset=offset)
            out.update(res["ids"])
            if len(res["ids"]) < BATCH:
                return out
            offset += BATCH

    def count(self) -> int:
        """Number of entries."""
        return int(self._call("count", "count"))

    def reset(self) -> None:
        """Drop and recreate the collection."""
        try:
            self.client.delete_collection(self.collection_name)
        except Exception:  # noqa: BLE001 - absent collection is fine
            logger.debug("collection %s did not exist", self.collection_name)
        self._col = self._open()


def _collection_gone(exc: BaseException) -> bool:
    """Whether Chroma refused a call because the collection id it was given no longer exists."""
    kind = getattr(exc, "kind", type(exc).__name__)  # a ChildChromaError carries the child's type name
    return kind in {"NotFoundError", "InvalidCollectionException"} or (
        "does not exist" in str(exc) and "ollection" in str(exc)
    )


def close_client(client: ClientAPI) -> None:
    """Close a chromadb client, including an ``HttpClient``'s connection pool.

    ``Client.close()`` releases the client's shared system but (chromadb 1.5) leaves the httpx sessions of an
    ``HttpClient`` and of its internal admin client open, so their sockets to the server lived until garbage
    collection; those sessions are closed here too.
    """
    close = getattr(client, "close", None)
    if close is not None:
        close()
    for owner in (client, getattr(client, "_admin_client", None)):
        session = getattr(getattr(owner, "_server", None), "_session", None)
        if session is not None and callable(getattr(session, "close", None)):
            session.close()
