"""Query plan by scope size: exact search over a small scope's vectors in memory, the ANN index for large scopes.

An approximate index with a metadata filter (HNSW in Chroma) searches a graph built over *every* user's vectors
and drops what the filter refuses; for a scope that holds a small share of the collection (one user among
many) that is slower than scoring the scope's own vectors exactly, and it can miss neighbours. This wrapper keeps
each small scope's vectors contiguous (one float32 block per ``user_id``, normalised, with its filter columns as
small integer codes), answers queries on such scopes by one matrix-vector product, and hands large scopes to the
wrapped index. Blocks are loaded from the ledger on a scope's first query and evicted least recently used.

Writes: :meth:`~ScopedVectorIndex.upsert` and :meth:`~ScopedVectorIndex.add` go to the wrapped index first and then
to the loaded blocks. A scope the exact plan serves does not need the wrapped index at all, so the index sync
writes its memories with :meth:`~ScopedVectorIndex.put_local` instead: the ledger keeps them (``index_state =
'exact'``) and the loaded block gets them, but the wrapped (ANN) index never does. When such a scope grows past
``exact_max``, the sync hands its memories to the wrapped index (``memlineage.services.index_sync``); the scope keeps
the exact plan until every memory of its block has reached the wrapped index through this wrapper, so the switch to
the ANN plan never loses one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from memlineage import telemetry
from memlineage.index._base import (
    DOCUMENT_KEY,
    STAMP_KEY,
    IndexFilter,
    IndexHit,
    ScopeTally,
    Vector,
    VectorIndex,
    index_metadata,
)
from memlineage.index._base import query_many as query_each
from memlineage.index._block import Block, Codes

__all__ = ["IN_ANN", "ScopedVectorIndex", "VectorLedger"]

#: Key a loader may set in a row's metadata: False when the wrapped index does not hold the memory yet.
IN_ANN = "_in_ann"

#: ``user_id -> iterable of (id, vector, flat index metadata)`` for a scope's indexable memories. A metadata mapping
#: may carry ``IN_ANN: False`` for a memory the wrapped index does not hold (``index_state`` 'exact' or 'pending').
BlockLoader = Callable[[str], Iterable[tuple[str, Any, Mapping[str, Any]]]]
#: ``user_id -> number of indexable memories`` (decides the plan before anything is loaded).
ScopeCounter = Callable[[str], int]
#: ``user_id -> (indexable memories, sum of their stamp keys, sum of the active ones' keys)``: ``Ledger.scope_stamp``.
ScopeStamp = Callable[[str], tuple[int, int, int]]


class VectorLedger(Protocol):
    """What :meth:`ScopedVectorIndex.over_ledger` reads of a :class:`~memlineage.ledger.Ledger`.

    A protocol, since the index layer never imports the ledger (they are siblings).
    """

    def indexable_rows(self, user_id: str, /) -> Iterable[Mapping[str, Any]]:
        """One user's rows that belong in the index, with their vectors (``embedding``) and ``index_state``."""
        ...

    def count_indexable(self, user_id: str, /) -> int:
        """How many of one user's rows belong in the index."""
        ...

    def count_awaiting_ann(self, user_id: str, /) -> int:
        """How many of one user's indexable rows the ANN index does not hold yet."""
        ...

    def scope_stamp(self, user_id: str, /) -> tuple[int, int, int]:
        """``(indexable rows, sum of their stamp keys, sum of the active ones' keys)`` for one user."""
        ...

    def scope_plan_counts(self, user_ids: Sequence[str], /) -> dict[str, tuple[int, int]]:
        """``user_id -> (indexable rows, rows in the ANN index or on their way there)``."""
        ...


