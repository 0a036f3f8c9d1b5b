"""What a captured run holds, and the premise rules that read it (the records behind :mod:`memlineage.capture`).

:class:`CaptureRun` is one agent run being recorded (ids and the memories in its context); the premise rules decide
what a tool call, a text or an answer of the run derives from, and how each premise was attributed
(:data:`ATTRIBUTIONS`). :class:`~memlineage.capture.RunRecorder` writes what they decide, one moment of a run at a
time (:func:`_per_run`).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

from memlineage._evidence import argument_values as _values
from memlineage._evidence import asks, content_premises
from memlineage._evidence import contains as _contains
from memlineage._evidence import holders as _holders
from memlineage._evidence import is_filler_memory as _is_filler_memory
from memlineage._evidence import topic as _topic
from memlineage._types import JSONValue
from memlineage.models import Memory, Scope, SourceKind, match_short_id
from memlineage.reconcile import Reconciler

#: How a premise was attributed, strongest first.
ATTRIBUTIONS = ("cited", "arguments", "results", "content", "context")

#: ``[m:1a2b3c4d]`` or ``[m:1a2b3c4d tool:x 2025-01-01 ...]``: the marker a recalled memory is shown with.
_MARKER = re.compile(r"\[m:([0-9a-fA-F-]{4,36})")
_MAX_ARGS_CHARS = 200


def cited_ids(text: str, candidates: Iterable[str]) -> list[str]:
    """The ids among ``candidates`` that ``text`` cites with ``[m:<short id>]`` markers, in citation order.

    A marker cites the one candidate it names (:func:`memlineage.models.match_short_id`: the full id, a short id, or
    the 8-character prefix earlier versions showed); an ambiguous or unknown marker cites nothing.
    """
    pool = list(dict.fromkeys(candidates))
    out: list[str] = []
    for key in _MARKER.findall(text or ""):
        matches = match_short_id(key, pool)
        if len(matches) == 1 and matches[0] not in out:
            out.append(matches[0])
    return out


def tool_result_text(name: str, arguments: Mapping[str, Any], output: str) -> str:
    """The stored text of a tool result, e.g. ``get_weather(city='Paris') -> 18°C, light rain``."""
    args = ", ".join(f"{k}={v!r}" for k, v in sorted(arguments.items()))
    if len(args) > _MAX_ARGS_CHARS:
        args = args[: _MAX_ARGS_CHARS - 1] + "…"
    return f"{name}({args}) -> {output.strip()}"


@overload
def _json_safe(value: Mapping[str, object]) -> dict[str, JSONValue]: ...
@overload
def _json_safe(value: object) -> JSONValue: ...
def _json_safe(value: object) -> JSONValue:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def _arguments(value: object) -> dict[str, Any]:
    """Tool arguments as the dict the tool received (a JSON string is parsed; a scalar becomes ``{"input": v}``)."""
    if isinstance(value, Mapping):
        return _json_safe(dict(value))
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"input": value} if value else {}
        return _json_safe(parsed) if isinstance(parsed, dict) else {"input": value}
    return {} if value is None else {"input": _json_safe(value)}


@dataclass(frozen=True)
class ToolCallSpec:
    """A tool call the model requested: its id, tool name and arguments.

    ``arguments`` is the dict the tool receives; a JSON string or a scalar input is accepted and normalised.
    """

    id: str
    name: str
    arguments: object = None


@dataclass
class _Call:
    activity_id: str
    name: str
    arguments: dict[str, Any]
    premises: dict[str, str]
    done: bool = False
    memory_id: str | None = None  # the result stored for it, if any
    failed: bool = False


#: What :func:`memlineage_langchain.tool_error_text` (and any adapter that marks a handled tool error) puts first in
#: the text the model receives: a framework that hands a handled error to observers as plain text (``AgentExecutor``
#: with ``handle_tool_error``) still lets the capture tell a failure from a result.
TOOL_ERROR_PREFIX = "Tool error: "


@dataclass
class CaptureRun:
    """One agent run being recorded (ids only; the ledger holds the rest).

    Attributes:
        scope: Owner of everything the run writes.
        run_id: The framework's run id (``run_id`` attribute of the run's activities).
        activity_id: The run's ``agent_run`` activity.
        user_memory_id: The user turn's memory, once stored.
        user_text: The user turn.
        reconciler: Decides whether what the run writes updates a memory (the agent's model, see
            :meth:`~memlineage.MemoryManager.model_reconciler`); None = the store's own.
    """

    scope: Scope
    run_id: str
    activity_id: str
    user_text: str = ""
    user_memory_id: str | None = None
    context: dict[str, Memory] = field(default_factory=dict)
    results: dict[str, Memory] = field(default_factory=dict)
    calls: dict[str, _Call] = field(default_factory=dict)
    step_citations: list[str] = field(default_factory=list)
    llm_activity_id: str | None = None
    texts: set[str] = field(default_factory=set)
    answered: bool = False
    ended: bool = False
    aliases: set[str] = field(default_factory=set)
    kind: str | None = None
    reconciler: Reconciler | None = None
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)


_S = TypeVar("_S")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _per_run(
    fn: Callable[Concatenate[_S, CaptureRun, _P], _R],
) -> Callable[Concatenate[_S, CaptureRun, _P], _R]:
    """Serialise the moments of one run: two observers of the same run report them from different threads."""

    @functools.wraps(fn)
    def wrapper(self: _S, run: CaptureRun, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with run.lock:
            return fn(self, run, *args, **kwargs)

    return wrapper


# ------------------------------------------------------------------ premise rules
def citable(run: CaptureRun) -> list[str]:
    """The ids a marker in the run's texts may cite: its context memories and tool results."""
    return [*run.context, *run.results]


