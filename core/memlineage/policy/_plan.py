"""The policy engine's evaluation plan: precedence, target matching, batched condition evaluation.

Pure functions and records used by :class:`memlineage.policy._engine.PolicyEngine`: :func:`build_plan` orders
and compiles the enabled policies of one operation, :func:`cel_results` evaluates every CEL condition over a
batch of memories, :func:`fire` gives one policy's outcome per memory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from memlineage.errors import ConfigurationError
from memlineage.models import Memory
from memlineage.policy import _cel as cel
from memlineage.policy._condition import (
    MEMORY_FIELDS,
    REQUEST_FIELDS,
    PolicyContext,
    memory_fields,
    request_fields,
)
from memlineage.policy._model import (
    EFFECT_RANK,
    LAYER_RANK,
    Decision,
    Effect,
    Operation,
    Policy,
    PolicyTarget,
)

if TYPE_CHECKING:
    from cel import Program

__all__ = [
    "NO_VERDICT",
    "CelEntry",
    "Plan",
    "PolicyConflict",
    "ReadOutcome",
    "Verdict",
    "build_plan",
    "cel_results",
    "fire",
    "policy_inputs",
    "precedence_key",
    "target_matcher",
    "targets_overlap",
]

logger = logging.getLogger(__name__)


def precedence_key(policy: Policy) -> tuple[Any, ...]:
    """Sort key giving the deterministic evaluation order (smaller = evaluated first).

    1. ``final`` policies first (global before domain before session): nothing can override them.
    2. Then by layer: session, then domain, then global (a more specific layer overrides a broader one).
    3. Within a layer: higher ``priority`` first.
    4. Within a priority: the more restrictive effect first (deny, filter, mark_expired, require_refresh,
       downgrade, allow) — "deny overrides".
    5. Finally the policy id, so the order never depends on insertion order.
    """
    tier = (0, LAYER_RANK[policy.layer]) if policy.final else (1, -LAYER_RANK[policy.layer])
    return (tier, -policy.priority, EFFECT_RANK[policy.effect], policy.id)


class PolicyConflict(BaseModel):
    """Two policies whose targets and operations overlap and whose effects are opposite.

    Conditions are not compared, so a conflict is *possible*: both may fire on the same memory. ``winner_id``
    is
    the one the deterministic order applies first.
    """

    model_config = ConfigDict(frozen=True)

    first_id: str = Field(description="Policy evaluated first (the winner when both fire).")
    second_id: str = Field(description="Policy it overrides when both fire.")
    operations: tuple[Operation, ...] = Field(description="Operations both govern.")
    effects: tuple[Effect, Effect] = Field(description="Effects of first and second.")
    winner_id: str = Field(description="Same as first_id; kept explicit for reports.")
    explanation: str = Field(description="Why the winner wins (layer, final, priority, deny-overrides).")


@dataclass
class ReadOutcome:
    """Result of applying read policies to a batch of candidates.

    Attributes:
        memories: Memories to serve, in candidate order; a refreshed memory replaces its stale version.
        decisions: Every decision that touched a memory, keyed by the candidate's id (and by the replacement
        id).
        withheld: ``(memory, deciding decision)`` for every candidate kept from the caller.
        flagged: Ids of served memories flagged by a ``downgrade`` policy (e.g. suspect, not decision-grade).
        expire: Ids the manager should mark ``expired`` (mark_expired, or the stale side of a refresh); never
            for a policy whose condition failed.
        mark_suspect: Ids the manager should mark ``suspect`` (downgraded memories that are still ``active``,
            by a downgrade whose condition held).
        refreshed: Stale memory id → the refreshed memory served instead.
        warnings: Human-readable warnings (e.g. stale memories accepted within budget).
        cost: Compliance cost spent on refreshes, in budget units.
    """

    memories: list[Memory] = field(default_factory=list)
    decisions: dict[str, list[Decision]] = field(default_factory=dict)
    withheld: list[tuple[Memory, Decision]] = field(default_factory=list)
    flagged: set[str] = field(default_factory=set)
    expire: list[str] = field(default_factory=list)
    mark_suspect: list[str] = field(default_factory=list)
    refreshed: dict[str, Memory] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    cost: float = 0.0

    def all_decisions(self) -> list[Decision]:
        """Every decision once, in the order they were made (for the event log)."""
        seen: dict[str, Decision] = {}
        for items in self.decisions.values():
            for d in items:
                seen.setdefault(d.id, d)
        return sorted(seen.values(), key=lambda d: d.at)


@dataclass
class Verdict:
    decisions: list[Decision] = field(default_factory=list)
    terminal: Decision | None = None
    policy: Policy | None = None
    flags: list[str] = field(default_factory=list)
    obligations: dict[str, Any] = field(default_factory=dict)
    #: Downgrade policies whose condition held (not failed): only these may change stored state.
    sticky_flags: list[str] = field(default_factory=list)


#: Shared verdict of memories no policy fired on (never mutated).
NO_VERDICT = Verdict(decisions=[], terminal=None, policy=None, flags=[], obligations={}, sticky_flags=[])


def target_matcher(target: PolicyTarget) -> Callable[[Memory], bool] | None:
    checks: list[Callable[[Memory], bool]] = []
    if target.kinds:
        kinds = frozenset(target.kinds)
        checks.append(lambda m: m.kind in kinds)
    if target.tags:
        tags = frozenset(target.tags)
        checks.append(lambda m: not tags.isdisjoint(m.tags))
    if target.source_kinds:
        sks = frozenset(target.source_kinds)
        checks.append(lambda m: m.lineage.source_kind in sks)
    if target.source_names:
        sns = frozenset(target.source_names)
        checks.append(lambda m: m.lineage.source_name in sns)
    if target.statuses:
        sts = frozenset(target.statuses)
        checks.append(lambda m: m.status in sts)
    if target.user_ids:
        uids = frozenset(target.user_ids)
        checks.append(lambda m: m.scope.user_id in uids)
    if target.agent_ids:
        aids = frozenset(target.agent_ids)
        checks.append(lambda m: m.scope.agent_id in aids)
    if target.session_ids:
        sids = frozenset(target.session_ids)
        checks.append(lambda m: m.scope.session_id in sids)
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    return lambda m: all(check(m) for check in checks)


def targets_overlap(a: PolicyTarget, b: PolicyTarget) -> bool:
    for name in PolicyTarget.model_fields:
        va, vb = getattr(a, name), getattr(b, name)
        if va and vb and not set(va) & set(vb):
            return False
    return True


@dataclass(frozen=True)
class CelEntry:
    policy_id: str
    program: Program
    flat_program: Program | None
    python: tuple[Callable[..., Any], Callable[..., Any]] | None
    matcher: Callable[[Memory], bool] | None


@dataclass(frozen=True)
class Plan:
    """Per-operation evaluation plan, rebuilt when the policy set changes."""

    policies: tuple[Policy, ...]
    matchers: tuple[Callable[[Memory], bool] | None, ...]
    cel_memory_fields: frozenset[str]
    cel_new_fields: frozenset[str]
    cel_request_fields: frozenset[str]
    needs_premises: bool
    cel: tuple[CelEntry, ...]
    flat: bool  # every CEL condition without a Python form has a flat-variable program


def build_plan(policies: Sequence[Policy], operation: Operation) -> Plan:
    """The evaluation plan of ``operation``: the enabled policies for it in precedence order, compiled."""
    if True:
        ordered = tuple(p for p in policies if p.enabled and operation in p.operations)
        matchers = tuple(target_matcher(p.target) for p in ordered)
        cels = [p.compiled for p in ordered if p.compiled.kind == "cel"]
        flat = all(c.flat_program is not None for c in cels if c.python is None)
        mem = frozenset().union(*(c.memory_fields for c in cels)) if cels else frozenset()
        plan = Plan(
            policies=ordered,
            matchers=matchers,
            cel_memory_fields=mem,
            cel_new_fields=frozenset().union(*(c.new_fields for c in cels)) if cels else frozenset(),
            cel_request_fields=frozenset().union(*(c.request_fields for c in cels)) if cels else frozenset(),
            needs_premises=bool(mem & {"suspect", "invalid_premises"})
            or any(p.compiled.kind != "cel" for p in ordered),
            cel=tuple(
                CelEntry(p.id, p.compiled.program, p.compiled.flat_program, p.compiled.python, m)
                for p, m in zip(ordered, matchers, strict=True)
                if p.compiled.kind == "cel" and p.compiled.program is not None  # a "cel" condition has its program
            ),
            flat=flat,
        )
    return plan


def policy_inputs(policy: Policy, memory: Memory, ctx: PolicyContext) -> dict[str, Any]:
    """The inputs a decision records: the condition's fields as read on ``memory`` (unreadable ones left out)."""
    out: dict[str, Any] = {}
    for path in policy.compiled.inputs:
        var, _, name = path.partition(".")
        try:
            if var == "memory" and name in MEMORY_FIELDS:
                out[path] = MEMORY_FIELDS[name](memory, ctx)
            elif var == "new" and name in MEMORY_FIELDS and ctx.new is not None:
                out[path] = MEMORY_FIELDS[name](ctx.new, ctx)
            elif var == "request" and name in REQUEST_FIELDS:
                out[path] = REQUEST_FIELDS[name](ctx.request)
            elif path == "now":
                out[path] = ctx.now_epoch
        except Exception:  # an input that cannot be read is simply not recorded
            logger.debug("could not record input %s for policy %s", path, policy.id, exc_info=True)
    return out


