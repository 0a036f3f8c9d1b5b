"""A dependency-free in-memory :class:`~memlineage.index.VectorIndex` (numpy; tests and small stores)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memlineage.index._base import DOCUMENT_KEY, IndexFilter, IndexHit, Vector

__all__ = ["InMemoryIndex"]


class InMemoryIndex:
    """Exact cosine search over vectors held in a dict; same contract as :class:`ChromaIndex`.

    Example:
        >>> idx = InMemoryIndex()
        >>> idx.delete([])
        0
    """

    def __init__(self) -> None:
        self._vectors: dict[str, np.ndarray] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()

    def upsert(
        self, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[Mapping[str, Any]]
    ) -> None:
        """Insert or replace entries."""
        with self._lock:
            for i, v, m in zip(ids, vectors, metadatas):
                arr = np.asarray(v, dtype=np.float32)
                norm = float(np.linalg.norm(arr)) or 1.0
                self._vectors[i] = arr / norm
                self._meta[i] = {k: v for k, v in m.items() if k != DOCUMENT_KEY}

    def add(
        self, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[Mapping[str, Any]]
    ) -> None:
        """Insert new entries (same as :meth:`upsert` here)."""
        self.upsert(ids, vectors, metadatas)

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Merge metadata into existing entries."""
        with self._lock:
            for i, m in zip(ids, metadatas):
                if i in self._meta:
                    self._meta[i].update(m)

    def delete(self, ids: Sequence[str]) -> int:
        """Delete entries; returns how many existed."""
        with self._lock:
            n = 0
            for i in set(ids):
                if self._vectors.pop(i, None) is not None:
                    self._meta.pop(i, None)
                    n += 1
            return n

    def query(self, vector: Vector, k: int, where: IndexFilter) -> list[IndexHit]:
        """Top-``k`` by cosine similarity among entries passing ``where``, highest first (ties by id)."""
        if k <= 0:
            return []
        with self._lock:
            ids = [i for i, m in self._meta.items() if where.matches(m)]
            if not ids:
                return []
            q = np.asarray(vector, dtype=np.float32)
            q = q / (float(np.linalg.norm(q)) or 1.0)
            sims = np.stack([self._vectors[i] for i in ids]) @ q
        order = sorted(range(len(ids)), key=lambda j: (-float(sims[j]), ids[j]))[:k]
        return [IndexHit(ids[j], float(sims[j])) for j in order]

    def get_metadata(self, ids: Sequence[str]) -> list[dict[str, Any] | None]:
        """Metadata per id in input order, ``None`` where absent."""
        with self._lock:
            return [dict(self._meta[i]) if i in self._meta else None for i in ids]

    def get_vectors(self, ids: Sequence[str]) -> list[list[float] | None]:
        """Stored (normalised) vectors per id, ``None`` where absent."""
        with self._lock:
            return [self._vectors[i].tolist() if i in self._vectors else None for i in ids]

    def ids(self) -> set[str]:
        """Every id."""
        with self._lock:
            return set(self._vectors)

    def count(self) -> int:
        """Number of entries."""
        return len(self._vectors)

    def reset(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._vectors.clear()
            self._meta.clear()
