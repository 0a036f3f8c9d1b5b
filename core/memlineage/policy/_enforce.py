"""Enforcement points used by :class:`memlineage.MemoryManager` (its policy hooks delegate here).

Kept out of ``manager.py`` so that the manager only carries one-line hooks: read policies before the top-k cut,
write policies (plus write protection of slot supersession) before dedup and persistence, update/delete policies
before any change. Every decision a policy made is appended to the event log as a ``policy_decision`` event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memlineage.errors import InvalidInputError, PolicyViolationError, ScopeViolationError
from memlineage.models import Lineage, Memory, MemoryKind, Scope, Source, Status, to_epoch
from memlineage.policy._engine import SCOPE_POLICY_ID, PolicyEngine
from memlineage.policy._model import Decision, Effect, Operation, PolicyRequest

if TYPE_CHECKING:
    from memlineage.manager import MemoryManager
    from memlineage.retrieval import Trace

logger = logging.getLogger(__name__)

__all__ = [
    "DECISION_EVENT",
    "enforce_operation",
    "enforce_read",
    "enforce_write",
    "ensure_engine",
    "hit_annotations",
]

#: Event type of recorded policy decisions.
DECISION_EVENT = "policy_decision"

_LONG_TERM = frozenset({MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL})
_LIVE = (Status.ACTIVE.value, Status.SUSPECT.value)


def ensure_engine(policy: Any) -> PolicyEngine | None:
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


def _premise_lookup(mm: MemoryManager) -> Callable[[Sequence[str]], Mapping[str, Status]]:
    def lookup(ids: Sequence[str]) -> dict[str, Status]:
        return {k: Status(v) for k, v in mm.ledger.statuses(list(ids)).items()}

    return lookup


def _event_rows(decisions: Sequence[Decision], users: Mapping[str | None, str], default_user: str) -> list[dict]:
    rows = []
    for d in decisions:
        rows.append(
            {
                "at": to_epoch(d.at) or 0.0,
                "type": DECISION_EVENT,
                "memory_id": d.memory_id if d.memory_id in users else None,
                "activity_id": None,
                "user_id": users.get(d.memory_id, default_user),
                "data": d.to_event(),
            }
        )
    return rows


def _record(mm: MemoryManager, decisions: Sequence[Decision], memories: Sequence[Memory], scope: Scope) -> None:
    fired = [d for d in decisions if d.policy_id is not None]
    if not fired:
        return
    users: dict[str | None, str] = {m.id: m.scope.user_id for m in memories}
    with mm.ledger.transaction() as conn:
        mm.ledger.insert_events(conn, _event_rows(fired, users, scope.user_id))


def _raise(decision: Decision, what: str) -> None:
    if decision.policy_id == SCOPE_POLICY_ID:
        error = ScopeViolationError(f"{what} refused: {decision.reason}")
        error.decision = decision  # type: ignore[attr-defined]
        raise error
    msg = f"{what} refused by policy {decision.policy_id!r}: {decision.reason}; nothing was changed"
    raise PolicyViolationError(msg, decision)


def enforce_read(
    mm: MemoryManager,
    candidates: list[tuple[Memory, float]],
    *,
    scope: Scope,
    purpose: str | None,
    query: str,
    trace: Trace,
    budget: float | None = None,
) -> list[tuple[Memory, float]]:
    """Apply read policies to scored candidates before the top-k cut; record decisions and state changes.

    Withheld candidates go to ``trace.excluded`` with their policy and reason; every decision goes to
    ``trace.decisions`` and the event log. ``mark_expired`` and refreshed-stale memories are expired in the
    ledger (their descendants become suspect); downgraded active memories are marked suspect. A refreshed memory
    is served with the stale one's score.
    """
    engine = ensure_engine(mm.policy)
    if engine is None or not candidates:
        return candidates
    from memlineage.retrieval import Exclusion

    served_before = {getattr(d, "replacement_id", None) for d in trace.decisions} - {None}
    candidates = [(m, s) for m, s in candidates if m.id not in served_before]
    scores = {m.id: s for m, s in candidates}
    now = mm.clock()
    request = PolicyRequest(operation=Operation.READ, scope=scope, purpose=purpose, query=query, budget=budget)
    outcome = engine.filter_read([m for m, _ in candidates], request, now=now, premise_status=_premise_lookup(mm))
    for memory, decision in outcome.withheld:
        trace.excluded.append(Exclusion(memory.id, decision.reason, decision.policy_id, "policy"))
    decisions = outcome.all_decisions()
    trace.decisions.extend(decisions)
    stale_of = {fresh.id: old for old, fresh in outcome.refreshed.items()}
    involved = [m for m, _ in candidates] + list(outcome.refreshed.values())
    _record(mm, decisions, involved, scope)
    if outcome.mark_suspect:
        t = to_epoch(now)
        with mm.ledger.transaction() as conn:
            mm.ledger.update_memories(
                conn, outcome.mark_suspect, {"status": Status.SUSPECT.value, "index_state": "stale"}
            )
            mm.ledger.insert_events(
                conn,
                [
                    {"at": t, "type": "suspect", "memory_id": mid, "activity_id": None, "user_id": scope.user_id,
                     "data": {"reason": "downgraded by policy"}}
                    for mid in outcome.mark_suspect
                ],
            )  # fmt: skip
        mm._sync_index(outcome.mark_suspect)
    if outcome.expire:
        live = [k for k, v in mm.ledger.statuses(outcome.expire).items() if v in _LIVE]
        if live:
            mm._expire(live, reason="expired by policy")
    kept: list[tuple[Memory, float]] = []
    for m in outcome.memories:
        score = scores.get(m.id)
        if score is None:
            score = scores.get(stale_of.get(m.id, ""), 0.0)
        kept.append((m, score))
    return kept


def hit_annotations(memory: Memory, trace: Trace) -> tuple[tuple[str, ...], tuple[Decision, ...]]:
    """Flags and decisions for one recall hit, from the decisions in ``trace``.

    Flags: ``suspect`` (status suspect or downgraded), ``stale`` (accepted within budget), ``refreshed``.
    """
    flags: list[str] = ["suspect"] if memory.status is Status.SUSPECT else []
    mine: list[Decision] = []
    for d in trace.decisions:
        if not isinstance(d, Decision):
            continue
        if d.memory_id == memory.id or d.replacement_id == memory.id:
            mine.append(d)
            if d.effect is Effect.DOWNGRADE and "suspect" not in flags:
                flags.append("suspect")
            if d.warning and "stale" not in flags:
                flags.append("stale")
            if d.replacement_id == memory.id and "refreshed" not in flags:
                flags.append("refreshed")
    return tuple(flags), tuple(mine)


def enforce_operation(
    mm: MemoryManager,
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
    engine = ensure_engine(mm.policy)
    if engine is None or not memories:
        return []
    op = Operation(operation)
    now = mm.clock()
    request = PolicyRequest(operation=op, scope=scope, source=source)
    lookup = _premise_lookup(mm)
    decisions = [engine.check(op, m, request, now=now, premise_status=lookup) for m in memories]
    _record(mm, decisions, memories, scope)
    for m, d in zip(memories, decisions):
        if d.withheld:
            _raise(d, f"{op.value} of memory {m.id}")
    return decisions


def enforce_write(mm: MemoryManager, drafts: Sequence[Any]) -> list[Decision]:
    """Check write policies on drafts (and update policies on the slot values they would supersede).

    Applies write obligations in place: ``ttl_seconds`` shortens ``expires_at``; ``demote_kind`` stores a
    semantic / procedural draft as that kind. Runs before dedup and persistence, so a refusal changes nothing.

    Raises:
        PolicyViolationError: a write policy refused, or the draft would supersede a slot value that an update
            policy protects (e.g. a tool overwriting what the user asserted).
    """
    engine = ensure_engine(mm.policy)
    if engine is None or not drafts:
        return []
    now = mm.clock()
    lookup = _premise_lookup(mm)
    recorded: list[Decision] = []
    involved: list[Memory] = []
    failure: tuple[Decision, str] | None = None
    for d in drafts:
        provisional = _provisional(d, now)
        request = PolicyRequest(operation=Operation.WRITE, scope=d.scope, source=d.source)
        decision = engine.check(Operation.WRITE, provisional, request, now=now, premise_status=lookup)
        recorded.append(decision.model_copy(update={"memory_id": None}))
        if decision.withheld:
            failure = (decision, f"write of {d.source} memory")
            break
        old = _live_slot_holder(mm, d)
        if old is not None:
            upd = engine.check(
                Operation.UPDATE,
                old,
                request.for_operation(Operation.UPDATE),
                new=provisional,
                now=now,
                premise_status=lookup,
            )
            recorded.append(upd)
            involved.append(old)
            if upd.withheld:
                failure = (upd, f"superseding slot {d.slot!r} (memory {old.id}) by {d.source}")
                break
        _apply_obligations(d, decision, now)
    _record(mm, recorded, involved, drafts[0].scope)
    if failure is not None:
        _raise(*failure)
    return recorded


def _provisional(d: Any, now: datetime) -> Memory:
    return Memory(
        content=d.content,
        kind=d.kind,
        scope=d.scope,
        lineage=Lineage(
            source_kind=d.source.kind,
            source_name=d.source.name,
            activity_id=d.activity_id,
            derived_from=d.derived_from,
            confidence=d.confidence,
            trust=d.trust,
        ),
        tags=d.tags,
        metadata=d.metadata,
        created_at=now,
        recorded_at=now,
        valid_from=d.valid_from,
        expires_at=d.expires_at,
        slot=d.slot,
    )


def _live_slot_holder(mm: MemoryManager, d: Any) -> Memory | None:
    if not d.slot:
        return None
    rows = [r for r in mm.ledger.slot_versions(d.scope.user_id, d.scope.agent_id, d.slot) if r["status"] in _LIVE]
    if not rows or rows[-1]["content_hash"] == d.hash:
        return None
    return mm.ledger.memories([rows[-1]["id"]])[0]


def _apply_obligations(d: Any, decision: Decision, now: datetime) -> None:
    ob = decision.obligations
    if "ttl_seconds" in ob:
        deadline = now + timedelta(seconds=float(ob["ttl_seconds"]))
        if d.expires_at is None or deadline < d.expires_at:
            d.expires_at = deadline
    if "demote_kind" in ob and d.kind in _LONG_TERM:
        d.kind = MemoryKind(ob["demote_kind"])
