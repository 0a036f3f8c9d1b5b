"""Lexical (BM25) leg of retrieval: multilingual tokenisation and a per-user, incremental BM25 index.

Tokenisation (:func:`tokenize`), identical for documents and queries:

1. NFKC normalisation and case folding (full-width ``ＡＢＣ１２３`` becomes ``abc123``).
2. Runs of Han, kana and Hangul characters become character unigrams plus overlapping bigrams, so a Chinese or
   Japanese term matches without a dictionary-based segmenter. Chinese function characters (:data:`CJK_STOPCHARS`:
   我, 的, 了, 什么, 自己 ...) are no term alone, nor in a bigram of two of them, the way English stopwords are
   dropped: "我的狗叫什么名字？" no longer matches "我的猫叫什么来着" better than "狗狗名字旺财".
3. Other word runs: a run that mixes letters and digits (``ABC123``, ``gpt4o``, ``v2``) is kept whole and
never
   stemmed; hyphen/underscore/dot-joined identifiers (``order-77a``) are kept whole *and* split into parts;
   plain
   words are stemmed with the English Snowball stemmer (PyStemmer) after dropping a small stopword list.
4. Dates in text (``8 May 2023``, ``May 8, 2023``, ``2023-05-08``, ``May 2023``) add canonical date tokens
   (``@2023-05-08``, ``@2023-05``, ``@2023``) so a date in a query matches a memory's event time
   (:func:`date_tokens` of ``valid_from`` is indexed with every memory).

Scoping: the index keeps one BM25 index per ``user_id``. A query only ever scores documents of the requesting
user (another user's index is never touched), and the remaining filter (status, kind, agent, session, tags) is
applied to the scored documents before the top-k cut, inside the query. The index is incremental: a write adds or
removes one document's postings and updates the corpus counts, and a query scores exactly as a BM25 model rebuilt
from the same documents would, so a write costs the same whatever the user's history; an optional ``loader``
fills a user's documents from the ledger the first time that user is queried.

Example:
    >>> tokenize("Order ABC123 shipped to 北京")
    ['order', 'abc123', 'ship', '北', '京', '北京']
"""

from __future__ import annotations

import bisect
import logging
import math
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from memlineage._forget import on_erase
from memlineage.errors import ConfigurationError, MissingDependencyError
from memlineage.index._base import IndexFilter, ScopeTally

__all__ = ["LexicalHit", "LexicalIndex", "date_tokens", "tokenize"]

logger = logging.getLogger(__name__)

