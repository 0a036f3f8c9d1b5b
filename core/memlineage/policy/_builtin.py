"""Built-in policies from the seed, as factories returning plain :class:`Policy` data.

Scope isolation is not here: it is a guard inside :class:`PolicyEngine` that runs before every policy and
cannot
be disabled. Trust itself is computed by the core at write time (never above the lowest trust among a memory's
premises); :func:`decision_trust_floor` is the policy that keeps low-trust memories out of decision-grade
reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from memlineage.errors import ConfigurationError
from memlineage.models import SourceKind
from memlineage.policy._model import Effect, Operation, Policy, PolicyTarget

__all__ = [
    "DEFAULT_TOOL_TTL",
    "builtin_policies",
    "decision_trust_floor",
    "dependency_consistency",
    "freshness",
    "source_trust_floor",
    "tool_result_ttl",
    "ttl_expiry",
    "user_write_protection",
]

#: Default lifetime of a tool result that nobody promoted (24 hours).
DEFAULT_TOOL_TTL = timedelta(hours=24)


def _seconds(value: timedelta | float | int, what: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds <= 0:
        msg = f"{what} must be a positive duration (timedelta or seconds), got {value!r}"
        raise ConfigurationError(msg)
    return seconds


def _num(value: float) -> str:
    """A float literal CEL accepts (``0.7``, ``3600.0``)."""
    return repr(float(value))


def source_trust_floor(
    min_confidence: float = 0.7,
    *,
    source_kinds: Sequence[str] = ("reasoning",),
    purpose: str | None = None,
    priority: int = 50,
) -> Policy:
    """Do not use memories from these sources below a confidence floor (seed: reasoning below 0.7).

    Args:
        min_confidence: Floor in [0, 1]; memories strictly below it are filtered from reads.
        source_kinds: Source kinds the floor applies to.
        purpose: Apply only to reads with this purpose (e.g. ``"decision"``); None = every read.
        priority: Priority in the global layer.
    """
    condition = f"memory.confidence < {_num(min_confidence)}"
    if purpose is not None:
        condition += f' && request.purpose == "{purpose}"'
    return Policy(
        id="builtin.source_trust_floor",
        description=f"{'/'.join(source_kinds)} memories with confidence below {min_confidence:g} are unused",
        operations=(Operation.READ,),
        target=PolicyTarget(source_kinds=tuple(source_kinds)),
        condition=condition,
        effect=Effect.FILTER,
        priority=priority,
    )


def freshness(
    tag: str,
    max_age: timedelta | float,
    *,
    refresh: str | None = None,
    on_stale: str = "refresh",
    cost: float = 0.0,
    priority: int = 60,
) -> Policy:
    """Memories tagged ``tag`` older than ``max_age`` expire and trigger a refresh (seed: prices after 1 h).

    Args:
        tag: The tag, e.g. ``"flight_price"``.
        max_age: Maximum age (``timedelta`` or seconds), measured from ``created_at``.
        refresh: Refresh hook name; default: the tag.
        on_stale: ``"refresh"`` (require_refresh: call the hook, serve its result) or ``"expire"``
        (mark_expired).
        cost: Cost of one refresh in caller budget units (a caller budget below it accepts the stale memory).
        priority: Priority in the global layer.

    Raises:
        ConfigurationError: ``max_age`` is not positive or ``on_stale`` is unknown.
    """
    seconds = _seconds(max_age, "max_age")
    if on_stale not in ("refresh", "expire"):
        msg = f"on_stale must be 'refresh' or 'expire', got {on_stale!r}"
        raise ConfigurationError(msg)
    refreshing = on_stale == "refresh"
    return Policy(
        id=f"builtin.freshness.{tag}",
        description=f"{tag!r} memories older than {seconds:g} s are stale",
        operations=(Operation.READ,),
        target=PolicyTarget(tags=(tag,)),
        condition=f"memory.age > {_num(seconds)}",
        effect=Effect.REQUIRE_REFRESH if refreshing else Effect.MARK_EXPIRED,
        refresh=(refresh or tag) if refreshing else None,
        cost=cost,
        priority=priority,
    )


def ttl_expiry(*, priority: int = 90) -> Policy:
    """Memories past their TTL deadline (``expires_at``) are withheld and marked expired."""
    return Policy(
        id="builtin.ttl_expiry",
        description="memory is past its TTL deadline",
        operations=(Operation.READ,),
        condition="memory.expired",
        inputs=("memory.expires_at",),
        effect=Effect.MARK_EXPIRED,
        priority=priority,
    )


def dependency_consistency(*, purpose: str = "decision", priority: int = 70) -> list[Policy]:
    """Suspect memories (a premise retracted, superseded or expired) are not decision-grade.

    Returns two policies: one filters suspect memories from reads whose purpose is ``purpose``; the other
    flags
    them (``downgrade``) on every other read, so they are served with a flag.
    """
    return [
        Policy(
            id="builtin.dependency_consistency",
            description=f"memory is suspect (a premise is no longer valid) and the read is for a {purpose}",
            operations=(Operation.READ,),
            condition=f'memory.suspect && request.purpose == "{purpose}"',
            inputs=("memory.status", "memory.invalid_premises", "request.purpose"),
            effect=Effect.FILTER,
            priority=priority,
        ),
        Policy(
            id="builtin.dependency_flag",
            description="memory is suspect (a premise is no longer valid); revalidate before relying on it",
            operations=(Operation.READ,),
            condition="memory.suspect",
            inputs=("memory.status", "memory.invalid_premises"),
            effect=Effect.DOWNGRADE,
            priority=priority,
        ),
    ]


#: Every source kind but ``user``: none of them may overwrite or delete what the user asserted.
NON_USER_SOURCES = tuple(k.value for k in SourceKind if k is not SourceKind.USER)


def user_write_protection(
    *, writers: Sequence[str] = NON_USER_SOURCES, final: bool = True, priority: int = 100
) -> Policy:
    """What the user asserted can only be revised, superseded or deleted by the user (seed: write protection).

    Updates and deletes of ``user``-sourced memories requested by ``writers`` are denied with
    ``PolicyViolationError``. Deletes carry their requester through ``source=`` of ``retract`` / ``forget`` /
    ``erase``; a call without a source is the application's own and is not refused.

    Args:
        writers: Source kinds that may not overwrite or delete user-asserted memories (default: every kind
            but ``user`` — tool, reasoning, system, agent, consolidation, import).
        final: Higher layers (domain, session) cannot override it.
        priority: Priority in the global layer.
    """
    kinds = ", ".join(f'"{w}"' for w in writers)
    return Policy(
        id="builtin.user_write_protection",
        description="user-asserted memories can only be changed by a new user statement",
        operations=(Operation.UPDATE, Operation.DELETE),
        target=PolicyTarget(source_kinds=("user",)),
        condition=f"request.source_kind in [{kinds}]",
        inputs=("memory.source_kind", "request.source"),
        effect=Effect.DENY,
        final=final,
        priority=priority,
    )


def tool_result_ttl(
    ttl: timedelta | float = DEFAULT_TOOL_TTL, *, demote_to: str = "episodic", priority: int = 10
) -> Policy:
    """Tool outputs are short-lived and never long-term memories unless promoted.

    On write, a tool memory gets ``expires_at = now + ttl`` and, if written as semantic or procedural, is
    stored as ``demote_to``. A caller promotes with ``request.promote``; a policy promotes by allowing the
    write
    with a higher precedence (its ``allow`` stops the walk before this one).

    Args:
        ttl: Lifetime (``timedelta`` or seconds).
        demote_to: Kind used instead of semantic / procedural.
        priority: Priority in the global layer.
    """
    seconds = _seconds(ttl, "ttl")
    return Policy(
        id="builtin.tool_result_ttl",
        description=f"tool results live {seconds:g} s and are not long-term memories unless promoted",
        operations=(Operation.WRITE,),
        target=PolicyTarget(source_kinds=("tool",)),
        condition="!request.promote",
        inputs=("memory.source", "memory.kind", "request.promote"),
        effect=Effect.ALLOW,
        obligations={"ttl_seconds": seconds, "demote_kind": demote_to},
        priority=priority,
    )


def decision_trust_floor(min_trust: float = 0.5, *, purpose: str = "decision", priority: int = 50) -> Policy:
    """Keep low-trust memories (e.g. built on an untrusted tool output) out of decision-grade reads.

    Trust never exceeds the lowest trust among a memory's premises (the core enforces that at write time), so
    a
    summary of a poisoned tool output stays below the floor.
    """
    return Policy(
        id="builtin.decision_trust_floor",
        description=f"trust below {min_trust:g} is not decision-grade",
        operations=(Operation.READ,),
        condition=f'request.purpose == "{purpose}" && memory.trust < {_num(min_trust)}',
        effect=Effect.FILTER,
        priority=priority,
    )


def builtin_policies(
    *,
    freshness_by_tag: Mapping[str, timedelta | float] | None = None,
    min_confidence: float = 0.7,
    min_decision_trust: float = 0.5,
    tool_ttl: timedelta | float = DEFAULT_TOOL_TTL,
) -> list[Policy]:
    """The recommended set of built-in policies.

    Trust floor, TTL expiry, freshness per tag, dependency consistency, write protection, tool-result TTL and
    the decision trust floor.

    Args:
        freshness_by_tag: Tag → maximum age, each becoming a :func:`freshness` policy (refresh hook = tag).
        min_confidence: Floor for reasoning memories (:func:`source_trust_floor`).
        min_decision_trust: Floor for decision-grade reads (:func:`decision_trust_floor`).
        tool_ttl: Lifetime of unpromoted tool results (:func:`tool_result_ttl`).

    Example:
        >>> [p.id for p in builtin_policies()][:2]
        ['builtin.source_trust_floor', 'builtin.ttl_expiry']
    """
    policies = [
        source_trust_floor(min_confidence),
        ttl_expiry(),
        *(freshness(tag, age) for tag, age in sorted((freshness_by_tag or {}).items())),
        *dependency_consistency(),
        user_write_protection(),
        tool_result_ttl(tool_ttl),
        decision_trust_floor(min_decision_trust),
    ]
    return policies
