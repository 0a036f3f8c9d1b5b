"""The stages behind :class:`~memlineage.MemoryManager`: one module per stage of the write and read paths.

Each service takes its dependencies explicitly (the ports of :mod:`memlineage.ports` and the services it builds
on), never the manager; :func:`wire` builds the whole set from a store's parts. See ``docs/architecture.md``.

- :mod:`~memlineage.services.draft`: validation of a write request into a draft.
- :mod:`~memlineage.services.write`: the write path (dedupe, corroboration, slot plan, update detection, value
  gate, persistence) and supersede / revise.
- ``memlineage.services._concurrency``: the write path's checks repeated under database locks inside the writing
  transaction (several writers on one PostgreSQL ledger).
- ``memlineage.services._corroborate`` and ``memlineage.services._decisions``: the write path's merging of duplicates
  (``seen_again``, corroboration) and its update-decision records (and what a correction keeps).
- :mod:`~memlineage.services.cascade`: invalidation and its cascade, expiry, archiving.
- :mod:`~memlineage.services.lifecycle`: retract, impact, revalidate, undo, forget, erase.
- :mod:`~memlineage.services.index_sync`: pending → indexed, repair, verify, reindex.
- :mod:`~memlineage.services.reads`: get, find, slots, lineage walks, explain, audit, stats.
- :mod:`~memlineage.services.recall`: ranked retrieval through the policy and value gates.
- :mod:`~memlineage.services.activities`: activities and their links (capture support).
- :mod:`~memlineage.services.consolidate`: session consolidation.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from memlineage.ledger import Ledger
from memlineage.policy._enforce import PolicyGate
from memlineage.policy._engine import PolicyEngine
from memlineage.ports import Clock, Embedder, LexicalIndexPort, VectorIndex
from memlineage.reconcile import Reconciler
from memlineage.retrieval import CandidateFilter, RetrievalConfig
from memlineage.services.activities import Activities
from memlineage.services.cascade import Cascade
from memlineage.services.consolidate import Consolidation
from memlineage.services.draft import DraftBuilder
from memlineage.services.embedding import Embedding
from memlineage.services.index_sync import IndexSync
from memlineage.services.lifecycle import Lifecycle
from memlineage.services.reads import Reads
from memlineage.services.recall import Recall
from memlineage.services.write import WritePath
from memlineage.value import ValueModel
from memlineage.value_gate import ValueGate

__all__ = ["Parts", "Services", "wire"]


@dataclass
class Parts:
    """What a store is made of: the ports and the configuration the services are built from."""

    ledger: Ledger
    index: VectorIndex
    embedder: Embedder
    lexical: LexicalIndexPort
    clock: Clock
    trust_by_source: Mapping[str, float]
    policy: PolicyEngine | None
    value_model: ValueModel | None
    reconciler: Reconciler | None
    retrieval: RetrievalConfig
    read_filter: CandidateFilter | None
    #: No other process writes to this ledger (the embedded store's writer lock is held): the background index
    #: writes may gather over ``_indexsync.LINGER_S``. Other processes read the shared index in server mode, so
    #: there each deferred write goes as soon as the worker takes it.
    single_writer: bool = False


@dataclass
class Services:
    """The services of one store, wired together (see :func:`wire`)."""

    embedding: Embedding
    index_sync: IndexSync
    cascade: Cascade
    policy: PolicyGate
    value: ValueGate
    reads: Reads
    drafts: DraftBuilder
    writes: WritePath
    lifecycle: Lifecycle
    recall: Recall
    activities: Activities
    consolidation: Consolidation


def wire(parts: Parts, *, write_mutex: threading.RLock, previous: Services | None = None) -> Services:
    """Build every service of a store from its parts.

    Args:
        parts: The store's ports and configuration.
        write_mutex: The store's write mutex (shared by every writing service).
        previous: The services this set replaces (after a part changed): the embedder's learnt vector size and
            the value gate's buffers and pending reinforcements carry over when their part is unchanged.

    Returns:
        The wired services.
    """
    if previous is not None and previous.embedding.embedder is parts.embedder:
        embedding = previous.embedding
    else:
        embedding = Embedding(parts.embedder)
    ledger, index, clock = parts.ledger, parts.index, parts.clock
    if previous is not None:  # its deferred status syncs are applied before the new set takes over
        previous.index_sync.close()
    index_sync = IndexSync(
        ledger=ledger, index=index, lexical=parts.lexical, embedding=embedding, gather=parts.single_writer,
        shared=not parts.single_writer,
    )  # fmt: skip
    cascade = Cascade(ledger=ledger, clock=clock, syncer=index_sync)
    policy = PolicyGate(parts.policy, ledger=ledger, clock=clock, expirer=cascade, syncer=index_sync)
    value = ValueGate(parts.value_model, ledger=ledger, index=index, clock=clock, archiver=cascade)
    if previous is not None:
        value.carry_over(previous.value)
    reads = Reads(ledger=ledger, index=index, clock=clock)
    drafts = DraftBuilder(trust_by_source=parts.trust_by_source, clock=clock, embedding=embedding)
    writes = WritePath(
        ledger=ledger, index=index, reconciler=parts.reconciler, drafts=drafts, embedding=embedding, policy=policy,
        value=value, cascade=cascade, syncer=index_sync, reads=reads, clock=clock, write_mutex=write_mutex,
    )  # fmt: skip
    lifecycle = Lifecycle(
        ledger=ledger, reads=reads, policy=policy, cascade=cascade, syncer=index_sync, value=value, clock=clock
    )
    recall = Recall(
        ledger=ledger, index=index, lexical=parts.lexical, embedding=embedding, cascade=cascade, policy=policy,
        value=value, retrieval=parts.retrieval, read_filter=parts.read_filter, clock=clock,
    )  # fmt: skip
    activities = Activities(ledger=ledger, reads=reads, clock=clock, write_mutex=write_mutex)
    consolidation = Consolidation(ledger=ledger, value=value, writes=writes, activities=activities, clock=clock)
    return Services(
        embedding=embedding, index_sync=index_sync, cascade=cascade, policy=policy, value=value, reads=reads,
        drafts=drafts, writes=writes, lifecycle=lifecycle, recall=recall, activities=activities,
        consolidation=consolidation,
    )  # fmt: skip
