"""Lineage-guided policy engine: policies as data, CEL conditions, deterministic combination, decisions.

Policies decide, from a memory's lineage (source, confidence, trust, age, premises, who asserted it), what
may be
read, written, updated or deleted. :class:`PolicyEngine` evaluates them in batch over recall candidates and
for
each write; :class:`memlineage.MemoryManager` enforces them at every operation. Conditions use CEL through
``common-expression-language`` (see :mod:`memlineage.policy._condition` for why not ``cel-python``).

Example:
    >>> from memlineage.models import Lineage, Memory, Scope
    >>> engine = PolicyEngine(builtin_policies())
    >>> guess = Memory(
    ...     content="the user might like jazz",
    ...     scope=Scope(user_id="u1"),
    ...     lineage=Lineage(source_kind="reasoning", confidence=0.4),
    ... )
    >>> outcome = engine.filter_read([guess], PolicyRequest(scope=Scope(user_id="u1")))
    >>> outcome.memories, outcome.withheld[0][1].policy_id
    ([], 'builtin.source_trust_floor')
"""

from memlineage.policy._builtin import (
    DEFAULT_TOOL_TTL,
    builtin_policies,
    decision_trust_floor,
    dependency_consistency,
    freshness,
    source_trust_floor,
    tool_result_ttl,
    ttl_expiry,
    user_write_protection,
)
from memlineage.policy._condition import PolicyContext
from memlineage.policy._engine import (
    SCOPE_POLICY_ID,
    PolicyConflict,
    PolicyEngine,
    ReadOutcome,
    RefreshHook,
    precedence_key,
)
from memlineage.policy._load import load_policies, load_policy_file
from memlineage.policy._model import (
    AdminGrant,
    Decision,
    Effect,
    Operation,
    Policy,
    PolicyLayer,
    PolicyRequest,
    PolicyTarget,
)

__all__ = [
    "DEFAULT_TOOL_TTL",
    "SCOPE_POLICY_ID",
    "AdminGrant",
    "Decision",
    "Effect",
    "Operation",
    "Policy",
    "PolicyConflict",
    "PolicyContext",
    "PolicyEngine",
    "PolicyLayer",
    "PolicyRequest",
    "PolicyTarget",
    "ReadOutcome",
    "RefreshHook",
    "builtin_policies",
    "decision_trust_floor",
    "dependency_consistency",
    "freshness",
    "load_policies",
    "load_policy_file",
    "precedence_key",
    "source_trust_floor",
    "tool_result_ttl",
    "ttl_expiry",
    "user_write_protection",
]
