"""Shared types of the feature extractors: the extracted features and the extractor protocol."""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from memlineage.models import StrEnum

__all__ = ["FeatureExtractor", "GoalRelation", "InfoType", "MemoryFeatures"]


class InfoType(StrEnum):
    """Information type of a candidate memory (seed 004, §3.1 ``information_type``)."""

    INSTRUCTION = "instruction"
    PREFERENCE = "preference"
    FACT = "fact"
    FEEDBACK = "feedback"
    CHITCHAT = "chitchat"


class GoalRelation(StrEnum):
    """Relation of a candidate memory to the agent's goal (seed 004, §3.1 ``relation_to_goal``)."""

    DIRECT = "direct"
    INDIRECT = "indirect"
    NONE = "none"


class MemoryFeatures(BaseModel):
    """Features of one candidate memory, extracted from its text (and the current goal, if any).

    These are the raw ingredients of the value score; :class:`memlineage.value.ValueModel` turns them into the
    factor values of a :class:`memlineage.models.ValueAssessment`. Novelty and trust are not text features:
    they come from the index (nearest memory in scope) and from the lineage, and are supplied at scoring time.

    Example:
        >>> MemoryFeatures(info_type="preference", goal_relation="direct").utility_type
        'preference'
    """

    model_config = ConfigDict(frozen=True)

    info_type: InfoType = Field(default=InfoType.FACT, description="Detected information type.")
    goal_relation: GoalRelation = Field(
        default=GoalRelation.INDIRECT, description="Relation to the goal: direct / indirect / none."
    )
    directive_intensity: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Strength of explicit directives ('remember', 'important', '切记'), in [0, 1], "
        "higher = stronger "
        "(the seed's 0-10 user_directive_intensity divided by 10).",
    )
    emotion_valence: Literal["positive", "neutral", "negative"] = Field(
        default="neutral", description="Emotional valence of the text."
    )
    emotion_intensity: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Strength of the emotion, in [0, 1], higher = stronger."
    )
    entities: tuple[str, ...] = Field(
        default=(), description="Key entities as 'type:text' (product, error, date, amount, name...)."
    )
    forced: bool = Field(
        default=False, description="An explicit 'remember ...' / '记住...' directive: storage is forced."
    )
    slot: str | None = Field(
        default=None,
        description="Semantic slot key such as 'user.residence'; a new value supersedes the old.",
    )
    slot_value: str | None = Field(default=None, description="The value the text assigns to ``slot``.")
    extractor: str = Field(default="rules", description="Name of the extractor that produced these features.")

    @property
    def utility_type(self) -> str:
        """The information type as a plain string."""
        return self.info_type.value


@runtime_checkable
class FeatureExtractor(Protocol):
    """Port for feature extractors: text (and an optional goal) in, :class:`MemoryFeatures` out.

    Implementations must be deterministic for a given input when they are to be cached (the rule extractor
    is); :class:`memlineage.value.ValueModel` caches features per ``(extractor name, normalised text, goal)``.
    """

    name: str

    def extract(self, text: str, *, goal: str | None = None) -> MemoryFeatures:
        """Extract the features of ``text`` (non-empty) relative to ``goal`` (None = no explicit goal)."""
        ...
