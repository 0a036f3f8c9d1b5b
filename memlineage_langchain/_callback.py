"""``LineageCaptureCallback``: LangChain callback events → MemLineage activities and memories with lineage."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.agents import AgentAction, AgentFinish
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.outputs import LLMResult
from memlineage.capture import CaptureRun, RunRecorder, ToolCallSpec, hook_span
from memlineage.manager import MemoryManager
from memlineage.models import Activity, Scope, new_id
from typing_extensions import override

from memlineage_langchain._convert import (
    RECALLED_KEY,
    action_text,
    final_ai_text,
    require_scope,
    scope_from_mapping,
    text_of,
    tool_output,
    user_text,
)

__all__ = ["AsyncLineageCaptureCallback", "LineageCaptureCallback"]

logger = logging.getLogger(__name__)

#: Tool names AgentExecutor uses for parse-error and unknown-tool fallbacks: their outputs are not tool results.
_FALLBACK_TOOLS = frozenset({"_Exception", "invalid_tool"})

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class _Action:
    """An ``on_agent_action`` waiting for its tool run (AgentExecutor gives tool hooks no ``tool_call_id``)."""

    tool: str
    tool_input: Any
    tool_call_id: str | None


@dataclass
class _Run:
    """A LangChain run seen by the handler: its place in the run tree and, for the root, the recorded run."""

    id: str
    kind: str
    name: str | None
    parent: str | None
    scope: Scope | None
    capture: CaptureRun | None = None
    actions: list[_Action] = field(default_factory=list)
    tool_call_id: str | None = None
    recorded: bool = False


class _Recorder:
    """Translates LangChain callback events into :class:`~memlineage.capture.RunRecorder` moments (no rules here)."""

    def __init__(
        self,
        manager: MemoryManager,
        scope: Scope | None,
        *,
        capture_user_input: bool,
        capture_reasoning: bool,
        strict: Callable[[], bool],
        tool_tags: Mapping[str, Sequence[str]] | None = None,
        reconciler: Any = None,
    ) -> None:
        self.manager = manager
        self.reconciler = reconciler
        self.recorder = RunRecorder.of(manager)
        self.scope = scope
        self.capture_user_input = capture_user_input
        self.capture_reasoning = capture_reasoning
        self.tool_tags = {name: tuple(tags) for name, tags in (tool_tags or {}).items()}
        self._strict = strict
        self._runs: dict[str, _Run] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ run tree
    def _scope_for(self, metadata: Mapping[str, Any] | None, parent: str | None) -> Scope | None:
        if self.scope is not None:
            return self.scope
        found = scope_from_mapping(metadata)
        if found is None and parent is not None:
            with self._lock:
                p = self._runs.get(parent)
            found = p.scope if p else None
        return found

    def _root(self, run_id: str | None) -> _Run | None:
        """The top-level run above ``run_id`` (the one that owns the recorded agent run)."""
        seen: set[str] = set()
        with self._lock:
            cur = self._runs.get(run_id) if run_id else None
            while cur is not None and cur.parent is not None and cur.id not in seen:
                seen.add(cur.id)
                nxt = self._runs.get(cur.parent)
                if nxt is None:
                    break
                cur = nxt
        return cur

    def _capture(self, run_id: str | None) -> CaptureRun | None:
        root = self._root(run_id)
        return root.capture if root is not None else None

    def _writable(self, scope: Scope | None, run_id: str, what: str) -> Scope | None:
        if scope is not None:
            return scope
        if self._strict():
            require_scope(None, f"LineageCaptureCallback ({what})")
        logger.warning("LineageCaptureCallback: no scope for run %s; %s not remembered", run_id, what)
        return None

    # ------------------------------------------------------------------ chains
    def chain_start(
        self, inputs: Any, run_id: str, parent: str | None, metadata: Mapping[str, Any] | None, name: str | None
    ) -> None:
        run = _Run(id=run_id, kind="chain", name=name, parent=parent, scope=self._scope_for(metadata, parent))
        with self._lock:
            self._runs[run_id] = run
        if parent is not None or self._writable(run.scope, run_id, "run") is None:
            return
        assert run.scope is not None
        recalled = inputs.get(RECALLED_KEY) if isinstance(inputs, Mapping) else None
        text = user_text(inputs) if self.capture_user_input else ""
        run.capture = self.recorder.start_run(
            run.scope, run_id, text, name=name, framework="langchain",
            recalled=[x for x in recalled if isinstance(x, str)] if isinstance(recalled, list) else (),
            reconciler=self.reconciler,
        )  # fmt: skip

    def chain_end(self, outputs: Any, run_id: str, outcome: str, error: BaseException | None = None) -> None:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            return
        cap = run.capture
        if cap is not None:
            for action in run.actions:  # actions whose tool run this handler never saw (attached at construction)
                self.recorder.tool_start(cap, action.tool_call_id, action.tool, action.tool_input)
            run.actions.clear()
            if outcome == "success" and isinstance(outputs, Mapping):
                messages = outputs.get("messages")
                text = final_ai_text(messages) if isinstance(messages, list) else ""
                if text.strip():
                    self.recorder.answer(cap, text)
            self.recorder.end_run(cap, outcome=outcome, error=repr(error) if error is not None else None)
        with self._lock:
            if run.parent is None:  # forget the whole run tree
                for other in [r.id for r in self._runs.values()]:
                    root = self._root(other)
                    if root is not None and root.id == run_id:
                        self._runs.pop(other, None)
            self._runs.pop(run_id, None)

    # ------------------------------------------------------------------ model calls and retrievals
    def llm_start(
        self, run_id: str, parent: str | None, metadata: Mapping[str, Any] | None, name: str | None,
        kind: str = "llm_call",
    ) -> None:  # fmt: skip
        run = _Run(id=run_id, kind=kind, name=name, parent=parent, scope=self._scope_for(metadata, parent))
        with self._lock:
            self._runs[run_id] = run
        if kind == "retrieval" and run.scope is not None:  # the retriever records `used` edges from this id
            self.manager.record_activity(
                Activity(id=run_id, kind=kind, name=name, scope=run.scope, metadata={"framework": "langchain"})
            )
            run.recorded = True

    def llm_end(self, run_id: str, outcome: str, payload: Any = None) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is None:
            return
        if run.recorded and run.scope is not None:  # recorded runs always have a scope
            meta = payload if isinstance(payload, dict) else None
            self.manager.end_activity(run_id, scope=run.scope, outcome=outcome, metadata=meta)
            return
        cap = self._capture(run.parent)
        if cap is None or outcome != "success" or not isinstance(payload, LLMResult):
            return
        message = _ai_message(payload)
        if message is None:
            return
        calls = [ToolCallSpec(c["id"] or new_id(), c["name"], c.get("args") or {}) for c in message.tool_calls]
        # Text without tool calls is not yet the answer: AgentExecutor reports it through on_agent_finish and
        # ReAct models write their actions as text.
        self.recorder.model_step(cap, text=text_of(message) if calls else None, tool_calls=calls, name=run.name)

    # ------------------------------------------------------------------ agent steps
    def agent_action(self, action: AgentAction, run_id: str) -> None:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            return
        call_id = getattr(action, "tool_call_id", None)
        with self._lock:
            run.actions.append(_Action(action.tool, action.tool_input, call_id))
        cap = self._capture(run_id)
        if cap is None or call_id is not None:  # tool-calling agents: the model step already recorded the call
            return
        # Text-based agents (ReAct): the action log is the step's reasoning; markers in it are citations.
        log = action_text(action.log)
        reasoning = log if self.capture_reasoning else None
        self.recorder.model_step(cap, reasoning=reasoning, name=run.name)

    def agent_finish(self, finish: AgentFinish, run_id: str) -> None:
        cap = self._capture(run_id)
        if cap is None:
            return
        values = finish.return_values or {}
        text = text_of(values.get("output", next(iter(values.values()), "")))
        if text.strip():
            self.recorder.answer(cap, text)

    # ------------------------------------------------------------------ tools
    def tool_start(
        self, run_id: str, parent: str | None, name: str, input_str: str, inputs: Any, tool_call_id: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> None:  # fmt: skip
        action = self._match_action(parent, name, inputs, input_str) if parent is not None else None
        if tool_call_id is None and action is not None:
            tool_call_id = action.tool_call_id
        arguments = inputs if isinstance(inputs, Mapping) else (action.tool_input if action else input_str)
        run = _Run(id=run_id, kind="tool_call", name=name, parent=parent, scope=self._scope_for(metadata, parent))
        with self._lock:
            self._runs[run_id] = run
        cap = self._capture(parent)
        if cap is not None:
            run.tool_call_id = self.recorder.tool_start(cap, tool_call_id, name, arguments, framework_id=run_id)

    def _match_action(self, parent: str, name: str, inputs: Any, input_str: str) -> _Action | None:
        """Pair an AgentExecutor tool run with its ``on_agent_action``: same executor run, same tool, same input."""
        with self._lock:
            owner = self._runs.get(parent)
            if owner is None:
                return None
            same_tool = [a for a in owner.actions if a.tool == name]
            exact = [a for a in same_tool if a.tool_input == inputs or a.tool_input == input_str]
            candidates = exact or same_tool
            chosen = candidates[0] if candidates else None
            if chosen is not None:
                owner.actions.remove(chosen)
            return chosen

    def tool_end(self, output: Any, run_id: str) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        cap = self._capture(run.parent) if run is not None else None
        if run is None or cap is None:
            return
        text, outcome, _ = tool_output(output)
        if outcome == "error" or run.name in _FALLBACK_TOOLS:
            self.recorder.tool_error(cap, run.tool_call_id, text, name=run.name)
            return
        tags = self.tool_tags.get(run.name or "", ())
        self.recorder.tool_end(cap, run.tool_call_id, text, name=run.name, tags=tags)

    def tool_error(self, error: BaseException, run_id: str, tool_call_id: str | None) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        cap = self._capture(run.parent) if run is not None else None
        if run is None or cap is None:
            return
        text = f"{type(error).__name__}: {error}"
        self.recorder.tool_error(cap, run.tool_call_id or tool_call_id, text, name=run.name)


def _ai_message(response: LLMResult) -> AIMessage | None:
    """The AI message of a chat model response (``None`` for plain-text LLMs)."""
    for generations in response.generations:
        for gen in generations:
            message = getattr(gen, "message", None)
            if isinstance(message, AIMessage):
                return message
    return None


def _tool_name(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> str:
    return str(kwargs.get("name") or (serialized or {}).get("name") or "tool")


def _run_name(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> str | None:
    name = kwargs.get("name") or (serialized or {}).get("name")
    if name is None and serialized and isinstance(serialized.get("id"), list) and serialized["id"]:
        name = serialized["id"][-1]
    return str(name) if name is not None else None


def _sid(value: UUID | None) -> str | None:
    return str(value) if value is not None else None


def _guard(fn: F) -> F:
    """Log a handler failure instead of breaking the host run (re-raise when ``raise_error``)."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        where = f"{type(self).__name__}.{fn.__name__}"
        with hook_span(where, self._recorder.scope):  # one span per callback
            try:
                return fn(self, *args, **kwargs)
            except Exception as exc:
                if self.raise_error:
                    raise
                self.manager.record_adapter_error(where, exc, scope=self._recorder.scope)
                return None

    return wrapper  # type: ignore[return-value]


