"""Embedders: the default ONNX all-MiniLM-L6-v2 and adapters for other embedding objects.

The default reads the same six files chromadb's default embedding function uses, from
``MEMLINEAGE_EMBEDDING_MODEL_DIR`` (or an explicit ``model_dir``) or chromadb's cache
``~/.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx/``. When they are missing and the network is up, chromadb's own
downloader fetches them. Unlike chromadb's function, which pads every input to 256 tokens, each batch is padded to
its longest member (texts are sorted by length first), which gives the same vectors far faster on short texts.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeAlias, cast, runtime_checkable

import numpy as np

from memlineage.errors import ConfigurationError, InvalidInputError, MissingDependencyError

__all__ = [
    "Embedder", "EmbedderLike", "LangChainEmbeddings", "LlamaIndexEmbedding", "OnnxMiniLMEmbedder", "default_model_dir",
    "ensure_embedder",
]  # fmt: skip

logger = logging.getLogger(__name__)

MODEL_FILES = (
    "model.onnx",
    "tokenizer.json",
    "vocab.txt",
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
)
ENV_MODEL_DIR = "MEMLINEAGE_EMBEDDING_MODEL_DIR"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    ``embed(texts)`` returns ``list[list[float]]``: one row per input text, each of length ``dims``. Vectors should
    be unit-normalised (cosine similarity is then a dot product); MemLineage normalises whatever it receives.
    An embedder may also set ``english_only = True`` (as the default one does): recall then weighs the vector leg
    less for a query in Chinese, Japanese or Korean script (``RetrievalConfig.cjk_vector_weight``).
    """

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts``; returns one vector per text, in input order."""
        ...


class LangChainEmbeddings(Protocol):
    """What MemLineage calls on a LangChain ``Embeddings``: ``embed_documents(texts)``, one vector per text."""

    def embed_documents(self, texts: list[str], /) -> Sequence[Iterable[float]]:
        """Embed ``texts``; one vector per text, in input order."""
        ...


class LlamaIndexEmbedding(Protocol):
    """What MemLineage calls on a LlamaIndex ``BaseEmbedding``: ``get_text_embedding_batch(texts)``."""

    def get_text_embedding_batch(self, texts: list[str], /) -> Sequence[Iterable[float]]:
        """Embed ``texts``; one vector per text, in input order."""
        ...


#: What :func:`ensure_embedder` (and ``MemoryManager(embedder=...)``) accepts besides None: an :class:`Embedder`, a
#: LangChain ``Embeddings``, a LlamaIndex embedding, or a callable ``f(list[str]) -> list[vector]`` (e.g. a chromadb
#: ``EmbeddingFunction``).
EmbedderLike: TypeAlias = (
    Embedder | LangChainEmbeddings | LlamaIndexEmbedding | Callable[[list[str]], Iterable[Iterable[float]]]
)


def default_model_dir() -> Path:
    """Where the default embedder looks for its files: ``$MEMLINEAGE_EMBEDDING_MODEL_DIR`` or chromadb's cache."""
    env = os.environ.get(ENV_MODEL_DIR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dims, unit-normalised) on onnxruntime + tokenizers, padded per batch.

    Setup:
        Nothing beyond ``pip install memlineage``; files are read from ``model_dir`` (see
        :func:`default_model_dir`). Offline runs set ``MEMLINEAGE_EMBEDDING_MODEL_DIR``.

    Instantiate:
        >>> emb = OnnxMiniLMEmbedder()  # doctest: +SKIP

    Use:
        >>> emb.embed(["hello world"])[0][:3]  # doctest: +SKIP

    Args:
        model_dir: Directory holding the six model files; default :func:`default_model_dir`.
        batch_size: Texts per ONNX run (default 32, like chromadb).
        max_tokens: Truncation length in tokens (default 256, like chromadb).
        download: When files are missing, let chromadb's downloader fetch them (needs network).

    Raises:
        ConfigurationError: model files are missing and cannot be downloaded.
    """

    name = "onnx-all-MiniLM-L6-v2"
    dims = 384
    #: Trained on English only: it reads Chinese, Japanese and Korean as loose characters. Recall weighs its leg
    #: less for a query in those scripts (``RetrievalConfig.cjk_vector_weight``).
    english_only = True

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        batch_size: int = 32,
        max_tokens: int = 256,
        download: bool = True,
    ) -> None:
        self.model_dir = Path(model_dir).expanduser() if model_dir else default_model_dir()
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.download = download
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def _missing(self) -> list[str]:
        return [f for f in MODEL_FILES if not (self.model_dir / f).is_file()]

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            if self._missing():
                self._fetch()
            try:
                import onnxruntime as ort  # deferred: heavy, loaded on the first embedding
                from tokenizers import Tokenizer
            except ImportError as exc:  # pragma: no cover - both come with chromadb
                msg = "onnxruntime and tokenizers are required for the default embedder; pip install memlineage"
                raise MissingDependencyError(msg) from exc
            tok = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
            tok.enable_truncation(max_length=self.max_tokens)
            tok.no_padding()
            opts = ort.SessionOptions()
            opts.log_severity_level = 3
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            self._session = ort.InferenceSession(
                str(self.model_dir / "model.onnx"), sess_options=opts, providers=["CPUExecutionProvider"]
            )
            self._tokenizer = tok

    def _fetch(self) -> None:
        missing = self._missing()
        chroma_dir = Path.home() / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
        if self.download and self.model_dir == chroma_dir:
            try:
                # deferred: chromadb is heavy and only needed to download the model files. Its default embedding
                # function fetches them into this very directory on its first call (public API, no private method)
                from chromadb.utils.embedding_functions import DefaultEmbeddingFunction

                DefaultEmbeddingFunction()(["warm up"])
            except Exception as exc:  # noqa: BLE001 - reported below with the remedy
                logger.warning("chromadb could not download the model: %s", exc)
            missing = self._missing()
        if missing:
            msg = (
                f"embedding model files {missing} are missing in {self.model_dir}; set {ENV_MODEL_DIR} to a "
                "directory holding all-MiniLM-L6-v2's ONNX files (model.onnx, tokenizer.json, ...), connect to the "
                "internet once so chromadb can download them, or pass embedder=... to MemoryManager.open()"
            )
            raise ConfigurationError(msg)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts``; returns ``len(texts)`` unit vectors of 384 floats, in input order."""
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Like :meth:`embed` but returns a ``float32`` array of shape ``(len(texts), 384)``."""
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        self._load()
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            hidden = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1)
            norms[norms == 0] = 1e-12
            out[idx] = pooled / norms[:, None]
        return out


class _CallableEmbedder:
    """Adapts a callable ``f(list[str]) -> list[vector]`` (e.g. a chromadb ``EmbeddingFunction``)."""

    def __init__(self, fn: Callable[[list[str]], Any], name: str) -> None:
        self._fn = fn
        self.name = name

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self._fn(list(texts))]


class _LangChainEmbedder:
    """Adapts a LangChain ``Embeddings`` (``embed_documents``)."""

    def __init__(self, obj: LangChainEmbeddings) -> None:
        self._obj = obj
        self.name = f"langchain:{type(obj).__name__}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self._obj.embed_documents(list(texts))]


class _LlamaIndexEmbedder:
    """Adapts a LlamaIndex ``BaseEmbedding`` (``get_text_embedding_batch``)."""

    def __init__(self, obj: LlamaIndexEmbedding) -> None:
        self._obj = obj
        self.name = f"llamaindex:{type(obj).__name__}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self._obj.get_text_embedding_batch(list(texts))]


def ensure_embedder(obj: EmbedderLike | None) -> Embedder:
    """Normalise an embedder: ours, a LangChain ``Embeddings``, a LlamaIndex embedding, or a plain callable.

    ``None`` gives the default :class:`OnnxMiniLMEmbedder`.

    Raises:
        InvalidInputError: ``obj`` is none of the supported kinds.
    """
    if obj is None:
        return OnnxMiniLMEmbedder()
    if hasattr(obj, "embed") and callable(obj.embed) and hasattr(obj, "name") and isinstance(obj.name, str):
        return cast(Embedder, obj)  # duck-typed: checked above
    if hasattr(obj, "embed_documents"):
        return _LangChainEmbedder(cast(LangChainEmbeddings, obj))
    if hasattr(obj, "get_text_embedding_batch"):
        return _LlamaIndexEmbedder(cast(LlamaIndexEmbedding, obj))
    if callable(obj):
        name = getattr(obj, "name", None)
        label = name() if callable(name) else (name or type(obj).__name__)
        return _CallableEmbedder(obj, f"callable:{label}")
    msg = (
        f"embedder must be an object with embed(texts), a LangChain Embeddings, a LlamaIndex embedding or a "
        f"callable, not {type(obj).__name__}"
    )
    raise InvalidInputError(msg)
