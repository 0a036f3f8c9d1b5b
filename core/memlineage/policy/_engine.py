"""The policy engine: deterministic combination, batch evaluation, refresh hooks, budgets, conflicts."""

from __future__ import annotations

import logging
import os
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memlineage.errors import (
    ConfigurationError,
    InvalidInputError,
    PolicyViolationError,
    ScopeViolationError,
)
from memlineage.models import Memory, Status, utcnow
from memlineage.policy._condition import (
    PolicyContext,
)
from memlineage.policy._load import load_policy_file
from memlineage.policy._model import (
    WITHHOLDING_EFFECTS,
    AdminGrant,
    Decision,
    Effect,
    Operation,
    Policy,
    PolicyRequest,
)
from memlineage.policy._plan import (
    NO_VERDICT,
    Plan,
    PolicyConflict,
    ReadOutcome,
    Verdict,
    build_plan,
    cel_results,
    fire,
    policy_inputs,
    precedence_key,
    targets_overlap,
)

logger = logging.getLogger(__name__)

__all__ = [
    "SCOPE_POLICY_ID",
    "PolicyConflict",
    "PolicyEngine",
    "ReadOutcome",
    "RefreshHook",
    "precedence_key",
]

#: Policy id used on decisions made by the always-on scope guard.
SCOPE_POLICY_ID = "builtin.scope_isolation"

#: A refresh hook: gets the stale memory and the ``require_refresh`` decision, returns the fresh memory (or
# None).
RefreshHook = Callable[[Memory, Decision], "Memory | None"]

_PremiseLookup = Callable[[Sequence[str]], Mapping[str, Status]]


_ID_RNG = random.Random(int.from_bytes(os.urandom(16), "big"))


def _decision_id() -> str:
    """A version-4 UUID string from a PRNG seeded once from the OS (one syscall per process, not per id)."""
    return str(uuid.UUID(int=_ID_RNG.getrandbits(128), version=4))