def _aguard(fn: F) -> F:
    """Async :func:`_guard`."""

    @functools.wraps(fn)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        where = f"{type(self).__name__}.{fn.__name__}"
        with hook_span(where, self._recorder.scope):
            try:
                return await fn(self, *args, **kwargs)
            except Exception as exc:
                if self.raise_error:
                    raise
                await asyncio.to_thread(self.manager.record_adapter_error, where, exc, scope=self._recorder.scope)
                return None

    return wrapper  # type: ignore[return-value]


class _CaptureSetup:
    """The constructor shared by the sync and async handlers (both delegate to one :class:`_Recorder`)."""

    raise_error: bool

    def __init__(
        self,
        manager: MemoryManager,
        *,
        scope: Scope | Mapping[str, Any] | str | None = None,
        capture_user_input: bool = True,
        capture_reasoning: bool = True,
        raise_error: bool = False,
        tool_tags: Mapping[str, Sequence[str]] | None = None,
        llm: Any = None,
    ) -> None:
        self.manager = manager
        self.raise_error = raise_error
        self._recorder = _Recorder(
            manager,
            Scope.coerce(scope) if scope is not None else None,
            capture_user_input=capture_user_input,
            capture_reasoning=capture_reasoning,
            strict=lambda: self.raise_error,
            tool_tags=tool_tags,
            reconciler=manager.model_reconciler(llm),
        )