class ScopedVectorIndex:
    """A :class:`~memlineage.index.VectorIndex` that plans each query by the size of its scope.

    A scope (``user_id``) with at most ``exact_max`` indexable memories is searched exactly over its own
    contiguous float32 block (cosine similarity, the same filter as the wrapped index); a larger scope is queried
    through the wrapped (approximate) index. Blocks are built from ``loader`` on a scope's first query, kept in
    step by every write through this wrapper, and evicted least recently used beyond ``cache_vectors`` vectors.
    :meth:`wants_ann` tells a writer whether a scope's new memories need the wrapped index; those that do not are
    written with :meth:`put_local` (the blocks only). A scope past ``exact_max`` keeps the exact plan while its
    loaded block holds memories the wrapped index lacks, and switches once they have all been written through
    :meth:`upsert` or :meth:`add`; a scope loaded while ``awaiting`` reports such memories is loaded whatever its
    size. Anything else (``purge_log``, ``get_vectors``, ``close`` ...) is delegated to the wrapped index.

    Isolation: a block holds one ``user_id``'s entries only (an entry whose metadata names another user moves to
    that user's block), and a query reads the block of ``where.user_id`` alone, then applies the rest of the
    filter (status, kind, agent, session, tags) before the top-k cut.

    Args:
        inner: The wrapped index (e.g. :class:`~memlineage.index.ChromaIndex`); receives every write except
            :meth:`put_local`.
        loader: ``user_id -> iterable of (id, vector, flat metadata)``: the scope's indexable memories (the
            ledger), with ``IN_ANN: False`` in the metadata of those ``inner`` does not hold. Without a loader every
            query goes to ``inner``.
        counter: ``user_id -> number of indexable memories``, asked before loading; default: load and count.
        awaiting: ``user_id -> number of the scope's indexable memories that inner does not hold``, asked before
            a scope past ``exact_max`` is handed to ``inner``; default: none (``inner`` holds every memory).
        plan_counts: With ``stamp``: ``user_ids -> {user_id: (indexable memories, memories in or on their way to
            inner)}``; :meth:`wants_ann` asks it on every write, since another process may have handed the scope
            over.
        exact_max: Largest scope searched exactly, >= 0 (0 = always the wrapped index). Default 100,000: one
            pass over 100,000 384-d vectors (150 MB) takes about 15-25 ms on one core, where Chroma's filtered HNSW
            query over a scope that size took 450 ms and found 11 % of the exact top 10 on random vectors
            (``benchmarks/bench_scale.py``).
        cache_vectors: Most vectors held over all blocks, >= 0. Default 250,000 (about 380 MB at 384 dims, the
            size of the HNSW graph's own vectors for as many entries).
        stamp: Given when other processes write to the same ledger (server mode): their writes never pass
            through this wrapper, so every query of a loaded scope first compares the stamp with the block's own
            tally (:class:`~memlineage.index._base.ScopeTally`) and reloads the block when they differ.

    Example:
        >>> from memlineage.index import InMemoryIndex
        >>> idx = ScopedVectorIndex(InMemoryIndex(), loader=lambda user: [])
        >>> idx.query([1.0, 0.0], 3, IndexFilter(user_id="u", statuses=("active",)))
        []
    """

    def __init__(
        self,
        inner: VectorIndex,
        loader: BlockLoader | None = None,
        *,
        counter: ScopeCounter | None = None,
        awaiting: ScopeCounter | None = None,
        exact_max: int = 100_000,
        cache_vectors: int = 250_000,
        stamp: ScopeStamp | None = None,
        plan_counts: Callable[[Sequence[str]], dict[str, tuple[int, int]]] | None = None,
    ) -> None:
        self.inner = inner
        self._loader = loader
        self._counter = counter
        self._awaiting = awaiting
        self.exact_max = int(exact_max)
        self.cache_vectors = int(cache_vectors)
        self._stamp = stamp
        self._plan_counts = plan_counts
        self._blocks: OrderedDict[str, Block] = OrderedDict()
        self._large: set[str] = set()
        self._sizes: dict[str, int] = {}  # counted sizes of scopes written while not loaded (wants_ann)
        self._owner: dict[str, str] = {}
        self._codes = Codes()
        self._lock = threading.RLock()
        self.exact_queries = 0  # plan counters (benchmarks, tests)
        self.ann_queries = 0

    @classmethod
    def over_ledger(
        cls, inner: VectorIndex, ledger: VectorLedger, *, shared: bool = False, **kwargs: int
    ) -> ScopedVectorIndex:
        """Wrap ``inner`` with blocks loaded from a :class:`~memlineage.ledger.Ledger`'s stored vectors.

        ``shared``: other processes write to this ledger (checks each query against ``Ledger.scope_stamp``).
        Other keyword arguments are those of the constructor (``exact_max``, ``cache_vectors``).
        """

        def load(user_id: str) -> Iterable[tuple[str, Any, Mapping[str, Any]]]:
            for row in ledger.indexable_rows(user_id):
                blob = row.get("embedding")
                vec = np.frombuffer(blob, dtype="<f4") if blob is not None else None
                meta = index_metadata(row)
                meta[STAMP_KEY] = row.get("stamp_key") or 0
                if row["index_state"] in ("exact", "pending"):
                    meta[IN_ANN] = False
                yield row["id"], vec, meta

        return cls(
            inner,
            load,
            counter=ledger.count_indexable,
            awaiting=ledger.count_awaiting_ann,
            stamp=ledger.scope_stamp if shared else None,
            plan_counts=ledger.scope_plan_counts if shared else None,
            **kwargs,
        )

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes this wrapper lacks: backend extras (purge_log, get_vectors, close, ...).
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # -- writes: the wrapped index first, then the loaded blocks -----------------------------------------------
    def upsert(
        self, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[Mapping[str, Any]]
    ) -> None:
        """Insert or replace entries in the wrapped index and in the loaded blocks of their scopes."""
        self.inner.upsert(ids, vectors, _public(metadatas))
        self._put(ids, vectors, metadatas)

    def add(
        self, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[Mapping[str, Any]]
    ) -> None:
        """Insert new entries (the wrapped index's ``add`` when it has one)."""
        write = getattr(self.inner, "add", None) or self.inner.upsert
        write(ids, vectors, _public(metadatas))
        self._put(ids, vectors, metadatas, new=True)

    def split_writes(
        self,
        upserts: tuple[Sequence[str], Sequence[Sequence[float]], Sequence[Mapping[str, Any]]],
        updates: tuple[Sequence[str], Sequence[Mapping[str, Any]]],
        deletes: Sequence[str],
        *,
        new: Collection[str] = (),
    ) -> Callable[[], int]:
        """Apply a batch of writes to the loaded blocks now; return the wrapped index's part, to run later.

        The same writes as :meth:`upsert`, :meth:`update_metadata` and :meth:`delete`, split so that a caller can
        bring the blocks in line while it holds its own lock and write the wrapped index (Chroma) after letting
        the lock go.

        Args:
            upserts: ``(ids, vectors, metadatas)`` to insert or replace.
            updates: ``(ids, metadatas)`` to merge into existing entries.
            deletes: Ids to remove.
            new: Ids of upserts never written to the wrapped index: its ``add`` writes them (Chroma's is about twice
                as fast as its ``upsert``, and leaves an entry that exists unchanged); the others are upserted.

        Returns:
            A callable that writes the wrapped index and returns how many entries it removed.
        """
        up_ids, up_vectors, up_metas = upserts
        st_ids, st_metas = updates
        if up_ids:
            self._put(up_ids, up_vectors, up_metas)
        if st_ids:
            self._update_blocks(st_ids, st_metas)
        if deletes:
            self.drop_local(deletes)

        add = getattr(self.inner, "add", None)
        added = {i for i, mid in enumerate(up_ids) if mid in new} if add is not None else set()
        upserted = [i for i in range(len(up_ids)) if i not in added]

        def write(to: Callable[..., object], rows: Sequence[int]) -> None:
            if rows:
                to([up_ids[i] for i in rows], [up_vectors[i] for i in rows], _public([up_metas[i] for i in rows]))

        def wrapped() -> int:
            if add is not None:
                write(add, sorted(added))
            write(self.inner.upsert, upserted)
            if st_ids:
                self.inner.update_metadata(st_ids, _public(st_metas))
            return int(self.inner.delete(deletes)) if deletes else 0

        return wrapped

    def put_local(
        self,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        *,
        new: bool = False,
    ) -> None:
        """Insert or replace entries in the loaded blocks only: memories of scopes the exact plan serves.

        The wrapped index is not written; the ledger keeps these memories for the scope's next load. Callers ask
        :meth:`wants_ann` first: a scope that needs the wrapped index must be written with :meth:`upsert`.
        ``new``: the memories were just added to the ledger (they count towards ``exact_max`` from now on).
        """
        self._put(ids, vectors, metadatas, local=True, new=new)

    def wants_ann_many(self, user_ids: Sequence[str], *, rebuild: bool = False) -> dict[str, bool]:
        """:meth:`wants_ann` for several scopes (one ledger read for all of them in server mode)."""
        users = list(dict.fromkeys(user_ids))
        if self._plan_counts is not None and self._loader is not None and self.exact_max > 0:
            counts = self._plan_counts(users)
            # every memory goes to the wrapped index now: the plan is the scope's size alone
            return {u: counts[u][0] > self.exact_max for u in users}
        return {u: self.wants_ann(u, rebuild=rebuild) for u in users}

    def wants_ann(self, user_id: str, *, rebuild: bool = False) -> bool:
        """Whether new memories of ``user_id`` must reach the wrapped (ANN) index now.

        False while the scope fits the exact plan (at most ``exact_max`` memories, loaded or counted in the
        ledger; a batch may take it past, and the writer then hands it over); True without a loader, with
        ``exact_max == 0``, or for a scope past ``exact_max``. With ``plan_counts`` (server mode) the ledger's count
        decides. Every memory reaches the wrapped index in the end (the store of record); this only says whether
        it must be there before a query can be planned without it. ``rebuild`` is kept for callers.
        """
        if self._loader is None or self.exact_max <= 0:
            return True
        if self._plan_counts is not None:  # server mode: the ledger decides, whatever this process holds
            return self.wants_ann_many([user_id], rebuild=rebuild)[user_id]
        with self._lock:
            if user_id in self._large:
                return True
            block = self._blocks.get(user_id)
            if block is not None:
                return block.live > self.exact_max
        if self._counter is None:
            return False  # the loader decides on the first query
        with self._lock:
            known = self._sizes.get(user_id)
        if known is None:  # counted once, then followed by this wrapper's writes (a scope written, not queried)
            known = self._counter(user_id)
            with self._lock:
                self._sizes[user_id] = known
        return known > self.exact_max

    def written_to_inner(self, ids: Sequence[str]) -> None:
        """Record that the wrapped index now holds ``ids`` (written behind the ledger commit, marked ``indexed``).

        A block loaded while they were still awaited counts them as ``local``, and a scope past ``exact_max`` keeps
        the exact plan while any is; the write that reached the wrapped index may have run before the load. A block
        past ``exact_max`` left with nothing awaited hands its scope over (:meth:`_hand_over_if_complete`).
        """
        with self._lock:
            touched: set[str] = set()
            for mid in ids:
                user = self._owner.get(mid)
                block = self._blocks.get(user) if user is not None else None
                if user is not None and block is not None and mid in block.local:
                    block.local.discard(mid)
                    touched.add(user)
            for user in touched:
                self._hand_over_if_complete(user, self._blocks[user])

    def _hand_over_if_complete(self, user: str, block: Block) -> None:
        """A block past ``exact_max`` whose memories the wrapped index all holds: its scope goes to that index."""
        if block.live > self.exact_max and not block.local:
            self.invalidate(user)
            self._large.add(user)

    def update_local(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Merge metadata into the loaded blocks' entries only (status changes of memories held by the ledger)."""
        self._update_blocks(ids, metadatas)

    def drop_local(self, ids: Sequence[str]) -> int:
        """Remove entries from the loaded blocks only; returns how many were loaded."""
        with self._lock:
            return sum(self._drop(mid) for mid in set(ids))

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Merge metadata into existing entries (status changes) in the wrapped index and the blocks."""
        self.inner.update_metadata(ids, _public(metadatas))
        self._update_blocks(ids, metadatas)

    def _update_blocks(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            for mid, meta in zip(ids, metadatas, strict=False):
                user = self._owner.get(mid)
                block = self._blocks.get(user) if user is not None else None
                if block is None or mid not in block.row:
                    continue
                if meta.get("user_id") not in (None, user):  # moved to another scope: it leaves this block
                    self._drop(mid)
                    continue
                block.update(mid, meta, self._codes)

    def delete(self, ids: Sequence[str]) -> int:
        """Delete entries from the wrapped index and the blocks; returns what the wrapped index removed."""
        removed = int(self.inner.delete(ids))
        with self._lock:
            for mid in set(ids):
                self._drop(mid)
        return removed

    def reset(self) -> None:
        """Empty the wrapped index and drop every block."""
        self.inner.reset()
        self.invalidate()

    def invalidate(self, user_id: str | None = None) -> None:
        """Drop one scope's block (or all); the next query reloads it from the loader."""
        with self._lock:
            users = [user_id] if user_id is not None else [*self._blocks, *self._large, *self._sizes]
            for user in users:
                block = self._blocks.pop(user, None)
                if block is not None:
                    for mid in block.row:
                        self._owner.pop(mid, None)
                self._large.discard(user)
                self._sizes.pop(user, None)

    def _put(
        self,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        *,
        local: bool = False,
        new: bool = False,
    ) -> None:
        with self._lock:
            for mid, vec, meta in zip(ids, vectors, metadatas, strict=False):
                user = str(meta["user_id"])
                if self._owner.get(mid) not in (None, user):
                    self._drop(mid)
                block = self._blocks.get(user)
                if block is None:
                    if new and user in self._sizes:  # counted before these rows were written
                        self._sizes[user] += 1
                    continue  # not loaded: the loader reads the scope's memories on its first query
                try:
                    block.put(mid, _unit(vec), meta, self._codes)
                except ValueError:  # a vector of another size: the scope is reloaded from the ledger instead
                    self.invalidate(user)
                    continue
                self._owner[mid] = user
                if local:
                    block.local.add(mid)
                self._hand_over_if_complete(user, block)
            self._evict()

    def _drop(self, mid: str) -> bool:
        user = self._owner.pop(mid, None)
        block = self._blocks.get(user) if user is not None else None
        return block.drop(mid) if block is not None else False

    # -- reads ------------------------------------------------------------------------------------------------
    def query(self, vector: Vector, k: int, where: IndexFilter) -> list[IndexHit]:
        """Top-``k`` entries of ``where.user_id`` by cosine similarity, planned by the scope's size."""
        if k <= 0:
            return []
        # Server mode: the scope's stamp in the ledger, read outside the lock, tells whether a loaded block missed
        # a write: another process's, or this process's own status change still queued for the index (then the
        # reload reads the ledger's newer state; the queued change applies to it as a no-op).
        expected = self._stamp(where.user_id) if self._stamp is not None else None
        with self._lock:
            block = self._block(where.user_id, expected)
            if block is not None:
                self.exact_queries += 1
                telemetry.current().set(plan="exact")
                return block.query(_unit(vector), k, where, self._codes)
        self.ann_queries += 1
        telemetry.current().set(plan="ann")
        return list(self.inner.query(vector, k, where))

    def query_many(self, vectors: Sequence[Vector], k: int, where: IndexFilter) -> list[list[IndexHit]]:
        """:meth:`query` for each vector, in input order: one pass over the scope's exact block where it has one.

        The write gate asks the nearest memories of every draft of a batch at once; asked one by one, a batch of
        ``m`` drafts into a scope of ``n`` memories read the whole block ``m`` times. A scope on the ANN plan asks
        the wrapped index, at once where it can (:func:`~memlineage.index._base.query_many`).
        """
        if k <= 0 or not vectors:
            return [[] for _ in vectors]
        expected = self._stamp(where.user_id) if self._stamp is not None else None  # read once for the batch
        with self._lock:
            block = self._block(where.user_id, expected)
            if block is not None:
                self.exact_queries += len(vectors)
                telemetry.current().set(plan="exact")
                units = [_unit(v) for v in vectors]
                if len({u.shape for u in units}) == 1:
                    return block.query_many(np.stack(units), k, where, self._codes)
                return [block.query(u, k, where, self._codes) for u in units]  # vectors of mixed sizes
        self.ann_queries += len(vectors)
        telemetry.current().set(plan="ann")
        return [list(hits) for hits in query_each(self.inner, vectors, k, where)]

    def held_vectors(self, user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Unit vectors (float32, shape ``(dims,)``) of those ``ids`` that the scope's loaded block holds.

        Reads neither the ledger nor the wrapped index and loads no block: an id the block lacks is left out (the
        caller reads it from the ledger). A memory's vector never changes, so a block that lags a status change
        still holds the right one.
        """
        with self._lock:
            block = self._blocks.get(user_id)
            if block is None:
                return {}
            return {mid: block.vecs[block.row[mid]].copy() for mid in ids if mid in block.row}

    def plan(self, user_id: str) -> str:
        """``"exact"`` or ``"ann"``: how a query in this scope is answered now (loads the block if due)."""
        with self._lock:
            return "exact" if self._block(user_id) is not None else "ann"

    def _block(self, user: str, expected: tuple[int, int, int] | None = None) -> Block | None:
        block = self._blocks.get(user)
        if block is not None and expected is not None and expected != block.tally.stamp():
            self.invalidate(user)  # another process wrote to this scope: read it again
            block = None
        if block is not None:
            self._blocks.move_to_end(user)
            return block
        if self._loader is None or user in self._large or self.exact_max <= 0:
            return None
        # Past exact_max the scope goes to inner, unless inner still lacks some of its memories (then it is
        # loaded whatever its size: the exact plan is slower there, but it misses nothing).
        complete: bool | None = None  # asked only of a scope past exact_max

        def handed_over() -> bool:
            nonlocal complete
            if complete is None:
                complete = self._awaiting is None or self._awaiting(user) == 0
            return complete

        if self._counter is not None and self._counter(user) > self.exact_max and handed_over():
            self._large.add(user)
            return None
        rows = []
        skipped = ScopeTally()
        for mid, vec, meta in self._loader(user):
            if vec is None or str(meta.get("user_id", user)) != user:
                if vec is None:  # counted by the ledger's stamp, never held
                    skipped.add(ScopeTally.part(meta))
                continue  # never admit another scope's entry into this block
            rows.append((mid, _unit(vec), meta))
            if len(rows) > self.exact_max and handed_over():
                self._large.add(user)
                return None
        block = Block(user)
        block.tally.n, block.tally.keys, block.tally.active = skipped.stamp()
        for mid, vec, meta in rows:
            if self._owner.get(mid) not in (None, user):
                self._drop(mid)
            block.put(mid, vec, {**meta, "user_id": user}, self._codes)
            if meta.get(IN_ANN) is False:
                block.local.add(mid)
            self._owner[mid] = user
        self._blocks[user] = block
        self._sizes.pop(user, None)  # the block counts from now on
        self._evict(keep=user)
        return block

    def _evict(self, keep: str | None = None) -> None:
        total = sum(b.n for b in self._blocks.values())
        while total > self.cache_vectors and self._blocks:
            user = next(iter(self._blocks))
            if user == keep:
                if len(self._blocks) == 1:
                    break
                self._blocks.move_to_end(user)
                continue
            block = self._blocks.pop(user)
            total -= block.n
            for mid in block.row:
                self._owner.pop(mid, None)

    # -- the rest of the port: the wrapped index ------------------------------------------------------------
    def get_metadata(self, ids: Sequence[str]) -> list[dict[str, Any] | None]:
        """Metadata per id from the wrapped index."""
        return list(self.inner.get_metadata(ids))

    def ids(self) -> set[str]:
        """Every id in the wrapped index."""
        return set(self.inner.ids())

    def count(self) -> int:
        """Number of entries in the wrapped index."""
        return int(self.inner.count())


def _public(metadatas: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """The metadata without the private keys (``_...``: stamp key, IN_ANN) that only the in-memory legs use."""
    if not any(STAMP_KEY in m or IN_ANN in m for m in metadatas):
        return metadatas
    return [{k: v for k, v in m.items() if not k.startswith("_") or k == DOCUMENT_KEY} for m in metadatas]


def _unit(vector: npt.ArrayLike) -> np.ndarray:
    arr = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm > 0 else arr
