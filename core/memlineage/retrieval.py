"""Hybrid retrieval (vector + lexical legs, fusion, re-ranking, policy hook) and the trace of ``recall``.

Pipeline (``hybrid_recall``): both legs query with the scope/status filter inside the query; the candidates
are
fused (reciprocal rank fusion by default), re-ranked by effective value and recency, passed through the
read-policy
hook *before* the top-k cut (so ``k`` results come back whenever ``k`` eligible memories exist), re-checked
against
the scope by a final guard, and returned with their score parts. Fusion choice and defaults are justified by
the
LoCoMo dev figures in ``benchmarks/bench_locomo.py``.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from memlineage._forget import text_cache
from memlineage.errors import ConfigurationError
from memlineage.models import Memory, Scope, Status

if TYPE_CHECKING:
    from memlineage.index import IndexFilter, VectorIndex

__all__ = [
    "CandidateFilter",
    "Exclusion",
    "Fused",
    "RecallHit",
    "RecallHooks",
    "RecallLegs",
    "RecallQuery",
    "RecallResult",
    "RetrievalConfig",
    "Trace",
    "fuse",
    "hybrid_recall",
    "is_question",
    "is_request",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecallHit:
    """One recalled memory.

    Attributes:
        memory: The memory version served.
        score: Final score in [0, 1], higher = more relevant.
        scores: Score parts (``vector``, ``lexical``, ``value``, ``recency``, ``final``), each in [0, 1].
        lineage: Short lineage summary, e.g. ``tool:flight_api ← 2 premises, trust 0.80``.
        flags: Warnings attached by policies, e.g. ``("suspect",)`` or ``("stale",)``.
        decisions: Policy decisions that touched this memory.
        newer: Id of a later memory of the same speaker that answers the query the same way (read-time conflict
            resolution, :mod:`memlineage.reconcile`); this hit is then demoted and flagged ``"older"``. None
            otherwise.
    """

    memory: Memory
    score: float
    scores: dict[str, float] = field(default_factory=dict)
    lineage: str = ""
    flags: tuple[str, ...] = ()
    decisions: tuple[Any, ...] = ()
    newer: str | None = None

    @property
    def id(self) -> str:
        """The memory id."""
        return self.memory.id

    @property
    def content(self) -> str:
        """The memory content."""
        return self.memory.content


@dataclass(frozen=True)
class Exclusion:
    """A candidate withheld from the result and why (policy id ``None`` for built-in guards)."""

    memory_id: str
    reason: str
    policy_id: str | None = None
    stage: str = "filter"


@dataclass
class Trace:
    """Why a recall returned what it did.

    Attributes:
        query: The query text.
        k: Requested number of results.
        candidates: Number of candidates considered before filtering.
        excluded: Withheld candidates with reasons.
        legs: Candidate count per retrieval leg (``vector``, ``lexical``).
        timings_ms: Wall time per stage, in milliseconds.
        decisions: Every policy decision taken during the read.
        conflicts: Memories demoted because a later one of the same speaker answers the query the same way
            (:class:`memlineage.reconcile.Conflict`: older, newer, reason).
        withheld: Withheld candidates counted by stage (``guard``, ``ttl``, ``policy``), kept either way.
        detail: Whether ``excluded`` and ``timings_ms`` are kept (``recall(trace=True)``); the counts, policy
            decisions and conflicts are kept either way.
    """

    query: str
    k: int
    candidates: int = 0
    excluded: list[Exclusion] = field(default_factory=list)
    legs: dict[str, int] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    decisions: list[Any] = field(default_factory=list)
    conflicts: list[Any] = field(default_factory=list)
    withheld: dict[str, int] = field(default_factory=dict)
    detail: bool = True

    def exclude(self, memory_id: str, reason: str, policy_id: str | None, stage: str) -> None:
        """Count a withheld candidate by stage, and record it with its reason (only with ``detail``)."""
        self.withheld[stage] = self.withheld.get(stage, 0) + 1
        if self.detail:
            self.excluded.append(Exclusion(memory_id, reason, policy_id, stage))

    def timed(self, stage: str, seconds: float) -> None:
        """Record a stage's wall time (only with ``detail``)."""
        if self.detail:
            self.timings_ms[stage] = seconds * 1000

    def reasons(self) -> dict[str, str]:
        """``{memory_id: reason}`` for every excluded candidate."""
        return {e.memory_id: e.reason for e in self.excluded}


