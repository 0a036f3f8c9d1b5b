"""The value model bound to a store: the write gate, re-ranking, reinforcement and the forget gate.

:mod:`memlineage.value` holds the model (factors, score, decay) and its data structures; this module applies
it to a ledger and an index (see that module's docstring for the formulas and the seed references). A
:class:`ValueGate` without a model is a no-op everywhere except :meth:`ValueGate.sweep`, which then uses the
default :class:`~memlineage.value.ValueModel`, so the core store behaves as before when none is configured.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memlineage._draft import Draft
from memlineage.extractors import InfoType, content_terms
from memlineage.extractors._patterns import has_cjk
from memlineage.index import IndexFilter, IndexHit, VectorIndex
from memlineage.index._base import query_many
from memlineage.ledger import Ledger, row_to_memory
from memlineage.ledger._queries_memories import active_rows, reinforce_values
from memlineage.models import Memory, MemoryKind, Scope
from memlineage.ports import Archiver, Clock
from memlineage.value import BufferedItem, ReinforcementBatch, ShortTermBuffer, SweepReport, ValueModel

__all__ = ["ValueGate", "ValueState"]

logger = logging.getLogger(__name__)


@dataclass
class ValueState:
    """Per-store state of the value gate: the sessions' short-term buffers and the reinforcement batch."""

    buffer: ShortTermBuffer
    batch: ReinforcementBatch


def _bigram_similarity(a: str, b: str) -> float:
    """Jaccard similarity of the content terms (words and CJK character bigrams) of two texts, in [0, 1]."""
    ta, tb = content_terms(a), content_terms(b)
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


