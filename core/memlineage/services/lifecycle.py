"""Lifecycle of stored memories: retract, impact (dry run), revalidate, undo a decision, forget (archive), erase.

Each verb checks update / delete policies first, changes the ledger in one transaction (running the cascade
of :mod:`memlineage.services.cascade` where a memory is invalidated), then syncs the index.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memlineage import telemetry
from memlineage._forget import clear_text_caches
from memlineage.errors import ConflictError, InvalidInputError, MemoryNotFoundError
from memlineage.ledger import Connection, Ledger, OperationalError
from memlineage.ledger._erase import ErasureSet
from memlineage.ledger._queries_erase import redact_erased_activities, redact_erased_memories, truncate_wal
from memlineage.ledger._queries_events import memories_with_event
from memlineage.ledger._queries_memories import generated_by, revisions_of, scope_memory_ids
from memlineage.lineage import CascadeReport, ErasureReceipt
from memlineage.models import (
    Activity,
    Memory,
    Relation,
    Scope,
    Source,
    SourceKind,
    Status,
    check_id,
    check_text,
    new_id,
    to_epoch,
)
from memlineage.ports import Clock, IndexSyncer, PolicyGatePort, ValueGatePort
from memlineage.reconcile import Action
from memlineage.services._rows import LIVE, edge_row, event_row, row_activity
from memlineage.services.cascade import Cascade
from memlineage.services.reads import Reads

_log = logging.getLogger(__name__)

__all__ = ["Lifecycle"]


class Lifecycle:
    """State changes of existing memories.

    Args:
        ledger: The ledger.
        reads: Scope-checked reads.
        policy: Update / delete policies.
        cascade: Invalidation with its cascade, and archiving.
        syncer: Brings the index in line after each transaction.
        value: The value gate (an erasure drops the scope's buffered candidates).
        clock: Returns "now".
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        reads: Reads,
        policy: PolicyGatePort,
        cascade: Cascade,
        syncer: IndexSyncer,
        value: ValueGatePort,
        clock: Clock,
    ) -> None:
        self.ledger = ledger
        self.reads = reads
        self.policy = policy
        self.cascade = cascade
        self.syncer = syncer
        self.value = value
        self.clock = clock

    def retract(
        self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "retracted",
        activity_id: str | None = None, source: Source | str | None = None,
    ) -> CascadeReport:  # fmt: skip
        """See :meth:`memlineage.MemoryManager.retract`."""
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        if activity_id is not None:
            check_id(activity_id, "activity_id")
        src = Source.parse(source) if source is not None else None
        mem = self.reads.require(memory_id, scope=scope)
        self.policy.check_operation("delete", [mem], scope=scope, source=src)
        if mem.status in (Status.RETRACTED, Status.ERASED):
            return CascadeReport(target=memory_id, action="retract")
        with self.ledger.transaction() as conn:
            done = self.cascade.invalidate(
                conn, memory_id, Status.RETRACTED, self.clock(), reason=reason, activity_id=activity_id,
                attribute=True,
            )  # fmt: skip
        self.syncer.defer([memory_id, *done.suspect])  # status changes only: off the critical path
        return CascadeReport(
            target=memory_id, action="retract", suspect=done.suspect, unaffected=done.unaffected,
            attribution=done.attribution,
        )  # fmt: skip

    def impact(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> CascadeReport:
        """See :meth:`memlineage.MemoryManager.impact`."""
        scope = Scope.coerce(scope)
        self.reads.require(memory_id, scope=scope)
        with self.ledger.read() as conn:
            done = self.cascade.invalidate(
                conn, memory_id, Status.RETRACTED, self.clock(), reason="impact", dry_run=True, attribute=True
            )
        return CascadeReport(
            target=memory_id, action="impact", suspect=done.suspect, unaffected=done.unaffected, dry_run=True,
            attribution=done.attribution,
        )  # fmt: skip

    def revalidate(
        self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "revalidated"
    ) -> Memory:
        """See :meth:`memlineage.MemoryManager.revalidate`."""
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        mem = self.reads.require(memory_id, scope=scope)
        if mem.status not in (Status.SUSPECT, Status.EXPIRED):
            msg = f"memory {memory_id!r} is {mem.status.value}; only suspect or expired memories can be revalidated"
            raise InvalidInputError(msg)
        self.policy.check_operation("update", [mem], scope=scope)
        t = to_epoch(self.clock())
        with self.ledger.transaction() as conn:
            self.ledger.update_memories(
                conn, [memory_id], {"status": Status.ACTIVE.value, "invalidated_at": None, "index_state": "stale"}
            )
            self.ledger.insert_events(
                conn, [event_row(t, "revalidated", memory_id, None, mem.scope.user_id, {"reason": reason})]
            )
        self.syncer.sync([memory_id])
        return self.reads.require(memory_id, scope=scope)

    def undo(
        self, decision_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "decision undone"
    ) -> Memory:
        """See :meth:`memlineage.MemoryManager.undo`."""
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        row = self.ledger.activity_rows([check_id(decision_id, "decision_id")])[0]
        if row is None or row["kind"] != "update_detection" or row["user_id"] != scope.user_id:
            msg = f"no update decision {decision_id!r} in this scope; see explain(...).decisions"
            raise MemoryNotFoundError(msg)
        if row["outcome"] == "undone":
            msg = f"decision {decision_id!r} was already undone"
            raise InvalidInputError(msg)
        meta = dict(row["meta"] or {})
        if row["name"] not in (Action.UPDATE.value, Action.CONTRADICT.value):
            msg = f"a {row['name']} decision stored nothing that could be restored; remember the statement again"
            raise InvalidInputError(msg)
        target = str(meta.get("target"))
        mem = self.reads.require(target, scope=scope)
        expected = Status.SUPERSEDED if row["name"] == Action.UPDATE.value else Status.RETRACTED
        if mem.status is not expected:
            msg = f"memory {target!r} is {mem.status.value} now, not {expected.value}; it changed since the decision"
            raise InvalidInputError(msg)
        now = self.clock()
        with self.ledger.transaction() as conn:
            # the checks again, under the target's row lock: two processes undoing one decision apply it once
            again = self.ledger.activity_rows([decision_id], conn)[0]
            locked = self.ledger.lock_rows(conn, [target]).get(target)
            if again is None or again["outcome"] == "undone" or locked is None or locked["status"] != expected.value:
                msg = (
                    f"decision {decision_id!r} or memory {target!r} changed while it was being undone; nothing was done"
                )
                raise ConflictError(msg)
            touched = self._undo_in(conn, row, scope, reason, now)
        self.syncer.sync(touched)
        return self.reads.require(target, scope=scope)

    def _undo_in(self, conn: Connection, row: Mapping[str, Any], scope: Scope, reason: str, now: datetime) -> list[str]:
        """Undo one applied decision in ``conn``; return the ids whose status changed (for the index sync).

        Everything the decision withdrew comes back where it is still supported: its target, and what its cascade
        made suspect. What the decision generated (the clauses it carried over) is withdrawn, after the decisions
        those clauses made themselves are undone in turn. A memory is active again only while one of its support
        groups has every premise active (or it has none); otherwise it stays (or, for the target, becomes) suspect.
        """
        decision_id = str(row["id"])
        meta = dict(row["meta"] or {})
        target = str(meta.get("target"))
        t = to_epoch(now)
        marked = memories_with_event(conn, decision_id, "suspect")
        statuses = self.ledger.statuses([m for m in marked if m], conn)
        candidates = sorted(m for m, st in statuses.items() if st == Status.SUSPECT.value)
        values: dict[str, Any] = {"status": Status.ACTIVE.value, "invalidated_at": None, "index_state": "stale"}
        if row["name"] == Action.UPDATE.value:
            values["slot"] = None
        self.ledger.update_memories(conn, [target], values)
        touched = [target]
        # What the decision generated (the untouched clauses it carried over) goes with it: the target is whole
        # again. The decisions those clauses made (stores written before carried-over clauses skipped detection)
        # are undone first.
        carried = generated_by(conn, decision_id, scope.user_id, LIVE)
        for sub in self._decisions_made_by(conn, carried, scope):
            touched += self._undo_in(conn, sub, scope, reason, now)
        for mid in carried:
            self.cascade.invalidate(conn, mid, Status.RETRACTED, now, reason=reason)
        touched += carried
        supported = self._supported(conn, [target, *candidates])
        if target not in supported:  # a premise of its own was withdrawn meanwhile
            self.ledger.update_memories(conn, [target], {"status": Status.SUSPECT.value, "index_state": "stale"})
        restored = [m for m in candidates if m in supported]
        if restored:
            self.ledger.update_memories(conn, restored, {"status": Status.ACTIVE.value, "index_state": "stale"})
        data = {"reason": reason, "decision": decision_id}
        self.ledger.insert_events(
            conn,
            [event_row(t, "decision_undone", target, decision_id, scope.user_id, data)]
            + [event_row(t, "revalidated", m, decision_id, scope.user_id, data) for m in restored],
        )
        self.ledger.upsert_activity(
            conn, row_activity(row).model_copy(update={"outcome": "undone", "metadata": {**meta, "undo": reason}})
        )
        return touched + restored

    def _decisions_made_by(self, conn: Connection, statements: Sequence[str], scope: Scope) -> list[Any]:
        """The applied update / contradict decisions whose statement is one of ``statements``, target intact."""
        if not statements:
            return []
        used = {e["src"] for e in self.ledger.edges_into(statements, Relation.USED.value, conn)}
        out = []
        for row in self.ledger.activity_rows(sorted(used), conn, user_id=scope.user_id):
            if row is None or row["kind"] != "update_detection" or row["outcome"] != "applied":
                continue
            meta = dict(row["meta"] or {})
            if row["name"] not in (Action.UPDATE.value, Action.CONTRADICT.value) or meta.get("statement") not in (
                set(statements)
            ):
                continue
            expected = Status.SUPERSEDED if row["name"] == Action.UPDATE.value else Status.RETRACTED
            if self.ledger.statuses([str(meta.get("target"))], conn).get(str(meta.get("target"))) == expected.value:
                out.append(row)
        return out

    def _supported(self, conn: Connection, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` would be active: one support group with every premise active, or no premises at all.

        ``ids`` are about to be active together, so a premise among them counts as active when it is supported
        itself (decided to a fixed point).
        """
        groups = self.ledger.support_groups(ids, conn)
        by_group: dict[str, dict[int, list[str]]] = {}
        for derived, premise, group in self.ledger.derivation_edges(ids, conn):
            by_group.setdefault(derived, {}).setdefault(group, []).append(premise)
        premises = {p for g in by_group.values() for ps in g.values() for p in ps}
        statuses = self.ledger.statuses(sorted(premises), conn)
        pending = set(ids)
        ok: set[str] = set()
        changed = True
        while changed:
            changed = False
            for mid in sorted(pending - ok):
                sets = by_group.get(mid, {})
                group_ids = set(groups.get(mid, {})) | set(sets)
                if not group_ids or any(
                    all(
                        p in ok or (p not in pending and statuses.get(p) == Status.ACTIVE.value)
                        for p in sets.get(g, [])
                    )
                    for g in group_ids
                ):
                    ok.add(mid)
                    changed = True
        return ok

    def _possible(self, decision_id: str, scope: Scope) -> dict[str, Any]:
        """The pending possible update ``decision_id`` of the scope's user (raises when there is none)."""
        row = self.ledger.activity_rows([check_id(decision_id, "decision_id")])[0]
        if row is None or row["kind"] != "update_detection" or row["user_id"] != scope.user_id:
            msg = f"no update decision {decision_id!r} in this scope; see explain(...).decisions"
            raise MemoryNotFoundError(msg)
        if row["name"] != "possible_update" or row["outcome"] != "pending":
            msg = f"decision {decision_id!r} is not a pending possible update (it is {row['name']}, {row['outcome']})"
            raise InvalidInputError(msg)
        return row

    def confirm(
        self, decision_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "possible update confirmed"
    ) -> CascadeReport:
        """See :meth:`memlineage.MemoryManager.confirm`."""
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        row = self._possible(decision_id, scope)
        meta = dict(row["meta"] or {})
        older = self.reads.require(str(meta.get("target")), scope=scope)
        newer = self.reads.require(str(meta.get("statement")), scope=scope)
        for mem in (older, newer):
            if mem.status.value not in LIVE:
                msg = f"memory {mem.id!r} is {mem.status.value} now; the possible update no longer applies"
                raise InvalidInputError(msg)
        self.policy.check_operation("update", [older], scope=scope, source=newer.source)
        now = self.clock()
        t = to_epoch(now)
        with self.ledger.transaction() as conn:
            self.ledger.lock_rows(conn, [older.id])
            self.ledger.insert_edges(conn, [edge_row(newer.id, older.id, Relation.WAS_REVISION_OF, t, scope.user_id)])
            done = self.cascade.invalidate(
                conn, older.id, Status.SUPERSEDED, now, reason=str(meta.get("reason") or reason),
                activity_id=decision_id, attribute=True,
            )  # fmt: skip
            self.ledger.upsert_activity(
                conn,
                row_activity(row).model_copy(
                    update={
                        "name": Action.UPDATE.value,
                        "outcome": "applied",
                        "metadata": {**meta, "confirmed": reason},
                    }
                ),
            )
            data = {"reason": reason, "decision": decision_id, "statement": newer.id}
            self.ledger.insert_events(conn, [event_row(t, "possible_update_confirmed", older.id, decision_id,
                                                       scope.user_id, data)])  # fmt: skip
        self.syncer.defer([older.id, *done.suspect])
        return CascadeReport(
            target=older.id, action="supersede", suspect=done.suspect, unaffected=done.unaffected,
            memory=self.reads.get(newer.id, scope=scope), attribution=done.attribution,
        )  # fmt: skip

    def reject(
        self, decision_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "possible update rejected"
    ) -> Activity:
        """See :meth:`memlineage.MemoryManager.reject`."""
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        row = self._possible(decision_id, scope)
        meta = dict(row["meta"] or {})
        act = row_activity(row).model_copy(update={"outcome": "rejected", "metadata": {**meta, "rejected": reason}})
        t = to_epoch(self.clock())
        with self.ledger.transaction() as conn:
            self.ledger.upsert_activity(conn, act)
            data = {"reason": reason, "decision": decision_id}
            self.ledger.insert_events(
                conn, [event_row(t, "possible_update_rejected", str(meta.get("target")), decision_id, scope.user_id,
                                 data)]
            )  # fmt: skip
        return act

    def forget(
        self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "forgotten",
        source: Source | str | None = None,
    ) -> Memory:  # fmt: skip
        """See :meth:`memlineage.MemoryManager.forget`."""
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        src = Source.parse(source) if source is not None else None
        mem = self.reads.require(memory_id, scope=scope)
        self.policy.check_operation("delete", [mem], scope=scope, source=src)
        self.cascade.archive([memory_id], reason)
        return self.reads.require(memory_id, scope=scope)

    def erase(
        self, memory_id: str | None = None, *, scope: Scope | Mapping[str, Any] | str, reason: str = "erasure request",
        source: Source | str | None = None,
    ) -> ErasureReceipt:  # fmt: skip
        """See :meth:`memlineage.MemoryManager.erase`.

        Set-based: the ids go once into a temporary table (:class:`memlineage.ledger._erase.ErasureSet`) and each
        step is a few statements joined to it, whatever the number of memories. One ``invalidation`` activity
        stands for the whole erasure; a cascade runs only below erased memories that something outside the erased
        set was derived from.
        """
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        src = Source.parse(source) if source is not None else None
        now = self.clock()
        t = to_epoch(now) or 0.0
        if memory_id is not None:
            mem = self.reads.require(memory_id, scope=scope)
            user = mem.scope.user_id
            ids = self._revision_chain(mem.id)
            owner = mem.scope
        else:
            user = scope.user_id
            ids = self._scope_ids(scope)
            owner = scope
        ids = [*ids, *self._derived_summaries(ids)]
        if self.policy.enabled:
            for start in range(0, len(ids), 5000):
                mems = [m for m in self.ledger.memories(ids[start : start + 5000]) if m is not None]
                self.policy.check_operation("delete", mems, scope=scope, source=src)
        if memory_id is None:
            self.value.clear_scope(scope)  # buffered (never stored) candidates of the scope go too
        suspects: list[str] = []
        act = new_id()
        with self.ledger.transaction() as conn:
            if not self.ledger.is_sqlite:
                self.ledger.lock_rows(conn, ids)  # in id order, as every writer locks (SQLite: one writer anyway)
            erased = ErasureSet(conn, ids, sqlite=self.ledger.is_sqlite)
            searchable = erased.searchable()  # in the ANN index, on its way there, or in an exact-plan block
            self.ledger.upsert_activity(
                conn,
                Activity(
                    id=act, kind="invalidation", name=Status.ERASED.value, scope=owner, started_at=now,
                    ended_at=now, outcome="applied", metadata={"reason": reason, "memories": len(ids)},
                ),
                new=True,
            )  # fmt: skip
            erased.record_invalidation(activity_id=act, at=t, data={"reason": reason})
            roots = erased.premises_of_others()
            redact_erased_memories(erased, t)
            for root in roots:  # what was derived from the erased memories, outside them: suspect unless supported
                suspects.extend(x for x in self.cascade.below(conn, root, Status.ERASED, now, activity_id=act))
            successors = erased.successors()
            redacted = erased.redact_events(user if memory_id is None and scope == Scope(user_id=user) else None,
                                            keep_types=("erasure_receipt",))  # fmt: skip
            acts = redact_erased_activities(erased, user, scope=scope if memory_id is None else None, keep=act)
            erased.close()
            self.ledger.insert_events(
                conn,
                [event_row(t, "erasure_receipt", None, act, user, {"memories": len(ids), "reason": reason})],
            )
        self.syncer.sync([*ids, *dict.fromkeys(suspects)])  # descendants made suspect need a sync too
        if successors:  # their indexed words drew on the erased versions: indexed again without them
            self.syncer.reindex_words(successors)
        self._compact()
        clear_text_caches()  # process-wide caches keyed by text (clauses, slots, stems, features, vectors)
        return ErasureReceipt(
            user_id=user,
            memory_ids=list(ids),
            index_entries_removed=searchable,
            events_redacted=redacted,
            activities_redacted=acts,
            suspect=sorted(set(suspects)),
            erased_at=now.isoformat(),
        )

    def _scope_ids(self, scope: Scope) -> list[str]:
        """Every memory of the scope: the user's, or only one agent's / session's when the scope names one."""
        with self.ledger.read() as conn:
            return scope_memory_ids(conn, scope.user_id, scope.agent_id, scope.session_id)

    def _revision_chain(self, mid: str) -> list[str]:
        chain = [mid]
        rows = self.ledger.memory_rows([mid])
        row = rows[0]
        while row and row["supersedes"]:
            chain.append(row["supersedes"])
            row = self.ledger.memory_rows([row["supersedes"]])[0]
        frontier = [mid]
        with self.ledger.read() as conn:
            while frontier:
                nxt = revisions_of(conn, frontier)
                nxt = [n for n in nxt if n not in chain]
                chain.extend(nxt)
                frontier = nxt
        return chain

    def _derived_summaries(self, ids: Sequence[str]) -> list[str]:
        """Consolidated summaries derived (transitively) from ``ids``: their text restates what is erased."""
        found = self.ledger.walk(list(ids), direction="descendants")
        rows = self.ledger.memory_rows(sorted(set(found) - set(ids)), embedding=False)
        return [r["id"] for r in rows if r and r["source_kind"] == SourceKind.CONSOLIDATION.value]

    def _compact(self) -> None:
        """Make redactions physical after an erasure: checkpoint and truncate SQLite's WAL.

        ``secure_delete`` zeroes freed cells. The index's log records of the erased entries (embedded Chroma) are
        dropped by the index sync once Chroma deleted them (``IndexSync._purge``), not before: a log stripped of an
        entry that Chroma still holds would make the later delete of that entry a no-op.
        """
        if self.ledger.is_sqlite and not self.ledger.shared_connection:
            # an in-memory database has no write-ahead log; its one connection is shared with other threads
            try:
                truncate_wal(self.ledger)
            except OperationalError as exc:  # a reader holds the log: the next checkpoint truncates it
                _log.warning("erasure: WAL checkpoint deferred (%s); the redaction itself is committed", exc)
                telemetry.count("memlineage.erase.checkpoint_deferred")
