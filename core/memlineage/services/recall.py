"""Read path: recall (the retrieval gate): expiry, hybrid retrieval, read policies, value re-ranking, reinforcement.

:func:`memlineage.retrieval.hybrid_recall` does the candidate search and fusion; this stage wraps it with the
store's gates and records the use of what it serves.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memlineage import telemetry
from memlineage.errors import StorageError
from memlineage.index import IndexFilter
from memlineage.ledger import Ledger
from memlineage.ledger._queries_memories import record_use
from memlineage.models import (
    Memory,
    MemoryKind,
    Relation,
    Scope,
    SourceKind,
    Status,
    check_text,
    normalize_tags,
    to_epoch,
)
from memlineage.ports import Clock, LexicalIndexPort, PolicyGatePort, ValueGatePort, VectorIndex
from memlineage.reconcile import (
    asks_about_history,
    asks_about_past,
    gives_answer,
    newest_first,
    resolve_conflicts,
)
from memlineage.retrieval import (
    CandidateFilter,
    RecallHit,
    RecallHooks,
    RecallLegs,
    RecallQuery,
    RecallResult,
    RetrievalConfig,
    Trace,
    hybrid_recall,
)
from memlineage.services._checks import check_read_args, kind_values
from memlineage.services._rows import edge_row
from memlineage.services.cascade import Cascade
from memlineage.services.embedding import Embedding

__all__ = ["Recall"]

logger = logging.getLogger(__name__)

#: How many of the user's statements below the window read-time resolution searches for successors.
RESERVE = 40


class Recall:
    """Ranked, gated retrieval within a scope.

    Args:
        ledger: The ledger (loads candidates; records uses).
        index: The vector index port.
        lexical: The lexical index port.
        embedding: Embeds the query.
        cascade: Expires what is past its TTL before ranking.
        policy: Read policies.
        value: Value re-ranking and reinforcement.
        retrieval: Hybrid retrieval settings.
        read_filter: Optional per-memory candidate filter (see :data:`memlineage.retrieval.CandidateFilter`).
        clock: Returns "now".
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        index: VectorIndex,
        lexical: LexicalIndexPort,
        embedding: Embedding,
        cascade: Cascade,
        policy: PolicyGatePort,
        value: ValueGatePort,
        retrieval: RetrievalConfig,
        read_filter: CandidateFilter | None,
        clock: Clock,
    ) -> None:
        self.ledger = ledger
        self.index = index
        self.lexical = lexical
        self.embedding = embedding
        self.cascade = cascade
        self.policy = policy
        self.value = value
        self.retrieval = retrieval
        self.read_filter = read_filter
        self.clock = clock

    @telemetry.traced("memlineage.recall")
    def recall(
        self,
        query: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        k: int = 5,
        kinds: Iterable[MemoryKind | str] | None = None,
        tags: Iterable[str] | None = None,
        include_suspect: bool = False,
        purpose: str | None = None,
        session_only: bool = False,
        activity_id: str | None = None,
        trace: bool = False,
        reinforce: bool = True,
        budget: float | None = None,
    ) -> RecallResult:
        """See :meth:`memlineage.MemoryManager.recall`."""
        query = check_text(query, "query")
        scope = Scope.coerce(scope)
        check_read_args(k=k, purpose=purpose, budget=budget, activity_id=activity_id)
        telemetry.current().set(k=k).scope(scope)
        kinds_wanted = kind_values(kinds)
        statuses = [Status.ACTIVE.value]
        if include_suspect and purpose != "decision":
            statuses.append(Status.SUSPECT.value)
        past = purpose != "decision" and asks_about_past(query)
        if past:
            # "Where did I live before Austin?": earlier versions answer it (served flagged "superseded")
            statuses.append(Status.SUPERSEDED.value)
        history = purpose != "decision" and (past or asks_about_history(query))
        if history:
            # "What did you recommend yesterday?": expired tool results and what was built on them answer it
            statuses.extend(s.value for s in (Status.EXPIRED, Status.SUSPECT) if s.value not in statuses)
        where = IndexFilter(
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            session_id=scope.session_id if session_only else None,
            statuses=tuple(statuses),
            kinds=kinds_wanted,
            tags=normalize_tags(tags),
        )
        tr = Trace(query=query, k=k, detail=trace)
        if k == 0:
            return RecallResult([], tr)
        now = self.clock()
        # Expire what is past its TTL first, so conclusions derived from it are already suspect when ranked.
        self.cascade.expire_due(scope=scope)
        # an English-only embedder's leg weighs less for a query in CJK script (RetrievalConfig.cjk_vector_weight)
        config = self.retrieval.for_embedder(getattr(self.embedding.embedder, "english_only", False))
        hits = hybrid_recall(
            RecallQuery(text=query, k=k, where=where, scope=scope, now=now, config=config),
            RecallLegs(
                query_vector=lambda: self.embedding.embed([query])[0],
                vector_index=self.index,
                lexical_index=self.lexical,
                load=self.ledger.memories,
            ),
            tr,
            RecallHooks(
                candidate_filter=self.read_filter,
                read_filter=lambda c: self.policy.filter_read(
                    c, scope=scope, purpose=purpose, query=query, trace=tr, budget=budget, history=history
                ),
                expire=self.cascade.expire,
                value_of=self.value.value_of(),
            ),
        )
        hits = self.policy.annotate(hits, tr)
        hits = self.value.rerank(hits, now)
        if self.retrieval.answer_weight > 0 and not past:
            hits = answers_first(hits, query, self.retrieval.answer_weight)
        hits.sort(key=lambda h: (-h.score, h.memory.id))
        # two live values of one attribute, or two statements of one speaker that answer the query the same way:
        # the later event ranks first and the earlier is demoted (among the hits that can reach the top k)
        window = max(2 * k, k + 10)
        head = newest_first(hits[:window])
        # the rest of the candidates (through every gate already): a contender's later statement may sit there when
        # it shares few words with the query, and for a question about the past its earlier one (see
        # reconcile._compete); the user's own statements only
        reserve = [h for h in hits[window:] if h.memory.source.kind is SourceKind.USER][:RESERVE]
        links = self.ledger.possible_updates(scope.user_id, [h.memory.id for h in head]) if len(head) > 1 else {}
        vectors = (
            self._vectors(scope.user_id, [h.memory.id for h in (*head, *reserve)])
            if len(head) + len(reserve) > 1
            else {}
        )
        head, tr.conflicts = resolve_conflicts(
            query, head, links=links, vectors=vectors, older_weight=self.retrieval.older_weight, reserve=reserve,
            served=k,
        )  # fmt: skip
        joined = {h.memory.id for h in head}
        hits = (head + [h for h in hits[window:] if h.memory.id not in joined])[:k]
        if hits and (reinforce or activity_id):
            self._mark_used([h.memory for h in hits], activity_id, now)
        telemetry.current().set(hits=len(hits), candidates=tr.candidates, withheld=sum(tr.withheld.values())).set(
            **{f"withheld.{stage}": n for stage, n in tr.withheld.items()}
        )
        return RecallResult(hits, tr)

    def _vectors(self, user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of ``ids``: from the scope's exact block where it holds them, the rest from the ledger."""
        held_vectors = getattr(self.index, "held_vectors", None)  # ScopedVectorIndex: the exact plan's block
        held: dict[str, np.ndarray] = held_vectors(user_id, ids) if callable(held_vectors) else {}
        missing = [i for i in ids if i not in held]
        return {**held, **self.ledger.vectors(missing)} if missing else held

    def _mark_used(self, mems: Sequence[Memory], activity_id: str | None, now: datetime) -> None:
        t = to_epoch(now)
        ids = sorted(m.id for m in mems)
        self.value.reinforce(ids, now)
        try:
            with self.ledger.transaction() as conn:
                record_use(conn, ids, t)
                user = mems[0].scope.user_id
                # an activity id is the reader's own: another user's activity of the same id gets no edge into this
                # user's memories (a read neither fails nor tells that the id is taken)
                owner = self.ledger.activity_rows([activity_id], conn)[0] if activity_id else None
                if activity_id and (owner is None or owner["user_id"] in (None, user)):
                    self.ledger.insert_edges(conn, [edge_row(activity_id, m.id, Relation.USED, t, user) for m in mems])
        except StorageError as exc:
            # Usage bookkeeping must never fail a read (e.g. a PostgreSQL deadlock with a concurrent cascade).
            logger.warning("could not record the use of %d memories: %s", len(ids), exc)


def answers_first(hits: list[RecallHit], query: str, weight: float) -> list[RecallHit]:
    """User statements that assert a value of the kind ``query`` asks for, their score times ``1 + weight`` (≤ 1).

    "Actually, I'm going to Rotterdam." gives a place for "What's the weather where I'm going?"; the earlier requests
    worded like the query ("Book me a hotel where I'm going next month.") give none. The boost is recorded as
    ``scores["answer"]``; a question that asks for no kind of value leaves every hit as it is. Only what the user
    said is boosted: an assistant's reply or a tool result repeats values (often several) without stating them.
    """
    out = []
    for h in hits:
        if h.memory.source.kind is SourceKind.USER and gives_answer(h.memory.content, query):
            h = dataclasses.replace(h, score=min(1.0, h.score * (1.0 + weight)), scores={**h.scores, "answer": weight})
        out.append(h)
    return out
