"""The multi-factor value model: what to remember, reinforce, decay and forget.

Source: seed 004 ("Learning What to Remember: A Cognitively Grounded Multi-Factor Value Model for Agentic
Memory", ../shared/seeds/004_11344e848526b279.txt) and the write / forget gates of seed 002
(002_26169c127f89851a.txt).

Score (seed 004 §3.2)::

    S = (w_goal·F_goal + w_sal·F_salience + w_util·F_utility + w_nov·F_novelty)
        / (w_goal + w_sal + w_util + w_nov)
    V = S · (1 − λ + λ·trust)          trust enters as a multiplier (λ = trust_influence, default 1)

with the seed's default weights 0.4 / 0.25 / 0.2 / 0.15 (they sum to 1, so the division is a no-op unless a
profile changes them). The seed's formula has no trust term; MemLineage adds trust as a *multiplier* rather
than a fifth summand so that an untrusted source can never be rescued by being salient or novel: a tool result
with trust 0.8 needs S ≥ 0.75 to pass the store threshold 0.6, and a summary of untrusted material stays low
(DESIGN §2, non-amplification). ``λ = 0`` switches trust off.

Factor quantification (each in [0, 1], higher = more worth keeping):

- F_goal: ``direct`` 0.9, ``indirect`` 0.4, ``none`` 0.1 (seed §3.2), or ``max(0, cos(goal, text))`` when a
  goal embedding similarity is supplied.
- F_salience: noisy-OR of the directive intensity d, the emotion e (× 0.6; neutral emotion counts half) and
  the key entities k = min(0.5, 0.2 · count): ``1 − (1 − d)(1 − 0.6e)(1 − k)``.
- F_utility: instruction 0.8, preference 0.8, fact 0.5, feedback 0.3, chit-chat 0.1 (seed §3.2; the seed gives
  no number for feedback, 0.3 places it between fact and chit-chat as the issue orders them).
- F_novelty: ``1 − s`` with s the cosine similarity of the nearest memory in the same scope (seed §3.2:
  "与近期记忆向量库中最相似条目的余弦距离"), rescaled above a baseline s0: ``1 − max(0, s − s0) / (1 − s0)``.
  Sentence embedders are anisotropic: on a LoCoMo dev conversation the nearest stored turn has a MiniLM cosine
  of 0.72 on average although few turns repeat one another, so the seed's literal ``1 − s`` (s0 = 0) buffers
  most new facts. With the default s0 = 0.5 only similarity above that of a same-topic neighbour counts as
  redundancy; ``ValueProfile(novelty_baseline=0)`` restores the seed's formula.

Gates:

- Write gate (seed 004 §3.3 "存储决策"), MemLineage's reading: V decides *promotion*, not existence. Every
  statement with content is stored (the episodic log: recallable, decaying, archived first by the forget
  gate); V ≥ ``store_threshold`` (0.6) promotes a memory whose kind was left open to ``semantic`` long-term
  memory. Only content-free chit-chat below the threshold ("ok thanks") stays in the session's bounded,
  deduplicated short-term buffer (:class:`ShortTermBuffer`, capacity 10 as in the seed's sketch). The seed
  buffers every below-threshold candidate; on LoCoMo that lost about half of the turns later asked about,
  and an update resembles the statement it replaces (low novelty), so the seed's gate dropped corrections.
  An explicit "remember ..." / "记住..." forces promotion (seed §5.4 troubleshooting table), and its stored V
  is raised to the store threshold so the forget gate treats it like any other promoted memory. Novelty of a
  new value for a slot is 1 (a changed value is new information, not redundancy); correction cues
  ("actually", "更正") add salience.
- Re-ranking (seed §3.3 "检索增强", §4 ``retrieve``): ``similarity · (1 − w) + V_eff · w``; the seed's w = 0.3,
  MemLineage's default w = 0.1. On the LoCoMo dev conversations with the default configuration (every turn
  stored, benchmarks/bench_locomo.py) evidence recall@10 was 70.7 at w = 0.3, 72.2 at w = 0.1 and 71.9 at
  w = 0: decay favours recent turns and LoCoMo asks about old ones, so a light value term helps and a heavy
  one hurts.
- Reinforcement (seed §3.2 注意事项): each use adds 0.05 to V (capped at 1) and updates the last-access time;
  writes are batched (:class:`ReinforcementBatch`, seed §5.3 "批量处理与异步更新").
- Forget gate (seed §3.3 "遗忘淘汰机制"): ``V_eff = V · 2^(−Δt / h)`` with Δt the time since the last use (or
  creation) and a half-life ``h = h0 · growth^min(uses, cap)`` that grows with use — the spacing effect, using
  the use count as the proxy for successful spaced retrievals; a sweep archives memories with V_eff below
  ``forget_threshold`` (0.2).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memlineage._forget import on_erase
from memlineage._twins import async_twin
from memlineage.errors import ConfigurationError, InvalidInputError
from memlineage.extractors import (
    FeatureExtractor,
    GoalRelation,
    InfoType,
    LLMExtractor,
    MemoryFeatures,
    RuleBasedExtractor,
)
from memlineage.models import Memory, Scope, ValueAssessment, check_text, normalize_content
from memlineage.value_buffer import BufferedItem, ReinforcementBatch, ShortTermBuffer, SweepReport

__all__ = [
    "BufferedItem",
    "LLMExtractor",
    "MemoryFeatures",
    "ReinforcementBatch",
    "RuleBasedExtractor",
    "ShortTermBuffer",
    "SweepReport",
    "ValueModel",
    "ValueProfile",
    "ValueWeights",
    "decay_factor",
    "rerank_score",
]

logger = logging.getLogger(__name__)

DAY = 86_400.0

#: F_goal per relation (seed 004 §3.2 "direct 0.9, indirect 0.4, none 0.1").
GOAL_SCORES: Mapping[GoalRelation, float] = {
    GoalRelation.DIRECT: 0.9,
    GoalRelation.INDIRECT: 0.4,
    GoalRelation.NONE: 0.1,
}
#: F_utility per information type (seed 004 §3.2; feedback 0.3 is MemLineage's choice, see module docstring).
UTILITY_SCORES: Mapping[InfoType, float] = {
    InfoType.INSTRUCTION: 0.8,
    InfoType.PREFERENCE: 0.8,
    InfoType.FACT: 0.5,
    InfoType.FEEDBACK: 0.3,
    InfoType.CHITCHAT: 0.1,
}


class ValueWeights(BaseModel):
    """Weights of the four factors of V (seed 004 §3.2: goal 0.4, salience 0.25, utility 0.2, novelty 0.15).

    Each weight is ≥ 0 and at least one is > 0; the score divides by their sum, so they need not sum to 1.

    Example:
        >>> ValueWeights(novelty=0.35, goal=0.3).novelty  # a research assistant that values new facts
        0.35
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    goal: float = Field(default=0.4, ge=0.0, description="Weight of goal relevance, ≥ 0 (default 0.4).")
    salience: float = Field(default=0.25, ge=0.0, description="Weight of salience, ≥ 0 (default 0.25).")
    utility: float = Field(default=0.2, ge=0.0, description="Weight of information-type utility, ≥ 0 (default 0.2).")
    novelty: float = Field(default=0.15, ge=0.0, description="Weight of novelty, ≥ 0 (default 0.15).")

    @model_validator(mode="after")
    def _some_positive(self) -> ValueWeights:
        if self.total <= 0:
            msg = "at least one value weight must be > 0 (defaults: goal 0.4, salience 0.25, utility 0.2, novelty 0.15)"
            raise ValueError(msg)
        return self

    @property
    def total(self) -> float:
        """Sum of the four weights."""
        return self.goal + self.salience + self.utility + self.novelty


