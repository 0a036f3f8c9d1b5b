"""Policy data model: :class:`Policy`, :class:`PolicyTarget` and :class:`Decision` (requests: ``_request``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from memlineage.errors import PolicyLoadError
from memlineage.models import Memory, MemoryKind, SourceKind, Status, new_id, utcnow
from memlineage.policy._condition import CompiledCondition, check_cel, compile_condition
from memlineage.policy._request import AdminGrant, Operation, PolicyRequest, _StrEnum

__all__ = [
    "AdminGrant",
    "Decision",
    "Effect",
    "Operation",
    "Policy",
    "PolicyLayer",
    "PolicyRequest",
    "PolicyTarget",
    "format_validation_error",
]


class Effect(_StrEnum):
    """What a policy does when its target matches and its condition holds.

    - ``allow``: permit; stops the evaluation (an explicit exception to lower-precedence restrictions).
    - ``deny``: refuse; on a read the memory is withheld, on a write/update/delete ``PolicyViolationError``
      is raised.
    - ``filter``: drop the memory from a read (read only).
    - ``mark_expired``: withhold the memory and mark it ``expired`` in the ledger (read only).
    - ``require_refresh``: call the registered refresh hook and serve its result instead; a missing or
      failing hook
      withholds the memory; a caller budget smaller than the policy's ``cost`` serves the stale memory with a
      warning (read only).
    - ``downgrade``: keep the memory but flag it (and mark it ``suspect`` if it is not already); evaluation
      goes on.
    """

    ALLOW = "allow"
    DENY = "deny"
    FILTER = "filter"
    MARK_EXPIRED = "mark_expired"
    REQUIRE_REFRESH = "require_refresh"
    DOWNGRADE = "downgrade"


class PolicyLayer(_StrEnum):
    """Where a policy was defined: session overrides domain overrides global (unless a policy is final)."""

    GLOBAL = "global"
    DOMAIN = "domain"
    SESSION = "session"


#: Effects that stop evaluation and keep the memory from the caller.
WITHHOLDING_EFFECTS = frozenset({Effect.DENY, Effect.FILTER, Effect.MARK_EXPIRED, Effect.REQUIRE_REFRESH})
#: Effects allowed on write / update / delete policies.
MUTATION_EFFECTS = frozenset({Effect.ALLOW, Effect.DENY, Effect.DOWNGRADE})
#: Tie-break inside one layer and priority: the more restrictive effect is evaluated first ("deny overrides").
EFFECT_RANK: dict[Effect, int] = {
    Effect.DENY: 0,
    Effect.FILTER: 1,
    Effect.MARK_EXPIRED: 2,
    Effect.REQUIRE_REFRESH: 3,
    Effect.DOWNGRADE: 4,
    Effect.ALLOW: 5,
}
LAYER_RANK: dict[PolicyLayer, int] = {PolicyLayer.GLOBAL: 0, PolicyLayer.DOMAIN: 1, PolicyLayer.SESSION: 2}

#: Obligation keys a write policy may attach (applied by the manager when the policy fires).
OBLIGATION_KEYS = frozenset({"ttl_seconds", "demote_kind"})
#: Longest TTL an obligation may set (100 years); NaN and infinity are refused when the policy loads.
MAX_TTL_SECONDS = 100 * 365.25 * 86400

#: Where policies being constructed come from ((source, entry index)); set by the file loader.
LOAD_SOURCE: ContextVar[tuple[str, int | None]] = ContextVar("memlineage_policy_source", default=("<python>", None))

_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:\-]*$")
RESERVED_PREFIX = "builtin.scope"


def _strs(value: object) -> object:
    if isinstance(value, str):
        return (value,)
    return value


class PolicyTarget(BaseModel):
    """Which memories a policy applies to. Every field is optional; an empty field matches everything.

    Inside one field any listed value matches (``tags: [price, fx]`` = tagged price OR fx); across fields all
    must
    match. Scope fields match the memory's scope.

    Example:
        >>> PolicyTarget(tags=("flight_price",), source_kinds=("tool",)).is_empty
        False
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kinds: tuple[MemoryKind, ...] = Field(default=(), description="Memory kinds (working, episodic, ...).")
    tags: tuple[str, ...] = Field(default=(), description="Tags; the memory needs at least one of them.")
    source_kinds: tuple[SourceKind, ...] = Field(default=(), description="Source kinds (user, tool, reasoning...).")
    source_names: tuple[str, ...] = Field(default=(), description="Source names, e.g. tool names ('flight_api').")
    statuses: tuple[Status, ...] = Field(default=(), description="Lifecycle statuses (active, suspect...).")
    user_ids: tuple[str, ...] = Field(default=(), description="Scope user ids.")
    agent_ids: tuple[str, ...] = Field(default=(), description="Scope agent ids.")
    session_ids: tuple[str, ...] = Field(default=(), description="Scope session ids.")

    _normalise = field_validator(
        "kinds",
        "tags",
        "source_kinds",
        "source_names",
        "statuses",
        "user_ids",
        "agent_ids",
        "session_ids",
        mode="before",
    )(_strs)

    @property
    def is_empty(self) -> bool:
        """True when the target matches every memory."""
        return not any(getattr(self, name) for name in type(self).model_fields)


