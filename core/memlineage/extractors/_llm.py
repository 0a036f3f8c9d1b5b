"""LLM-backed feature extraction with validated structured output (seed 004 §3.1).

The model is duck-typed so that the core never imports LangChain or LlamaIndex:

- an object with ``complete(prompt)`` returning something with ``.text`` is treated as a LlamaIndex ``LLM``;
- an object with ``invoke(prompt)`` returning a message with ``.content`` (or a string) as a LangChain chat
  model or runnable;
- any other callable ``str -> str`` is called directly.

The answer must be one JSON object matching :class:`LLMFeatureOutput` (the seed's schema plus an optional
slot). Invalid output is retried once with the validation error quoted back to the model; if the retry is
invalid too, the extractor falls back to :class:`RuleBasedExtractor` and logs a warning. It never raises on
bad model output.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import re
from collections.abc import Callable
from typing import Literal, Protocol, TypeAlias, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memlineage import telemetry
from memlineage._twins import async_twin
from memlineage._types import JSONValue
from memlineage.errors import ConfigurationError
from memlineage.extractors._base import FeatureExtractor, GoalRelation, InfoType, MemoryFeatures
from memlineage.extractors._rules import RuleBasedExtractor, is_forcing_directive

__all__ = [
    "BoundedModel", "CompletionModel", "InvokableModel", "LLMExtractor", "LLMFeatureOutput", "LanguageModel",
    "ModelUnavailableError", "call_model", "check_model",
]  # fmt: skip

logger = logging.getLogger(__name__)

_PROMPT = """You are an information analysis assistant. Analyse the text below and extract its key features.

Text: {text} Current agent task: {goal}

Answer with ONE JSON object and nothing else, with exactly these keys:
{{
  "entities": ["..."],                  // key entities: names, products, error codes, dates, amounts
  "user_directive_intensity": 0,        // 0-10, strength of explicit instructions ("remember", "important")
  "emotional_valence": "neutral",       // "positive" | "neutral" | "negative"
  "emotion_intensity": 0,               // 0-10, strength of the emotion
  "relation_to_goal": "none",           // "direct" | "indirect" | "none"
  "information_type": "fact",           // "instruction" | "preference" | "fact" | "feedback" | "chitchat"
  "remember": false,                    // true only if the user explicitly asks to remember this
  "slot": null                          // e.g. "user.residence", "user.preference.seat" when the text sets a
                                        // value of an attribute of the user; otherwise null
}}"""

_RETRY = """Your previous answer was not valid: {error}
Previous answer: {answer}
Answer again with ONE valid JSON object with the keys listed above and nothing else."""


class CompletionModel(Protocol):
    """A LlamaIndex ``LLM``: ``complete(prompt)`` returns a response whose ``.text`` is the answer."""

    def complete(self, prompt: str, /) -> object:
        """The model's response to ``prompt``."""
        ...


class InvokableModel(Protocol):
    """A LangChain chat model or runnable: ``invoke(prompt)`` returns a message whose ``.content`` is the answer."""

    def invoke(self, prompt: str, /) -> object:
        """The model's message (or text) for ``prompt``."""
        ...


#: What :func:`call_model` calls: a LlamaIndex LLM, a LangChain chat model / runnable or a callable ``str -> str``
#: (its answer is read as text). Duck-typed, so that the core never imports LangChain or LlamaIndex.
LanguageModel: TypeAlias = CompletionModel | InvokableModel | Callable[[str], object]


class LLMFeatureOutput(BaseModel):
    """The structured output asked from the model (seed 004 §3.1 JSON schema, plus slot and remember)."""

    model_config = ConfigDict(extra="ignore")

    entities: list[str] = Field(default_factory=list, description="Key entities mentioned in the text.")
    user_directive_intensity: int = Field(ge=0, le=10, description="Directive strength, 0-10, higher = stronger.")
    emotional_valence: Literal["positive", "neutral", "negative"] = Field(description="Emotional valence.")
    emotion_intensity: int = Field(default=0, ge=0, le=10, description="Emotion strength, 0-10.")
    relation_to_goal: GoalRelation = Field(description="direct / indirect / none.")
    information_type: InfoType = Field(description="instruction / preference / fact / feedback / chitchat.")
    remember: bool = Field(default=False, description="Explicit request to remember.")
    slot: str | None = Field(default=None, max_length=80, description="Semantic slot key, if any.")
    slot_value: str | None = Field(default=None, description="Value assigned to the slot, if any.")


