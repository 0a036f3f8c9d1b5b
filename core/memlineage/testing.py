"""Typed fakes for fast, offline tests (STYLE R14): a deterministic embedder and a ready in-memory manager."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from memlineage._store_lock import StoreLock
from memlineage.index import Embedder, InMemoryIndex, VectorIndex
from memlineage.ledger import Ledger
from memlineage.manager import MemoryManager
from memlineage.policy import Policy, PolicyEngine
from memlineage.ports import LexicalIndexPort
from memlineage.reconcile import Reconciler
from memlineage.retrieval import CandidateFilter, RetrievalConfig
from memlineage.value import ValueModel

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["FakeEmbedder", "make_manager"]

_TOKEN = re.compile(r"\w+", re.UNICODE)


class FakeEmbedder:
    """Deterministic bag-of-words hashing embedder: shared words give similar vectors.

    Each token (lower-cased, NFKC; CJK characters one token each) adds a fixed pseudo-random unit vector seeded by
    its SHA-256; the sum is L2-normalised. No model files, no network; ``dims`` floats per text.

    Example:
        >>> e = FakeEmbedder()
        >>> len(e.embed(["hello world"])[0])
        64
    """

    name = "fake-hash-embedder"

    def __init__(self, dims: int = 64) -> None:
        self.dims = dims
        self._cache: dict[str, np.ndarray] = {}
        self.calls = 0

    def _token_vector(self, token: str) -> np.ndarray:
        vec = self._cache.get(token)
        if vec is None:
            seed = int.from_bytes(hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()[:8], "little")
            vec = np.random.default_rng(seed).standard_normal(self.dims)
            vec /= np.linalg.norm(vec)
            self._cache[token] = vec
        return vec

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector of ``dims`` floats per text."""
        self.calls += 1
        out = []
        for text in texts:
            norm = unicodedata.normalize("NFKC", text).lower()
            tokens: list[str] = []
            for tok in _TOKEN.findall(norm):
                if any("\u3400" <= ch <= "\u9fff" for ch in tok):
                    tokens.extend(tok)
                else:
                    tokens.append(tok)
            acc = np.zeros(self.dims)
            for tok in tokens or ["<empty>"]:
                acc += self._token_vector(tok)
            n = np.linalg.norm(acc)
            out.append((acc / (n or 1.0)).tolist())
        return out


class _ManagerArgs(TypedDict, total=False):
    """:class:`MemoryManager`'s keyword arguments, each optional here (:func:`make_manager` fills in the fakes).

    ``embedder`` is an :class:`~memlineage.index.Embedder` such as :class:`FakeEmbedder` (``MemoryManager`` also
    wraps LangChain / LlamaIndex embeddings and callables, which a fake store has no use for).
    """

    ledger: Ledger
    index: VectorIndex
    embedder: Embedder | None
    clock: Callable[[], datetime] | None
    trust_by_source: Mapping[str, float] | None
    policy: PolicyEngine | Iterable[Policy] | None
    value_model: ValueModel | None
    lock: StoreLock | None
    path: Path | None
    repair_on_open: bool
    lexical: LexicalIndexPort | None
    retrieval: RetrievalConfig | None
    read_filter: CandidateFilter | None
    reconciler: Reconciler | None | str
    exact_max: int | None


def make_manager(**kwargs: Unpack[_ManagerArgs]) -> MemoryManager:
    """A :class:`MemoryManager` on in-memory SQLite, :class:`InMemoryIndex` and :class:`FakeEmbedder`.

    Keyword arguments override the collaborators (``ledger``, ``index``, ``embedder``, ``clock``, ``policy``...).
    """
    params: _ManagerArgs = {"ledger": Ledger("sqlite://"), "index": InMemoryIndex(), "embedder": FakeEmbedder()}
    params.update(kwargs)
    return MemoryManager(**params)