class Policy(BaseModel):
    """One policy: what it governs (operations, target), when it fires (condition) and what it does (effect).

    Policies are data: build them in Python, or load YAML/JSON files with
    :func:`memlineage.policy.load_policies`. Invalid definitions raise
    :class:`memlineage.errors.PolicyLoadError`
    naming the source, the policy and the field.

    Conditions are CEL expressions (compiled once, here) over ``memory``, ``request``, ``new`` (the incoming
    memory of a write/update) and ``now`` (epoch seconds), or Python callables ``(memory, ctx) -> bool``
    (``batch=True``: ``(memories, ctx) -> list[bool]``), ``ctx`` being a
    :class:`memlineage.policy.PolicyContext`. Timestamps are epoch seconds; ``memory.age`` is in seconds.

    Example:
        >>> p = Policy(
        ...     id="reasoning_floor",
        ...     operations=("read",),
        ...     target=PolicyTarget(source_kinds=("reasoning",)),
        ...     condition="memory.confidence < 0.7",
        ...     effect="filter",
        ... )
        >>> p.effect
        <Effect.FILTER: 'filter'>
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    id: str = Field(description="Unique id: letters, digits, '_', '.', ':' or '-'.")
    description: str = Field(default="", description="What the policy is for; used as the decision reason.")
    operations: tuple[Operation, ...] = Field(
        default=(Operation.READ,), description="Operations it governs: read, write, update, delete."
    )
    target: PolicyTarget = Field(default_factory=PolicyTarget, description="Which memories it applies to.")
    condition: str | Callable[..., Any] | None = Field(
        default=None, description="CEL expression or Python callable; None = always fires on its target."
    )
    batch: bool = Field(default=False, description="The callable condition takes a list of memories.")
    inputs: tuple[str, ...] = Field(
        default=(),
        description="Fields recorded in decisions, e.g. 'memory.confidence'; inferred from a CEL condition.",
    )
    effect: Effect = Field(description="allow, deny, filter, mark_expired, require_refresh or downgrade.")
    priority: int = Field(default=0, description="Higher = evaluated first within its layer.")
    layer: PolicyLayer = Field(default=PolicyLayer.GLOBAL, description="global, domain or session.")
    final: bool = Field(default=False, description="Cannot be overridden by higher layers.")
    cost: float = Field(
        default=0.0,
        ge=0.0,
        allow_inf_nan=False,
        description="Cost of complying (e.g. a refresh call), in caller budget units, >= 0 and finite.",
    )
    refresh: str | None = Field(
        default=None, description="Name of the refresh hook (require_refresh only); default: the policy id."
    )
    obligations: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Write obligations: 'ttl_seconds' (TTL in seconds, > 0); 'demote_kind' (long-term kinds, "
            "semantic and procedural, are stored as this kind instead, e.g. episodic)."
        ),
    )
    reason: str | None = Field(default=None, description="Reason shown in decisions; default: the description.")
    enabled: bool = Field(default=True, description="Disabled policies are kept but never evaluated.")

    _compiled: CompiledCondition = PrivateAttr()

    def __init__(self, **data: object) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            source, index = LOAD_SOURCE.get()
            msg = format_validation_error(exc, source=source, policy_id=data.get("id"), index=index)
            raise PolicyLoadError(msg) from None

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _ID_RE.match(value):
            msg = f"policy id {value!r} must use letters, digits, '_', '.', ':' or '-'"
            raise ValueError(msg)
        if value.startswith(RESERVED_PREFIX):
            msg = f"policy id {value!r} is reserved: scope isolation is always on and cannot be redefined"
            raise ValueError(msg)
        return value

    @field_validator("operations", "inputs", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return _strs(value)

    @field_validator("operations")
    @classmethod
    def _check_operations(cls, value: tuple[Operation, ...]) -> tuple[Operation, ...]:
        if not value:
            msg = "operations must name at least one of read, write, update, delete"
            raise ValueError(msg)
        return tuple(dict.fromkeys(value))

    @field_validator("condition")
    @classmethod
    def _check_condition(cls, value: str | Callable[..., Any] | None) -> str | Callable[..., Any] | None:
        if value is None or callable(value):
            return value
        if not isinstance(value, str) or not value.strip():
            msg = "condition must be a non-empty CEL expression string, a Python callable or null"
            raise ValueError(msg)
        check_cel(value)
        return value

    @field_validator("obligations")
    @classmethod
    def _check_obligations(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = set(value) - OBLIGATION_KEYS
        if unknown:
            msg = f"unknown obligation(s) {sorted(unknown)}; allowed: {sorted(OBLIGATION_KEYS)}"
            raise ValueError(msg)
        out = dict(value)
        if "ttl_seconds" in out:
            ttl = out["ttl_seconds"]
            if isinstance(ttl, timedelta):
                ttl = ttl.total_seconds()
            if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= MAX_TTL_SECONDS:
                msg = (
                    f"obligations.ttl_seconds must be a positive finite number of seconds up to "
                    f"{MAX_TTL_SECONDS:g} (100 years), got {ttl!r}"
                )
                raise ValueError(msg)
            out["ttl_seconds"] = float(ttl)
        if "demote_kind" in out:
            try:
                out["demote_kind"] = MemoryKind(out["demote_kind"]).value
            except ValueError:
                allowed = ", ".join(k.value for k in MemoryKind)
                msg = f"obligations.demote_kind must be one of {allowed}, got {out['demote_kind']!r}"
                raise ValueError(msg) from None
        return out

    @model_validator(mode="after")
    def _check_consistency(self) -> Policy:
        read_only = {Effect.FILTER, Effect.MARK_EXPIRED, Effect.REQUIRE_REFRESH}
        if self.effect in read_only and set(self.operations) != {Operation.READ}:
            msg = f"effect {self.effect.value!r} applies to reads only; set operations: [read]"
            raise ValueError(msg)
        if self.refresh is not None and self.effect is not Effect.REQUIRE_REFRESH:
            msg = "'refresh' names a refresh hook and is only valid with effect require_refresh"
            raise ValueError(msg)
        if self.obligations and (
            Operation.WRITE not in self.operations or self.effect not in (Effect.ALLOW, Effect.DOWNGRADE)
        ):
            msg = "obligations apply to write policies with effect allow or downgrade"
            raise ValueError(msg)
        if self.batch and not callable(self.condition):
            msg = "batch=True needs a Python callable condition"
            raise ValueError(msg)
        return self

    def model_post_init(self, __context: object) -> None:  # noqa: D102
        self._compiled = compile_condition(self.condition, batch=self.batch, inputs=self.inputs)

    @property
    def compiled(self) -> CompiledCondition:
        """The compiled condition (CEL program or callable), built once at construction."""
        return self._compiled

    @property
    def refresh_hook_name(self) -> str:
        """Name of the refresh hook a ``require_refresh`` policy calls (``refresh`` or the policy id)."""
        return self.refresh or self.id

    @property
    def display_reason(self) -> str:
        """Reason used in decisions."""
        return self.reason or self.description or f"policy {self.id} ({self.effect.value})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what a policy file holds); a callable condition is left out.

        Raises:
            PolicyLoadError: never; documented for symmetry with loading.
        """
        data = self.model_dump(mode="json", exclude={"condition"}, exclude_defaults=True)
        if isinstance(self.condition, str):
            data["condition"] = self.condition
        data["id"] = self.id
        data["effect"] = self.effect.value
        return data


