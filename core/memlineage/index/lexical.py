"""Lexical (BM25) leg of retrieval: multilingual tokenisation and a per-user, lazily built BM25 index.

Tokenisation (:func:`tokenize`), identical for documents and queries:

1. NFKC normalisation and case folding (full-width ``ＡＢＣ１２３`` becomes ``abc123``).
2. Runs of Han, kana and Hangul characters become character unigrams plus overlapping bigrams, so a Chinese or
   Japanese term matches without a dictionary-based segmenter.
3. Other word runs: a run that mixes letters and digits (``ABC123``, ``gpt4o``, ``v2``) is kept whole and
never
   stemmed; hyphen/underscore/dot-joined identifiers (``order-77a``) are kept whole *and* split into parts;
   plain
   words are stemmed with the English Snowball stemmer (PyStemmer) after dropping a small stopword list.
4. Dates in text (``8 May 2023``, ``May 8, 2023``, ``2023-05-08``, ``May 2023``) add canonical date tokens
   (``@2023-05-08``, ``@2023-05``, ``@2023``) so a date in a query matches a memory's event time
   (:func:`date_tokens` of ``valid_from`` is indexed with every memory).

Scoping: the index keeps one BM25 model per ``user_id``. A query only ever scores documents of the requesting
user
(the model of another user is never touched), and the remaining filter (status, kind, agent, session, tags)
masks
the scores before the top-k cut, inside the query. A user's model is (re)built lazily on the first query
after a
write; an optional ``loader`` fills a user's documents from the ledger the first time that user is queried.

Example:
    >>> tokenize("Order ABC123 shipped to 北京")
    ['order', 'abc123', 'ship', '北', '京', '北京']
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from memlineage.errors import MissingDependencyError
from memlineage.index._base import IndexFilter

__all__ = ["LexicalHit", "LexicalIndex", "date_tokens", "tokenize"]

logger = logging.getLogger(__name__)

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\uac00-\ud7af"  # Hangul syllables
    "\U00020000-\U0002ffff"  # Han extensions
)
_TOKEN_RE = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+(?:[-_.][^\W_{_CJK}]+)*)")
_HAS_DIGIT = re.compile(r"\d")

STOPWORDS: frozenset[str] = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the their then there
    these they this to was will with i me my we our you your he him his she her its them what which who
    whom when where why how do does did doing done has have had having am been being would could should
    can might shall must about so than too very just also any some all both each few more most other own
    same s t d ll m re ve
    """.split()
)

_MONTHS = {
    m: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for m in names
}
_MONTH_ALT = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DATE_PATTERNS = (
    # 2023-05-08, 2023/5/8, 2023.05.08
    (re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b"), ("y", "m", "d")),
    # 8 May 2023, 8th of May, 2023
    (
        re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_ALT})\.?,?\s+(\d{{4}})\b"),
        ("d", "mn", "y"),
    ),
    # May 8, 2023 / May 8th 2023
    (re.compile(rf"\b({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"), ("mn", "d", "y")),
    # May 2023
    (re.compile(rf"\b({_MONTH_ALT})\.?,?\s+(\d{{4}})\b"), ("mn", "y")),
    # 2023年5月8日 / 2023年5月
    (re.compile(r"(\d{4})年(\d{1,2})月(?:(\d{1,2})[日号])?"), ("y", "m", "d")),
)

_stemmer_lock = threading.Lock()
_stemmer: Any = None