class PolicyEngine:
    """Evaluates policies over memories for read, write, update and delete operations.

    Setup / Instantiate / Use::

        engine = PolicyEngine(builtin_policies())  # or PolicyEngine.from_files("policies.yaml")
        engine.register_refresh_hook("flight_price", rerun_flight_search)
        outcome = engine.filter_read(candidates, PolicyRequest(scope=scope, purpose="decision"))
        engine.enforce(Operation.UPDATE, old_memory, PolicyRequest(scope=scope, source="tool:x"))

    Combination is deterministic (see :func:`precedence_key`): policies are walked in precedence order; a
    ``downgrade`` flags the memory and the walk goes on; ``allow`` stops it and permits; any other effect
    stops
    it and withholds (reads) or refuses (writes). A memory no policy stops is permitted. Scope isolation runs
    before every policy and cannot be disabled; cross-scope reads need an :meth:`admin_grant`.

    Args:
        policies: Initial policies (ids must be unique).
        refresh_hooks: Name → hook, for ``require_refresh`` policies.
        clock: Returns the current UTC time (default: wall clock); tests inject a fake.
        on_admin_grant: Called with every :class:`AdminGrant` issued, e.g. to write an audit event.

    Raises:
        ConfigurationError: duplicate policy ids.
    """

    def __init__(
        self,
        policies: Iterable[Policy] = (),
        *,
        refresh_hooks: Mapping[str, RefreshHook] | None = None,
        clock: Callable[[], datetime] | None = None,
        on_admin_grant: Callable[[AdminGrant], None] | None = None,
    ) -> None:
        self._policies: dict[str, Policy] = {}
        self._hooks: dict[str, RefreshHook] = dict(refresh_hooks or {})
        self._clock = clock or utcnow
        self._grants: dict[str, AdminGrant] = {}
        self.on_admin_grant = on_admin_grant
        self._plans: dict[Operation, Plan] = {}
        self.add(policies)

    # ------------------------------------------------------------------ policy set
    @classmethod
    def from_files(
        cls,
        *paths: str | os.PathLike[str],
        refresh_hooks: Mapping[str, RefreshHook] | None = None,
        clock: Callable[[], datetime] | None = None,
        on_admin_grant: Callable[[AdminGrant], None] | None = None,
    ) -> PolicyEngine:
        """Build an engine from YAML/JSON policy files (the keyword arguments are the constructor's).

        Raises:
            PolicyLoadError: a file is invalid (the message names file, policy and field).
        """
        policies: list[Policy] = []
        for path in paths:
            policies.extend(load_policy_file(path))
        return cls(policies, refresh_hooks=refresh_hooks, clock=clock, on_admin_grant=on_admin_grant)

    def load(self, path: str | os.PathLike[str]) -> list[Policy]:
        """Load a YAML/JSON policy file and add its policies; return them.

        Raises:
            PolicyLoadError: the file is invalid.
            ConfigurationError: a policy id is already registered.
        """
        loaded = load_policy_file(path)
        self.add(loaded)
        return loaded

    def add(self, policies: Policy | Iterable[Policy], *, replace: bool = False) -> None:
        """Add one or more policies.

        Args:
            policies: A policy or an iterable of them.
            replace: Replace a policy with the same id instead of failing.

        Raises:
            ConfigurationError: an id is already registered and ``replace`` is False.
            InvalidInputError: an item is not a :class:`Policy`.
        """
        items = [policies] if isinstance(policies, Policy) else list(policies)
        seen: set[str] = set()
        for p in items:
            if not isinstance(p, Policy):
                msg = f"expected a Policy, got {type(p).__name__}; load dicts with load_policies()"
                raise InvalidInputError(msg)
            if (p.id in self._policies or p.id in seen) and not replace:
                msg = f"policy id {p.id!r} is already registered; remove it first or pass replace=True"
                raise ConfigurationError(msg)
            seen.add(p.id)
        for p in items:
            self._policies[p.id] = p
        self._plans.clear()

    def remove(self, policy_id: str) -> Policy:
        """Remove a policy by id and return it.

        Raises:
            ConfigurationError: ``policy_id`` names the scope guard, which cannot be removed.
            InvalidInputError: no such policy.
        """
        if policy_id == SCOPE_POLICY_ID:
            msg = "scope isolation is always on and cannot be removed; use admin_grant() for audited access"
            raise ConfigurationError(msg)
        try:
            policy = self._policies.pop(policy_id)
        except KeyError:
            msg = f"no policy with id {policy_id!r}; registered: {sorted(self._policies)}"
            raise InvalidInputError(msg) from None
        self._plans.clear()
        return policy

    def get(self, policy_id: str) -> Policy | None:
        """The policy with that id, or None."""
        return self._policies.get(policy_id)

    @property
    def policies(self) -> tuple[Policy, ...]:
        """All policies, in evaluation (precedence) order."""
        return tuple(sorted(self._policies.values(), key=precedence_key))

    def __len__(self) -> int:
        return len(self._policies)

    # ------------------------------------------------------------------ hooks and grants
    def register_refresh_hook(self, name: str, hook: RefreshHook) -> None:
        """Register the hook ``require_refresh`` policies named ``name`` call (e.g. re-run a tool).

        The hook receives ``(stale_memory, decision)`` and returns the fresh :class:`Memory` to serve (usually
        written through ``MemoryManager.remember``), or None when it cannot refresh.

        Raises:
            InvalidInputError: ``hook`` is not callable.
        """
        if not callable(hook):
            msg = f"refresh hook {name!r} must be callable (memory, decision) -> Memory | None"
            raise InvalidInputError(msg)
        self._hooks[name] = hook

    def unregister_refresh_hook(self, name: str) -> None:
        """Remove a refresh hook (no error if absent)."""
        self._hooks.pop(name, None)

    @property
    def refresh_hooks(self) -> dict[str, RefreshHook]:
        """Registered refresh hooks by name (a copy)."""
        return dict(self._hooks)

    def admin_grant(self, *, actor: str, reason: str) -> AdminGrant:
        """Issue an audited grant for an explicit cross-scope (admin) call.

        Raises:
            InvalidInputError: ``actor`` or ``reason`` is empty.
        """
        if not actor or not actor.strip() or not reason or not reason.strip():
            msg = "admin_grant needs a non-empty actor and reason; both are written to the audit log"
            raise InvalidInputError(msg)
        grant = AdminGrant(actor=actor, reason=reason, issued_at=self._clock())
        self._grants[grant.id] = grant
        logger.warning("cross-scope admin grant %s issued to %r: %s", grant.id, actor, reason)
        if self.on_admin_grant is not None:
            self.on_admin_grant(grant)
        return grant

    # ------------------------------------------------------------------ evaluation
    def _plan(self, operation: Operation) -> Plan:
        plan = self._plans.get(operation)
        if plan is None:
            plan = self._plans[operation] = build_plan(self.policies, operation)
        return plan

    def _context(
        self,
        operation: Operation,
        request: PolicyRequest,
        now: datetime | None,
        new: Memory | None,
        premise_status: _PremiseLookup | None,
    ) -> PolicyContext:
        if request.operation is not operation:
            request = request.for_operation(operation)
        return PolicyContext(
            request=request,
            operation=operation,
            now=now or self._clock(),
            new=new,
            premise_status=premise_status,
        )

    def _in_scope(self, memory: Memory, request: PolicyRequest) -> Decision | None:
        """None if the memory is in the request's scope; else the scope decision (allow by grant or deny)."""
        if request.scope.contains(memory.scope):
            return None
        inputs = {"memory.user_id": memory.scope.user_id, "request.user_id": request.scope.user_id}
        grant = request.admin
        if grant is not None and self._grants.get(grant.id) == grant:
            return Decision.model_construct(
                policy_id=SCOPE_POLICY_ID,
                effect=Effect.ALLOW,
                operation=request.operation,
                memory_id=memory.id,
                reason=f"cross-scope access by admin grant to {grant.actor!r}: {grant.reason}",
                inputs=inputs,
                admin_grant_id=grant.id,
                withheld=False,
            )
        if grant is not None:
            logger.warning("ignoring admin grant %s: it was not issued by this engine", grant.id)
        return Decision.model_construct(
            policy_id=SCOPE_POLICY_ID,
            effect=Effect.DENY,
            operation=request.operation,
            memory_id=memory.id,
            reason="memory belongs to another scope; cross-scope access needs an audited admin call",
            inputs=inputs,
            withheld=True,
        )

    def _walk(self, memories: Sequence[Memory], ctx: PolicyContext) -> list[Verdict]:
        plan = self._plan(ctx.operation)
        if not plan.policies or not memories:
            return [NO_VERDICT] * len(memories)
        touched: dict[int, Verdict] = {}
        if plan.needs_premises:
            ctx.prefetch(memories)
        evaluated = cel_results(plan, memories, ctx)
        open_idx = list(range(len(memories)))
        for policy, matcher in zip(plan.policies, plan.matchers, strict=True):
            if not open_idx:
                break
            idx = open_idx if matcher is None else [i for i in open_idx if matcher(memories[i])]
            if not idx:
                continue
            results = fire(policy, idx, memories, ctx, evaluated)
            closed = False
            for i, fired in zip(idx, results, strict=True):
                error = None
                if isinstance(fired, BaseException):
                    error = fired
                    # fail closed: a broken restriction applies, a broken allow does not
                    fired = policy.effect is not Effect.ALLOW
                    logger.warning("condition of policy %s failed on memory %s: %r", policy.id, memories[i].id, error)
                if not fired:
                    continue
                verdict = touched.get(i)
                if verdict is None:
                    verdict = touched[i] = Verdict()
                reason = policy.display_reason
                if error is not None:
                    reason += (
                        f" (condition failed: {type(error).__name__}: {error}; applied to this operation only, "
                        "nothing stored was changed)"
                    )
                decision = Decision.model_construct(
                    id=_decision_id(),
                    policy_id=policy.id,
                    effect=policy.effect,
                    operation=ctx.operation,
                    memory_id=memories[i].id,
                    reason=reason,
                    inputs=policy_inputs(policy, memories[i], ctx),
                    layer=policy.layer,
                    priority=policy.priority,
                    withheld=policy.effect in WITHHOLDING_EFFECTS,
                    failed=error is not None,
                    warning=None,
                    flags=tuple(verdict.flags),
                    obligations=dict(policy.obligations),
                    cost=0.0,
                    replacement_id=None,
                    replacement=None,
                    admin_grant_id=None,
                    at=ctx.now,
                )
                verdict.decisions.append(decision)
                verdict.obligations.update(policy.obligations)
                if policy.effect is Effect.DOWNGRADE:
                    verdict.flags.append(policy.id)
                    if error is None:
                        verdict.sticky_flags.append(policy.id)
                    continue
                verdict.terminal = decision
                verdict.policy = policy
                closed = True
            if closed:
                open_idx = [i for i in open_idx if i not in touched or touched[i].terminal is None]
        return [touched.get(i, NO_VERDICT) for i in range(len(memories))]

    def evaluate(
        self,
        operation: Operation | str,
        memories: Sequence[Memory],
        request: PolicyRequest,
        *,
        new: Memory | None = None,
        now: datetime | None = None,
        premise_status: _PremiseLookup | None = None,
    ) -> list[list[Decision]]:
        """Decisions for each memory (aligned with ``memories``), without side effects.

        The scope guard runs first; then the policies for ``operation`` in precedence order. The last
        decision in
        each list is the deciding one when it is not a ``downgrade``; an empty list means no policy applied
        (permitted).

        Args:
            operation: read, write, update or delete.
            memories: The memories to decide on (for a write: the new memory).
            request: Who asks and why.
            new: The incoming memory for update checks (``new.*`` in CEL).
            now: Evaluation time (UTC); default: the engine's clock.
            premise_status: Optional batch lookup of premise statuses (``memory.suspect``).
        """
        op = Operation(operation)
        ctx = self._context(op, request, now, new, premise_status)
        out: list[list[Decision]] = [[] for _ in memories]
        in_scope: list[int] = []
        for i, m in enumerate(memories):
            scope_decision = self._in_scope(m, ctx.request)
            if scope_decision is None:
                in_scope.append(i)
            else:
                out[i].append(scope_decision)
                if not scope_decision.withheld:
                    in_scope.append(i)
        verdicts = self._walk([memories[i] for i in in_scope], ctx)
        for i, v in zip(in_scope, verdicts, strict=True):
            out[i].extend(v.decisions)
        return out

    def filter_read(
        self,
        memories: Sequence[Memory],
        request: PolicyRequest,
        *,
        now: datetime | None = None,
        premise_status: _PremiseLookup | None = None,
    ) -> ReadOutcome:
        """Apply read policies to recall candidates (before the top-k cut), calling refresh hooks as needed.

        Budget trade-off: each refresh spends the policy's ``cost`` from ``request.budget``; when a refresh
        would
        exceed what is left, the stale memory is served with a warning instead (seed: "the information is a
        bit
        old, but the API call is too expensive; this task can accept it").

        Args:
            memories: Candidates, in rank order.
            request: The read request (scope, purpose, budget).
            now: Evaluation time (UTC); default: the engine's clock.
            premise_status: Optional batch lookup of premise statuses.

        Returns:
            A :class:`ReadOutcome`; ``memories`` keeps candidate order.
        """
        ctx = self._context(Operation.READ, request, now, None, premise_status)
        out = ReadOutcome()
        scoped: list[Memory] = []
        for m in memories:
            scope_decision = self._in_scope(m, ctx.request)
            if scope_decision is not None:
                out.decisions.setdefault(m.id, []).append(scope_decision)
                if scope_decision.withheld:
                    out.withheld.append((m, scope_decision))
                    continue
            scoped.append(m)
        verdicts = self._walk(scoped, ctx)
        remaining = request.budget
        for memory, verdict in zip(scoped, verdicts, strict=True):
            decisions = out.decisions.setdefault(memory.id, [])
            decisions.extend(verdict.decisions)
            terminal = verdict.terminal
            served: Memory | None = memory
            if terminal is not None and terminal.failed:
                # fail closed for this read only: withhold (or serve flagged), never expire, refresh or mark
                served = None if terminal.withheld else memory
            elif terminal is not None and terminal.effect is Effect.REQUIRE_REFRESH:
                assert verdict.policy is not None
                served, terminal, spent = self._refresh(memory, terminal, verdict.policy, remaining, out)
                if remaining is not None:
                    remaining -= spent
                out.cost += spent
                decisions[-1] = terminal
                if served is not None and served.id != memory.id:
                    out.decisions.setdefault(served.id, []).append(terminal)
            elif terminal is not None and terminal.withheld:
                served = None
                if terminal.effect is Effect.MARK_EXPIRED:
                    out.expire.append(memory.id)
                    if request.history and request.purpose != "decision":
                        # expiry is about decisions, not history: what was said or found stays answerable
                        warning = f"expired ({terminal.reason}): served as history, not for decisions"
                        terminal = terminal.model_copy(update={"withheld": False, "warning": warning})
                        decisions[-1] = terminal
                        served = memory
                        out.flagged.add(memory.id)
            if served is None:
                assert terminal is not None
                out.withheld.append((memory, terminal))
                continue
            if verdict.flags:
                out.flagged.add(served.id)
                if verdict.sticky_flags and served.status is Status.ACTIVE:
                    out.mark_suspect.append(served.id)
            out.memories.append(served)
        return out

    def _refresh(
        self, memory: Memory, decision: Decision, policy: Policy, remaining: float | None, out: ReadOutcome
    ) -> tuple[Memory | None, Decision, float]:
        cost = policy.cost
        if remaining is not None and cost > remaining:
            warning = (
                f"serving stale memory {memory.id}: refresh by {policy.refresh_hook_name!r} costs {cost:g}, "
                f"budget left {remaining:g}"
            )
            out.warnings.append(warning)
            return memory, decision.model_copy(update={"withheld": False, "warning": warning}), 0.0
        hook = self._hooks.get(policy.refresh_hook_name)
        if hook is None:
            reason = (
                f"{decision.reason}; no refresh hook named {policy.refresh_hook_name!r} is registered, "
                "so the stale memory is withheld"
            )
            return None, decision.model_copy(update={"reason": reason, "withheld": True}), 0.0
        try:
            fresh = hook(memory, decision)
        except Exception as exc:
            logger.warning("refresh hook %r failed for memory %s", policy.refresh_hook_name, memory.id, exc_info=True)
            reason = (
                f"{decision.reason}; refresh hook {policy.refresh_hook_name!r} failed "
                f"({type(exc).__name__}: {exc}), so the stale memory is withheld"
            )
            return None, decision.model_copy(update={"reason": reason, "withheld": True, "cost": cost}), cost
        if not isinstance(fresh, Memory):
            reason = f"{decision.reason}; refresh hook {policy.refresh_hook_name!r} returned no memory"
            return None, decision.model_copy(update={"reason": reason, "withheld": True, "cost": cost}), cost
        if not _same_owner(memory, fresh):
            reason = f"{decision.reason}; refresh hook returned a memory of another scope, withheld"
            return None, decision.model_copy(update={"reason": reason, "withheld": True, "cost": cost}), cost
        out.refreshed[memory.id] = fresh
        if fresh.id != memory.id:
            out.expire.append(memory.id)
        reason = f"{decision.reason}; refreshed by hook {policy.refresh_hook_name!r}"
        update = {
            "reason": reason,
            "withheld": False,
            "cost": cost,
            "replacement_id": fresh.id,
            "replacement": fresh,
        }
        return fresh, decision.model_copy(update=update), cost

    def check(
        self,
        operation: Operation | str,
        memory: Memory,
        request: PolicyRequest,
        *,
        new: Memory | None = None,
        now: datetime | None = None,
        premise_status: _PremiseLookup | None = None,
    ) -> Decision:
        """The deciding decision for one memory and one operation (no exception).

        ``withheld=True`` means refused. When no policy stops the walk, the result is an ``allow`` with
        ``policy_id=None``. ``flags`` lists downgrade policies that fired; ``obligations`` merges the write
        obligations of every policy that fired (e.g. ``ttl_seconds``, ``kind``).
        """
        op = Operation(operation)
        ctx = self._context(op, request, now, new, premise_status)
        scope_decision = self._in_scope(memory, ctx.request)
        if scope_decision is not None and scope_decision.withheld:
            return scope_decision
        return self._decide(op, memory, scope_decision, self._walk([memory], ctx)[0])

    def check_many(
        self,
        operation: Operation | str,
        memories: Sequence[Memory],
        request: PolicyRequest,
        *,
        now: datetime | None = None,
        premise_status: _PremiseLookup | None = None,
    ) -> list[Decision]:
        """:meth:`check` of each of ``memories`` (no ``new``), with one walk of the policies over all of them.

        What an erasure of a scope needs: the same decisions as one :meth:`check` per memory, at the cost of a
        batch (conditions are evaluated together, the context is built once).
        """
        op = Operation(operation)
        ctx = self._context(op, request, now, None, premise_status)
        scoped = [self._in_scope(m, ctx.request) for m in memories]
        todo = [i for i, d in enumerate(scoped) if d is None or not d.withheld]
        out: list[Decision | None] = [d if d is not None and d.withheld else None for d in scoped]
        for i, verdict in zip(todo, self._walk([memories[i] for i in todo], ctx), strict=True):
            out[i] = self._decide(op, memories[i], scoped[i], verdict)
        return [d for d in out if d is not None]

    @staticmethod
    def _decide(op: Operation, memory: Memory, scope_decision: Decision | None, verdict: Verdict) -> Decision:
        """The deciding decision of one memory from its policy walk (see :meth:`check`)."""
        flags = tuple(verdict.flags)
        if verdict.terminal is not None:
            return verdict.terminal.model_copy(update={"flags": flags, "obligations": dict(verdict.obligations)})
        if verdict.decisions:
            last = verdict.decisions[-1]
            return last.model_copy(update={"flags": flags, "obligations": dict(verdict.obligations)})
        return Decision.model_construct(
            policy_id=None if scope_decision is None else SCOPE_POLICY_ID,
            effect=Effect.ALLOW,
            operation=op,
            memory_id=memory.id,
            reason="no policy applies" if scope_decision is None else scope_decision.reason,
            admin_grant_id=None if scope_decision is None else scope_decision.admin_grant_id,
            withheld=False,
            # given, not defaulted: pydantic inspects each default factory's signature on every model_construct
            id=_decision_id(),
            inputs={},
            obligations={},
            at=utcnow(),
        )

    def enforce(
        self,
        operation: Operation | str,
        memory: Memory,
        request: PolicyRequest,
        *,
        new: Memory | None = None,
        now: datetime | None = None,
        premise_status: _PremiseLookup | None = None,
    ) -> Decision:
        """Like :meth:`check`, but raise when refused.

        Raises:
            ScopeViolationError: the memory is outside the request's scope (``.decision`` is set).
            PolicyViolationError: a policy refused the operation (``.decision`` is the refusing decision).
        """
        decision = self.check(operation, memory, request, new=new, now=now, premise_status=premise_status)
        if decision.withheld:
            if decision.policy_id == SCOPE_POLICY_ID:
                msg = f"{decision.operation.value} refused: {decision.reason}"
                error = ScopeViolationError(msg)
                error.decision = decision  # type: ignore[attr-defined]
                raise error
            msg = (
                f"{decision.operation.value} of memory {memory.id} refused by policy {decision.policy_id!r}: "
                f"{decision.reason}"
            )
            raise PolicyViolationError(msg, decision)
        return decision

    # ------------------------------------------------------------------ analysis
    def check_conflicts(self) -> list[PolicyConflict]:
        """Pairs of enabled policies that may fire on the same memory with opposite effects.

        Opposite = one ``allow`` and one restrictive effect (deny, filter, mark_expired, require_refresh,
        downgrade) on a shared operation with overlapping targets. Sorted by the winner's precedence.
        """
        ordered = [p for p in self.policies if p.enabled]
        conflicts: list[PolicyConflict] = []
        for i, first in enumerate(ordered):
            for second in ordered[i + 1 :]:
                if (first.effect is Effect.ALLOW) == (second.effect is Effect.ALLOW):
                    continue
                ops = tuple(op for op in first.operations if op in second.operations)
                if not ops or not targets_overlap(first.target, second.target):
                    continue
                conflicts.append(
                    PolicyConflict(
                        first_id=first.id,
                        second_id=second.id,
                        operations=ops,
                        effects=(first.effect, second.effect),
                        winner_id=first.id,
                        explanation=_why_first(first, second),
                    )
                )
        return conflicts

    def describe(self) -> list[dict[str, Any]]:
        """Rows in evaluation order: id, layer, priority, effect, operations, final, condition."""
        return [
            {
                "id": p.id,
                "layer": p.layer.value,
                "priority": p.priority,
                "effect": p.effect.value,
                "operations": [op.value for op in p.operations],
                "final": p.final,
                "enabled": p.enabled,
                "condition": p.compiled.source,
            }
            for p in self.policies
        ]


def _same_owner(stale: Memory, fresh: Memory) -> bool:
    """A refreshed memory must belong to the same user as the stale one."""
    return stale.scope.user_id == fresh.scope.user_id


def _why_first(first: Policy, second: Policy) -> str:
    if first.final and not second.final:
        return f"{first.id} is final in the {first.layer.value} layer"
    if first.layer is not second.layer:
        return f"{first.layer.value} layer overrides {second.layer.value} layer"
    if first.priority != second.priority:
        return f"higher priority ({first.priority} > {second.priority})"
    if first.effect is not second.effect:
        return f"same priority: {first.effect.value} overrides {second.effect.value} (deny-overrides)"
    return "same layer, priority and effect: ordered by id"
