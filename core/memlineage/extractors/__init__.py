"""Feature extractors for the value model: rule-based (default, offline) and LLM-backed."""

from memlineage.extractors._base import FeatureExtractor, GoalRelation, InfoType, MemoryFeatures
from memlineage.extractors._llm import LLMExtractor, LLMFeatureOutput
from memlineage.extractors._rules import RuleBasedExtractor, content_terms, detect_slot, is_forcing_directive

__all__ = [
    "FeatureExtractor",
    "GoalRelation",
    "InfoType",
    "LLMExtractor",
    "LLMFeatureOutput",
    "MemoryFeatures",
    "RuleBasedExtractor",
    "content_terms",
    "detect_slot",
    "is_forcing_directive",
]