def call_model(model: object, prompt: str) -> str:
    """Send ``prompt`` to a duck-typed LLM and return its text answer.

    Args:
        model: A LlamaIndex LLM (``complete``), a LangChain chat model / runnable (``invoke``) or a callable
            ``str -> str`` (a :data:`LanguageModel`); any other object is refused here, at run time.
        prompt: The full prompt text.

    Returns:
        The answer text ("" when the model returned no text).

    Raises:
        ConfigurationError: ``model`` has none of the supported interfaces.
    """
    if callable(getattr(model, "complete", None)):
        response = cast(CompletionModel, model).complete(prompt)
        return str(getattr(response, "text", response) or "")
    if callable(getattr(model, "invoke", None)):
        response = cast(InvokableModel, model).invoke(prompt)
        content = getattr(response, "content", response)
        if isinstance(content, list):  # LangChain content blocks
            content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
        return str(content or "")
    if callable(model):
        return str(model(prompt) or "")
    msg = (
        f"unsupported model type {type(model).__name__}: pass a LangChain chat model (has .invoke), a "
        "LlamaIndex LLM (has .complete) or a callable str -> str"
    )
    raise ConfigurationError(msg)


class ModelUnavailableError(Exception):
    """A bounded model call gave no answer: it timed out, or an earlier call that timed out still runs."""


class BoundedModel:
    """One model called with a time limit, never queuing a call behind one that hangs.

    Every model call on the write path goes through one of these: a call waits at most ``timeout`` seconds; while a
    call that timed out is still running, later calls are refused at once instead of each waiting out the limit (a
    hung model would otherwise slow every write by ``timeout``). The call runs on one worker thread; an abandoned
    call finishes (or not) in the background.

    Args:
        model: LangChain chat model / runnable, LlamaIndex LLM or callable ``str -> str`` (see :func:`call_model`).
        timeout: Seconds to wait for one answer, > 0.
        name: Thread-name prefix, for debugging.

    Raises:
        ConfigurationError: unsupported model, or ``timeout`` not > 0.
    """

    def __init__(self, model: LanguageModel, *, timeout: float, name: str = "memlineage-llm") -> None:
        check_model(model)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            msg = f"timeout must be > 0 seconds, got {timeout!r}"
            raise ConfigurationError(msg)
        self.model = model
        self.timeout = float(timeout)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._hung: concurrent.futures.Future[str] | None = None

    @property
    def busy(self) -> bool:
        """Whether a call that timed out is still running (the next call would be refused)."""
        if self._hung is not None and self._hung.done():
            self._hung = None
        return self._hung is not None

    def __call__(self, prompt: str) -> str:
        """The model's answer to ``prompt``.

        Raises:
            ModelUnavailableError: no answer within ``timeout``, or an earlier call still hangs.
            Exception: whatever the model's own call raised.
        """
        if self.busy:
            msg = "an earlier model call that timed out is still running"
            raise ModelUnavailableError(msg)
        future = self._pool.submit(call_model, self.model, prompt)
        try:
            return future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            self._hung = future
            msg = f"no answer within {self.timeout:.1f} s"
            raise ModelUnavailableError(msg) from None

    def close(self) -> None:
        """Stop the worker thread (a call still running is abandoned)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def check_model(model: object) -> None:
    """Refuse a model :func:`call_model` cannot call.

    Raises:
        ConfigurationError: ``model`` has neither ``complete`` (LlamaIndex) nor ``invoke`` (LangChain) and is not
            callable.
    """
    if not (callable(getattr(model, "complete", None)) or callable(getattr(model, "invoke", None)) or callable(model)):
        msg = (
            f"unsupported model type {type(model).__name__}: pass a LangChain chat model (.invoke), a "
            "LlamaIndex LLM (.complete) or a callable str -> str"
        )
        raise ConfigurationError(msg)


def _json_object(answer: str) -> JSONValue:
    """Parse the first JSON object in ``answer`` (tolerates code fences and prose around it)."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", answer, re.S)
    candidate = fenced.group(1) if fenced else answer
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end <= start:
        msg = "no JSON object found"
        raise ValueError(msg)
    return json.loads(candidate[start : end + 1])