class ValueProfile(BaseModel):
    """All tunables of the value model for one agent profile (weights, thresholds, decay, re-ranking).

    Defaults are the seeds' numbers; see the module docstring for the formulas they enter.

    Example:
        >>> ValueProfile(store_threshold=0.4).store_threshold  # seed §5.4: lower it if the agent forgets too much
        0.4
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    weights: ValueWeights = Field(default_factory=ValueWeights, description="Factor weights of V.")
    store_threshold: float = Field(
        default=0.6,
        ge=0.0,
        le=1.0,
        description="Write gate: V ≥ this → long-term store, in [0, 1] (default 0.6).",
    )
    forget_threshold: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="Forget gate: V_eff < this → archive, in [0, 1] (default 0.2).",
    )
    rerank_weight: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="w in sim·(1−w) + V_eff·w, in [0, 1] (default 0.1; the seed's 0.3 costs LoCoMo recall).",
    )
    reinforcement: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Added to V per use, capped at 1, in [0, 1] (default 0.05)."
    )
    half_life_seconds: float = Field(
        default=90 * DAY,
        gt=0,
        description="Decay half-life of a never-used memory, in seconds (default 90 days: seed 002 notes that a "
        "user's preference from three months ago may have changed).",
    )
    half_life_growth: float = Field(
        default=1.5, ge=1.0, description="Half-life multiplier per use (spacing effect), ≥ 1 (default 1.5)."
    )
    half_life_max_uses: int = Field(
        default=10, ge=0, description="Uses after which the half-life stops growing, ≥ 0 (default 10)."
    )
    novelty_baseline: float = Field(
        default=0.5,
        ge=0.0,
        lt=1.0,
        description="s0: cosine similarity at or below which the nearest memory counts as unrelated (novelty 1), "
        "in [0, 1); 0 = the seed's 1 − similarity (default 0.5).",
    )
    trust_influence: float = Field(
        default=1.0, ge=0.0, le=1.0, description="λ in V = S·(1 − λ + λ·trust), in [0, 1]; 0 = ignore trust."
    )
    keep_all: bool = Field(
        default=True,
        description="Store every statement with content (the episodic log) and let V decide promotion, decay and "
        "forgetting (default); False = the seed's gate: candidates below the store threshold go to the short-term "
        "buffer and are not stored (saves storage, loses facts: see the module docstring).",
    )
    buffer_size: int = Field(
        default=10,
        ge=1,
        description="Capacity of a session's short-term buffer, in items (default 10, FIFO).",
    )

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> ValueProfile:
        if self.forget_threshold > self.store_threshold:
            msg = (
                f"forget_threshold ({self.forget_threshold}) is above "
                f"store_threshold ({self.store_threshold}): "
                "new memories would be archived by the next sweep; lower forget_threshold"
            )
            raise ValueError(msg)
        return self

    def half_life(self, use_count: int) -> float:
        """Half-life in seconds after ``use_count`` uses: ``h0 · growth^min(uses, max_uses)``."""
        return self.half_life_seconds * self.half_life_growth ** min(max(use_count, 0), self.half_life_max_uses)


def decay_factor(elapsed_seconds: float, half_life_seconds: float) -> float:
    """Exponential decay ``2^(−Δt / h)`` in (0, 1]; 1 for Δt ≤ 0.

    Args:
        elapsed_seconds: Δt since the last use, in seconds.
        half_life_seconds: h, in seconds, > 0.

    Example:
        >>> decay_factor(86_400, 86_400)
        0.5
    """
    if elapsed_seconds <= 0:
        return 1.0
    return math.pow(2.0, -elapsed_seconds / half_life_seconds)


def rerank_score(similarity: float, value: float, weight: float = 0.3) -> float:
    """Value-aware retrieval score ``similarity · (1 − w) + value · w`` (seed 004 §4 ``retrieve``).

    Args:
        similarity: Relevance in [0, 1], higher = more similar (clipped).
        value: Effective value V_eff in [0, 1], higher = more worth keeping (clipped).
        weight: w in [0, 1] (default 0.3).

    Returns:
        Score in [0, 1], higher = better.

    Example:
        >>> round(rerank_score(0.8, 0.5), 2)
        0.71
    """
    sim = min(max(similarity, 0.0), 1.0)
    val = min(max(value, 0.0), 1.0)
    return sim * (1.0 - weight) + val * weight


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


class ValueModel:
    """Scores candidate memories and runs the value arithmetic of the write, retrieval and forget gates.

    Setup:
        Nothing to install for the default rule extractor. For LLM features pass ``LLMExtractor(model)`` with
        a LangChain chat model or LlamaIndex LLM.

    Instantiate:
        >>> model = ValueModel()  # rules, seed defaults
        >>> researcher = ValueModel(profiles={"researcher": ValueProfile(weights=ValueWeights(novelty=0.35))})

    Use:
        >>> a = model.assess("Remember: my passport number ends in 4471")
        >>> a.forced, model.should_store(a)
        (True, True)
        >>> model.should_store(model.assess("thanks!"))
        False

    Args:
        extractor: Feature extractor; default :class:`RuleBasedExtractor`.
        profile: Default :class:`ValueProfile` (seed defaults).
        profiles: Per-agent profiles keyed by ``Scope.agent_id``; agents not listed use ``profile``.
        cache_size: Features cached per (extractor, normalised text, goal), LRU, ≥ 0 entries (default 4096;
            0 disables the cache).

    Raises:
        ConfigurationError: ``extractor`` lacks ``extract`` or ``cache_size`` is negative.
    """

    def __init__(
        self,
        extractor: FeatureExtractor | None = None,
        *,
        profile: ValueProfile | None = None,
        profiles: Mapping[str, ValueProfile] | None = None,
        cache_size: int = 4096,
    ) -> None:
        if extractor is not None and not callable(getattr(extractor, "extract", None)):
            msg = f"extractor must have an extract(text, *, goal=None) method; got {type(extractor).__name__}"
            raise ConfigurationError(msg)
        if cache_size < 0:
            msg = f"cache_size must be >= 0, got {cache_size}"
            raise ConfigurationError(msg)
        self.extractor: FeatureExtractor = extractor or RuleBasedExtractor()
        self.profile = profile or ValueProfile()
        self.profiles: dict[str, ValueProfile] = dict(profiles or {})
        self._cache: OrderedDict[tuple[str, str, str | None], MemoryFeatures] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.cache_hits = 0
        self.cache_misses = 0
        on_erase(self.clear_cache)  # the cache is keyed by memory texts: an erasure empties it

    def clear_cache(self) -> None:
        """Forget every cached feature extraction (run by ``erase``: the keys are memory texts)."""
        with self._lock:
            self._cache.clear()

    # ----------------------------------------------------------------------------------------------------
    # Features and score
    # ----------------------------------------------------------------------------------------------------
    def profile_for(self, scope: Scope | str | None = None) -> ValueProfile:
        """The profile for a scope's agent (or an agent id); the default profile when none is registered."""
        agent = scope.agent_id if isinstance(scope, Scope) else scope
        return self.profiles.get(agent, self.profile) if agent else self.profile

    def extract(self, text: str, *, goal: str | None = None) -> MemoryFeatures:
        """Extract (or fetch from the cache) the features of ``text``.

        Args:
            text: Candidate memory text; must be a non-empty string.
            goal: The agent's current goal in words, or None.

        Returns:
            The features; identical text (after NFKC, case-fold and whitespace normalisation) with the same
            goal hits the cache and costs no extractor call (seed 004 §5.3 "特征提取的缓存").

        Raises:
            InvalidInputError: ``text`` is not a string or is empty / whitespace (checked before the extractor
                runs).
        """
        check_text(text)
        key = (getattr(self.extractor, "name", type(self.extractor).__name__), normalize_content(text), goal)
        if self._cache_size:
            with self._lock:
                cached = self._cache.get(key)
                if cached is not None:
                    self._cache.move_to_end(key)
                    self.cache_hits += 1
                    return cached
        features = self.extractor.extract(text, goal=goal)
        with self._lock:
            self.cache_misses += 1
            # A fallback result is not cached: the next identical text gets another chance with the model.
            if self._cache_size and not features.extractor.endswith("(fallback)"):
                self._cache[key] = features
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return features

    def score(
        self,
        features: MemoryFeatures,
        *,
        nearest_similarity: float | None = None,
        trust: float = 1.0,
        goal_similarity: float | None = None,
        profile: ValueProfile | None = None,
    ) -> ValueAssessment:
        """Turn features into factor values and V (formulas in the module docstring).

        Args:
            features: Extracted features.
            nearest_similarity: Cosine similarity of the nearest memory in the same scope, in [-1, 1] (higher
                = more alike); None = nothing comparable stored (novelty 1). Only the part above the
                profile's ``novelty_baseline`` lowers novelty.
            trust: Trust of the memory's lineage, in [0, 1] (higher = more trusted).
            goal_similarity: Cosine between the goal and the text embeddings, in [-1, 1]; when given it
                replaces the categorical goal relation.
            profile: Profile to use; default :attr:`profile`.

        Returns:
            The assessment; ``score`` is V in [0, 1], higher = keep.

        Raises:
            InvalidInputError: ``trust`` is outside [0, 1].
        """
        prof = profile or self.profile
        if not 0.0 <= trust <= 1.0:
            msg = f"trust must be in [0, 1], got {trust}"
            raise InvalidInputError(msg)
        if goal_similarity is not None:
            f_goal = min(max(goal_similarity, 0.0), 1.0)
        else:
            f_goal = GOAL_SCORES[features.goal_relation]
        emotion = features.emotion_intensity * (1.0 if features.emotion_valence != "neutral" else 0.5)
        entities = min(0.5, 0.2 * len(features.entities))
        f_sal = 1.0 - (1.0 - features.directive_intensity) * (1.0 - 0.6 * emotion) * (1.0 - entities)
        f_util = UTILITY_SCORES[features.info_type]
        sim = 0.0 if nearest_similarity is None else min(max(nearest_similarity, 0.0), 1.0)
        s0 = prof.novelty_baseline
        f_nov = 1.0 - max(0.0, sim - s0) / (1.0 - s0)
        w = prof.weights
        s = (w.goal * f_goal + w.salience * f_sal + w.utility * f_util + w.novelty * f_nov) / w.total
        v = s * (1.0 - prof.trust_influence + prof.trust_influence * trust)
        if features.forced:
            v = max(v, prof.store_threshold)
        clip = lambda x: round(min(max(x, 0.0), 1.0), 6)  # noqa: E731
        return ValueAssessment(
            goal_relevance=clip(f_goal),
            salience=clip(f_sal),
            utility=clip(f_util),
            novelty=clip(f_nov),
            trust=clip(trust),
            score=clip(v),
            info_type=features.info_type.value,
            forced=features.forced,
            extractor=features.extractor,
        )

    def assess(
        self,
        text: str,
        *,
        goal: str | None = None,
        nearest_similarity: float | None = None,
        trust: float = 1.0,
        goal_similarity: float | None = None,
        scope: Scope | None = None,
    ) -> ValueAssessment:
        """Extract features of ``text`` and score them (:meth:`extract` then :meth:`score`).

        Raises:
            InvalidInputError: empty text or trust outside [0, 1].
        """
        features = self.extract(text, goal=goal)
        return self.score(
            features,
            nearest_similarity=nearest_similarity,
            trust=trust,
            goal_similarity=goal_similarity,
            profile=self.profile_for(scope),
        )

    aextract = async_twin(extract)
    aassess = async_twin(assess)

    def should_store(self, assessment: ValueAssessment, profile: ValueProfile | None = None) -> bool:
        """Write gate: True when storage is forced or V ≥ the store threshold."""
        prof = profile or self.profile
        return assessment.forced or assessment.score >= prof.store_threshold

    # ----------------------------------------------------------------------------------------------------
    # Decay, reinforcement, re-ranking, forgetting
    # ----------------------------------------------------------------------------------------------------
    def effective_value(
        self,
        value: float,
        *,
        last_used_at: datetime,
        now: datetime,
        use_count: int = 0,
        profile: ValueProfile | None = None,
    ) -> float:
        """``V_eff = V · 2^(−Δt / h(uses))`` in [0, 1], higher = keep.

        Args:
            value: Stored V in [0, 1].
            last_used_at: Last use (or creation), timezone-aware (naive = UTC).
            now: Current time.
            use_count: Number of uses, ≥ 0; each multiplies the half-life by ``half_life_growth`` (spacing
                effect).
            profile: Profile to use; default :attr:`profile`.
        """
        prof = profile or self.profile
        elapsed = (_as_utc(now) - _as_utc(last_used_at)).total_seconds()
        return min(max(value, 0.0), 1.0) * decay_factor(elapsed, prof.half_life(use_count))

    def memory_effective_value(self, memory: Memory, now: datetime) -> float:
        """:meth:`effective_value` of a stored memory (its last use, or its creation when never used)."""
        return self.effective_value(
            memory.value,
            last_used_at=memory.last_used_at or memory.created_at,
            now=now,
            use_count=memory.use_count,
            profile=self.profile_for(memory.scope),
        )

    def reinforced(self, value: float, uses: int = 1, profile: ValueProfile | None = None) -> float:
        """V after ``uses`` uses: ``min(1, V + uses · reinforcement)`` (seed 004: +0.05 per use)."""
        prof = profile or self.profile
        return min(1.0, max(value, 0.0) + max(uses, 0) * prof.reinforcement)

    def rerank(self, similarity: float, effective_value: float, profile: ValueProfile | None = None) -> float:
        """:func:`rerank_score` with the profile's weight (default w = 0.1)."""
        prof = profile or self.profile
        return rerank_score(similarity, effective_value, prof.rerank_weight)

    def is_forgettable(self, memory: Memory, now: datetime) -> bool:
        """Forget gate: V_eff(now) < the forget threshold of the memory's profile."""
        return self.memory_effective_value(memory, now) < self.profile_for(memory.scope).forget_threshold
