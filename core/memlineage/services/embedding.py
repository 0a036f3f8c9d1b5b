"""Embedding: the embedder port behind one checked call, and the vector size it makes."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from memlineage._forget import on_erase
from memlineage.errors import InvalidInputError, MemLineageError, StorageError
from memlineage.ports import Embedder

__all__ = ["Embedding"]


#: Vectors of the most recent distinct texts kept in process: an agent turn embeds the user's message for the
#: recall and again for the memory of the turn (and a repeated request is the same text again).
CACHED_VECTORS = 256


class Embedding:
    """Calls the embedder and checks what comes back; remembers the vector size (``dims``).

    The vectors of the last :data:`CACHED_VECTORS` distinct texts are reused (keyed by a 128-bit BLAKE2b digest of
    the text, so the cache holds no text); an embedder failure is never cached.

    Args:
        embedder: The embedder port.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.dims: int | None = None  # the embedder's vector size, learnt from its first output
        self._cache: OrderedDict[bytes, list[float]] = OrderedDict()
        self._lock = threading.Lock()
        on_erase(self.clear)  # a vector restates its text: an erasure empties the cache

    def clear(self) -> None:
        """Forget every cached vector (run by ``erase``)."""
        with self._lock:
            self._cache.clear()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in input order.

        Raises:
            StorageError: the embedder failed or returned the wrong number of vectors.
            MemLineageError: the embedder's own typed error (e.g. model files missing).
        """
        keys = [hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest() for t in texts]
        with self._lock:
            known = {k: self._cache[k] for k in keys if k in self._cache}
            for k in known:
                self._cache.move_to_end(k)
        todo: dict[bytes, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in known:
                todo.setdefault(k, t)
        if todo:
            fresh = self._embed(list(todo.values()))
            known.update(zip(todo, fresh, strict=True))
            with self._lock:
                for k, v in zip(todo, fresh, strict=True):
                    self._cache[k] = v
                while len(self._cache) > CACHED_VECTORS:
                    self._cache.popitem(last=False)
        return [list(known[k]) for k in keys]

    def _embed(self, texts: list[str]) -> list[list[float]]:
        try:
            vectors = self.embedder.embed(list(texts))
        except MemLineageError:
            raise  # e.g. ConfigurationError: the model files are missing (the message says what to set)
        except Exception as exc:
            msg = f"embedder {self.embedder.name!r} failed: {exc}"
            raise StorageError(msg) from exc
        if len(vectors) != len(texts):
            msg = f"embedder {self.embedder.name!r} returned {len(vectors)} vectors for {len(texts)} texts"
            raise StorageError(msg)
        out = [list(map(float, v)) for v in vectors]
        if out:
            self.dims = len(out[0])
        return out

    def check_dims(self, vector: Sequence[float] | np.ndarray) -> None:
        """A precomputed embedding must have the embedder's size, or it would poison the index for the scope.

        Raises:
            InvalidInputError: the sizes differ.
        """
        if self.dims is None:
            declared = getattr(self.embedder, "dims", None)
            if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
                self.dims = declared
            else:
                self.embed(["dimension probe"])
        if len(vector) != self.dims:
            msg = (
                f"embedding has {len(vector)} dimensions but the embedder {self.embedder.name!r} makes "
                f"{self.dims}; pass vectors from the same model, or embedding=None"
            )
            raise InvalidInputError(msg)