class LineageCaptureCallback(_CaptureSetup, BaseCallbackHandler):
    """Capture LangChain runs as MemLineage activities and memories with lineage.

    The handler translates callback events into the shared :class:`~memlineage.capture.RunRecorder`, which
    decides what is stored: a top-level run is an ``agent_run`` activity (framework ``run_id`` as its
    ``run_id`` attribute) with its input as a ``user`` memory; each model call is an ``llm_call`` activity, and
    text it sends with tool calls an ``agent`` memory; each tool call is a ``tool_call`` activity holding the
    model's ``tool_call_id`` and the arguments as JSON, its result a ``tool:<name>`` memory derived from what
    supplied the arguments; the final answer an ``agent`` memory derived from what it cites or from the run's tool
    results. The memories :class:`LineageMemory` recalled into the run are its context; with both attached, each
    turn is written once.

    Tool calls are joined by run ids: under ``AgentExecutor`` the tool hooks get no ``tool_call_id``, so the id is
    taken from the matching ``on_agent_action`` of the executor run (same tool, same input; parallel calls to the
    same tool are paired one to one); under ``create_agent`` it comes with ``on_tool_start`` / the
    ``ToolMessage``. A tool that never reports an end is closed with outcome ``unknown`` when the run ends; an
    error (raised, or a ``ToolMessage`` with ``status="error"``) or a fallback closes the call with
    ``outcome="error"`` and is never stored as a memory. Handler failures are logged and never break the host
    run unless ``raise_error=True``.

    Setup:
        ``pip install "memlineage[langchain]"``.

    Instantiate:
        >>> from memlineage import Scope
        >>> from memlineage.testing import make_manager
        >>> handler = LineageCaptureCallback(make_manager(), scope=Scope(user_id="alice", session_id="s1"))

    Use:
        Attach it at construction (``AgentExecutor(..., callbacks=[handler])``) or per call
        (``executor.invoke(inputs, config={"callbacks": [handler], "metadata": {"user_id": "alice"}})``). Without
        a constructor scope the scope comes from run metadata ``user_id`` / ``session_id`` (``thread_id``).

    Args:
        manager: The memory manager to write to.
        scope: Fixed scope; ``None`` = from each run's metadata.
        capture_user_input: Remember the input of top-level runs as a ``user`` memory.
        capture_reasoning: Read text agents' action logs (ReAct thoughts) for cited ``[m:<id>]`` markers.
        raise_error: Re-raise handler failures (for tests).
        tool_tags: Tags per tool name added to that tool's result memories, so policies can target them (e.g.
            ``{"get_flight_price": ["flight_price"]}`` with a ``freshness("flight_price", 3600)`` policy).
        llm: The agent's chat model: it judges whether what the user says updates a memory
            (:meth:`~memlineage.MemoryManager.model_reconciler`); None = the store's reconciler (offline rules).
    """

    @override
    @_guard
    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._recorder.chain_start(inputs, str(run_id), _sid(parent_run_id), metadata, _run_name(serialized, kwargs))

    @override
    @_guard
    def on_chain_end(
        self, outputs: dict[str, Any], *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._recorder.chain_end(outputs, str(run_id), "success")

    @override
    @_guard
    def on_chain_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._recorder.chain_end(None, str(run_id), "error", error)

    @override
    @_guard
    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._recorder.llm_start(str(run_id), _sid(parent_run_id), metadata, _run_name(serialized, kwargs))

    @override
    @_guard
    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._recorder.llm_start(str(run_id), _sid(parent_run_id), metadata, _run_name(serialized, kwargs))

    @override
    @_guard
    def on_llm_end(
        self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._recorder.llm_end(str(run_id), "success", response)

    @override
    @_guard
    def on_llm_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._recorder.llm_end(str(run_id), "error", {"error": repr(error)})

    @override
    @_guard
    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._recorder.llm_start(
            str(run_id), _sid(parent_run_id), metadata, _run_name(serialized, kwargs), kind="retrieval"
        )

    @override
    @_guard
    def on_retriever_end(
        self, documents: Sequence[Document], *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._recorder.llm_end(str(run_id), "success", {"documents": len(documents)})

    @override
    @_guard
    def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._recorder.llm_end(str(run_id), "error", {"error": repr(error)})

    @override
    @_guard
    def on_agent_action(
        self, action: AgentAction, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._recorder.agent_action(action, str(run_id))

    @override
    @_guard
    def on_agent_finish(
        self, finish: AgentFinish, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._recorder.agent_finish(finish, str(run_id))

    @override
    @_guard
    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._recorder.tool_start(
            str(run_id), _sid(parent_run_id), _tool_name(serialized, kwargs), input_str, inputs,
            kwargs.get("tool_call_id"), metadata,
        )  # fmt: skip

    @override
    @_guard
    def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._recorder.tool_end(output, str(run_id))

    @override
    @_guard
    def on_tool_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._recorder.tool_error(error, str(run_id), kwargs.get("tool_call_id"))


class AsyncLineageCaptureCallback(_CaptureSetup, AsyncCallbackHandler):
    """Async :class:`LineageCaptureCallback`: the same capture, each write offloaded to a worker thread.

    Setup:
        ``pip install "memlineage[langchain]"``.

    Instantiate:
        >>> from memlineage.testing import make_manager
        >>> handler = AsyncLineageCaptureCallback(make_manager(), scope="alice")

    Use:
        ``await executor.ainvoke(inputs, config={"callbacks": [handler]})``. Errors raised by async handlers are
        only propagated on async paths; test with ``raise_error=True`` and ``ainvoke``.

    Args:
        Those of :class:`LineageCaptureCallback`.
    """

    @override
    @_aguard
    async def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        await asyncio.to_thread(
            self._recorder.chain_start, inputs, str(run_id), _sid(parent_run_id), metadata,
            _run_name(serialized, kwargs),
        )  # fmt: skip

    @override
    @_aguard
    async def on_chain_end(
        self, outputs: dict[str, Any], *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        await asyncio.to_thread(self._recorder.chain_end, outputs, str(run_id), "success")

    @override
    @_aguard
    async def on_chain_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        await asyncio.to_thread(self._recorder.chain_end, None, str(run_id), "error", error)

    @override
    @_aguard
    async def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        await asyncio.to_thread(
            self._recorder.llm_start,
            str(run_id),
            _sid(parent_run_id),
            metadata,
            _run_name(serialized, kwargs),
        )

    @override
    @_aguard
    async def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        await asyncio.to_thread(
            self._recorder.llm_start,
            str(run_id),
            _sid(parent_run_id),
            metadata,
            _run_name(serialized, kwargs),
        )

    @override
    @_aguard
    async def on_llm_end(
        self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        await asyncio.to_thread(self._recorder.llm_end, str(run_id), "success", response)

    @override
    @_aguard
    async def on_llm_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        await asyncio.to_thread(self._recorder.llm_end, str(run_id), "error", {"error": repr(error)})

    @override
    @_aguard
    async def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        await asyncio.to_thread(
            self._recorder.llm_start, str(run_id), _sid(parent_run_id), metadata, _run_name(serialized, kwargs),
            "retrieval",
        )  # fmt: skip

    @override
    @_aguard
    async def on_retriever_end(
        self, documents: Sequence[Document], *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        await asyncio.to_thread(self._recorder.llm_end, str(run_id), "success", {"documents": len(documents)})

    @override
    @_aguard
    async def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        await asyncio.to_thread(self._recorder.llm_end, str(run_id), "error", {"error": repr(error)})

    @override
    @_aguard
    async def on_agent_action(
        self, action: AgentAction, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        await asyncio.to_thread(self._recorder.agent_action, action, str(run_id))

    @override
    @_aguard
    async def on_agent_finish(
        self, finish: AgentFinish, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        await asyncio.to_thread(self._recorder.agent_finish, finish, str(run_id))

    @override
    @_aguard
    async def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        await asyncio.to_thread(
            self._recorder.tool_start, str(run_id), _sid(parent_run_id), _tool_name(serialized, kwargs),
            input_str, inputs, kwargs.get("tool_call_id"), metadata,
        )  # fmt: skip

    @override
    @_aguard
    async def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        await asyncio.to_thread(self._recorder.tool_end, output, str(run_id))

    @override
    @_aguard
    async def on_tool_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        await asyncio.to_thread(self._recorder.tool_error, error, str(run_id), kwargs.get("tool_call_id"))