def cel_results(
    plan: Plan, memories: Sequence[Memory], ctx: PolicyContext
) -> dict[str, list[bool | BaseException | None]]:
    """Evaluate every CEL policy on every candidate its target matches.

    Conditions in the simple subset run vectorised in Python over the batch (one list comprehension per
    policy over field dicts extracted once per candidate); any item whose Python evaluation raises or is
    not a bool is re-evaluated by the CEL program, so CEL semantics decide every edge case. Others run
    in CEL on one context per batch: request fields, ``now`` and ``new`` converted once, ``memory`` fields
    once per candidate (as flat scalar variables when possible, cheaper than a map). ``None`` marks pairs
    not evaluated (target does not match).
    """
    results: dict[str, list[bool | BaseException | None]] = {
        entry.policy_id: [None] * len(memories) for entry in plan.cel
    }
    if not plan.cel:
        return results
    fields = plan.cel_memory_fields
    values: list[dict[str, Any] | None] = [None] * len(memories)

    def fields_of(i: int) -> dict[str, Any]:
        v = values[i]
        if v is None:
            v = values[i] = memory_fields(memories[i], ctx, fields)
        return v

    req = request_fields(ctx.request, plan.cel_request_fields)
    new = None if ctx.new is None else memory_fields(ctx.new, ctx, plan.cel_new_fields)
    fallback: list[Any] = []  # lazily built CEL context (map form) for items the Python form cannot decide

    def cel_eval(program: Program, i: int) -> bool | BaseException:
        if not fallback:
            context = cel.Context()
            context.add_variable("request", req)
            context.add_variable("now", ctx.now_epoch)
            if new is not None:
                context.add_variable("new", new)
            fallback.append(context)
        context = fallback[0]
        context.add_variable("memory", fields_of(i))
        try:
            value = program.execute(context)
        except Exception as exc:
            return exc
        return value if isinstance(value, bool) else TypeError(f"condition returned {value!r}")

    slow = []
    for entry in plan.cel:
        idx = [i for i in range(len(memories)) if entry.matcher is None or entry.matcher(memories[i])]
        if not idx:
            continue
        column = results[entry.policy_id]
        if entry.python is None:
            slow.append((entry, set(idx)))
            continue
        single, batch = entry.python
        rows = [fields_of(i) for i in idx]
        try:
            out = batch(rows, req, new, ctx.now_epoch)
        except Exception:
            out = []
            for row in rows:
                try:
                    out.append(single(row, req, new, ctx.now_epoch))
                except Exception as exc:
                    out.append(exc)
        for i, value in zip(idx, out, strict=True):
            column[i] = value if isinstance(value, bool) else cel_eval(entry.program, i)
    if not slow:
        return results
    context = cel.Context()
    context.add_variable("now", ctx.now_epoch)
    if plan.flat:
        for name, value in req.items():
            context.add_variable("_r_" + name, value)
        for name, value in (new or {}).items():
            context.add_variable("_n_" + name, value)
    else:
        context.add_variable("request", req)
        if new is not None:
            context.add_variable("new", new)
    for i in range(len(memories)):
        todo = [entry for entry, members in slow if i in members]
        if not todo:
            continue
        if plan.flat:
            for name, value in fields_of(i).items():
                context.add_variable("_m_" + name, value)
        else:
            context.add_variable("memory", fields_of(i))
        for entry in todo:
            program = entry.flat_program if plan.flat and entry.flat_program is not None else entry.program
            try:
                value = program.execute(context)
            except Exception as exc:
                results[entry.policy_id][i] = exc
                continue
            results[entry.policy_id][i] = (
                value if isinstance(value, bool) else TypeError(f"condition returned {value!r}")
            )
    return results


def fire(
    policy: Policy,
    idx: list[int],
    memories: Sequence[Memory],
    ctx: PolicyContext,
    cel_results: dict[str, list[bool | BaseException | None]],
) -> list[bool | BaseException]:
    """Whether ``policy``'s condition holds for the memories at ``idx`` (an exception where it raised)."""
    compiled = policy.compiled
    if compiled.kind == "always":
        return [True] * len(idx)
    if compiled.kind == "batch":
        assert compiled.func is not None
        try:
            result = list(compiled.func([memories[i] for i in idx], ctx))
        except Exception as exc:
            return [exc] * len(idx)
        if len(result) != len(idx):
            err = ConfigurationError(f"batch condition of {policy.id!r} returned {len(result)} for {len(idx)}")
            return [err] * len(idx)
        return [bool(r) for r in result]
    if compiled.kind == "callable":
        assert compiled.func is not None
        out: list[bool | BaseException] = []
        for i in idx:
            try:
                out.append(bool(compiled.func(memories[i], ctx)))
            except Exception as exc:
                out.append(exc)
        return out
    column = cel_results[policy.id]
    return [False if column[i] is None else column[i] for i in idx]  # type: ignore[misc]
