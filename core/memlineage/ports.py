"""Ports: the typed interfaces the services of :mod:`memlineage.services` depend on.

Each service takes the ports it needs in its constructor (never the manager), so a stage of the write or read
path can be built, tested and replaced on its own. The embedder and vector index ports live with their
backends in :mod:`memlineage.index` and are re-exported here; the others are defined here.

Implementations in the package:

- :class:`Embedder`: :class:`~memlineage.index.OnnxMiniLMEmbedder` and the adapters made by
  :func:`~memlineage.index.ensure_embedder`.
- :class:`VectorIndex`: :class:`~memlineage.index.ChromaIndex`, :class:`~memlineage.index.InMemoryIndex`.
- :class:`LexicalIndexPort`: :class:`memlineage.index.lexical.LexicalIndex` (BM25).
- :class:`PolicyGatePort`: :class:`memlineage.policy._enforce.PolicyGate` (a policy engine bound to a ledger).
- :class:`ValueGatePort`: :class:`memlineage.value_gate.ValueGate` (a value model bound to a ledger and an index).
- :class:`IndexSyncer`: :class:`memlineage.services.index_sync.IndexSync`.
- :class:`Expirer` and :class:`Archiver`: :class:`memlineage.services.cascade.Cascade`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from memlineage._draft import Draft
from memlineage.index import Embedder, VectorIndex
from memlineage.models import Memory, Scope, Source
from memlineage.retrieval import LexicalLeg, RecallHit, Trace

if TYPE_CHECKING:
    from memlineage.value import BufferedItem

__all__ = [
    "Archiver",
    "Clock",
    "Embedder",
    "Expirer",
    "IndexSyncer",
    "LexicalIndexPort",
    "PolicyGatePort",
    "ValueGatePort",
    "VectorIndex",
]

#: Returns "now" as a timezone-aware UTC datetime.
Clock = Callable[[], datetime]


class LexicalIndexPort(LexicalLeg, Protocol):
    """The lexical (BM25) leg of hybrid retrieval; mirrors the vector index's writes, rebuilt from the ledger.

    Reads (``query``, ``neighbours``) are those :class:`~memlineage.retrieval.LexicalLeg` declares.
    """

    def upsert(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Insert or replace entries (``texts``: what is tokenised, aligned with ``ids``)."""
        ...

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Replace the filterable metadata of existing entries."""
        ...

    def delete(self, ids: Sequence[str]) -> int:
        """Remove entries; returns how many existed."""
        ...

    def reset(self) -> None:
        """Drop everything (rebuilt lazily from the ledger)."""
        ...


class IndexSyncer(Protocol):
    """Brings index entries in line with the ledger after a ledger transaction."""

    def sync(self, ids: Sequence[str], *, rows: Sequence[dict[str, Any]] | None = None, fresh: bool = False) -> int:
        """Sync ``ids`` (``rows``: their just-written ledger rows); returns index entries removed."""
        ...

    def initial_state(self, user_ids: Sequence[str]) -> dict[str, str]:
        """``index_state`` for new memories per user: ``exact`` (ledger-held, exact plan) or ``pending``."""
        ...

    def defer(self, ids: Sequence[str]) -> None:
        """Sync ``ids`` later, off the caller's path (see :mod:`memlineage._indexsync`).

        Only for status changes that narrow what may be served: every read re-checks statuses in the ledger.
        """
        ...

    def reindex_words(self, ids: Sequence[str]) -> None:
        """Index the words of ``ids`` again in the lexical leg (their indexed text drew on erased versions)."""
        ...


class Expirer(Protocol):
    """Marks memories ``expired`` (their unsupported descendants become suspect)."""

    def expire(self, ids: Sequence[str], reason: str = "ttl elapsed") -> list[str]:
        """Expire ``ids`` now; returns them."""
        ...


class Archiver(Protocol):
    """Archives memories: out of the index, kept in the ledger with an ``archived`` event."""

    def archive(self, ids: Sequence[str], reason: str) -> None:
        """Archive ``ids`` for ``reason``."""
        ...


class PolicyGatePort(Protocol):
    """Where policies decide: before a write, before an update or delete, and on read candidates."""

    @property
    def enabled(self) -> bool:
        """Whether a policy engine is configured (a disabled gate allows everything)."""
        ...

    def check_write(self, drafts: Sequence[Draft]) -> list[Draft]:
        """Write policies on drafts; raises on a refusal, else returns the drafts with their obligations applied."""
        ...

    def check_operation(
        self, operation: str, memories: Sequence[Memory], *, scope: Scope, source: Source | None = None
    ) -> object:
        """Update / delete policies on existing memories; raises on a refusal (returns the decisions)."""
        ...

    def filter_read(
        self,
        candidates: list[tuple[Memory, float]],
        *,
        scope: Scope,
        purpose: str | None,
        query: str,
        trace: Trace,
        budget: float | None = None,
        history: bool = False,
    ) -> list[tuple[Memory, float]]:
        """Read policies on scored candidates before the top-k cut."""
        ...

    def annotate(self, hits: list[RecallHit], trace: Trace) -> list[RecallHit]:
        """Attach the read decisions in ``trace`` to the hits served."""
        ...


class ValueGatePort(Protocol):
    """The value model's hooks on the write and read paths (all no-ops without a model)."""

    @property
    def enabled(self) -> bool:
        """Whether a value model is configured."""
        ...

    def prepare(self, drafts: Sequence[Draft]) -> list[Draft]:
        """The drafts with their features, extracted before duplicate resolution."""
        ...

    def gate(
        self, drafts: Sequence[Draft], todo: Sequence[Draft], results: list[Memory | None], now: datetime
    ) -> list[Draft]:
        """Score drafts; returns those to persist, scored (the others are buffered, their results set)."""
        ...

    def buffered(self, scope: Scope) -> list[Any]:
        """The session's short-term buffer, oldest first (empty without a model)."""
        ...

    def pop_buffered(self, item_id: str, scope: Scope) -> BufferedItem | None:
        """Take an item out of its session's short-term buffer."""
        ...

    def clear_scope(self, scope: Scope) -> None:
        """Drop the scope's buffered candidates."""
        ...

    def value_of(self) -> Callable[[Memory, datetime], float] | None:
        """The retrieval pipeline's value hook (None when :meth:`rerank` scores value)."""
        ...

    def rerank(self, hits: list[RecallHit], now: datetime) -> list[RecallHit]:
        """Re-score recall hits with the memories' effective value."""
        ...

    def reinforce(self, memory_ids: Sequence[str], now: datetime) -> None:
        """Record one use of each memory."""
        ...

    def flush(self) -> int:
        """Write pending reinforcements; returns how many memories were written."""
        ...