class LLMExtractor:
    """Feature extractor that asks an LLM for the seed's structured features, with validation and fallback.

    Setup:
        Install the framework of the model you pass (``pip install 'memlineage[langchain]'`` or
        ``'memlineage[llamaindex]'``); MemLineage itself imports neither.

    Instantiate:
        >>> from langchain_core.language_models import FakeListChatModel  # doctest: +SKIP
        >>> extractor = LLMExtractor(FakeListChatModel(responses=["{...}"]))  # doctest: +SKIP

    Use:
        ``extractor.extract("I prefer aisle seats", goal="book a flight")`` returns :class:`MemoryFeatures`
        with ``extractor="llm"``; after two invalid answers it returns the rule extractor's features with
        ``extractor="rules(fallback)"``. Results are cached by :class:`memlineage.value.ValueModel`, so
        identical text costs one model call.

    Args:
        model: LangChain chat model / runnable, LlamaIndex LLM or callable ``str -> str``.
        fallback: Extractor used when the model output is invalid twice or the call fails; default
            :class:`RuleBasedExtractor`.
        max_retries: Extra attempts after an invalid answer, in [0, 3]; default 1 (the issue's "retry once").
        timeout: Seconds to wait for one model answer, > 0 (default 20). A call that times out falls back to the
            rules, and while it still runs later texts fall back at once instead of waiting again.

    Raises:
        ConfigurationError: ``model`` has no supported interface, or ``max_retries`` / ``timeout`` is out of range.
    """

    name = "llm"

    def __init__(
        self,
        model: LanguageModel,
        *,
        fallback: FeatureExtractor | None = None,
        max_retries: int = 1,
        timeout: float = 20.0,
    ) -> None:
        self._call = BoundedModel(model, timeout=timeout, name="memlineage-llm-features")
        if not 0 <= max_retries <= 3:
            msg = f"max_retries must be in [0, 3], got {max_retries}"
            raise ConfigurationError(msg)
        self.model = model
        self.fallback: FeatureExtractor = fallback or RuleBasedExtractor()
        self.max_retries = max_retries
        self.calls = 0
        self.fallbacks = 0

    def extract(self, text: str, *, goal: str | None = None) -> MemoryFeatures:
        """Extract features with the model; retry once on invalid output, then fall back to rules.

        Args:
            text: Candidate memory text (non-empty).
            goal: The agent's current goal, or None ("serve this user").

        Returns:
            Validated features (``extractor="llm"``) or the fallback's (``extractor="rules(fallback)"``).
        """
        prompt = _PROMPT.format(text=text, goal=goal or "assist this user over the long term")
        error = ""
        for attempt in range(self.max_retries + 1):
            try:
                self.calls += 1
                answer = self._call(prompt)
            except Exception as exc:  # a failing or hung model must not break or stall the write path
                logger.warning("LLM feature extraction call failed (%s); falling back to rules", exc)
                break
            try:
                output = LLMFeatureOutput.model_validate(_json_object(answer))
            except (ValueError, ValidationError) as exc:
                error = str(exc).splitlines()[0][:300]
                logger.info("LLM feature output invalid on attempt %d: %s", attempt + 1, error)
                prompt = _PROMPT.format(text=text, goal=goal or "assist this user over the long term") + (
                    "\n\n" + _RETRY.format(error=error, answer=answer[:500])
                )
                continue
            return self._to_features(output, text)
        self.fallbacks += 1
        telemetry.count("memlineage.extractor.fallbacks")
        logger.warning(
            "LLM feature output invalid after %d attempts (%s); using rule-based features",
            self.max_retries + 1,
            error or "call failed",
        )
        features = self.fallback.extract(text, goal=goal)
        return features.model_copy(update={"extractor": f"{features.extractor}(fallback)"})

    aextract = async_twin(extract)

    def _to_features(self, output: LLMFeatureOutput, text: str) -> MemoryFeatures:
        # The forcing directive is a user's explicit wish; the model may confirm it but the rule check is kept
        # too,
        # so a model that misses "记住..." cannot drop it.
        forced = output.remember or is_forcing_directive(text)
        slot = output.slot.strip() if output.slot and output.slot.strip() else None
        return MemoryFeatures(
            info_type=output.information_type,
            goal_relation=output.relation_to_goal,
            directive_intensity=max(output.user_directive_intensity / 10.0, 1.0 if forced else 0.0),
            emotion_valence=output.emotional_valence,
            emotion_intensity=output.emotion_intensity / 10.0
            if output.emotion_intensity
            else (0.5 if output.emotional_valence != "neutral" else 0.0),
            entities=tuple(dict.fromkeys(e.strip() for e in output.entities if e and e.strip())),
            forced=forced,
            slot=slot,
            slot_value=output.slot_value if slot else None,
            extractor=self.name,
        )
