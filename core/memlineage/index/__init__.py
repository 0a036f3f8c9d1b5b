"""Vector index port, backends (Chroma, in-memory) and embedders."""

from memlineage.index._base import IndexFilter, IndexHit, VectorIndex, index_metadata
from memlineage.index._chroma import ChromaIndex
from memlineage.index._embedding import Embedder, OnnxMiniLMEmbedder, default_model_dir, ensure_embedder
from memlineage.index._memory import InMemoryIndex
from memlineage.index._scoped import ScopedVectorIndex

__all__ = [
    "ChromaIndex",
    "Embedder",
    "InMemoryIndex",
    "IndexFilter",
    "IndexHit",
    "OnnxMiniLMEmbedder",
    "ScopedVectorIndex",
    "VectorIndex",
    "default_model_dir",
    "ensure_embedder",
    "index_metadata",
]
