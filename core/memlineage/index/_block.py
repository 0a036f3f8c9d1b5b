"""One scope's vectors in memory for :class:`~memlineage.index.ScopedVectorIndex`: the exact plan's block.

A block holds a scope's normalised float32 vectors in one contiguous array (rows ``0..n``; deleted rows masked until
compaction) with its filter columns as small integer codes, and answers a query by one pass over the rows that
pass the filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from memlineage.index._base import IndexFilter, IndexHit, ScopeTally

__all__ = ["Block", "Codes"]


class Codes:
    """Small integer codes for the filter columns' strings (shared by every block)."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def of(self, value: object) -> int:
        key = "" if value is None else str(value)
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self._codes)
        return code

    def known(self, values: Iterable[Any]) -> list[int]:
        return [self._codes[v] for v in ("" if x is None else str(x) for x in values) if v in self._codes]


#: Cells of one (queries x block rows) similarity product in :meth:`Block.query_many` (4M float32 = 16 MB).
_PRODUCT_CELLS = 4_000_000


class Block:
    """One scope's vectors (rows ``0..n``; deleted rows masked until compaction) and filter columns."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.n = 0
        self.vecs = np.zeros((0, 0), dtype=np.float32)  # sized by the first vector
        self.alive = np.zeros(16, dtype=bool)
        self.cols = {name: np.zeros(16, dtype=np.int32) for name in ("status", "kind", "agent", "session")}
        self.ids: list[str] = []
        self.tags: list[tuple[str, ...]] = []
        self.row: dict[str, int] = {}
        self.local: set[str] = set()  # ids the wrapped index does not hold (written with put_local)
        self.tally = ScopeTally()  # held rows plus the loader's rows without a vector: the ledger's scope stamp
        self.parts: dict[str, tuple[int, bool]] = {}

    @property
    def live(self) -> int:
        return len(self.row)

    def put(self, mid: str, vector: np.ndarray, meta: Mapping[str, Any], codes: Codes) -> None:
        if mid in self.row:
            self.drop(mid)
        if self.vecs.shape[1] != vector.shape[0]:
            if self.n:
                msg = f"vector of {vector.shape[0]} dimensions in a block of {self.vecs.shape[1]}"
                raise ValueError(msg)
            self.vecs = np.zeros((self.alive.size, vector.shape[0]), dtype=np.float32)
        if self.n == self.alive.size:
            size = 2 * self.n
            self.vecs = np.resize(self.vecs, (size, self.vecs.shape[1]))
            self.alive = np.resize(self.alive, size)
            self.cols = {k: np.resize(v, size) for k, v in self.cols.items()}
        i = self.n
        part = self.parts[mid] = ScopeTally.part(meta)
        self.tally.add(part)
        self.vecs[i] = vector
        self.alive[i] = True
        self.ids.append(mid)
        self.tags.append(tuple(meta.get("tags") or ()))
        self.row[mid] = i
        self._set_cols(i, meta, codes)
        self.n += 1

    def _set_cols(self, i: int, meta: Mapping[str, Any], codes: Codes, *, merge: bool = False) -> None:
        for col, key in (("status", "status"), ("kind", "kind"), ("agent", "agent_id"), ("session", "session_id")):
            if not merge or key in meta:  # a merge keeps the columns the update does not name
                self.cols[col][i] = codes.of(meta.get(key))

    def update(self, mid: str, meta: Mapping[str, Any], codes: Codes) -> None:
        i = self.row[mid]
        if "status" in meta:
            old = self.parts[mid]
            self.tally.remove(old)
            self.parts[mid] = (old[0], meta["status"] == "active")
            self.tally.add(self.parts[mid])
        self._set_cols(i, meta, codes, merge=True)
        if "tags" in meta:
            self.tags[i] = tuple(meta.get("tags") or ())

    def drop(self, mid: str) -> bool:
        i = self.row.pop(mid, None)
        if i is None:
            return False
        self.local.discard(mid)
        self.tally.remove(self.parts.pop(mid))
        self.alive[i] = False
        # nothing of it stays until the next compaction: its tags, and its vector (which restates its text)
        self.tags[i] = ()
        self.vecs[i] = 0.0
        if self.n > 64 and self.live * 2 < self.n:
            self._compact()
        return True

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[: self.n])
        size = max(16, keep.size)
        vecs = np.zeros((size, self.vecs.shape[1]), dtype=np.float32)
        vecs[: keep.size] = self.vecs[keep]
        cols = {}
        for k, v in self.cols.items():
            col = np.zeros(size, dtype=np.int32)
            col[: keep.size] = v[keep]
            cols[k] = col
        self.vecs, self.cols = vecs, cols
        self.ids = [self.ids[i] for i in keep.tolist()]
        self.tags = [self.tags[i] for i in keep.tolist()]
        self.alive = np.zeros(size, dtype=bool)
        self.alive[: keep.size] = True
        self.n = int(keep.size)
        self.row = {mid: i for i, mid in enumerate(self.ids)}

    def _rows(self, where: IndexFilter, codes: Codes) -> np.ndarray:
        """The rows that pass ``where`` (alive, status, kind, agent, session, tags)."""
        n = self.n
        mask = self.alive[:n].copy()
        mask &= np.isin(self.cols["status"][:n], codes.known(where.statuses))
        if where.kinds is not None:
            mask &= np.isin(self.cols["kind"][:n], codes.known(where.kinds))
        if where.agent_id is not None:
            mask &= np.isin(self.cols["agent"][:n], codes.known(["", where.agent_id]))
        if where.session_id is not None:
            mask &= np.isin(self.cols["session"][:n], codes.known([where.session_id]))
        if where.tags:
            for i in np.flatnonzero(mask).tolist():
                if not all(t in self.tags[i] for t in where.tags):
                    mask[i] = False
        return np.flatnonzero(mask)

    def _top(self, rows: np.ndarray, sims_rows: np.ndarray, k: int) -> list[IndexHit]:
        """The top-``k`` of ``rows`` by similarity, ties broken by id (every row tied with the k-th is weighed)."""
        if rows.size > k:
            kth = np.partition(sims_rows, rows.size - k)[rows.size - k]
            pick = np.flatnonzero(sims_rows >= kth)
        else:
            pick = np.arange(rows.size)
        ranked = sorted(pick.tolist(), key=lambda j: (-float(sims_rows[j]), self.ids[int(rows[j])]))[:k]
        return [IndexHit(self.ids[int(rows[j])], float(sims_rows[j])) for j in ranked]

    def query(self, q: np.ndarray, k: int, where: IndexFilter, codes: Codes) -> list[IndexHit]:
        n = self.n
        if n == 0 or q.shape[0] != self.vecs.shape[1]:
            return []
        rows = self._rows(where, codes)
        if rows.size == 0:
            return []
        # One pass over the block (the filter picks from it). einsum, not BLAS: a multi-threaded BLAS gemv is
        # several times slower on a loaded machine (thread hand-offs), and one core reads the block at memory speed.
        sims_rows = np.einsum("ij,j->i", self.vecs[:n], q, optimize=False)[rows]
        return self._top(rows, sims_rows, k)

    def query_many(self, qs: np.ndarray, k: int, where: IndexFilter, codes: Codes) -> list[list[IndexHit]]:
        """:meth:`query` for each row of ``qs`` (unit vectors, shape ``(m, dims)``): one filter, few matrix products."""
        n = self.n
        if n == 0 or qs.shape[1] != self.vecs.shape[1]:
            return [[] for _ in range(qs.shape[0])]
        rows = self._rows(where, codes)
        if rows.size == 0:
            return [[] for _ in range(qs.shape[0])]
        # the block is read in place (a view); the filter picks columns of the product, as query() picks rows
        step = max(1, _PRODUCT_CELLS // n)  # bounds the (queries x block rows) product's memory
        out: list[list[IndexHit]] = []
        for lo in range(0, qs.shape[0], step):
            sims = (qs[lo : lo + step] @ self.vecs[:n].T)[:, rows]
            out.extend(self._top(rows, sims[i], k) for i in range(sims.shape[0]))
        return out