class ValueGate:
    """The :class:`~memlineage.ports.ValueGate` port over a :class:`~memlineage.value.ValueModel`.

    Args:
        model: The value model; None = no value gate (every hook is a no-op; :meth:`sweep` uses the defaults).
        ledger: The ledger (reads candidates; writes reinforcements).
        index: The vector index (novelty: the nearest live memory).
        clock: Returns "now" (timezone-aware UTC).
        archiver: Archives what the forget gate drops (the lifecycle service).
    """

    def __init__(
        self, model: ValueModel | None, *, ledger: Ledger, index: VectorIndex, clock: Clock, archiver: Archiver
    ) -> None:
        self.model = model
        self.ledger = ledger
        self.index = index
        self.clock = clock
        self.archiver = archiver
        self._state: ValueState | None = None
        self._state_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether a value model is configured."""
        return self.model is not None

    def carry_over(self, previous: ValueGate) -> None:
        """Take over the buffers and pending reinforcements of the gate this one replaces (same model only).

        With another model (or none) the previous gate's pending reinforcements are written first.
        """
        if previous.model is self.model:
            self._state = previous._state
        else:
            previous.flush()

    def state(self) -> ValueState:
        """The buffers and the reinforcement batch (created on first use; needs a model)."""
        st = self._state
        if st is not None:
            return st
        with self._state_lock:
            if self._state is None:
                assert self.model is not None
                self._state = ValueState(
                    buffer=ShortTermBuffer(self.model.profile.buffer_size),
                    batch=ReinforcementBatch(self._write_reinforcement),
                )
            return self._state

    # ------------------------------------------------------------------ write gate
    def prepare(self, drafts: Sequence[Draft]) -> list[Draft]:
        """Write-path step 1: extract features (cached) before duplicate resolution and update detection.

        Slots are not set here: update detection (:mod:`memlineage.reconcile`) detects them, and uses a model
        extractor's slot when the rules find none.

        Returns:
            The drafts with their ``features`` (unchanged without a model).
        """
        vm = self.model
        if vm is None:
            return list(drafts)
        return [dataclasses.replace(d, features=vm.extract(d.content, goal=d.goal)) for d in drafts]

    def _nearest_similarities(self, drafts: Sequence[Draft]) -> dict[str, float | None]:
        """Per draft id, the similarity of the nearest live memory in the draft's scope, ignoring its own slot.

        Cosine of the embeddings in general; for Chinese text the word overlap (CJK bigram Jaccard) of the nearest
        candidates instead, because the default English MiniLM scores unrelated Chinese sentences as similar
        (about 0.56 for "我喜欢喝咖啡。" vs "我住在上海浦东。"). None where the draft has no embedding or the scope
        no live memory. The drafts of one scope ask the index at once (:func:`memlineage.index._base.query_many`) and
        the ledger once for the statuses of every neighbour: one by one, a batch of ``m`` drafts into a scope of
        ``n`` memories cost ``m`` passes over the scope and ``m`` reads.
        """
        asked = [d for d in drafts if d.embedding is not None]
        groups: dict[tuple[str, str | None], list[Draft]] = {}
        for d in asked:
            groups.setdefault((d.scope.user_id, d.scope.agent_id), []).append(d)
        found: dict[str, list[IndexHit]] = {}
        for (user_id, agent_id), members in groups.items():
            where = IndexFilter(user_id=user_id, agent_id=agent_id, statuses=("active",))
            vectors = [d.embedding for d in members if d.embedding is not None]
            answers = query_many(self.index, vectors, 5, where)
            found.update((d.id, hits) for d, hits in zip(members, answers, strict=True))
        # the index may lag a cascade's status changes: the ledger decides what is still active
        statuses = self.ledger.statuses(sorted({h.id for hits in found.values() for h in hits}))
        live = {mid: [h for h in hits if statuses.get(h.id) == "active"] for mid, hits in found.items()}
        # a slot's drafts and Chinese ones read their neighbours' rows (slot, content): one read for the batch
        wanted = sorted({h.id for d in asked if d.slot or has_cjk(d.content) for h in live[d.id]})
        rows = dict(zip(wanted, self.ledger.memory_rows(wanted, embedding=False), strict=True)) if wanted else {}
        out: dict[str, float | None] = {d.id: None for d in drafts}
        for d in asked:
            hits = live[d.id]
            if not hits:
                continue
            cjk = has_cjk(d.content)
            if d.slot or cjk:
                # A new value for a slot is new information even when it is worded like the old one.
                pairs = [(h, rows.get(h.id)) for h in hits]
                pairs = [(h, r) for h, r in pairs if r is None or not d.slot or r.get("slot") != d.slot]
                if cjk:
                    out[d.id] = max(
                        (_bigram_similarity(d.content, r["content"]) for _, r in pairs if r is not None), default=None
                    )
                    continue
                hits = [h for h, _ in pairs]
            out[d.id] = max((h.similarity for h in hits), default=None)
        return out

    def gate(
        self, drafts: Sequence[Draft], todo: Sequence[Draft], results: list[Memory | None], now: datetime
    ) -> list[Draft]:
        """Write-path step 3 (the write gate): score each new draft; V decides promotion, not existence.

        Every draft to persist gets its V and :class:`~memlineage.models.ValueAssessment`. Nothing with content is
        dropped: a draft below the store threshold is still stored (the episodic log: recallable, it decays and
        the forget gate archives it first), and a draft whose kind was left to the model (``kind=None``) becomes
        ``semantic`` when V reaches the threshold (promotion to long-term memory), ``episodic`` otherwise. Only
        chit-chat with no content ("ok thanks", "哈哈") below the threshold goes to the session's short-term
        buffer (deduplicated, so repeated filler cannot push anything out) and ``results`` gets an unsaved
        ``working`` memory for it. Storage is forced (V raised to the threshold) by an explicit "remember ..."
        directive, ``force=True``, a caller-given ``slot``, premises (``derived_from``), or an update decision (a
        correction and the memory it corrects must exist for the lineage to work).

        Args:
            drafts: Every draft of the call, in input order (``results`` has one slot per draft).
            todo: The drafts to score.
            results: Receives the unsaved ``working`` memory of each buffered draft, at its draft's position.
            now: Write time.

        Returns:
            The drafts to persist, each with its ``assessment`` (and ``kind`` where the model promoted it).
        """
        vm = self.model
        if vm is None:
            return list(todo)
        keep: list[Draft] = []
        position = {d.id: i for i, d in enumerate(drafts)}
        targets = {d.supersedes["id"] for d in todo if d.supersedes} | {d.retracts for d in todo if d.retracts}
        # A new value for a held slot is new information by definition (its restatements in summaries and the old
        # value are worded alike), so novelty is not measured against the index then.
        novelty = self._nearest_similarities([d for d in todo if d.supersedes is None])
        for d in todo:
            features = d.features or vm.extract(d.content, goal=d.goal)
            profile = vm.profile_for(d.scope)
            nearest = novelty.get(d.id)
            assessment = vm.score(features, nearest_similarity=nearest, trust=d.trust, profile=profile)
            forced = (
                d.force
                or (d.slot is not None and not d.auto_slot)
                or bool(d.derived_from)
                or d.decision is not None
                or d.id in targets
            )
            if forced and not assessment.forced:
                assessment = assessment.model_copy(
                    update={"forced": True, "score": max(assessment.score, profile.store_threshold)}
                )
            promoted = vm.should_store(assessment, profile)
            kind = MemoryKind.SEMANTIC if d.auto_kind and promoted else d.kind
            d = dataclasses.replace(d, assessment=assessment, kind=kind)
            has_content = features.info_type is not InfoType.CHITCHAT or bool(features.entities)
            if promoted or (profile.keep_all and has_content):
                keep.append(d)
                continue
            mem = d.to_memory(now).model_copy(update={"kind": MemoryKind.WORKING})  # short-term only
            self.state().buffer.add(
                BufferedItem(mem.id, d.content, d.scope, assessment, now, features, source=str(d.source)),
                capacity=profile.buffer_size,
            )
            logger.debug("write gate: buffered chit-chat %s (V=%.3f)", mem.id, assessment.score)
            results[position[d.id]] = mem
        return keep

    # ------------------------------------------------------------------ short-term buffer
    def buffered(self, scope: Scope) -> list[BufferedItem]:
        """The session's short-term buffer, oldest first (empty without a model)."""
        return self.state().buffer.items(scope) if self.model is not None else []

    def pop_buffered(self, item_id: str, scope: Scope) -> BufferedItem | None:
        """Take a buffered item out of its session's buffer (None when absent or no buffer exists yet)."""
        st = self._state
        return st.buffer.pop(item_id, scope) if st is not None else None

    def clear_scope(self, scope: Scope) -> None:
        """Drop the scope's buffered (never stored) candidates, e.g. on erasure."""
        if self.model is not None:
            self.state().buffer.clear_scope(scope)

    # ------------------------------------------------------------------ retrieval
    def value_of(self) -> Callable[[Memory, datetime], float] | None:
        """The retrieval pipeline's value hook: None with a model (it re-ranks after), else the stored V."""
        return None if self.model is not None else (lambda m, _now: m.value)

    def rerank(self, hits: list[Any], now: datetime) -> list[Any]:
        """Retrieval-gate hook: re-score hits as ``similarity · (1 − w) + V_eff · w`` (seed 004 §3.3; w = 0.1).

        ``hit.score`` is taken as the similarity in [0, 1]; the result keeps it as ``scores["similarity"]`` and
        adds ``scores["value"]`` (V_eff after decay) and ``scores["final"]``. No-op without a value model.
        """
        vm = self.model
        if vm is None or not hits:
            return hits
        out = []
        for h in hits:
            v_eff = vm.memory_effective_value(h.memory, now)
            final = vm.rerank(h.score, v_eff, vm.profile_for(h.memory.scope))
            scores = {**h.scores, "similarity": h.score, "value": round(v_eff, 6), "final": round(final, 6)}
            out.append(dataclasses.replace(h, score=final, scores=scores))
        return out

    def reinforce(self, memory_ids: Sequence[str], now: datetime) -> None:
        """Record one use of each memory: V += 0.05 (capped at 1), written in batches (see :meth:`flush`)."""
        if self.model is not None and memory_ids:
            self.state().batch.add(memory_ids, now)

    def flush(self) -> int:
        """Write pending reinforcements now; returns the number of memories written."""
        st = self._state
        return st.batch.flush() if st is not None else 0

    def _write_reinforcement(self, entries: Sequence[tuple[str, int, datetime]]) -> None:
        assert self.model is not None
        step = self.model.profile.reinforcement
        with self.ledger.transaction() as conn:
            reinforce_values(conn, [(memory_id, step * uses) for memory_id, uses, _last in entries])

    # ------------------------------------------------------------------ forget gate
    def sweep(self, *, now: datetime | None = None, scope: Scope | None = None) -> SweepReport:
        """The forget gate: archive active memories whose effective value fell below the forget threshold.

        A memory that live (active or suspect) memories still derive from is not archived — its dependants would
        lose their premise — and is reported in ``protected`` instead. Pending reinforcements are flushed first
        so the decay sees the latest uses.

        Args:
            now: Time to evaluate decay at (default: the clock).
            scope: Only this user's (and agent's) memories; None = every user (maintenance job).
        """
        vm = self.model or ValueModel()
        self.flush()
        now = now or self.clock()
        user, agent = (scope.user_id, scope.agent_id) if scope is not None else (None, None)
        report = SweepReport(now=now)
        low: dict[str, float] = {}
        with self.ledger.read() as conn:
            for row in active_rows(conn, user_id=user, agent_id=agent):
                report.checked += 1
                mem = row_to_memory(row)
                v_eff = vm.memory_effective_value(mem, now)
                if v_eff < vm.profile_for(mem.scope).forget_threshold:
                    low[mem.id] = v_eff
            for mid in sorted(low):
                dependants = self.ledger.walk([mid], direction="descendants", conn=conn)
                statuses = self.ledger.statuses(sorted(dependants), conn) if dependants else {}
                live = sorted(d for d, s in statuses.items() if s in ("active", "suspect"))
                if live:
                    report.protected[mid] = live
                else:
                    report.archived[mid] = round(low[mid], 6)
        for mid in report.protected:
            logger.info(
                "sweep: %s below the forget threshold but %d live memories derive from it; kept",
                mid,
                len(report.protected[mid]),
            )
        if report.archived:
            # One batched archive; the per-memory V_eff is in the report, the threshold in the event's reason.
            reason = f"forget gate: effective value below {vm.profile.forget_threshold:.2f}"
            self.archiver.archive(sorted(report.archived), reason)
        return report