#: Character ranges of Chinese, Japanese and Korean script, for a regex character class.
CJK_RANGES = _CJK = (
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

#: Chinese function characters (pronouns, particles, demonstratives, 是/在/有/没/不, 什么, 自己): alone, or in a bigram
#: of two of them, they are no BM25 term. A bigram with one content character stays ("现在", "我家").
CJK_STOPCHARS: frozenset[str] = frozenset("我你他她它们的了是在吗呢吧啊哦嗯么什这那个有没不也都就还和与或自己")

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


def _clear_stems() -> None:
    """Empty the stemmer's cache of words (an erasure leaves no erased word in the process)."""
    with _stemmer_lock:
        if _stemmer is not None:
            size = _stemmer.maxCacheSize
            _stemmer.maxCacheSize = 0  # PyStemmer drops its cache when the size is set to 0
            _stemmer.maxCacheSize = size


on_erase(_clear_stems)


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


#: What splits a word into parts that are also terms ("e-mail" → "e", "mail"; "v2.1" → "v2", "1").
_PART_BREAK = re.compile(r"[-_.]")


def tokenize(text: str, *, dates: bool = True) -> list[str]:
    """Split text into BM25 terms (see the module docstring for the rules).

    Args:
        text: The text: English, Chinese, Japanese, Korean or mixed.
        dates: Also emit canonical date tokens for dates found in the text (default True).

    Returns:
        Terms in text order (duplicates kept, they count as term frequency); date tokens last.
    """
    norm = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for m in _TOKEN_RE.finditer(norm):
        cjk, word = m.group(1), m.group(2)
        if cjk:
            out.extend(c for c in cjk if c not in CJK_STOPCHARS)
            out.extend(
                cjk[i : i + 2]
                for i in range(len(cjk) - 1)
                if cjk[i] not in CJK_STOPCHARS or cjk[i + 1] not in CJK_STOPCHARS
            )
            continue
        parts = _PART_BREAK.split(word)
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


class _Postings:
    """Slots and term frequencies of one term's documents, in growable arrays.

    Slots of deleted documents stay until the user's index is compacted; ``_UserIndex.alive`` masks them.
    """

    __slots__ = ("slots", "tfs", "n", "df")

    def __init__(self) -> None:
        self.slots = np.empty(4, dtype=np.int64)
        self.tfs = np.empty(4, dtype=np.float32)
        self.n = 0
        self.df = 0  # live documents holding the term

    def append(self, slot: int, tf: int) -> None:
        if self.n == self.slots.size:
            self.slots = np.resize(self.slots, 2 * self.n)
            self.tfs = np.resize(self.tfs, 2 * self.n)
        self.slots[self.n] = slot
        self.tfs[self.n] = tf
        self.n += 1
        self.df += 1


class _UserIndex:
    """Documents of one user in an incremental BM25 index: adding or deleting a document touches its own terms.

    Each document has a slot; per term, the slots and term frequencies of its documents (:class:`_Postings`).
    BM25's corpus statistics (number of documents, average length, document frequencies) are kept as counts
    and applied at query time, so a query scores exactly as a BM25 model built from scratch over the same
    documents would (the Lucene variant, as bm25s computes it, in float32). Deleted slots are masked and
    reclaimed by :meth:`compact` once they outnumber the live ones.
    """

    __slots__ = ("slot_of", "ids", "terms", "alive", "doclen", "postings", "total_len", "meta", "sessions", "tally")

    def __init__(self) -> None:
        self.slot_of: dict[str, int] = {}
        self.ids: list[str] = []
        self.terms: list[dict[str, int] | None] = []  # term frequencies per slot (None = deleted)
        self.alive = np.zeros(16, dtype=bool)
        self.doclen = np.zeros(16, dtype=np.int64)
        self.postings: dict[str, _Postings] = {}
        self.total_len = 0
        self.meta: dict[str, dict[str, Any]] = {}
        self.tally = ScopeTally()  # compared with the ledger's scope stamp (server mode)
        self.sessions: dict[str, list[tuple[float, str]]] = {}  # session id -> sorted (created_at, id)

    @property
    def docs(self) -> dict[str, int]:
        """Live document ids (a mapping for membership tests)."""
        return self.slot_of

    def add(self, mid: str, tokens: Sequence[str], meta: Mapping[str, Any]) -> None:
        """Add (or replace) one document."""
        if mid in self.slot_of:
            self.remove(mid)
        slot = len(self.ids)
        if slot == self.alive.size:
            self.alive = np.resize(self.alive, 2 * slot)
            self.doclen = np.resize(self.doclen, 2 * slot)
        counts: dict[str, int] = {}
        for t in tokens:
            counts[t] = counts.get(t, 0) + 1
        for t, tf in counts.items():
            post = self.postings.get(t)
            if post is None:
                post = self.postings[t] = _Postings()
            post.append(slot, tf)
        length = len(tokens) or 1  # an empty document counts as one (empty) token, like a rebuilt model's
        self.ids.append(mid)
        self.terms.append(counts)
        self.alive[slot] = True
        self.doclen[slot] = length
        self.total_len += length
        self.slot_of[mid] = slot
        self.meta[mid] = dict(meta)
        self.tally.add(ScopeTally.part(meta))
        self._place(mid)

    def remove(self, mid: str) -> bool:
        """Delete one document; returns whether it was there."""
        slot = self.slot_of.pop(mid, None)
        if slot is None:
            return False
        self._unplace(mid)
        counts = self.terms[slot] or {}
        for t in counts:
            post = self.postings[t]
            post.df -= 1
            if post.df == 0:
                del self.postings[t]
        self.terms[slot] = None
        self.alive[slot] = False
        self.total_len -= int(self.doclen[slot])
        old = self.meta.pop(mid, None)
        if old is not None:
            self.tally.remove(ScopeTally.part(old))
        if len(self.ids) > 64 and len(self.slot_of) * 2 < len(self.ids):
            self.compact()
        return True

    def update_meta(self, mid: str, meta: Mapping[str, Any]) -> None:
        self._unplace(mid)
        self.tally.remove(ScopeTally.part(self.meta[mid]))
        self.meta[mid].update(meta)
        self.tally.add(ScopeTally.part(self.meta[mid]))
        self._place(mid)

    def compact(self) -> None:
        """Rebuild the slots from the live documents (amortised: runs when most slots are dead)."""
        live = [(mid, self.terms[self.slot_of[mid]] or {}) for mid in self.ids if mid in self.slot_of]
        lengths = {mid: int(self.doclen[self.slot_of[mid]]) for mid, _ in live}
        self.slot_of, self.ids, self.terms, self.postings = {}, [], [], {}
        self.alive = np.zeros(max(16, len(live)), dtype=bool)
        self.doclen = np.zeros(max(16, len(live)), dtype=np.int64)
        for slot, (mid, counts) in enumerate(live):
            for t, tf in counts.items():
                post = self.postings.get(t)
                if post is None:
                    post = self.postings[t] = _Postings()
                post.append(slot, tf)
            self.ids.append(mid)
            self.terms.append(counts)
            self.alive[slot] = True
            self.doclen[slot] = lengths[mid]
            self.slot_of[mid] = slot

    def scores(self, terms: Sequence[str], k1: float, b: float) -> tuple[np.ndarray, np.ndarray]:
        """BM25 scores of the live documents holding at least one of ``terms``: ``(slots, scores)``."""
        n_docs = len(self.slot_of)
        if n_docs == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        avg_len = self.total_len / n_docs
        total = np.zeros(len(self.ids), dtype=np.float32)
        touched: list[np.ndarray] = []
        for t in terms:
            post = self.postings.get(t)
            if post is None:
                continue
            slots = post.slots[: post.n]
            keep = self.alive[slots]
            slots, tf = slots[keep], post.tfs[: post.n][keep]
            idf = np.float32(math.log(1 + (n_docs - post.df + 0.5) / (post.df + 0.5)))
            norm = (k1 * ((1 - b) + b * self.doclen[slots] / avg_len)).astype(np.float32)
            total[slots] += idf * (tf / (norm + tf))
            touched.append(slots)
        if not touched:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        hit = np.unique(np.concatenate(touched))
        return hit, total[hit]

    def _place(self, mid: str) -> None:
        meta = self.meta[mid]
        sid = meta.get("session_id")
        if sid:
            bisect.insort(self.sessions.setdefault(str(sid), []), (float(meta.get("created_at") or 0.0), mid))

    def _unplace(self, mid: str) -> None:
        meta = self.meta.get(mid) or {}
        sid = meta.get("session_id")
        items = self.sessions.get(str(sid)) if sid else None
        if items:
            key = (float(meta.get("created_at") or 0.0), mid)
            j = bisect.bisect_left(items, key)
            if j < len(items) and items[j] == key:
                del items[j]
            if not items:  # an emptied (e.g. erased) session leaves no key behind
                del self.sessions[str(sid)]

    def neighbours(self, mid: str) -> tuple[str, ...]:
        """Previous and next document of ``mid`` in its session, ordered by (created_at, id)."""
        meta = self.meta.get(mid) or {}
        sid = meta.get("session_id")
        items = self.sessions.get(str(sid)) if sid else None
        if not items:
            return ()
        j = bisect.bisect_left(items, (float(meta.get("created_at") or 0.0), mid))
        return tuple(items[i][1] for i in (j - 1, j + 1) if 0 <= i < len(items))


Loader = Callable[[str], Iterable[tuple[str, str, Mapping[str, Any]]]]


class LexicalIndex:
    """Per-user incremental BM25 index with scope and status filtering inside the query.

    Setup:
        Uses the core dependency ``PyStemmer`` (imported lazily) and numpy.

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
        loader: Optional source of a user's documents, called at most once per user (until ``reset``, or until
            ``stamp`` disagrees).
        stamp: Optional ``user_id -> (documents, sum of their stamp keys, sum of the active ones' keys)`` as the
            loader would return them now (``Ledger.scope_stamp``; documents carry their key under
            ``memlineage.index._base.STAMP_KEY``). When given, every query of a loaded user first compares it with
            the documents held and reloads the user when they differ: for a store other processes write to (server
            mode), whose writes never pass through this object.
        k1: BM25 term-frequency saturation, > 0; default 1.2.
        b: BM25 length normalisation, in [0, 1]; default 0.75.
        max_docs: With ``loader``: most documents held over all users, >= 1 (default 250,000, about 1.7 GB at the
            ~7 KB a short memory's postings take; the vector blocks' ``cache_vectors`` default). Beyond it the users
            queried least recently are dropped and read again through ``loader`` on their next query; the user
            being queried or written is kept even when it alone is larger. Without a loader nothing is evicted
            (nothing could bring it back).

    Example:
        >>> from memlineage.index._base import IndexFilter
        >>> idx = LexicalIndex()
        >>> idx.upsert(["m1"], ["flight AF123 to Paris"], [{"user_id": "u", "status": "active"}])
        >>> [h.id for h in idx.query("AF123", 5, IndexFilter(user_id="u", statuses=("active",)))]
        ['m1']
    """

    def __init__(
        self,
        loader: Loader | None = None,
        *,
        stamp: Callable[[str], tuple[int, int, int]] | None = None,
        k1: float = 1.2,
        b: float = 0.75,
        max_docs: int = 250_000,
    ) -> None:
        if isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1:
            msg = f"max_docs must be an int >= 1, got {max_docs!r}"
            raise ConfigurationError(msg)
        self.max_docs = max_docs
        #: Users in least-recently-used order (first = next to evict).
        self._users: OrderedDict[str, _UserIndex] = OrderedDict()
        self._owner: dict[str, str] = {}
        self._loader = loader
        self._stamp = stamp if loader is not None else None
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
                self._users.setdefault(user, _UserIndex()).add(mid, tokens, meta)
                self._owner[mid] = user
            if ids:
                self._evict(keep=str(metadatas[-1]["user_id"]) if metadatas else None)

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Merge metadata into existing documents (e.g. a status change); unknown ids are skipped."""
        with self._lock:
            for mid, meta in zip(ids, metadatas, strict=False):
                user = self._owner.get(mid)
                if user is not None:
                    self._users[user].update_meta(mid, meta)

    def delete(self, ids: Sequence[str]) -> int:
        """Remove documents (e.g. erased content); returns how many existed."""
        with self._lock:
            return sum(self._drop(mid) for mid in set(ids))

    def _drop(self, mid: str) -> bool:
        user = self._owner.pop(mid, None)
        if user is None:
            return False
        return self._users[user].remove(mid)

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

    def _ensure(self, user: str, expected: tuple[int, int, int] | None = None) -> _UserIndex | None:
        if expected is not None and user in self._loaded:
            held = self._users.get(user)
            if (held.tally.stamp() if held is not None else (0, 0, 0)) != expected:
                self.invalidate(user)  # another process wrote: read it again
        if self._loader is not None and user not in self._loaded:
            rows = list(self._loader(user))
            self._loaded.add(user)
            if rows:
                self.upsert([r[0] for r in rows], [r[1] for r in rows], [dict(r[2], user_id=user) for r in rows])
        ui = self._users.get(user)
        if ui is None or not ui.docs:
            return None
        self._users.move_to_end(user)
        self._evict(keep=user)
        return ui

    def _evict(self, keep: str | None) -> None:
        """Drop the least recently used users beyond ``max_docs`` documents (only what ``loader`` can reload)."""
        if self._loader is None or len(self._owner) <= self.max_docs:
            return
        for user in [u for u in self._users if u != keep]:
            if len(self._owner) <= self.max_docs:
                break
            self.invalidate(user)

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
        expected = self._stamp(where.user_id) if self._stamp is not None else None  # outside the lock: SQL
        with self._lock:
            ui = self._ensure(where.user_id, expected)
            if ui is None:
                return []
            slots, scores = ui.scores(list(dict.fromkeys(terms)), self.k1, self.b)
            # the filter runs on the scored documents only, before the cut: cost follows the matches
            # a slot whose document was removed keeps its postings until the next compaction: it has no metadata
            found = [
                (float(sc), ui.ids[j])
                for j, sc in zip(slots.tolist(), scores.tolist(), strict=True)
                if sc > 0 and (meta := ui.meta.get(ui.ids[j])) is not None and where.matches(meta)
            ]
        found.sort(key=lambda x: (-x[0], x[1]))
        return [LexicalHit(mid, sc) for sc, mid in found[:k]]

    def neighbours(self, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Ids of the documents next in time (same user and session) to each of ``ids``; unknown ids omitted.

        Used for the contiguity boost: an episodic memory's neighbours share its context.
        """
        with self._lock:
            out: dict[str, tuple[str, ...]] = {}
            for mid in ids:
                user = self._owner.get(mid)
                if user is not None:
                    adj = self._users[user].neighbours(mid)
                    if adj:
                        out[mid] = adj
            return out

    def terms(self, text: str) -> list[str]:
        """The query terms :meth:`query` would use for ``text`` (for traces and debugging)."""
        return tokenize(text)