def _stem_word(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        with _stemmer_lock:
            if _stemmer is None:
                try:
                    import Stemmer  # PyStemmer; deferred: loaded on the first lexical query, not on import
                except ImportError as exc:  # pragma: no cover - core dependency
                    msg = "PyStemmer is not installed; run: pip install PyStemmer"
                    raise MissingDependencyError(msg) from exc
                _stemmer = Stemmer.Stemmer("english")
    return str(_stemmer.stemWord(word))


def date_tokens(when: datetime) -> list[str]:
    """Canonical date tokens for a point in time: ``@YYYY-MM-DD``, ``@YYYY-MM``, ``@YYYY`` (UTC date).

    Example:
        >>> date_tokens(datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc))
        ['@2023-05-08', '@2023-05', '@2023']
    """
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return [
        f"@{when.year:04d}-{when.month:02d}-{when.day:02d}",
        f"@{when.year:04d}-{when.month:02d}",
        f"@{when.year:04d}",
    ]


def _dates_in(text: str) -> list[str]:
    out: list[str] = []
    for pattern, fields in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            parts = dict(zip(fields, m.groups(), strict=False))
            try:
                year = int(parts["y"])
                month = _MONTHS[parts["mn"].rstrip(".")] if "mn" in parts else int(parts["m"])
                day = int(parts["d"]) if parts.get("d") else None
            except (KeyError, ValueError, TypeError):
                continue
            if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
                continue
            if day is not None:
                out.append(f"@{year:04d}-{month:02d}-{day:02d}")
            out.extend((f"@{year:04d}-{month:02d}", f"@{year:04d}"))
    return list(dict.fromkeys(out))


def tokenize(text: str, *, dates: bool = True) -> list[str]:
    """Split text into BM25 terms (see the module docstring for the rules).

    Args:
        text: Any text; English, Chinese, Japanese, Korean or mixed.
        dates: Also emit canonical date tokens for dates found in the text (default True).

    Returns:
        Terms in text order (duplicates kept, they count as term frequency); date tokens last.
    """
    norm = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for m in _TOKEN_RE.finditer(norm):
        cjk, word = m.group(1), m.group(2)
        if cjk:
            out.extend(cjk)
            out.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
            continue
        parts = re.split(r"[-_.]", word)
        if len(parts) > 1:
            out.append(word)
        for part in parts:
            if _HAS_DIGIT.search(part):
                out.append(part)  # numbers and mixed identifiers (abc123) stay whole, unstemmed
            elif len(part) > 1 and part not in STOPWORDS:
                out.append(_stem_word(part) if part.isascii() else part)
    if dates:
        out.extend(_dates_in(norm))
    return out


@dataclass(frozen=True)
class LexicalHit:
    """One lexical hit: memory id and BM25 score (>= 0, unbounded, higher = more relevant)."""

    id: str
    score: float


class _UserIndex:
    """Documents of one user and their lazily built BM25 model."""

    __slots__ = ("docs", "meta", "model", "order", "dirty", "adjacent")

    def __init__(self) -> None:
        self.docs: dict[str, list[str]] = {}
        self.meta: dict[str, dict[str, Any]] = {}
        self.model: Any = None
        self.order: list[str] = []
        self.dirty = True
        self.adjacent: dict[str, tuple[str, ...]] | None = None

    def neighbours(self) -> dict[str, tuple[str, ...]]:
        """Previous and next document of each document in the same session, ordered by (created_at, id)."""
        if self.adjacent is None:
            sessions: dict[str, list[tuple[float, str]]] = {}
            for mid, meta in self.meta.items():
                sid = meta.get("session_id")
                if sid:
                    sessions.setdefault(str(sid), []).append((float(meta.get("created_at") or 0.0), mid))
            adj: dict[str, tuple[str, ...]] = {}
            for items in sessions.values():
                items.sort()
                ids = [mid for _, mid in items]
                for j, mid in enumerate(ids):
                    adj[mid] = tuple(ids[i] for i in (j - 1, j + 1) if 0 <= i < len(ids))
            self.adjacent = adj
        return self.adjacent


Loader = Callable[[str], Iterable[tuple[str, str, Mapping[str, Any]]]]


class LexicalIndex:
    """Per-user BM25 index (bm25s) with scope and status filtering inside the query.

    Setup:
        Uses the core dependencies ``bm25s`` and ``PyStemmer`` (imported lazily).

    Instantiate:
        ``LexicalIndex()``; pass ``loader=`` (``user_id -> iterable of (id, text, metadata)``) to fill a
        user's
        documents from the ledger on that user's first query. With a loader, writes for users not loaded yet
        are
        skipped (the loader will read them), so memory holds only the users that were queried.

    Use:
        Keep it in step with the ledger through ``upsert`` / ``update_metadata`` / ``delete`` (the manager's
        write
        paths do), then ``query(text, k, where)``.

    Args:
        loader: Optional source of a user's documents, called at most once per user (until ``reset``).
        k1: BM25 term-frequency saturation, > 0; default 1.2.
        b: BM25 length normalisation, in [0, 1]; default 0.75.

    Example:
        >>> from memlineage.index._base import IndexFilter
        >>> idx = LexicalIndex()
        >>> idx.upsert(["m1"], ["flight AF123 to Paris"], [{"user_id": "u", "status": "active"}])
        >>> [h.id for h in idx.query("AF123", 5, IndexFilter(user_id="u", statuses=("active",)))]
        ['m1']
    """

    def __init__(self, loader: Loader | None = None, *, k1: float = 1.2, b: float = 0.75) -> None:
        self._users: dict[str, _UserIndex] = {}
        self._owner: dict[str, str] = {}
        self._loader = loader
        self._loaded: set[str] = set()
        self._lock = threading.RLock()
        self.k1 = k1
        self.b = b

    # -- writes
    # ------------------------------------------------------------------------------------------------

    def upsert(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]],
        *,
        valid_from: Sequence[datetime | None] | None = None,
    ) -> None:
        """Insert or replace documents; each metadata must carry ``user_id`` (the scope key).

        Args:
            ids: Memory (version) ids.
            texts: Text to index, one per id.
            metadatas: Flat metadata per id (``user_id`` required; ``status``, ``kind``, ``agent_id``... used
                by
                the query filter). A float ``valid_from`` (epoch seconds) adds the event date tokens.
            valid_from: Optional event times per id; override the metadata's ``valid_from`` for date tokens.
        """
        with self._lock:
            for j, (mid, text, meta) in enumerate(zip(ids, texts, metadatas, strict=False)):
                user = str(meta["user_id"])
                if self._loader is not None and user not in self._loaded:
                    continue  # not loaded yet: the loader reads this user's documents on first query
                old = self._owner.get(mid)
                if old is not None and old != user:
                    self._drop(mid)
                tokens = tokenize(text)
                when = valid_from[j] if valid_from is not None else None
                if when is None and isinstance(meta.get("valid_from"), (int, float)) and meta.get("valid_from"):
                    when = datetime.fromtimestamp(float(meta["valid_from"]), tz=timezone.utc)
                if when is not None:
                    tokens.extend(date_tokens(when))
                ui = self._users.setdefault(user, _UserIndex())
                ui.docs[mid] = tokens
                ui.meta[mid] = dict(meta)
                ui.dirty = True
                ui.adjacent = None
                self._owner[mid] = user

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Merge metadata into existing documents (e.g. a status change); unknown ids are skipped."""
        with self._lock:
            for mid, meta in zip(ids, metadatas, strict=False):
                user = self._owner.get(mid)
                if user is not None:
                    self._users[user].meta[mid].update(meta)
                    self._users[user].adjacent = None

    def delete(self, ids: Sequence[str]) -> int:
        """Remove documents (e.g. erased content); returns how many existed."""
        with self._lock:
            return sum(self._drop(mid) for mid in set(ids))

    def _drop(self, mid: str) -> bool:
        user = self._owner.pop(mid, None)
        if user is None:
            return False
        ui = self._users[user]
        ui.docs.pop(mid, None)
        ui.meta.pop(mid, None)
        ui.dirty = True
        ui.adjacent = None
        return True

    def invalidate(self, user_id: str | None = None) -> None:
        """Forget what was loaded for one user (or all), so the next query reloads it through ``loader``."""
        with self._lock:
            users = [user_id] if user_id is not None else list(self._users)
            for u in users:
                ui = self._users.pop(u, None)
                if ui is not None:
                    for mid in ui.docs:
                        self._owner.pop(mid, None)
                self._loaded.discard(u)

    def reset(self) -> None:
        """Remove every document."""
        with self._lock:
            self._users.clear()
            self._owner.clear()
            self._loaded.clear()

    def ids(self) -> set[str]:
        """Every document id currently held."""
        with self._lock:
            return set(self._owner)

    def count(self) -> int:
        """Number of documents currently held."""
        return len(self._owner)

    # -- reads
    # -------------------------------------------------------------------------------------------------

    def _ensure(self, user: str) -> _UserIndex | None:
        if self._loader is not None and user not in self._loaded:
            rows = list(self._loader(user))
            self._loaded.add(user)
            if rows:
                self.upsert([r[0] for r in rows], [r[1] for r in rows], [dict(r[2], user_id=user) for r in rows])
        ui = self._users.get(user)
        if ui is None or not ui.docs:
            return None
        if ui.dirty or ui.model is None:
            try:
                with warnings.catch_warnings():
                    # bm25s imports tqdm.auto, which warns in Jupyter without ipywidgets; we never show progress.
                    warnings.filterwarnings("ignore", message="IProgress not found")
                    import bm25s  # deferred: heavy (scipy), loaded on the first lexical query
            except ImportError as exc:  # pragma: no cover - core dependency
                msg = "bm25s is not installed; run: pip install bm25s"
                raise MissingDependencyError(msg) from exc
            ui.order = sorted(ui.docs)
            model = bm25s.BM25(k1=self.k1, b=self.b)
            model.index([ui.docs[i] or [""] for i in ui.order], show_progress=False)
            ui.model = model
            ui.dirty = False
        return ui

    def query(self, text: str, k: int, where: IndexFilter) -> list[LexicalHit]:
        """Top-``k`` documents of ``where.user_id`` by BM25 score, among those passing ``where``.

        Args:
            text: Query text (tokenised like the documents).
            k: Number of hits wanted, >= 0.
            where: Scope and status filter; only documents of ``where.user_id`` are ever scored.

        Returns:
            Hits with score > 0, highest first, ties broken by id; at most ``k``.
        """
        if k <= 0:
            return []
        terms = tokenize(text)
        if not terms:
            return []
        with self._lock:
            ui = self._ensure(where.user_id)
            if ui is None:
                return []
            model = ui.model
            ids = [t for t in dict.fromkeys(terms) if t in model.vocab_dict]
            if not ids:
                return []
            mask = np.fromiter((where.matches(ui.meta[i]) for i in ui.order), dtype=np.float32, count=len(ui.order))
            scores = model.get_scores(ids) * mask
            order = ui.order
        nz = np.flatnonzero(scores > 0)
        if nz.size == 0:
            return []
        if nz.size > k:  # keep every document tied with the k-th score so the id tie-break is deterministic
            kth = np.partition(scores[nz], nz.size - k)[nz.size - k]
            nz = nz[scores[nz] >= kth]
        ranked = sorted(nz.tolist(), key=lambda j: (-float(scores[j]), order[j]))[:k]
        return [LexicalHit(order[j], float(scores[j])) for j in ranked]

    def neighbours(self, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Ids of the documents next in time (same user and session) to each of ``ids``; unknown ids omitted.

        Used for the contiguity boost: an episodic memory's neighbours share its context.
        """
        with self._lock:
            out: dict[str, tuple[str, ...]] = {}
            for mid in ids:
                user = self._owner.get(mid)
                if user is not None:
                    adj = self._users[user].neighbours().get(mid)
                    if adj:
                        out[mid] = adj
            return out

    def terms(self, text: str) -> list[str]:
        """The query terms :meth:`query` would use for ``text`` (for traces and debugging)."""
        return tokenize(text)
