"""Write path: validated drafts → duplicate / corroboration / slot plan → update detection → value gate → ledger.

Stages, in order (:meth:`WritePath.remember_many`): validation (:mod:`memlineage.services.draft`), premise
checks, the value model's feature extraction, write policies, exact-duplicate and slot resolution
(:meth:`WritePath._dedupe`), embedding, update detection (:func:`memlineage._detect.detect_updates`), merging
duplicates into existing memories (``seen_again`` or corroboration), the value gate, then one ledger transaction
(:meth:`WritePath._persist`) whose supersessions and withdrawals run the cascade, and the index sync.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from memlineage import telemetry
from memlineage._detect import Detected, detect_updates
from memlineage._gcpause import gc_paused
from memlineage.errors import (
    InvalidInputError,
    LineageCycleError,
    MemLineageError,
    MemoryNotFoundError,
    ScopeViolationError,
)
from memlineage.ledger import Connection, Ledger, encode_vector, memory_to_row
from memlineage.ledger._ledger import new_stamp_key
from memlineage.lineage import CascadeReport
from memlineage.models import (
    Activity,
    Memory,
    MemoryKind,
    Relation,
    Scope,
    Source,
    Status,
    from_epoch,
    to_epoch,
)
from memlineage.ports import Clock, IndexSyncer, PolicyGatePort, ValueGatePort, VectorIndex
from memlineage.reconcile import Reconciler, UpdateDecision, active_reconciler
from memlineage.services._concurrency import content_keys, lock_premises, recheck_targets, settle
from memlineage.services._corroborate import corroborate, would_cycle
from memlineage.services._decisions import carried_over_items, record_decision, record_possible
from memlineage.services._rows import LIVE, check_activity_owners, edge_row, event_row, row_scope, write_scope
from memlineage.services.cascade import Cascade
from memlineage.services.draft import Draft, DraftBuilder, check_item
from memlineage.services.embedding import Embedding
from memlineage.services.reads import Reads

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Persisted", "RememberOptions", "WritePath", "Written"]

logger = logging.getLogger(__name__)


class RememberOptions(TypedDict, total=False):
    """The keyword arguments of ``remember()`` besides ``content``, ``scope`` and ``source``.

    What ``supersede()`` and ``revise()`` take for the new version (:meth:`WritePath.supersede`,
    :meth:`WritePath.revise`), handed on to :meth:`~memlineage.services.draft.DraftBuilder.draft`, which checks
    them at run time.
    """

    kind: MemoryKind | str | None
    tags: Iterable[str]
    metadata: Mapping[str, Any] | None
    derived_from: Iterable[str]
    confidence: float
    activity_id: str | None
    parent_activity_id: str | None
    valid_from: datetime | None
    ttl: timedelta | float | None
    slot: str | None
    trust: float | None
    context_hash: str | None
    embedding: Sequence[float] | None
    force: bool
    goal: str | None


class Persisted(NamedTuple):
    """What one write transaction stored (:meth:`WritePath._persist`)."""

    memories: list[Memory]  # one per draft, in order
    suspects: list[str]  # ids the cascade made suspect
    applied: list[tuple[Draft, str]]  # drafts whose automatic decision was carried out, with its activity id


class Written(NamedTuple):
    """What :meth:`WritePath.remember_locked` wrote."""

    memories: list[Memory]  # one per draft of the call (a duplicate's existing memory), in order
    applied: list[tuple[Draft, str]]  # drafts whose automatic decision was carried out, with its activity id


class WritePath:
    """``remember`` / ``remember_many`` / ``supersede``: every write of new memory versions.

    Args:
        ledger: The ledger.
        index: The vector index (read by update detection).
        reconciler: Update detection's decision maker; None = no update detection.
        drafts: Validates requests into drafts.
        embedding: Embeds drafts given without a vector.
        policy: Write and update policies.
        value: The value model's write gate.
        cascade: Invalidates what a write supersedes or withdraws.
        syncer: Brings the index in line after each transaction.
        reads: Reads memories back (scope-checked).
        clock: Returns "now".
        write_mutex: Serialises the write gate (duplicate check → insert) within this process, so two threads
            writing the same content cannot both store it; across processes, :meth:`Ledger.guard` and the row
            locks of :mod:`memlineage.services._concurrency` do the same on PostgreSQL.
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        index: VectorIndex,
        reconciler: Reconciler | None,
        drafts: DraftBuilder,
        embedding: Embedding,
        policy: PolicyGatePort,
        value: ValueGatePort,
        cascade: Cascade,
        syncer: IndexSyncer,
        reads: Reads,
        clock: Clock,
        write_mutex: threading.RLock,
    ) -> None:
        self.ledger = ledger
        self.index = index
        self.reconciler = reconciler
        self.drafts = drafts
        self.embedding = embedding
        self.policy = policy
        self.value = value
        self.cascade = cascade
        self.syncer = syncer
        self.reads = reads
        self.clock = clock
        self.write_mutex = write_mutex

    def remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[Memory]:
        """See :meth:`memlineage.MemoryManager.remember_many`."""
        if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
            msg = "remember_many() takes a list of dicts with remember()'s keyword arguments"
            raise InvalidInputError(msg)
        return self.write([self.drafts.draft(**check_item(item)) for item in items], items=len(items))

    @telemetry.traced("memlineage.remember")
    @gc_paused()  # a batch allocates several objects per record: no full collection in the middle
    def write(self, drafts: Sequence[Draft], *, items: int | None = None) -> list[Memory]:
        """The write path of validated drafts (``remember`` builds its one draft at the public edge).

        Each stage returns new drafts (a :class:`Draft` is frozen): premise checks cap their trust, the value model
        adds its features, write policies their obligations, then duplicates, slots, embedding, update detection, the
        value gate and one ledger transaction (:meth:`remember_locked`); the clauses a correction kept follow.

        Args:
            drafts: The requests, as :meth:`DraftBuilder.draft` returns them.
            items: The number of items the caller was given, for telemetry (default: ``len(drafts)``).

        Returns:
            One memory per draft, in order (the existing memory for a duplicate; an unsaved ``working`` memory for
            chit-chat the value gate buffered).
        """
        written = self._write(drafts)
        telemetry.current().set(items=len(drafts) if items is None else items, memories=len(written))
        return written

    def _write(self, drafts: Sequence[Draft]) -> list[Memory]:
        if not drafts:
            return []
        telemetry.current().scope(*(d.scope for d in drafts))
        now = self.clock()
        self.persist_buffered_premises(drafts, now)
        with self.ledger.read() as conn:
            drafts = self.check_premises(drafts, conn)
        drafts = self.value.prepare(drafts)
        drafts = self.policy.check_write(drafts)
        with self.write_mutex:
            written = self.remember_locked(drafts, now)
        self._carry_over(written.applied)
        return written.memories

    def _carry_over(self, applied: Sequence[tuple[Draft, str]]) -> None:
        """Write again what a detected correction did not touch: the other facts of the statement it replaced.

        :func:`~memlineage.services._decisions.carried_over_items` lists the clauses; they are written as they were,
        without update detection. A failure here is logged and leaves the correction itself in place.
        """
        if not applied:
            return
        try:
            self._write(carried_over_items(self.ledger, applied, self.drafts))
        except MemLineageError as exc:
            logger.warning("update detection: could not keep the untouched part of a corrected statement: %s", exc)

    def remember_locked(self, drafts: Sequence[Draft], now: datetime) -> Written:
        """Resolve, gate and persist validated drafts (caller holds the write mutex); one memory per draft."""
        # Other processes writing the same words in the scope wait here until this write is committed.
        with self.ledger.guard(content_keys(drafts)):
            return self._remember_guarded(list(drafts), now)

    def _remember_guarded(self, drafts: list[Draft], now: datetime) -> Written:
        results: list[Memory | None] = [None] * len(drafts)
        drafts, todo, batch_dups, merges = self._dedupe(drafts, now)
        missing = [d for d in todo if d.embedding is None]
        if missing:
            vectors = iter(self.embedding.embed([d.content for d in missing]))
            todo = [replace(d, embedding=next(vectors)) if d.embedding is None else d for d in todo]
        found = self._detect(drafts, todo, batch_dups, merges, now)
        todo = found.todo
        # Writes start only now, after everything that can fail on bad input or a broken embedder.
        if found.merges:
            todo += self._merge_duplicates(found.merges, results, now)
        gating = telemetry.span("memlineage.value_gate", drafts=len(todo)) if self.value.enabled else telemetry.NOOP
        with gating as sp:
            kept = self.value.gate(drafts, todo, results, now)
            sp.set(stored=len(kept), buffered=len(todo) - len(kept))
        todo = kept
        written: list[dict[str, Any]] = []
        persisted = self._persist(todo, now, rows_out=written)
        created, suspects = persisted.memories, persisted.suspects
        by_draft = {d.id: m for d, m in zip(todo, created)}
        for i, d in enumerate(drafts):
            if d.id in by_draft:
                results[i] = by_draft[d.id]
        for i, first in found.batch_dups:
            results[i] = results[first]
        # A new memory made suspect in the same transaction (its premise was the slot value it superseded) was
        # already synced from the ledger by _persist; its in-memory row is out of date.
        cascaded = set(suspects)
        self.syncer.sync(
            [m.id for m in created if m.id not in cascaded],
            rows=[r for r in written if r["id"] not in cascaded],
            fresh=True,
        )
        return Written([r for r in results if r is not None], persisted.applied)

    def persist_buffered_premises(self, drafts: Sequence[Draft], now: datetime) -> None:
        """Store the short-term-buffer items that drafts name as premises, under the ids they were returned with.

        An adapter may take a turn the value model kept only in the session's buffer ("ok, what should I bring?")
        as the premise of the answer that follows; a derived memory needs its premise in the ledger for its
        lineage to work, so that item is persisted (forced) first.
        """
        wanted = sorted({p for d in drafts for p in d.derived_from})
        if not self.value.enabled or not wanted:
            return
        known = {r["id"] for r in self.ledger.memory_rows(wanted) if r is not None}
        items = []
        for d in drafts:
            for p in d.derived_from:
                item = self.value.pop_buffered(p, d.scope) if p not in known else None
                if item is not None:
                    known.add(p)
                    items.append(item)
        if not items:
            return
        buffered = [
            replace(
                self.drafts.draft(
                    content=item.content, scope=item.scope, source=item.source, kind=MemoryKind.EPISODIC, force=True
                ),
                id=item.id,
            )
            for item in items
        ]
        with self.write_mutex:
            self.remember_locked(buffered, now)

    def check_premises(self, drafts: Sequence[Draft], conn: Connection) -> list[Draft]:
        """Premises must exist in the draft's scope and not be erased; a draft's trust is capped by theirs.

        Returns:
            The drafts, those with premises at most as trusted as their least trusted premise.

        Raises:
            MemoryNotFoundError: a premise does not exist.
            ScopeViolationError: a premise belongs to another scope.
            InvalidInputError: a premise was erased.
        """
        wanted = sorted({p for d in drafts for p in d.derived_from})
        if not wanted:
            return list(drafts)
        rows = dict(zip(wanted, self.ledger.memory_rows(wanted, conn)))
        out = []
        for d in drafts:
            for p in d.derived_from:
                row = rows.get(p)
                if row is None:
                    msg = f"premise {p!r} does not exist; remember it first or drop it from derived_from"
                    raise MemoryNotFoundError(msg)
                if not d.scope.contains(row_scope(row)):
                    msg = f"premise {p!r} belongs to another scope; a memory can only derive from its own scope"
                    raise ScopeViolationError(msg)
                if row["status"] == Status.ERASED.value:
                    msg = f"premise {p!r} was erased and cannot support new memories"
                    raise InvalidInputError(msg)
            if d.derived_from:
                trust = min([d.trust] + [r["trust"] for r in (rows[p] for p in d.derived_from) if r is not None])
                d = replace(d, trust=trust)
            out.append(d)
        return out

    def _dedupe(
        self, drafts: list[Draft], now: datetime
    ) -> tuple[list[Draft], list[Draft], list[tuple[int, int]], list[tuple[int, dict[str, Any], Draft]]]:
        """Resolve exact duplicates and slot supersession (reads only; nothing is written here).

        Returns:
            The drafts (those with a held slot now superseding its live value), the drafts to persist,
            ``(index, first_index)`` pairs for in-batch duplicates, and ``(index, existing_row, draft)`` for
            duplicates of live ledger memories (to merge).
        """
        todo: list[Draft] = []
        seen: dict[tuple[str, str | None, str, str], int] = {}
        groups: dict[tuple[str, str | None], list[int]] = {}
        for i, d in enumerate(drafts):
            groups.setdefault((d.scope.user_id, d.scope.agent_id), []).append(i)
        existing: dict[tuple[str, str | None, str, str], dict[str, Any]] = {}
        with self.ledger.read() as conn:
            for (user, agent), idx in groups.items():
                pairs = [(drafts[i].kind.value, drafts[i].hash) for i in idx]
                pairs += [(MemoryKind.SEMANTIC.value, drafts[i].hash) for i in idx if drafts[i].auto_kind]
                found = self.ledger.find_duplicates(user, agent, pairs, conn)
                for (kind, h), row in found.items():
                    existing[(user, agent, kind, h)] = row
            for i, d in enumerate(drafts):
                if d.slot:
                    live = [
                        r
                        for r in self.ledger.slot_versions(d.scope.user_id, d.scope.agent_id, d.slot, conn)
                        if r["status"] in LIVE
                    ]
                    if live and live[-1]["content_hash"] != d.hash:
                        drafts[i] = replace(d, supersedes=live[-1])
        merges: list[tuple[int, dict[str, Any], Draft]] = []
        batch_dups: list[tuple[int, int]] = []
        for i, d in enumerate(drafts):
            key = (d.scope.user_id, d.scope.agent_id, d.kind.value, d.hash)
            promoted = (d.scope.user_id, d.scope.agent_id, MemoryKind.SEMANTIC.value, d.hash)
            if d.auto_kind and key not in existing and promoted in existing:
                key = promoted  # an unkinded restatement of a fact the value model promoted
            if key in existing and would_cycle(self.ledger, existing[key]["id"], d.derived_from):
                # Same words, but derived from what came after the first occurrence: a new event that repeats
                # earlier content (e.g. an agent saying "Noted." twice), not a circular re-derivation.
                todo.append(d)
            elif key in existing:
                merges.append((i, existing[key], d))
            elif key in seen:
                batch_dups.append((i, seen[key]))
            else:
                seen[key] = i
                todo.append(d)
        return drafts, todo, batch_dups, merges

    def _detect(
        self,
        drafts: list[Draft],
        todo: list[Draft],
        batch_dups: list[tuple[int, int]],
        merges: list[tuple[int, dict[str, Any], Draft]],
        now: datetime,
    ) -> Detected:
        """Update detection (see :mod:`memlineage._detect`); reads only, decisions are carried out by ``_persist``."""

        def check_operation(op: str, mems: Sequence[Memory], scope: Scope, source: Source) -> None:
            self.policy.check_operation(op, mems, scope=scope, source=source)

        reconciler = self.reconciler
        if reconciler is not None:
            reconciler = active_reconciler() or reconciler  # an adapter's choice (the agent's model), if any
        asked = [d for d in todo if not d.carried_over]  # carried-over clauses are written as they were
        if not asked:
            return Detected(todo, batch_dups, merges)
        traced = telemetry.span("memlineage.update_detection", drafts=len(asked), statements=0, candidates=0)
        with traced if reconciler is not None else telemetry.NOOP as sp:
            sp.set(reconciler=getattr(reconciler, "name", None))
            kept = detect_updates(
                drafts, asked, batch_dups, merges, now, ledger=self.ledger, index=self.index, reconciler=reconciler,
                check_operation=check_operation,
            )  # fmt: skip
        if len(asked) == len(todo):
            return kept
        keep = {d.id: d for d in kept.todo}
        return replace(kept, todo=[keep.get(d.id, d) for d in todo if d.carried_over or d.id in keep])

    def _merge_duplicates(
        self, merges: list[tuple[int, dict[str, Any], Draft]], results: list[Memory | None], now: datetime
    ) -> list[Draft]:
        """Record ``seen_again`` or a corroborating support for duplicates of live ledger rows.

        Returns:
            The drafts whose memory was withdrawn by another writer meanwhile: they are stored as new memories.
        """
        merged: list[tuple[int, dict[str, Any], Draft]] = []
        back: list[Draft] = []
        with self.ledger.transaction() as conn:
            for i, row, d in merges:
                current = self.ledger.lock_rows(conn, [row["id"]]).get(row["id"])
                if (
                    current is None
                    or current["status"] not in LIVE
                    or would_cycle(self.ledger, row["id"], d.derived_from, conn)
                ):
                    # withdrawn meanwhile, or the same words said again on premises that came after it (a request
                    # repeated later in a conversation): a new memory, never a corroboration that closes a cycle
                    back.append(replace(d, decision=None))
                    continue
                if d.decision is not None:
                    record_decision(self.ledger, conn, d, None, now)
                corroborate(self.ledger, conn, current, d, now)
                merged.append((i, current, d))
        fresh = self.ledger.memories([row["id"] for _, row, _ in merged])
        for (i, _, _), mem in zip(merged, fresh):
            results[i] = mem
        # A memory served again (a new support group of live premises) is synced before the call returns; other
        # merges change nothing a read filters on and follow on the background thread, so the turn never waits
        # for the index lock held by a Chroma write in flight.
        changed = {
            row["id"]
            for (_, row, _), mem in zip(merged, fresh, strict=True)
            if mem is None or mem.status.value != row["status"]
        }
        self.syncer.sync(sorted(changed))
        self.syncer.defer(sorted({row["id"] for _, row, _ in merged} - changed))
        return back

    def _persist(
        self,
        drafts: list[Draft],
        now: datetime,
        rows_out: list[dict[str, Any]] | None = None,
        attribution_out: dict[str, str] | None = None,
    ) -> Persisted:
        """Write new memories, their supports, edges and events in one transaction.

        Args:
            drafts: Validated, de-duplicated drafts.
            now: Write time.
            rows_out: When given, receives the ledger rows written (for the index write that follows).
            attribution_out: When given, receives how each suspect rested on the memory it superseded (read from
                the cascade's walk, see ``Cascade.invalidate(attribute=True)``).

        Returns:
            The new memories, the ids made suspect by superseding old slot values / versions, and each draft whose
            automatic decision was carried out with the id of its recorded decision.
        """
        if not drafts:
            return Persisted([], [], [])
        t = to_epoch(now)
        mems: list[Memory] = []
        rows: list[dict[str, Any]] = []
        edge_rows: list[dict[str, Any]] = []
        support_rows: list[dict[str, Any]] = []
        event_rows: list[dict[str, Any]] = []
        # (old id, status, reason, decision) for each memory this batch supersedes or withdraws
        invalidations: list[tuple[str, Status, str, UpdateDecision | None]] = []
        activity_ids = {d.activity_id for d in drafts if d.activity_id}
        # Exact-plan scopes stay out of the ANN index (memlineage.services.index_sync); decided before the lock.
        index_state = self.syncer.initial_state([d.scope.user_id for d in drafts])
        with self.ledger.transaction() as conn:
            # What this write replaces and rests on, re-read under locks: another writer may have changed it.
            drafts, latest = recheck_targets(self.ledger, conn, drafts)
            if latest is not None and latest >= (t or 0.0):  # a version is never recorded before the one it replaces
                t = latest + 1e-6
                now = from_epoch(t) or now
            lock_premises(self.ledger, conn, drafts)
            for d in drafts:
                old = d.supersedes
                mem = d.to_memory(now, previous=old)
                mems.append(mem)
                row = memory_to_row(mem)
                row.update(
                    content_hash=d.hash, index_state=index_state[d.scope.user_id], stamp_key=new_stamp_key(),
                    embedding=encode_vector(d.embedding),
                    embedder=self.embedding.embedder.name,
                )  # fmt: skip
                rows.append(row)
                user = d.scope.user_id
                support_rows.append(
                    {
                        "memory_id": mem.id, "support": 0, "source_kind": d.source.kind.value,
                        "source_name": d.source.name, "activity_id": d.activity_id,
                        "premises": len(d.derived_from), "created_at": t,
                    }
                )  # fmt: skip
                edge_rows.extend(
                    edge_row(mem.id, p, Relation.WAS_DERIVED_FROM, t, user, 0, d.activity_id) for p in d.derived_from
                )
                if d.activity_id:
                    edge_rows.append(edge_row(mem.id, d.activity_id, Relation.WAS_GENERATED_BY, t, user))
                data: dict[str, Any] = {"source": str(d.source), "kind": d.kind.value}
                if old:
                    edge_rows.append(edge_row(mem.id, old["id"], Relation.WAS_REVISION_OF, t, user))
                    reason = d.decision.reason if d.decision else "superseded by a new version"
                    invalidations.append((old["id"], Status.SUPERSEDED, reason, d.decision))
                    data["supersedes"] = old["id"]
                if d.retracts:
                    assert d.decision is not None
                    invalidations.append((d.retracts, Status.RETRACTED, d.decision.reason, d.decision))
                    data["retracts"] = d.retracts
                if d.decision is not None:
                    data["decision"] = {"action": d.decision.action.value, "target": d.decision.target}
                event_rows.append(event_row(t, "created", mem.id, d.activity_id, user, data))
            found = [r for r in self.ledger.activity_rows(sorted(activity_ids), conn) if r]
            check_activity_owners(found, drafts)
            known = {r["id"] for r in found}
            for d in drafts:
                if d.activity_id and d.activity_id not in known:
                    known.add(d.activity_id)
                    self.ledger.upsert_activity(
                        conn,
                        Activity(
                            id=d.activity_id, kind="run", parent_id=d.parent_activity_id, scope=d.scope,
                            started_at=now,
                        ),
                    )  # fmt: skip
            self.ledger.insert_memories(conn, rows)
            if rows_out is not None:  # for the index write (the same dicts: later status changes show)
                for r, d in zip(rows, drafts, strict=True):
                    r["premises"] = len(d.derived_from)  # the premise count Chroma's metadata carries
                rows_out.extend(rows)
            self.ledger.insert_supports(conn, support_rows)
            self.ledger.insert_edges(conn, edge_rows)
            self.ledger.insert_events(conn, event_rows)
            # A premise withdrawn before the write (or while it waited for the premise's lock) leaves it suspect.
            settled = set(settle(self.ledger, conn, [m.id for d, m in zip(drafts, mems) if d.derived_from], t))
            if settled:
                for row in rows:
                    row["status"] = Status.SUSPECT.value if row["id"] in settled else row["status"]
                mems = [m.model_copy(update={"status": Status.SUSPECT}) if m.id in settled else m for m in mems]
            for d, mem in zip(drafts, mems):
                for possible in d.possible:
                    record_possible(self.ledger, conn, d, possible, mem.id, now)
            suspects: list[str] = []
            applied: list[tuple[Draft, str]] = []
            by_target = {d.decision.target: (d, m) for d, m in zip(drafts, mems) if d.decision is not None}
            for old_id, status, reason, decision in invalidations:
                act = None
                if decision is not None:
                    d, mem = by_target[old_id]
                    act = record_decision(self.ledger, conn, d, mem.id, now)
                    applied.append((d, act))
                done = self.cascade.invalidate(
                    conn, old_id, status, now, reason=reason, activity_id=act, attribute=attribution_out is not None
                )
                suspects.extend(done.suspect)
                if attribution_out is not None:
                    attribution_out.update(done.attribution)
        if invalidations:  # status changes only (a new version made suspect is written by the deferred sync too)
            self.syncer.defer([i[0] for i in invalidations] + suspects)
        telemetry.count("memlineage.writes", len(mems))
        return Persisted(mems, suspects, applied)

    def supersede(
        self,
        old_id: str,
        new_content: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        source: Source | str = "user",
        **kwargs: Unpack[RememberOptions],
    ) -> CascadeReport:
        """See :meth:`memlineage.MemoryManager.supersede`."""
        scope = Scope.coerce(scope)
        old = self.reads.require(old_id, scope=scope)
        if old.status.value not in LIVE:
            msg = f"memory {old_id!r} is {old.status.value}; supersede its newest version instead"
            raise InvalidInputError(msg)
        params: RememberOptions = {
            "kind": old.kind,
            "tags": old.tags,
            "metadata": old.metadata,
            "slot": old.slot,
            "valid_from": None,
            **kwargs,
        }
        d = self.drafts.draft(content=new_content, scope=write_scope(scope, old.scope), source=source, **params)
        if kwargs.get("ttl") is None:
            # a correction keeps the old version's deadline, as its tags and metadata
            d = replace(d, expires_at=old.expires_at)
        self.policy.check_operation("update", [old], scope=scope, source=d.source)
        with self.ledger.read() as conn:
            (d,) = self.check_premises([d], conn)
            if d.derived_from:
                desc = self.ledger.walk([old_id], direction="descendants", conn=conn)
                if old_id in d.derived_from or desc.keys() & set(d.derived_from):
                    msg = f"the new version of {old_id!r} cannot derive from the old one or its descendants"
                    raise LineageCycleError(msg)
            d = replace(d, supersedes=self.ledger.memory_rows([old_id], conn)[0])
        if d.embedding is None:
            d = replace(d, embedding=self.embedding.embed([d.content])[0])
        # an explicit revision is always stored (a value model only scores it), and only while ``old_id`` is still
        # current (checked again under its row lock)
        d = replace(d, force=True, strict=True)
        scored = self.value.gate([d], [d], [None], self.clock())
        d = scored[0] if scored else d  # forced: the gate keeps it
        attribution: dict[str, str] = {}
        with self.write_mutex:
            persisted = self._persist([d], self.clock(), attribution_out=attribution)
        (new,), suspect = persisted.memories, persisted.suspects
        self.syncer.sync([new.id], fresh=True)  # a new row: it may take its scope past exact_max
        return CascadeReport(
            target=old_id, action="supersede", suspect=suspect, memory=self.reads.get(new.id, scope=scope),
            attribution=attribution,
        )  # fmt: skip

    def revise(
        self,
        memory_id: str,
        content: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        source: Source | str | None = None,
        **kwargs: Unpack[RememberOptions],
    ) -> Memory:
        """See :meth:`memlineage.MemoryManager.revise`."""
        old = self.reads.require(memory_id, scope=scope)
        if "derived_from" not in kwargs and old.derived_from:
            live = self.ledger.statuses(list(old.derived_from))
            kwargs["derived_from"] = [p for p in old.derived_from if live.get(p) not in (None, Status.ERASED.value)]
        report = self.supersede(memory_id, content, scope=scope, source=old.source if source is None else source,
                                **kwargs)  # fmt: skip
        assert report.memory is not None
        return report.memory
