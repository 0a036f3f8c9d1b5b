"""The ``VectorIndex`` port and the scope/status filter every query carries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar, cast, runtime_checkable

import numpy as np

__all__ = ["IndexFilter", "IndexHit", "Vector", "VectorIndex", "index_metadata"]

#: A query vector: a sequence of floats or a 1-d numpy array (what the embedder and the ledger hand out).
Vector: TypeAlias = Sequence[float] | np.ndarray

_T = TypeVar("_T")

#: The flat scalar metadata keys stored with each vector.
METADATA_KEYS = (
    "user_id",
    "agent_id",
    "session_id",
    "kind",
    "status",
    "source_kind",
    "created_at",
    "valid_from",
    "value",
    "tags",
    "content_hash",
)


@dataclass(frozen=True)
class IndexFilter:
    """Scope and status restriction applied *inside* an index query.

    Attributes:
        user_id: Required owner; never empty.
        agent_id: When set, the memory's agent is this agent or none ("" in the index).
        session_id: When set, only memories written in this session.
        statuses: Allowed statuses (non-empty).
        kinds: Allowed memory kinds, or None for all.
        tags: Memories must carry every one of these tags (empty = no restriction).
    """

    user_id: str
    statuses: tuple[str, ...]
    agent_id: str | None = None
    session_id: str | None = None
    kinds: tuple[str, ...] | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)

    def matches(self, meta: Mapping[str, Any]) -> bool:
        """Whether flat index metadata ``meta`` passes this filter (used by in-memory backends and guards)."""
        if meta.get("user_id") != self.user_id:
            return False
        if self.agent_id is not None and meta.get("agent_id") not in ("", None, self.agent_id):
            return False
        if self.session_id is not None and meta.get("session_id") != self.session_id:
            return False
        if meta.get("status") not in self.statuses:
            return False
        if self.kinds is not None and meta.get("kind") not in self.kinds:
            return False
        tags = meta.get("tags") or ()
        return all(t in tags for t in self.tags)


@dataclass(frozen=True)
class IndexHit:
    """One vector-search hit: memory id and cosine similarity in [-1, 1] (higher = more similar)."""

    id: str
    similarity: float


@runtime_checkable
class VectorIndex(Protocol):
    """A derived, rebuildable vector index over active memories (R12: we supply the vectors).

    Batch-first: every method takes sequences; an empty sequence is a no-op and never reaches the backend.
    """

    def upsert(
        self, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[Mapping[str, Any]]
    ) -> None:
        """Insert or replace entries; ``vectors`` is one row per id, each of the index's dimension."""

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Merge new metadata values into existing entries (ids missing from the index are skipped)."""

    def delete(self, ids: Sequence[str]) -> int:
        """Delete entries; returns how many existed. An empty ``ids`` returns 0 without a backend call."""

    def query(self, vector: Vector, k: int, where: IndexFilter) -> list[IndexHit]:
        """Top-``k`` entries by cosine similarity (highest first) among those passing ``where``."""

    def get_metadata(self, ids: Sequence[str]) -> list[dict[str, Any] | None]:
        """Metadata per id in input order, ``None`` where absent."""

    def ids(self) -> set[str]:
        """Every id in the index."""

    def count(self) -> int:
        """Number of entries."""

    def reset(self) -> None:
        """Remove every entry (used by ``reindex``)."""


#: Private metadata key carrying a row's ``stamp_key`` (``ml_memories``) to the in-memory legs; never written to
#: an ANN index (``ScopedVectorIndex`` strips keys starting with ``_``).
STAMP_KEY = "_stamp_key"


class ScopeTally:
    """What a scope held in memory adds up to, in the terms of ``Ledger.scope_stamp``.

    ``stamp()`` is ``(documents, sum of stamp keys, sum of the active documents' keys)``; a process compares it
    with the ledger's before a query to see another process's inserts, removals and (in)activations.
    """

    __slots__ = ("active", "keys", "n")

    def __init__(self) -> None:
        self.n = 0
        self.keys = 0
        self.active = 0

    @staticmethod
    def part(meta: Mapping[str, Any]) -> tuple[int, bool]:
        """``(stamp key, active?)`` of one document's metadata (0 when the key is missing)."""
        return int(meta.get(STAMP_KEY) or 0), meta.get("status") == "active"

    def add(self, part: tuple[int, bool]) -> None:
        """Count one document in."""
        self.n += 1
        self.keys += part[0]
        self.active += part[0] if part[1] else 0

    def remove(self, part: tuple[int, bool]) -> None:
        """Count one document out."""
        self.n -= 1
        self.keys -= part[0]
        self.active -= part[0] if part[1] else 0

    def stamp(self) -> tuple[int, int, int]:
        """The tally in ``Ledger.scope_stamp``'s shape."""
        return self.n, self.keys, self.active


def _scalar(value: _T | None) -> _T | str:
    return "" if value is None else value


#: Metadata key under which a writer hands an entry's text to an index that stores documents (Chroma); the index
#: stores it as the entry's document, never as metadata, and other indexes drop it.
DOCUMENT_KEY = "_document"


def query_many(index: VectorIndex, vectors: Sequence[Vector], k: int, where: IndexFilter) -> list[list[IndexHit]]:
    """``index.query`` for each vector, in input order; at once where the index can (``query_many``).

    :class:`~memlineage.index.ScopedVectorIndex` answers a batch with one pass over a scope's exact block; any
    other :class:`VectorIndex` is asked once per vector.
    """
    many = getattr(index, "query_many", None)
    if callable(many):
        return cast("list[list[IndexHit]]", many(vectors, k, where))
    return [index.query(v, k, where) for v in vectors]


def index_metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    """Flat scalar lineage metadata for a ledger row, as Chroma holds it.

    ``user_id``, ``agent_id``, ``session_id``, ``kind``, ``status``, ``source_kind``, ``source_name``, ``trust``
    and ``value`` (in [0, 1]), ``created_at`` and ``valid_from`` (the event time; epoch seconds), ``activity_id``
    (``wasGeneratedBy``), ``slot``, ``content_hash`` (SHA-256 of the content), ``premises`` (how many memories it
    was derived from when written, when known) and ``tags`` (a list, when any). None becomes "" so that filters can
    compare.
    """
    meta: dict[str, Any] = {
        "user_id": row["user_id"],
        "agent_id": _scalar(row.get("agent_id")),
        "session_id": _scalar(row.get("session_id")),
        "kind": row["kind"],
        "status": row["status"],
        "source_kind": row["source_kind"],
        "source_name": _scalar(row.get("source_name")),
        "trust": float(row.get("trust", 1.0)),
        "created_at": float(row["created_at"]),
        "valid_from": float(row["valid_from"] if row.get("valid_from") is not None else row["created_at"]),
        "value": float(row.get("value", 0.5)),
        "activity_id": _scalar(row.get("activity_id")),
        "slot": _scalar(row.get("slot")),
        # Lets MemoryManager.verify() prove that an entry was made from the ledger's current content.
        "content_hash": _scalar(row.get("content_hash")),
    }
    if row.get("premises") is not None:
        meta["premises"] = int(row["premises"])
    tags = list(row.get("tags") or ())
    if tags:
        meta["tags"] = tags
    return meta