@dataclass
class RecallResult:
    """Ranked hits (best first) plus the trace. Iterable over :class:`RecallHit`."""

    hits: list[RecallHit]
    trace: Trace

    def __iter__(self) -> Iterator[RecallHit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> RecallHit:
        return self.hits[i]

    @property
    def memories(self) -> list[Memory]:
        """The memories, best first."""
        return [h.memory for h in self.hits]

    @property
    def ids(self) -> list[str]:
        """The memory ids, best first."""
        return [h.memory.id for h in self.hits]


# ----------------------------------------------------------------------------------------------------
# Hybrid retrieval: candidate generation (vector + lexical legs), fusion, re-ranking, policy hook, trace.
# ----------------------------------------------------------------------------------------------------

CandidateFilter = Callable[[Memory], "str | None"]
"""Read-policy hook applied to every candidate *before* the top-k cut.

Called with the candidate memory; returns ``None`` to keep it or a short reason (e.g. ``"policy trust-floor:
reasoning
below 0.7"``) to withhold it. The policy engine plugs in here; a hook may also return a ``(reason,
policy_id)``
tuple so the trace can name the policy.
"""


#: Share of ``vector_weight`` given to the vector leg for a query in CJK script when the embedder is English-only
#: (see ``RetrievalConfig.cjk_vector_weight``).
ENGLISH_ONLY_CJK_VECTOR_WEIGHT = 0.25


@dataclass(frozen=True)
class RetrievalConfig:
    """Knobs of hybrid retrieval. Defaults tuned on the LoCoMo dev conversations (benchmarks/bench_locomo.py).

    Why weighted fusion: on LoCoMo dev (1,033 questions, categories 1-4, same MiniLM vectors and lexical leg),
    evidence R@10 was 62.7 for RRF (k=60), 68.3 for RRF (k=10) and 69.1 for the weighted sum with lexical
    weight 1.5; with the contiguity boost (0.3) added, RRF (k=10) reached 70.8 and the weighted sum 72.4.
    The weighted sum keeps score *gaps* (a near-exact lexical match stays far ahead), which rank fusion
    discards.

    Attributes:
        fusion: ``"weighted"`` (default; vector cosine min-max normalised over the candidates, lexical BM25
            divided
            by the best score, then a weighted mean) or ``"rrf"`` (reciprocal rank fusion).
        rrf_k: RRF rank constant, > 0; larger flattens the rank curve. Default 60 (only for ``"rrf"``).
        vector_weight: Weight of the vector leg in fusion, >= 0. Default 1.0.
        lexical_weight: Weight of the lexical leg in fusion, >= 0. Default 1.5.
        cjk_vector_weight: Weight of the vector leg for a query written in Chinese, Japanese or Korean script,
            >= 0. Default None: :data:`ENGLISH_ONLY_CJK_VECTOR_WEIGHT` × ``vector_weight`` when the embedder
            declares ``english_only`` (the default all-MiniLM-L6-v2 reads those scripts as loose characters; see
            :meth:`for_embedder`), else ``vector_weight``. On every Chinese update suite in one deal
            (``bench_updates.py --suites all --lang zh``), weights 1 / 0.5 / 0.25 / 0 for that leg served a stale
            statement in the top 3 for 157 / 156 / 152 / 147 of 593 updates, the current one for 399 / 411 /
            414 / 417 of 591, and kept 268 / 268 / 265 / 263 of 391 non-updates.
        candidates: Candidates fetched per leg, >= 1 (at least ``4 * k`` are fetched; more while fewer than ``k``
            pass the filters). Default 40: every candidate is read from the ledger before ranking, and at 100
            that read was about 40 % of a recall at 300 chat turns; LoCoMo evidence recall@5/10/20 and every
            update benchmark came out the same at 40 (session 15).
        value_weight: Share of the final score given to effective value, in [0, 1]. Default 0.05.
        recency_weight: Share of the final score given to recency, in [0, 1]. Default 0.0 for episodic recall.
        recency_half_life_s: Recency half-life, in seconds (> 0); default 30 days.
        contiguity: Share of a neighbour's relevance (same session, adjacent in time) added to a candidate, in
            [0, 1]. Models the temporal-contiguity effect of episodic memory (the turn that answers a question
            sits next to the turn that matches it). Default 0.3.
        request_weight: Multiplier in [0, 1] on the relevance of a memory that only asks: a question ("How much
            is the Hotel Miramar?") or a request ("Find me the Eurostar fare."). It asserts nothing, yet it
            resembles the next query about the same thing more than the statement that answers it. 1 = no
            effect. Default 0.6.
        older_weight: Multiplier in [0, 1] on the score of a memory that a later memory of the same speaker
            restates for the query (read-time conflict resolution, :mod:`memlineage.reconcile`); it also ranks
            below that memory. 1 = reorder only. Default 0.5.
        answer_weight: For a question that asks for a kind of value (a place, a time, a number, a name), a memory
            that asserts a value of that kind the question does not name itself has its score multiplied by
            ``1 + answer_weight`` (capped at 1): the statement that answers outranks the earlier questions and
            requests worded like the query. In [0, 1]; 0 = off. Default 0.3.
    """

    fusion: str = "weighted"
    rrf_k: int = 60
    vector_weight: float = 1.0
    lexical_weight: float = 1.5
    cjk_vector_weight: float | None = None
    candidates: int = 40
    value_weight: float = 0.05
    recency_weight: float = 0.0
    recency_half_life_s: float = 30 * 86_400.0
    contiguity: float = 0.3
    request_weight: float = 0.6
    older_weight: float = 0.5
    answer_weight: float = 0.3

    def __post_init__(self) -> None:
        if self.fusion not in ("rrf", "weighted"):
            msg = f"fusion must be 'rrf' or 'weighted', got {self.fusion!r}"
            raise ConfigurationError(msg)
        if self.rrf_k <= 0 or self.candidates < 1 or self.recency_half_life_s <= 0:
            msg = "rrf_k, candidates and recency_half_life_s must be positive"
            raise ConfigurationError(msg)
        for name in ("value_weight", "recency_weight", "contiguity", "request_weight", "older_weight", "answer_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                msg = f"{name} must be in [0, 1], got {getattr(self, name)}"
                raise ConfigurationError(msg)
        if self.value_weight + self.recency_weight > 1.0:
            msg = "value_weight + recency_weight must be <= 1 (the rest is relevance)"
            raise ConfigurationError(msg)
        if self.vector_weight < 0 or self.lexical_weight < 0 or self.vector_weight + self.lexical_weight == 0:
            msg = "leg weights must be >= 0 and not both 0"
            raise ConfigurationError(msg)
        if self.cjk_vector_weight is not None and (
            self.cjk_vector_weight < 0 or self.cjk_vector_weight + self.lexical_weight == 0
        ):
            msg = "cjk_vector_weight must be >= 0, and not 0 when lexical_weight is 0"
            raise ConfigurationError(msg)

    def for_embedder(self, english_only: bool) -> RetrievalConfig:
        """This config with ``cjk_vector_weight`` filled in for an embedder (unchanged when it is set).

        Args:
            english_only: The embedder declares it reads English only (``english_only = True``).

        Example:
            >>> RetrievalConfig().for_embedder(True).cjk_vector_weight
            0.25
        """
        if self.cjk_vector_weight is not None or not english_only:
            return self
        return _english_only(self)

    def for_query(self, text: str) -> RetrievalConfig:
        """The config a query ``text`` is ranked with: ``cjk_vector_weight`` for one in CJK script, if set.

        Example:
            >>> RetrievalConfig(cjk_vector_weight=0.25).for_query("我住在哪？").vector_weight
            0.25
        """
        if self.cjk_vector_weight is None or not _CJK_TEXT.search(text):
            return self
        return replace(self, vector_weight=self.cjk_vector_weight, cjk_vector_weight=None)


@functools.lru_cache(maxsize=16)
def _english_only(cfg: RetrievalConfig) -> RetrievalConfig:
    """``cfg`` resolved for an English-only embedder, built once per config (recall asks it on every call)."""
    return replace(cfg, cjk_vector_weight=ENGLISH_ONLY_CJK_VECTOR_WEIGHT * cfg.vector_weight)


@dataclass
class Fused:
    """A fused candidate and its score parts (all in [0, 1], higher = better, except the raw leg scores).

    Attributes:
        id: Memory id.
        vector: Cosine similarity mapped to [0, 1] (``(1 + cos) / 2``); 0 if the vector leg missed it.
        vector_rank: 1-based rank in the vector leg, 0 if absent.
        lexical: Lexical score normalised by the leg's best score, in [0, 1]; 0 if absent.
        lexical_raw: Raw BM25 score, >= 0.
        lexical_rank: 1-based rank in the lexical leg, 0 if absent.
        relevance: Fused relevance in [0, 1].
    """

    id: str
    vector: float = 0.0
    vector_rank: int = 0
    lexical: float = 0.0
    lexical_raw: float = 0.0
    lexical_rank: int = 0
    relevance: float = 0.0


def fuse(vector_hits: Sequence[Any], lexical_hits: Sequence[Any], config: RetrievalConfig | None = None) -> list[Fused]:
    """Fuse the two legs into one list ordered by relevance (highest first, ties by id: deterministic).

    Args:
        vector_hits: ``IndexHit``-like objects (``.id``, ``.similarity`` in [-1, 1]), best first.
        lexical_hits: ``LexicalHit``-like objects (``.id``, ``.score`` >= 0), best first.
        config: Fusion settings; default :class:`RetrievalConfig`.

    Returns:
        Fused candidates with ``relevance`` in [0, 1] (1 = ranked first by every leg with weight).

    Example:
        >>> from types import SimpleNamespace as H
        >>> [f.id for f in fuse([H(id="a", similarity=0.9)], [H(id="b", score=3.0), H(id="a", score=1.0)])]
        ['a', 'b']
    """
    cfg = config or RetrievalConfig()
    by_id: dict[str, Fused] = {}
    for rank, h in enumerate(vector_hits, start=1):
        f = by_id.setdefault(h.id, Fused(h.id))
        if f.vector_rank == 0:
            f.vector_rank, f.vector = rank, max(0.0, min(1.0, (1.0 + float(h.similarity)) / 2.0))
    best_lex = max((float(h.score) for h in lexical_hits), default=0.0)
    for rank, h in enumerate(lexical_hits, start=1):
        f = by_id.setdefault(h.id, Fused(h.id))
        if f.lexical_rank == 0:
            f.lexical_rank, f.lexical_raw = rank, float(h.score)
            f.lexical = float(h.score) / best_lex if best_lex > 0 else 0.0
    wv, wl = cfg.vector_weight, cfg.lexical_weight
    if cfg.fusion == "rrf":
        top = (wv + wl) / (cfg.rrf_k + 1)
        for f in by_id.values():
            s = (wv / (cfg.rrf_k + f.vector_rank) if f.vector_rank else 0.0) + (
                wl / (cfg.rrf_k + f.lexical_rank) if f.lexical_rank else 0.0
            )
            f.relevance = s / top
    else:
        sims = [f.vector for f in by_id.values() if f.vector_rank]
        lo, hi = (min(sims), max(sims)) if sims else (0.0, 1.0)
        span = hi - lo
        for f in by_id.values():
            v = ((f.vector - lo) / span if span > 0 else 1.0) if f.vector_rank else 0.0
            f.relevance = (wv * v + wl * f.lexical) / (wv + wl)
    return sorted(by_id.values(), key=lambda f: (-f.relevance, f.id))


_QUESTION_END = re.compile(r"[?？]\s*[\])\"'”」]*\s*$|[吗呢嘛]\s*[?？。]?\s*$")
_TRANSCRIPT_HEAD = re.compile(r"^\s*(?:\[[^\]\n]{1,60}\]\s*)?(?:[^\s:：\[\]][^:：\n]{0,30}[:：]\s*)?")
#: An imperative request: a request verb first (after "please", "can you"...), or a trailing "please".
_REQUEST = re.compile(
    r"^(?:(?:please|pls|ok(?:ay)?|so|now|and|hey|also|could you|can you|would you|will you)[,\s]+)*"
    r"(?:find|check(?!\s+(?:it|this|that)?\s*out)|search|look\s+up|book|get|show|tell|give|plan|refresh|recommend|suggest|remind|send|help|"
    r"compare|list|fetch|reserve|schedule|order|convert|translate|calculate|compute|estimate|summari[sz]e|draft|email|text|"
    r"re-?write|rephrase|reword|revise|edit|shorten|expand|redo|write|make\s+(?:it|this|that|them|the)|generate|create|"
    r"continue|explain|describe|format)\b"
    r"|,?\s*please[.!]?\s*$"
    r"|^(?:请|麻烦)?(?:再)?(?:帮我|给我|替我)?(?:查一下|查查|查|找一下|找|订|预订|推荐|安排|看看|看一下)",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """Whether a memory's text is only a question: its last sentence asks, and no earlier sentence states.

    A short earlier sentence states nothing unless it names the speaker or a number ("Hi there. Where's the gym?" is
    a question; "I make $78k. How much should I save?" and "我住北京。有什么好吃的？" are not only questions).

    Example:
        >>> is_question("How much is the Hotel Miramar for June 12-15?"), is_question("I live in Paris. Why?")
        (True, False)
    """
    body = _TRANSCRIPT_HEAD.sub("", text, count=1).strip()
    if not _QUESTION_END.search(body):
        return False
    sentences = [x for x in re.split(r"(?<=[.!?。！？])\s*", body) if x.strip()]
    return all(_QUESTION_END.search(x) or _filler(x) for x in sentences)


#: Chinese, Japanese or Korean script (the ranges of ``index.lexical.CJK_RANGES``, written out: importing the index
#: package here would load it, and chromadb's modules, with every ``import memlineage``).
_CJK_TEXT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
#: What makes a short sentence a statement: the speaker or a number ("I'm vegan.", "I make $78k.", "我住北京。").
_STATES = re.compile(r"\b(?:i|i'm|im|i've|my|we|we're|our)\b|\d|我|我们", re.IGNORECASE)


def _filler(sentence: str) -> bool:
    """Whether a sentence before a question states nothing: a greeting or interjection ("Hi there.", "Ugh!", "嗯。")."""
    if _STATES.search(sentence):
        return False
    if _CJK_TEXT.search(sentence):
        return len(re.sub(r"\W", "", sentence)) <= 3
    return len(sentence.split()) <= 3


@text_cache(maxsize=16384)
def is_request(text: str) -> bool:
    """Whether a memory's text only asks: a question, or a one-sentence imperative request.

    Cached per text (recall asks it of every candidate; emptied by every erasure).

    Example:
        >>> is_request("Find me the London-Paris train fare for July 2."), is_request("查一下西湖国宾馆的房价。")
        (True, True)
        >>> is_request("I found a great hotel in Nice.")
        False
    """
    if is_question(text):
        return True
    body = _TRANSCRIPT_HEAD.sub("", text, count=1).strip()
    sentences = [x for x in re.split(r"(?<=[.!?。！？])\s*", body) if x.strip()]
    return len(sentences) == 1 and bool(_REQUEST.search(body))


#: Where a statement said before a question in the same sentence ends ("My husband's birthday is May 12, any gift
#: ideas?", "我老公生日是5月12号，想给他准备个惊喜，有什么点子？").
_PART_END = re.compile(r"(?<=[.!?。！？;；，、])\s*|(?<=,)\s+")


@text_cache(maxsize=16384)
def only_asks(text: str) -> bool:
    """Whether a memory's text holds nothing but asking: :func:`is_request`, and no part before the question states.

    Cached per text (update detection asks it of every candidate of every rule; emptied by every erasure).

    A chat message often states a fact and asks about it in one sentence, joined by a comma ("My husband's birthday
    is May 12, any gift ideas?", "我老公生日是5月12号，想给他准备个惊喜，有什么点子？"): such a part (one that names
    the speaker or a number and asks nothing) is a statement a later correction can replace.

    Example:
        >>> only_asks("Any gift ideas for my husband?"), only_asks("My husband's birthday is May 12, any gift ideas?")
        (True, False)
    """
    if not is_request(text):
        return False
    body = _TRANSCRIPT_HEAD.sub("", text, count=1).strip()
    parts = [x for x in _PART_END.split(body) if x.strip()]
    return not any(_STATES.search(x) and not _QUESTION_END.search(x) for x in parts[:-1])


def _recency(memory: Memory, now: datetime, half_life_s: float) -> float:
    when = memory.valid_from or memory.created_at
    age = max(0.0, (now - when).total_seconds())
    return math.exp(-math.log(2.0) * age / half_life_s)


class LexicalLeg(Protocol):
    """What :func:`hybrid_recall` asks of its lexical index (:class:`~memlineage.index.lexical.LexicalIndex`)."""

    def query(self, text: str, k: int, where: IndexFilter) -> Sequence[Any]:
        """The ``k`` best entries for ``text`` among those matching ``where`` (``.id``, ``.score``), best first."""
        ...

    def neighbours(self, ids: Sequence[str]) -> Mapping[str, Sequence[str]]:
        """Ids of the entries next in time (same user and session) to each of ``ids``."""
        ...


@dataclass(frozen=True)
class RecallQuery:
    """What one hybrid recall asks for (parsed once, by the recall service or a caller of :func:`hybrid_recall`).

    Attributes:
        text: Query text.
        k: Number of results the caller wants, >= 1.
        where: ``IndexFilter`` applied inside both legs' queries (scope, status, kinds, tags).
        scope: Caller's ``Scope``; the final guard re-checks every loaded memory with ``scope.contains``.
        now: Current time (UTC), for recency and expiry.
        config: :class:`RetrievalConfig`; None = the default tuned values.
    """

    text: str
    k: int
    where: IndexFilter
    scope: Scope
    now: datetime
    config: RetrievalConfig | None = None


@dataclass(frozen=True)
class RecallLegs:
    """Where a hybrid recall's candidates come from.

    Attributes:
        query_vector: Returns the query embedding (called once).
        vector_index: A ``VectorIndex``.
        lexical_index: A :class:`~memlineage.index.lexical.LexicalIndex`, or None for the vector leg only.
        load: Loads memories by id from the ledger, aligned with the input (``None`` for misses).
    """

    query_vector: Callable[[], Sequence[float]]
    vector_index: VectorIndex
    lexical_index: LexicalLeg | None
    load: Callable[[Sequence[str]], Sequence[Memory | None]]


@dataclass(frozen=True)
class RecallHooks:
    """The store's hooks into a hybrid recall; each None leaves its stage out.

    Attributes:
        candidate_filter: Per-memory read-policy hook (see :data:`CandidateFilter`), applied before the cut.
        read_filter: Batch read-policy hook over ``(memory, score)`` pairs, applied before the cut.
        expire: Called with ids of memories found past their TTL.
        value_of: Effective value in [0, 1] of a memory at ``now``; None leaves value out of the score (e.g.
            when a value model re-ranks afterwards).
    """

    candidate_filter: CandidateFilter | None = None
    read_filter: Callable[[list[tuple[Memory, float]]], list[tuple[Memory, float]]] | None = None
    expire: Callable[[list[str]], Any] | None = None
    value_of: Callable[[Memory, datetime], float] | None = None


def hybrid_recall(
    query: RecallQuery, legs: RecallLegs, trace: Trace, hooks: RecallHooks | None = None
) -> list[RecallHit]:
    """Candidates from both legs, fused, re-ranked and filtered; returns every eligible hit, best first.

    The caller cuts to ``query.k`` (after any further re-ranking); this function fetches more candidates until
    ``k`` eligible ones survive the filters or both legs are exhausted.

    Args:
        query: What is asked (:class:`RecallQuery`).
        legs: Where candidates come from (:class:`RecallLegs`).
        trace: Filled with leg counts, exclusions and timings.
        hooks: Read policies, expiry and value (:class:`RecallHooks`); None = none of them.

    Returns:
        Hits with ``score`` in [0, 1] (higher = better) and ``scores`` holding ``vector``, ``lexical``,
        ``lexical_raw``, ``vector_rank``, ``lexical_rank``, ``relevance``, ``contiguity``, ``recency``,
        ``value``
        and ``final``.
    """
    hooks = hooks or RecallHooks()
    k, where, scope, now, config = query.k, query.where, query.scope, query.now, query.config
    vector_index, lexical_index, load = legs.vector_index, legs.lexical_index, legs.load
    candidate_filter, read_filter = hooks.candidate_filter, hooks.read_filter
    expire, value_of = hooks.expire, hooks.value_of
    cfg = config or RetrievalConfig()
    t0 = time.perf_counter()
    qvec = legs.query_vector()
    trace.timed("embed", time.perf_counter() - t0)
    statuses = set(where.statuses)
    fetch = max(cfg.candidates, 4 * k)
    fusion = cfg.for_query(query.text)  # the leg weights for this query's script
    while True:
        t1 = time.perf_counter()
        vhits = vector_index.query(qvec, fetch, where)
        t2 = time.perf_counter()
        lhits = lexical_index.query(query.text, fetch, where) if lexical_index is not None else []
        t3 = time.perf_counter()
        trace.legs["vector"], trace.legs["lexical"] = len(vhits), len(lhits)
        trace.timed("vector", t2 - t1)
        trace.timed("lexical", t3 - t2)
        fused = fuse(vhits, lhits, fusion)
        mems = load([f.id for f in fused])
        trace.excluded.clear()
        trace.withheld.clear()
        trace.candidates = len(fused)
        live: list[tuple[Fused, Memory]] = []
        expired: list[str] = []
        for f, m in zip(fused, mems, strict=False):
            if m is None or not scope.contains(m.scope):
                trace.exclude(f.id, "scope guard: not in the caller's scope", None, "guard")
            elif m.status.value not in statuses:
                trace.exclude(f.id, f"status {m.status.value}", None, "guard")
            elif m.expires_at is not None and m.expires_at <= now:
                if m.status is not Status.EXPIRED:
                    expired.append(m.id)
                if Status.EXPIRED.value in statuses:  # a question about the past: served, flagged by policies
                    live.append((f, m))
                else:
                    trace.exclude(f.id, "expired: ttl elapsed", None, "ttl")
            else:
                live.append((f, m))
        if expired and expire is not None:
            expire(expired)
        # Neighbours lend relevance only when the ledger lets them be read here (an index may lag a cascade).
        rel = {f.id: f.relevance for f, _ in live}
        neighbours = (
            lexical_index.neighbours([f.id for f, _ in live])
            if cfg.contiguity > 0 and lexical_index is not None
            else {}
        )
        w_rel = 1.0 - cfg.value_weight - cfg.recency_weight if value_of is not None else 1.0 - cfg.recency_weight
        scored: list[tuple[Memory, float, dict[str, float]]] = []
        for f, m in live:
            nb = max((rel.get(n, 0.0) for n in neighbours.get(f.id, ())), default=0.0)
            relevance = (f.relevance + cfg.contiguity * nb) / (1.0 + cfg.contiguity)
            asks = cfg.request_weight < 1.0 and is_request(m.content)
            if asks:
                relevance *= cfg.request_weight
            recency = _recency(m, now, cfg.recency_half_life_s)
            value = value_of(m, now) if value_of is not None else None
            final = w_rel * relevance + cfg.recency_weight * recency
            if value is not None:
                final += cfg.value_weight * value
            parts = {
                "vector": round(f.vector, 6),
                "vector_rank": float(f.vector_rank),
                "lexical": round(f.lexical, 6),
                "lexical_raw": round(f.lexical_raw, 6),
                "lexical_rank": float(f.lexical_rank),
                "fused": round(f.relevance, 6),
                "contiguity": round(nb, 6),
                "relevance": round(relevance, 6),
                "recency": round(recency, 6),
                "final": round(max(0.0, min(1.0, final)), 6),
            }
            if asks:
                parts["request"] = 1.0
            if value is not None:
                parts["value"] = round(value, 6)
            scored.append((m, parts["final"], parts))
        scored.sort(key=lambda x: (-x[1], x[0].id))
        kept: list[tuple[Memory, float, dict[str, float]]] = []
        for m, s, parts in scored:
            verdict = candidate_filter(m) if candidate_filter is not None else None
            if verdict:
                reason, policy_id = verdict if isinstance(verdict, tuple) else (str(verdict), None)
                trace.exclude(m.id, reason, policy_id, "policy")
                continue
            kept.append((m, s, parts))
        if read_filter is not None:
            counted = trace.withheld.get("policy", 0)
            allowed = {m.id for m, _ in read_filter([(m, s) for m, s, _ in kept])}
            dropped = [m for m, _, _ in kept if m.id not in allowed]
            if trace.detail:  # the filter's own reasons are recorded; the rest get a generic one
                withheld = {e.memory_id for e in trace.excluded}
                for m in dropped:
                    if m.id not in withheld:
                        trace.exclude(m.id, "read policy", None, "policy")
            else:  # counts only: those the filter did not count itself
                unrecorded = len(dropped) - (trace.withheld.get("policy", 0) - counted)
                if unrecorded > 0:
                    trace.withheld["policy"] = trace.withheld.get("policy", 0) + unrecorded
            kept = [x for x in kept if x[0].id in allowed]
        trace.timed("fuse_rerank_filter", time.perf_counter() - t3)
        exhausted = len(vhits) < fetch and len(lhits) < fetch
        if len(kept) >= k or exhausted:
            break
        fetch *= 2
    return [
        RecallHit(
            memory=m,
            score=s,
            scores=parts,
            lineage=m.summary(),
            flags=(m.status.value,) if m.status.value in ("suspect", "superseded") else (),
        )
        for m, s, parts in kept
    ]
