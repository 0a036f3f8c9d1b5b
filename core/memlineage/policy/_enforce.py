"""Enforcement points: :class:`PolicyGate` binds a :class:`PolicyEngine` to a store's ledger.

Read policies run before the top-k cut, write policies (plus write protection of slot supersession) before
dedup and persistence, update / delete policies before any change. Every decision a policy made is appended to
the event log as a ``policy_decision`` event.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from memlineage import telemetry
from memlineage._draft import Draft
from memlineage.errors import InvalidInputError, PolicyViolationError, ScopeViolationError
from memlineage.ledger import Ledger
from memlineage.models import Memory, MemoryKind, Scope, Source, Status, check_text, to_epoch
from memlineage.policy._engine import SCOPE_POLICY_ID, PolicyEngine
from memlineage.policy._model import Decision, Effect, Operation, Policy, PolicyRequest
from memlineage.ports import Clock, Expirer, IndexSyncer
from memlineage.retrieval import RecallHit, Trace

logger = logging.getLogger(__name__)

__all__ = [
    "DECISION_EVENT",
    "PolicyGate",
    "annotate_hits",
    "ensure_engine",
]

#: Event type of recorded policy decisions.
DECISION_EVENT = "policy_decision"

_LONG_TERM = frozenset({MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL})
_LIVE = (Status.ACTIVE.value, Status.SUSPECT.value)


def ensure_engine(policy: PolicyEngine | Iterable[Policy] | None) -> PolicyEngine | None:
    """Normalise the manager's ``policy=`` argument: None, a :class:`PolicyEngine` or an iterable of policies.

    Raises:
        InvalidInputError: anything else.
    """
    if policy is None or isinstance(policy, PolicyEngine):
        return policy
    try:
        return PolicyEngine(list(policy))
    except TypeError:
        msg = f"policy must be a PolicyEngine or a list of Policy objects, not {type(policy).__name__}"
        raise InvalidInputError(msg) from None


def _has_engine(gate: PolicyGate, *args: object, **kwargs: object) -> bool:
    """Policy checks are traced only where a policy engine is configured (the checked call's arguments are unused)."""
    return gate.engine is not None


def _raise(decision: Decision, what: str) -> None:
    if decision.policy_id == SCOPE_POLICY_ID:
        error = ScopeViolationError(f"{what} refused: {decision.reason}")
        error.decision = decision  # type: ignore[attr-defined]
        raise error
    msg = f"{what} refused by policy {decision.policy_id!r}: {decision.reason}; nothing was changed"
    raise PolicyViolationError(msg, decision)


def annotate_hits(hits: Sequence[RecallHit], trace: Trace) -> list[RecallHit]:
    """Attach the decisions in ``trace`` to recall hits, set their flags and swap in refreshed memories.

    Flags: ``suspect`` (status suspect or downgraded by a policy), ``stale`` (a refresh was skipped within the
    caller's budget), ``refreshed`` (served the refreshed memory instead of the stale one), ``expired`` (past its
    TTL, served as history to a question about the past).
    """
    by_memory: dict[str, list[Decision]] = {}
    for d in trace.decisions:
        if isinstance(d, Decision) and d.memory_id is not None:
            by_memory.setdefault(d.memory_id, []).append(d)
    out: list[RecallHit] = []
    for hit in hits:
        mine = by_memory.get(hit.memory.id, [])
        memory = hit.memory
        flags = list(hit.flags)
        for d in mine:
            if d.replacement is not None:
                memory = d.replacement
                flags.append("refreshed")
            if d.effect is Effect.DOWNGRADE:
                flags.append("suspect")
            if d.effect is Effect.MARK_EXPIRED and not d.withheld:
                flags.append("expired")  # served to a question about the past, as history
            elif d.warning:
                flags.append("stale")
        if memory is not hit.memory and memory.status is not Status.SUSPECT and "suspect" in flags:
            flags = [f for f in flags if f != "suspect"]
        flags_t = tuple(dict.fromkeys(flags))
        if memory is hit.memory and not mine and flags_t == hit.flags:
            out.append(hit)
            continue
        out.append(
            dataclasses.replace(
                hit,
                memory=memory,
                lineage=memory.summary(),
                flags=flags_t,
                decisions=tuple(hit.decisions) + tuple(mine),
            )
        )
    return out


def _without_text(decision: Decision) -> Decision:
    """A write decision fit for the event log: no memory id (none exists) and no text of the draft.

    The draft may be refused, and then nothing else records it, so no later ``erase`` could find its text in
    ``inputs``; strings are replaced by their length, numbers and booleans are kept.
    """
    inputs = {
        k: (f"<text withheld: {len(v)} characters>" if isinstance(v, str) else v)
        for k, v in decision.inputs.items()
        if v is None or isinstance(v, (bool, int, float, str))
    }
    return decision.model_copy(update={"memory_id": None, "inputs": inputs})


def _apply_obligations(d: Draft, decision: Decision, now: datetime) -> Draft:
    """The draft with a write decision's obligations: a shorter deadline, a demoted kind."""
    ob = decision.obligations
    if "ttl_seconds" in ob:
        deadline = now + timedelta(seconds=float(ob["ttl_seconds"]))
        if d.expires_at is None or deadline < d.expires_at:
            d = dataclasses.replace(d, expires_at=deadline)
    if "demote_kind" in ob and (d.kind in _LONG_TERM or d.auto_kind):
        # the policy decided the kind: the value model must not promote it again
        d = dataclasses.replace(d, kind=MemoryKind(ob["demote_kind"]), auto_kind=False)
    return d


class PolicyGate:
    """A policy engine bound to a store: the :class:`~memlineage.ports.PolicyGate` port.

    Without an engine every check allows and every read keeps its candidates.

    Args:
        engine: The policy engine; None = no policies.
        ledger: The ledger (decisions are appended to its event log; premise statuses are read from it).
        clock: Returns "now".
        expirer: Expires what a read policy marks expired (the cascade runs).
        syncer: Brings the index in line after a downgrade.
    """

    def __init__(
        self, engine: PolicyEngine | None, *, ledger: Ledger, clock: Clock, expirer: Expirer, syncer: IndexSyncer
    ) -> None:
        self.engine = engine
        self.ledger = ledger
        self.clock = clock
        self.expirer = expirer
        self.syncer = syncer

    @property
    def enabled(self) -> bool:
        """Whether a policy engine is configured."""
        return self.engine is not None

    def annotate(self, hits: list[RecallHit], trace: Trace) -> list[RecallHit]:
        """Attach the read decisions in ``trace`` to the hits (no engine: unchanged); see :func:`annotate_hits`."""
        return annotate_hits(hits, trace) if self.engine is not None else hits

    def _premise_lookup(self) -> Callable[[Sequence[str]], Mapping[str, Status]]:
        def lookup(ids: Sequence[str]) -> dict[str, Status]:
            return {k: Status(v) for k, v in self.ledger.statuses(list(ids)).items()}

        return lookup

    def _record(self, items: Sequence[tuple[Decision, str, str | None]]) -> None:
        """Append ``(decision, user_id, memory_id)`` as ``policy_decision`` events (policies' decisions only)."""
        effects = Counter(f"effects.{d.effect.value}" for d, _, _ in items)
        telemetry.current().set(decisions=len(items), withheld=sum(d.withheld for d, _, _ in items), **effects)
        rows = [
            {
                "at": to_epoch(d.at) or 0.0,
                "type": DECISION_EVENT,
                "memory_id": memory_id,
                "activity_id": None,
                "user_id": user_id,
                "data": d.to_event(),
            }
            for d, user_id, memory_id in items
            if d.policy_id is not None
        ]
        if rows:
            with self.ledger.transaction() as conn:
                self.ledger.insert_events(conn, rows)

    @telemetry.traced("memlineage.policy", when=_has_engine, operation="read")
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
        """Apply read policies to scored candidates before the top-k cut; record decisions and state changes.

        Withheld candidates go to ``trace.excluded`` with their policy and reason; every decision goes to
        ``trace.decisions`` and the event log. ``mark_expired`` and refreshed-stale memories are expired in the
        ledger (their descendants become suspect); downgraded active memories are marked suspect. A policy whose
        condition raised fails closed for this read only (withheld, or flagged for a downgrade) and never changes
        stored state: no expiry, no suspect mark, no refresh. A refreshed
        memory
        is returned under its stale version (the retrieval pipeline keeps candidates by id) and swapped in by
        :func:`annotate_hits`. Candidates already decided earlier in the same recall (the pipeline re-runs this
        hook
        when it fetches more candidates) reuse that decision, so hooks run and events are written once. A
        ``history`` read (a question about the past) is served expired memories flagged instead of withheld.
        """
        engine = self.engine
        if engine is None or not candidates:
            return candidates
        prior: dict[str, list[Decision]] = {}
        for d in trace.decisions:
            if isinstance(d, Decision) and d.memory_id is not None:
                prior.setdefault(d.memory_id, []).append(d)
        new = [m for m, _ in candidates if m.id not in prior]
        verdict: dict[str, Decision | None] = {}
        for mid, items in prior.items():
            terminal = [d for d in items if d.effect is not Effect.DOWNGRADE]
            verdict[mid] = terminal[-1] if terminal else None
        if new:
            now = self.clock()
            request = PolicyRequest(
                operation=Operation.READ, scope=scope, purpose=purpose, query=query, budget=budget, history=history
            )
            outcome = engine.filter_read(new, request, now=now, premise_status=self._premise_lookup())
            decisions = outcome.all_decisions()
            trace.decisions.extend(decisions)
            owners = {m.id: m.scope.user_id for m in new}
            self._record([(d, owners.get(d.memory_id or "", scope.user_id), d.memory_id) for d in decisions])
            for memory, decision in outcome.withheld:
                verdict[memory.id] = decision
            if outcome.mark_suspect:
                self._mark_suspect(outcome.mark_suspect, scope, now)
            if outcome.expire:
                live = [k for k, v in self.ledger.statuses(outcome.expire).items() if v in _LIVE]
                if live:
                    self.expirer.expire(live, reason="expired by policy")
        kept: list[tuple[Memory, float]] = []
        for m, score in candidates:
            final = verdict.get(m.id)
            if final is not None and final.withheld:
                trace.exclude(m.id, final.reason, final.policy_id, "policy")
                continue
            kept.append((m, score))
        return kept

    def _mark_suspect(self, ids: Sequence[str], scope: Scope, now: datetime) -> None:
        t = to_epoch(now)
        with self.ledger.transaction() as conn:
            self.ledger.update_memories(conn, ids, {"status": Status.SUSPECT.value, "index_state": "stale"})
            self.ledger.insert_events(
                conn,
                [
                    {"at": t, "type": "suspect", "memory_id": mid, "activity_id": None, "user_id": scope.user_id,
                     "data": {"reason": "downgraded by policy"}}
                    for mid in ids
                ],
            )  # fmt: skip
        self.syncer.sync(list(ids))

    @telemetry.traced("memlineage.policy", when=_has_engine, operation="update_or_delete")
    def check_operation(
        self,
        operation: str,
        memories: Sequence[Memory],
        *,
        scope: Scope,
        source: Source | None = None,
    ) -> list[Decision]:
        """Check update / delete policies on existing memories before anything changes.

        Raises:
            PolicyViolationError: a policy refused (the decision is recorded in the event log first).
            ScopeViolationError: a memory is outside ``scope``.
        """
        engine = self.engine
        if engine is None or not memories:
            return []
        op = Operation(operation)
        telemetry.current().set(operation=op.value)
        now = self.clock()
        request = PolicyRequest(operation=op, scope=scope, source=source)
        lookup = self._premise_lookup()
        decisions = engine.check_many(op, memories, request, now=now, premise_status=lookup)
        self._record([(d, m.scope.user_id, m.id) for m, d in zip(memories, decisions, strict=True)])
        for m, d in zip(memories, decisions, strict=True):
            if d.withheld:
                _raise(d, f"{op.value} of memory {m.id}")
        return decisions

    @telemetry.traced("memlineage.policy", when=_has_engine, operation="write")
    def check_write(self, drafts: Sequence[Draft]) -> list[Draft]:
        """Check write policies on drafts (and update policies on the slot values they would supersede).

        Runs before dedup and persistence, so a refusal changes nothing. The decisions go to the event log.

        Returns:
            The drafts with their write obligations applied: ``ttl_seconds`` shortens ``expires_at``;
            ``demote_kind`` stores a semantic / procedural draft as that kind.

        Raises:
            PolicyViolationError: a write policy refused, or the draft would supersede a slot value that an update
                policy protects (e.g. a tool overwriting what the user asserted).
        """
        engine = self.engine
        if engine is None or not drafts:
            return list(drafts)
        now = self.clock()
        lookup = self._premise_lookup()
        recorded: list[tuple[Decision, str, str | None]] = []
        failure: tuple[Decision, str] | None = None
        out: list[Draft] = []
        for d in drafts:
            provisional = d.to_memory(now)
            request = PolicyRequest(operation=Operation.WRITE, scope=d.scope, source=d.source)
            decision = engine.check(Operation.WRITE, provisional, request, now=now, premise_status=lookup)
            recorded.append((_without_text(decision), d.scope.user_id, None))
            if decision.withheld:
                failure = (decision, f"write of {d.source} memory")
                break
            old = self._live_slot_holder(d)
            if old is not None:
                upd = engine.check(
                    Operation.UPDATE,
                    old,
                    request.for_operation(Operation.UPDATE),
                    new=provisional,
                    now=now,
                    premise_status=lookup,
                )
                recorded.append((upd, old.scope.user_id, old.id))
                if upd.withheld:
                    failure = (upd, f"superseding slot {d.slot!r} (memory {old.id}) by {d.source}")
                    break
            out.append(_apply_obligations(d, decision, now))
        self._record(recorded)
        if failure is not None:
            _raise(*failure)
        return out

    def _live_slot_holder(self, d: Draft) -> Memory | None:
        if not d.slot:
            return None
        rows = [r for r in self.ledger.slot_versions(d.scope.user_id, d.scope.agent_id, d.slot) if r["status"] in _LIVE]
        if not rows or rows[-1]["content_hash"] == d.hash:
            return None
        return self.ledger.memories([rows[-1]["id"]])[0]

    def admin_access(self, query: str, *, scope: Scope, actor: str, reason: str) -> str:
        """Record an operator's read in another user's scope as an ``admin_access`` event in that user's log.

        The event keeps the actor, the reason and the SHA-256 of the query (never its text). The caller runs the
        recall afterwards.

        Returns:
            The checked query text.

        Raises:
            InvalidInputError: ``actor`` or ``reason`` is empty.
        """
        if not isinstance(actor, str) or not actor.strip() or not isinstance(reason, str) or not reason.strip():
            msg = "admin_recall needs a non-empty actor and reason; both are written to the audited event log"
            raise InvalidInputError(msg)
        query = check_text(query, "query")  # before the event: a refused call writes nothing
        engine = self.engine
        grant_id = engine.admin_grant(actor=actor, reason=reason).id if engine is not None else None
        # the query is the user's text: keep a digest (to match a known query in an audit), never the text
        digest = hashlib.sha256(query.encode("utf-8")).hexdigest()
        data = {"actor": actor, "reason": reason, "query_sha256": digest, "grant_id": grant_id, "operation": "recall"}
        with self.ledger.transaction() as conn:
            self.ledger.insert_events(
                conn,
                [
                    {
                        "at": to_epoch(self.clock()) or 0.0,
                        "type": "admin_access",
                        "memory_id": None,
                        "activity_id": None,
                        "user_id": scope.user_id,
                        "data": data,
                    }
                ],
            )
        logger.warning("admin %r recalled in scope of user %r: %s", actor, scope.user_id, reason)
        return query