def context_ids(run: CaptureRun) -> list[str]:
    """The run's context memories, in the order they joined."""
    return list(run.context)


def call_premises(run: CaptureRun, args: Mapping[str, Any]) -> dict[str, str]:
    """Premises of a tool call: the step's citations, else the memories holding its arguments, else the context."""
    if run.step_citations:
        return dict.fromkeys(run.step_citations, "cited")
    pool = [*run.context.values(), *run.results.values()]
    found = _holders(pool, _values(args), lambda m, v: _contains(m.content, v))
    if found:
        return dict.fromkeys(found, "arguments")
    return dict.fromkeys(context_ids(run), "context")


def text_premises(run: CaptureRun, text: str) -> dict[str, str]:
    """Premises of agent text: what it cites, what it names or repeats, the run's tool results, else the context."""
    cited = cited_ids(text, citable(run))
    if cited:
        return dict.fromkeys(cited, "cited")
    if asks(text):  # a reply that asks back asserts nothing: it rests on what it names, else on the turn
        pool = [m for m in [*run.context.values(), *run.results.values()] if m.id != run.user_memory_id]
        named = content_premises(text, run.user_text or "", pool, names_only=True)
        if named:
            return dict.fromkeys(named, "content")
        return {run.user_memory_id: "context"} if run.user_memory_id else {}
    if run.results:
        return dict.fromkeys(run.results, "results")
    pool = [m for m in run.context.values() if m.id != run.user_memory_id]
    found = content_premises(text, run.user_text or "", pool)
    if found:
        return dict.fromkeys(found, "content")
    return fallback_premises(run, text)


def fallback_premises(run: CaptureRun, text: str) -> dict[str, str]:
    """Premises of a text that repeats no memory's distinctive words nor cites one (``"context"``).

    The context memories about what the text adds to the user's turn (topic words of the text that the turn
    did not say) are its premises; without one, when the text asks back ("Which city are you going to?") or when
    the run's only tool calls failed, only the user turn is: "I haven't searched for a flight yet" rests on the
    question that asked, and "the booking service is down" on the failed call's outcome (an activity, never a
    memory), not on every memory recalled into the prompt.
    """
    failed = any(c.failed for c in run.calls.values())
    extra = set() if asks(text) or failed else _topic(text) - _topic(run.user_text or "")
    pool = [
        m for m in run.context.values()
        if m.id != run.user_memory_id and not _is_filler_memory(m)
        and not (m.source.kind is SourceKind.AGENT and asks(m.content))  # the agent's question supplies nothing
    ]  # fmt: skip
    found = [m.id for m in pool if extra & _topic(m.content)] if extra else []
    if not found and run.user_memory_id:
        found = [run.user_memory_id]
    return dict.fromkeys(found, "context")
