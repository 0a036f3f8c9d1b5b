"""MemLineage: agent memory with lineage (W3C PROV), policies and a multi-factor value model.

The public API is what ``__all__`` lists; everything else is internal.
"""

from memlineage._version import __version__
from memlineage.consolidation import ConsolidationResult, RuleBasedConsolidator
from memlineage.errors import (
    ConfigurationError,
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
from memlineage.ledger import Event, Ledger
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

__all__ = [
    "Activity",
    "CascadeReport",
    "ChromaIndex",
    "ConfigurationError",
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
    "Ledger",
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
    "Scope",
    "SchemaVersionError",
    "ScopeViolationError",
    "Source",
    "SourceKind",
    "Status",
    "StorageError",
    "StoreLockedError",
    "SweepReport",
    "Trace",
    "ValueAssessment",
    "ValueModel",
    "ValueProfile",
    "ValueWeights",
    "VectorIndex",
    "__version__",
    "builtin_policies",
    "load_policies",
]
