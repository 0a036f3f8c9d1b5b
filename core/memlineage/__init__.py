"""MemLineage: agent memory with lineage (W3C PROV), policies and a multi-factor value model.

The public API is what ``__all__`` lists; everything else is internal.
"""

from memlineage._version import __version__
from memlineage.errors import (
    ConfigurationError,
    InvalidInputError,
    InvalidNamespaceError,
    LineageCycleError,
    MemLineageError,
    MemoryNotFoundError,
    MissingDependencyError,
    PolicyLoadError,
    PolicyViolationError,
    ScopeViolationError,
    StorageError,
    StoreLockedError,
)
from memlineage.index import ChromaIndex, Embedder, InMemoryIndex, OnnxMiniLMEmbedder, VectorIndex
from memlineage.ledger import Event, Ledger
from memlineage.lineage import CascadeReport, ErasureReceipt, Explanation
from memlineage.manager import MemoryManager
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
from memlineage.retrieval import Exclusion, RecallHit, RecallResult, Trace
from memlineage.settings import MemLineageSettings

__all__ = [
    "Activity",
    "CascadeReport",
    "ChromaIndex",
    "ConfigurationError",
    "Embedder",
    "ErasureReceipt",
    "Event",
    "Exclusion",
    "Explanation",
    "InMemoryIndex",
    "InvalidInputError",
    "InvalidNamespaceError",
    "Ledger",
    "Lineage",
    "LineageCycleError",
    "MemLineageError",
    "MemLineageSettings",
    "Memory",
    "MemoryKind",
    "MemoryManager",
    "MemoryNotFoundError",
    "MissingDependencyError",
    "OnnxMiniLMEmbedder",
    "PolicyLoadError",
    "PolicyViolationError",
    "RecallHit",
    "RecallResult",
    "Relation",
    "Scope",
    "ScopeViolationError",
    "Source",
    "SourceKind",
    "Status",
    "StorageError",
    "StoreLockedError",
    "Trace",
    "ValueAssessment",
    "VectorIndex",
    "__version__",
]
