"""MemLineage: agent memory with lineage (W3C PROV), policies and a multi-factor value model.

The public API is what ``__all__`` lists; everything else is internal. Each name is loaded on first access
(PEP 562 ``__getattr__``), so ``import memlineage`` costs a few milliseconds and loads neither SQLAlchemy, NumPy,
pydantic nor the CEL engine; ``from memlineage import MemoryManager`` loads what the manager needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from memlineage._version import __version__

__all__ = [
    "Activity",
    "CascadeReport",
    "ChatMessage",
    "ChromaIndex",
    "ConfigurationError",
    "ConflictError",
    "ConsistencyReport",
    "ConsolidationResult",
    "ContextOverflowError",
    "Decision",
    "Effect",
    "Embedder",
    "ErasureReceipt",
    "Event",
    "Exclusion",
    "Explanation",
    "FeatureExtractor",
    "InMemoryIndex",
    "InvalidInputError",
    "InvalidNamespaceError",
    "LLMExtractor",
    "Lineage",
    "LineageCycleError",
    "MemLineageError",
    "MemLineageSettings",
    "Memory",
    "MemoryFeatures",
    "MemoryKind",
    "MemoryManager",
    "MemoryNotFoundError",
    "MissingDependencyError",
    "OnnxMiniLMEmbedder",
    "Operation",
    "Policy",
    "PolicyEngine",
    "PolicyLayer",
    "PolicyLoadError",
    "PolicyRequest",
    "PolicyTarget",
    "PolicyViolationError",
    "RecallHit",
    "RecallResult",
    "Relation",
    "RuleBasedConsolidator",
    "RuleBasedExtractor",
    "SchemaVersionError",
    "Scope",
    "ScopeViolationError",
    "Source",
    "SourceKind",
    "Status",
    "StorageError",
    "StoreLockedError",
    "SweepReport",
    "ToolCall",
    "Trace",
    "ValueAssessment",
    "ValueModel",
    "ValueProfile",
    "ValueWeights",
    "VectorIndex",
    "WorkingMemory",
    "WriteGateSink",
    "__version__",
    "builtin_policies",
    "load_policies",
]

#: Module of each public name (imported on first access; ``tests/unit/test_public_api.py`` imports every one).
_SOURCES: dict[str, str] = {
    "Activity": "memlineage.models",
    "CascadeReport": "memlineage.lineage",
    "ChatMessage": "memlineage.window",
    "ChromaIndex": "memlineage.index",
    "ConfigurationError": "memlineage.errors",
    "ConflictError": "memlineage.errors",
    "ConsistencyReport": "memlineage.manager",
    "ConsolidationResult": "memlineage.consolidation",
    "ContextOverflowError": "memlineage.errors",
    "Decision": "memlineage.policy",
    "Effect": "memlineage.policy",
    "Embedder": "memlineage.index",
    "ErasureReceipt": "memlineage.lineage",
    "Event": "memlineage.ledger",
    "Exclusion": "memlineage.retrieval",
    "Explanation": "memlineage.lineage",
    "FeatureExtractor": "memlineage.extractors",
    "InMemoryIndex": "memlineage.index",
    "InvalidInputError": "memlineage.errors",
    "InvalidNamespaceError": "memlineage.errors",
    "LLMExtractor": "memlineage.extractors",
    "Lineage": "memlineage.models",
    "LineageCycleError": "memlineage.errors",
    "MemLineageError": "memlineage.errors",
    "MemLineageSettings": "memlineage.settings",
    "Memory": "memlineage.models",
    "MemoryFeatures": "memlineage.extractors",
    "MemoryKind": "memlineage.models",
    "MemoryManager": "memlineage.manager",
    "MemoryNotFoundError": "memlineage.errors",
    "MissingDependencyError": "memlineage.errors",
    "OnnxMiniLMEmbedder": "memlineage.index",
    "Operation": "memlineage.policy",
    "Policy": "memlineage.policy",
    "PolicyEngine": "memlineage.policy",
    "PolicyLayer": "memlineage.policy",
    "PolicyLoadError": "memlineage.errors",
    "PolicyRequest": "memlineage.policy",
    "PolicyTarget": "memlineage.policy",
    "PolicyViolationError": "memlineage.errors",
    "RecallHit": "memlineage.retrieval",
    "RecallResult": "memlineage.retrieval",
    "Relation": "memlineage.models",
    "RuleBasedConsolidator": "memlineage.consolidation",
    "RuleBasedExtractor": "memlineage.extractors",
    "SchemaVersionError": "memlineage.errors",
    "Scope": "memlineage.models",
    "ScopeViolationError": "memlineage.errors",
    "Source": "memlineage.models",
    "SourceKind": "memlineage.models",
    "Status": "memlineage.models",
    "StorageError": "memlineage.errors",
    "StoreLockedError": "memlineage.errors",
    "SweepReport": "memlineage.value",
    "ToolCall": "memlineage.window",
    "Trace": "memlineage.retrieval",
    "ValueAssessment": "memlineage.models",
    "ValueModel": "memlineage.value",
    "ValueProfile": "memlineage.value",
    "ValueWeights": "memlineage.value",
    "VectorIndex": "memlineage.index",
    "WorkingMemory": "memlineage.window",
    "WriteGateSink": "memlineage.window",
    "builtin_policies": "memlineage.policy",
    "load_policies": "memlineage.policy",
}


def __getattr__(name: str) -> object:
    """Load a public name from its module on first access (deferred imports keep ``import memlineage`` cheap)."""
    module = _SOURCES.get(name)
    if module is None:
        msg = f"module 'memlineage' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    from memlineage.consolidation import ConsolidationResult, RuleBasedConsolidator
    from memlineage.errors import (
        ConfigurationError,
        ConflictError,
        ContextOverflowError,
        InvalidInputError,
        InvalidNamespaceError,
        LineageCycleError,
        MemLineageError,
        MemoryNotFoundError,
        MissingDependencyError,
        PolicyLoadError,
        PolicyViolationError,
        SchemaVersionError,
        ScopeViolationError,
        StorageError,
        StoreLockedError,
    )
    from memlineage.extractors import FeatureExtractor, LLMExtractor, MemoryFeatures, RuleBasedExtractor
    from memlineage.index import ChromaIndex, Embedder, InMemoryIndex, OnnxMiniLMEmbedder, VectorIndex
    from memlineage.ledger import Event
    from memlineage.lineage import CascadeReport, ErasureReceipt, Explanation
    from memlineage.manager import ConsistencyReport, MemoryManager
    from memlineage.models import (
        Activity,
        Lineage,
        Memory,
        MemoryKind,
        Relation,
        Scope,
        Source,
        SourceKind,
        Status,
        ValueAssessment,
    )
    from memlineage.policy import (
        Decision,
        Effect,
        Operation,
        Policy,
        PolicyEngine,
        PolicyLayer,
        PolicyRequest,
        PolicyTarget,
        builtin_policies,
        load_policies,
    )
    from memlineage.retrieval import Exclusion, RecallHit, RecallResult, Trace
    from memlineage.settings import MemLineageSettings
    from memlineage.value import SweepReport, ValueModel, ValueProfile, ValueWeights
    from memlineage.window import ChatMessage, ToolCall, WorkingMemory, WriteGateSink