def format_validation_error(exc: ValidationError, *, source: str, policy_id: object, index: int | None = None) -> str:
    """Turn a pydantic error into one message naming the source, the policy and the field(s)."""
    where = f"policy {policy_id!r}" if policy_id else "policy"
    if index is not None:
        where += f" (entry #{index})"
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err.get("loc", ())) or "<policy>"
        text = str(err.get("msg", "invalid"))
        if text.startswith("Value error, "):
            text = text[len("Value error, ") :]
        if err.get("type") == "extra_forbidden":
            text = "unknown field"
        problems.append(f"field {field!r}: {text}")
    return f"{source}: {where}: " + "; ".join(problems)


class Decision(BaseModel):
    """One policy decision about one memory: which policy, which effect, why, and the inputs that mattered.

    Decisions are recorded in the event log and attached to recall hits.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=new_id, description="Decision id.")
    policy_id: str | None = Field(description="Deciding policy; 'builtin.scope_isolation' for the scope guard.")
    effect: Effect = Field(description="The effect applied.")
    operation: Operation = Field(description="The operation decided on.")
    memory_id: str | None = Field(default=None, description="The memory decided on.")
    reason: str = Field(description="Human-readable reason.")
    inputs: dict[str, Any] = Field(default_factory=dict, description="Field values that mattered, by path.")
    layer: PolicyLayer | None = Field(default=None, description="Layer of the deciding policy.")
    priority: int | None = Field(default=None, description="Priority of the deciding policy.")
    withheld: bool = Field(default=False, description="The memory was kept from the caller / the op refused.")
    failed: bool = Field(
        default=False,
        description="The policy's condition raised; the effect was applied to this operation only (fail closed) "
        "and never to stored state.",
    )
    warning: str | None = Field(default=None, description="E.g. a stale memory accepted within budget.")
    flags: tuple[str, ...] = Field(default=(), description="Ids of downgrade policies that flagged the memory.")
    obligations: dict[str, Any] = Field(default_factory=dict, description="Write obligations to apply.")
    cost: float = Field(default=0.0, ge=0.0, description="Cost spent on compliance, in budget units.")
    replacement_id: str | None = Field(default=None, description="Id of the refreshed memory served instead.")
    replacement: Memory | None = Field(
        default=None, exclude=True, repr=False, description="The refreshed memory itself (not serialised)."
    )
    admin_grant_id: str | None = Field(default=None, description="Cross-scope grant that enabled the access.")
    at: datetime = Field(default_factory=utcnow, description="When it was decided (UTC).")

    def to_event(self) -> dict[str, Any]:
        """JSON-ready payload for the event log."""
        return self.model_dump(mode="json", exclude_none=True)


def coerce_mapping(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a plain dict copy (``None`` → ``{}``)."""
    return dict(value or {})
