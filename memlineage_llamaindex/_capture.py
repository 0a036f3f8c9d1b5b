"""Automatic tool-call capture for LlamaIndex workflow agents (``FunctionAgent``, ``ReActAgent``).

In llama-index-core 0.14 workflow agents emit neither ``AgentToolCallEvent`` nor
``CBEventType.FUNCTION_CALL``.
Tool calls surface in two places, and there is one capture mechanism for each:

* **Stream events** (recommended): ``capture_run(handler, manager, scope=...)`` consumes
  ``handler.stream_events()`` of one run: ``AgentInput`` / ``AgentOutput`` (one LLM step), ``ToolCall`` /
  ``ToolCallResult`` (tool name, kwargs, ``tool_id``, ``ToolOutput.is_error``) and ``StopEvent``. It is per
  run, so the scope is explicit and concurrent runs of different users never mix; it is async (the core calls
  run in a worker thread).
* **Instrumentation** (for code you cannot wrap, e.g. a server that builds the agents):
  ``LineageEventHandler(...).register()`` adds an event handler and a span handler to
  ``llama_index.core.instrumentation.get_dispatcher()``. The span handler sees the ``<Agent>.run-*`` span
  (user turn, final answer) and the ``BaseWorkflowAgent.call_tool-*`` spans (``ToolCall`` in,
  ``ToolCallResult`` out); the event handler turns ``LLMChatStartEvent`` / ``LLMChatEndEvent`` into reasoning
  activities whose id is the LLM span id. The dispatcher is process-global: give the handler one scope for a
  single-user app, or name the scope per run with
  ``instrument_tags({"memlineage.user_id": ..., "memlineage.session_id": ...})`` around ``agent.run``; runs
  with no scope are skipped (never written to a shared pool). Handlers are called synchronously, so its core
  calls are too; the dispatcher swallows handler errors, which are logged (``raise_error=True`` re-raises).

Both translate into the shared :class:`~memlineage.capture.RunRecorder`, which decides what is stored, the
same way for every framework: an ``agent_run`` activity with the user turn (source ``user``); one ``llm_call``
activity per model step (its text stored when it comes with tool calls); one ``tool_call`` activity per call,
with the framework's ``tool_id`` as its ``tool_call_id`` attribute (unique per user and run, never a key) and
the arguments as JSON; the result stored as ``tool:<name>`` (``name(arg='v') -> output``) derived from what
supplied its arguments. A failed call (``is_error=True``) only closes its activity with ``outcome="error"`` and
the error text; it is never stored as a result. The final answer (source ``agent``) derives from what it cites,
else from the run's tool results.

With :func:`~memlineage_llamaindex.lineage_memory` as the run's ``memory``, the block hands what it recalled to
the same recorder, so the recalled memories are the run's context (what markers cite, what arguments are
matched against), and the block and the capture join one run: each memory is written once.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llama_index.core.agent.workflow import AgentInput, AgentOutput, ToolCall, ToolCallResult
from llama_index.core.agent.workflow.base_agent import BaseWorkflowAgent
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import Dispatcher, get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent
from llama_index.core.instrumentation.span import SimpleSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.llms import ChatMessage
from llama_index.core.workflow import StopEvent
from memlineage.capture import CaptureRun, RunRecorder, ToolCallSpec, ashield, hook_span
from memlineage.manager import MemoryManager
from memlineage.models import Scope, new_id
from typing_extensions import override

from memlineage_llamaindex._convert import (
    latest_user_text,
    message_text,
    scope_from_tags,
    tool_calls_of,
)

__all__ = ["LineageEventHandler", "LineageSpanHandler", "capture_run"]

logger = logging.getLogger(__name__)


# ====================================================================== shared translation
@dataclass
class _Run:
    """An agent run being captured: its scope and the recorder's run (once started)."""

    run_id: str
    scope: Scope
    capture: CaptureRun | None = None


class _Recorder:
    """Translates agent-run moments into :class:`~memlineage.capture.RunRecorder` calls (no rules here)."""

    def __init__(self, manager: MemoryManager) -> None:
        self.manager = manager
        self.recorder = RunRecorder.of(manager)

    def _cap(self, run: _Run) -> CaptureRun:
        if run.capture is None:
            run.capture = self.recorder.start_run(run.scope, run.run_id, None, framework="llamaindex")
        return run.capture

    def start_run(self, run: _Run, user_text: str | None, name: str | None) -> None:
        run.capture = self.recorder.start_run(run.scope, run.run_id, user_text, name=name, framework="llamaindex")

    def model_step(self, run: _Run, text: str, tool_calls: list[ToolCallSpec], framework_id: str | None) -> None:
        self.recorder.model_step(
            self._cap(run), text=text if tool_calls else None, tool_calls=tool_calls, framework_id=framework_id
        )

    def start_tool(
        self, run: _Run, tool_id: str, tool_name: str, tool_kwargs: Mapping[str, Any], span_id: str | None = None
    ) -> None:
        self.recorder.tool_start(self._cap(run), tool_id, tool_name, dict(tool_kwargs), framework_id=span_id)

    def end_tool(
        self, run: _Run, tool_id: str, tool_name: str, tool_kwargs: Mapping[str, Any], output: str, is_error: bool
    ) -> None:
        cap = self._cap(run)
        if is_error:
            self.recorder.tool_error(cap, tool_id, output, name=tool_name, arguments=dict(tool_kwargs))
        else:
            self.recorder.tool_end(cap, tool_id, output, name=tool_name, arguments=dict(tool_kwargs))

    def answer(self, run: _Run, text: str) -> None:
        cap = self._cap(run)
        self.recorder.answer(cap, text)
        self.recorder.end_run(cap)

    def fail(self, run: _Run, error: str) -> None:
        self.recorder.end_run(self._cap(run), outcome="error", error=error)


def _output_text(result: ToolCallResult) -> str:
    output = result.tool_output
    return str(output.content if output.content is not None else output.raw_output)


def _answer_text(result: Any) -> str:
    if isinstance(result, AgentOutput):
        return message_text(result.response) or (result.response.content or "")
    return str(result) if result is not None else ""


# ====================================================================== stream events
async def capture_run(
    handler: Any,
    manager: MemoryManager,
    *,
    scope: Scope | Mapping[str, Any] | str,
    user_msg: str | None = None,
    on_event: Callable[[Any], Any] | None = None,
) -> Any:
    """Run a workflow agent to completion while recording its turn, tool calls and answer with lineage.

    When the run's memory is a :func:`~memlineage_llamaindex.lineage_memory`, the memories it recalls are the
    run's context (the block reports them to the shared recorder; nothing to pass here).

    Args:
        handler: The ``WorkflowHandler`` returned by ``agent.run(...)``; its events are consumed here.
        manager: The MemLineage store.
        scope: Owner of the run's memories; required.
        user_msg: The user turn; default the run's ``user_msg`` (read from the run context).
        on_event: Called with every streamed event (e.g. to print tokens); may be async.

    Returns:
        The run's result (``await handler``).

    Raises:
        InvalidInputError: bad scope.
        Exception: whatever the run raised; the run activity is closed with ``outcome="error"`` first.

    Example:
        >>> handler = agent.run(user_msg="Weather in Paris?", memory=memory)  # doctest: +SKIP
        >>> result = await capture_run(
        ...     handler, manager, scope={"user_id": "alice", "session_id": "s1"}
        ... )  # doctest: +SKIP
    """
    run = _Run(run_id=str(getattr(handler, "run_id", None) or new_id()), scope=Scope.coerce(scope))
    recorder = _Recorder(manager)
    started = False

    async def step(fn: Callable[..., Any], *args: Any) -> None:
        # nothing from memory raises into the agent: a failed step is logged, counted, kept as an event
        await ashield(manager, "capture_run", functools.partial(asyncio.to_thread, fn, *args), scope=run.scope)

    try:
        async for ev in handler.stream_events():
            if on_event is not None:
                maybe = on_event(ev)
                if inspect.isawaitable(maybe):
                    await maybe
            if isinstance(ev, AgentInput):
                if not started:
                    started = True
                    text = user_msg or await _run_user_msg(handler) or latest_user_text(ev.input)
                    await step(recorder.start_run, run, text, ev.current_agent_name)
            elif isinstance(ev, AgentOutput) and started:
                calls = [ToolCallSpec(t.tool_id, t.tool_name, dict(t.tool_kwargs)) for t in ev.tool_calls]
                await step(recorder.model_step, run, _answer_text(ev), calls, None)
            elif isinstance(ev, ToolCallResult):
                await step(
                    recorder.end_tool, run, ev.tool_id, ev.tool_name, ev.tool_kwargs, _output_text(ev),
                    ev.tool_output.is_error,
                )  # fmt: skip
            elif isinstance(ev, ToolCall):
                await step(recorder.start_tool, run, ev.tool_id, ev.tool_name, ev.tool_kwargs)
            elif isinstance(ev, StopEvent) and started and isinstance(ev.result, AgentOutput):
                await step(recorder.answer, run, _answer_text(ev.result))
        result = await handler
        if started and not _answered(run):
            await step(recorder.answer, run, _answer_text(result))
    except BaseException as exc:
        if started and not _answered(run):
            await step(recorder.fail, run, f"{type(exc).__name__}: {exc}")
        raise  # the run's own error (the agent's), never memory's
    return result


def _answered(run: _Run) -> bool:
    return run.capture is not None and (run.capture.answered or run.capture.ended)


async def _run_user_msg(handler: Any) -> str | None:
    value = await _run_state(handler, "user_msg_str")
    return value or None


async def _run_state(handler: Any, key: str) -> Any:
    ctx = getattr(handler, "ctx", None)
    if ctx is None:
        return None
    try:
        return await ctx.store.get(key, default=None)
    except Exception:  # the context API differs between workflow versions; the caller falls back
        return None


# ====================================================================== instrumentation
class LineageSpanHandler(BaseSpanHandler[SimpleSpan]):
    """Span handler that records agent runs and tool calls from ``<Agent>.run-*`` and ``call_tool-*`` spans.

    Built and registered by :class:`LineageEventHandler`; use it directly only to register it on another
    dispatcher.

    Setup:
        ``pip install "memlineage[llamaindex]"``.

    Instantiate:
        >>> handler = LineageEventHandler(manager=manager, scope="alice")  # doctest: +SKIP
        >>> spans = handler.span_handler  # doctest: +SKIP

    Use:
        >>> get_dispatcher().add_span_handler(spans)  # doctest: +SKIP
    """

    _owner: LineageEventHandler = PrivateAttr()

    def __init__(self, owner: LineageEventHandler) -> None:
        super().__init__(open_spans={}, completed_spans=[], dropped_spans=[], current_span_ids={})
        self._owner = owner

    @classmethod
    def class_name(cls) -> str:
        """Name used by LlamaIndex serialisation."""
        return "LineageSpanHandler"

    @override
    def new_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        self._owner._on_span_enter(id_, bound_args, instance, parent_span_id, tags)
        return SimpleSpan(id_=id_, parent_id=parent_span_id, tags=tags or {})

    @override
    def prepare_to_exit_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        self._owner._on_span_exit(id_, bound_args, instance, result)
        return self.open_spans.get(id_)

    @override
    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        self._owner._on_span_drop(id_, err)
        return self.open_spans.get(id_)


class LineageEventHandler(BaseEventHandler):
    """Captures every tool call, LLM call, user turn and answer of workflow agents through instrumentation.

    LLM chat start/end events become ``llm_call`` activities (id = the LLM span id); the companion
    :class:`LineageSpanHandler` records runs and tool calls. When a run's ``memory`` is a
    :func:`~memlineage_llamaindex.lineage_memory`, its tool results and answer also derive from the memories
    recalled into the run's context, as with :func:`capture_run`. See the module docstring for when to prefer
    :func:`capture_run`.

    Setup:
        ``pip install "memlineage[llamaindex]"``.

    Instantiate:
        >>> from memlineage.testing import make_manager
        >>> handler = LineageEventHandler(manager=make_manager(), scope={"user_id": "alice", "session_id": "s1"})

    Use:
        >>> handler.register()  # adds the event and span handlers to get_dispatcher()  # doctest: +SKIP
        >>> await agent.run(user_msg="Weather in Paris?")  # doctest: +SKIP
        >>> handler.unregister()  # doctest: +SKIP

    Args:
        manager: The MemLineage store.
        scope: Default owner of captured runs; ``None`` = only runs tagged with ``memlineage.user_id``.
        raise_error: Re-raise recording errors (the dispatcher swallows them anyway; useful when calling the
            handler directly in tests).
    """

    manager: MemoryManager = Field(exclude=True, description="The MemLineage store.")
    scope: Scope | None = Field(default=None, description="Default owner of captured runs.")
    raise_error: bool = Field(default=False, description="Re-raise recording errors instead of logging them.")

    _span_handler: LineageSpanHandler | None = PrivateAttr(default=None)
    _dispatcher: Dispatcher | None = PrivateAttr(default=None)
    _parents: dict[str, str | None] = PrivateAttr(default_factory=dict)
    _runs: dict[str, _Run] = PrivateAttr(default_factory=dict)
    _tools: dict[str, tuple[str, str]] = PrivateAttr(default_factory=dict)
    _run_spans: dict[str, list[str]] = PrivateAttr(default_factory=dict)
    _pending: dict[str, tuple[str | None, str | None]] = PrivateAttr(default_factory=dict)
    _recorder: _Recorder | None = PrivateAttr(default=None)

    def __init__(self, *, manager: MemoryManager, scope: Scope | Mapping[str, Any] | str | None = None, **kwargs: Any):
        super().__init__(manager=manager, scope=Scope.coerce(scope) if scope is not None else None, **kwargs)
        self._recorder = _Recorder(manager)

    @classmethod
    def class_name(cls) -> str:
        """Name used by LlamaIndex serialisation."""
        return "LineageEventHandler"

    @property
    def span_handler(self) -> LineageSpanHandler:
        """The companion span handler (created on first use)."""
        if self._span_handler is None:
            self._span_handler = LineageSpanHandler(self)
        return self._span_handler

    def register(self, dispatcher: Dispatcher | None = None) -> LineageEventHandler:
        """Add this handler and its span handler to ``dispatcher`` (default: ``get_dispatcher()``)."""
        d = dispatcher or get_dispatcher()
        d.add_event_handler(self)
        d.add_span_handler(self.span_handler)
        self._dispatcher = d
        return self

    def unregister(self) -> None:
        """Remove both handlers from the dispatcher they were registered with. Idempotent."""
        d = self._dispatcher
        if d is None:
            return
        d.event_handlers = [h for h in d.event_handlers if h is not self]
        d.span_handlers = [h for h in d.span_handlers if h is not self._span_handler]
        self._dispatcher = None

    # ------------------------------------------------------------------ helpers
    def _guard(self, what: str, fn: Callable[..., None], *args: Any) -> None:
        where = f"LineageEventHandler: {what}"
        with hook_span(where, self.scope):  # one span per capture step
            try:
                fn(*args)
            except Exception as exc:
                if self.raise_error:
                    raise
                self.manager.record_adapter_error(where, exc, scope=self.scope)

    def _run_of(self, span_id: str | None) -> _Run | None:
        seen = 0
        while span_id is not None and seen < 1000:
            run = self._runs.get(span_id)
            if run is not None:
                return run
            span_id = self._parents.get(span_id)
            seen += 1
        return None

    # ------------------------------------------------------------------ events (LLM calls)
    @override
    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, LLMChatEndEvent):
            run = self._run_of(event.span_id)
            if run is not None and event.response is not None:
                message = event.response.message
                calls = [ToolCallSpec(i, n, a) for i, (n, a) in tool_calls_of(message).items()]
                recorder = self._recorder_()
                self._guard("an LLM call", recorder.model_step, run, message_text(message), calls, event.span_id)

    def _recorder_(self) -> _Recorder:
        assert self._recorder is not None
        return self._recorder

    # ------------------------------------------------------------------ spans (runs and tool calls)
    def _on_span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any,
        parent_id: str | None,
        tags: dict[str, Any] | None,
    ) -> None:
        args = bound_args.arguments
        outer = self._run_of(parent_id)
        if outer is None and parent_id in self._pending:
            outer = self._activate(parent_id, tags)
        if outer is not None:
            self._parents[id_] = parent_id  # only spans inside a captured run are tracked
            self._run_spans.setdefault(outer.run_id, []).append(id_)
        if isinstance(instance, BaseWorkflowAgent) and id_.startswith(f"{type(instance).__name__}.run-"):
            if outer is None:
                # The run span itself carries no instrument tags; its first step span does, so the run starts
                # there.
                self._pending[id_] = (_start_user_msg(args), instance.name)
        elif ".call_tool-" in id_ and isinstance(args.get("ev"), ToolCall) and outer is not None:
            ev = args["ev"]
            self._tools[id_] = (ev.tool_id, ev.tool_name)
            self._guard(
                "a tool call start",
                self._recorder_().start_tool,
                outer,
                ev.tool_id,
                ev.tool_name,
                ev.tool_kwargs,
                id_,
            )

    def _activate(self, run_id: str, tags: Mapping[str, Any] | None) -> _Run | None:
        user_text, name = self._pending.pop(run_id)
        scope = scope_from_tags(tags, self.scope)
        if scope is None:
            logger.debug("agent run %s has no MemLineage scope (no handler scope, no tags); skipped", run_id)
            return None
        run = _Run(run_id=run_id, scope=scope)
        self._runs[run_id] = run
        self._guard("an agent run start", self._recorder_().start_run, run, user_text, name)
        return run

    def _on_span_exit(self, id_: str, bound_args: inspect.BoundArguments, instance: Any, result: Any) -> None:
        self._pending.pop(id_, None)
        run = self._runs.get(id_)
        if run is not None:
            answer = result.result if isinstance(result, StopEvent) else result
            self._guard("an agent answer", self._recorder_().answer, run, _answer_text(answer))
            self._forget(id_)
        elif id_ in self._tools and isinstance(result, ToolCallResult):
            tool_run = self._run_of(id_)
            self._tools.pop(id_, None)
            if tool_run is not None:
                self._guard(
                    "a tool result",
                    self._recorder_().end_tool,
                    tool_run,
                    result.tool_id,
                    result.tool_name,
                    result.tool_kwargs,
                    _output_text(result),
                    result.tool_output.is_error,
                )

    def _on_span_drop(self, id_: str, err: BaseException | None) -> None:
        self._pending.pop(id_, None)
        run = self._runs.get(id_)
        if run is not None:
            self._guard("an agent run failure", self._recorder_().fail, run, f"{type(err).__name__}: {err}")
            self._forget(id_)
        self._tools.pop(id_, None)

    def _forget(self, run_id: str) -> None:
        """Drop a finished run and every span tracked under it.

        LLM spans are kept until then: a streaming call's span ends before its chat-end event.
        """
        for span_id in self._run_spans.pop(run_id, []):
            self._parents.pop(span_id, None)
        self._runs.pop(run_id, None)


def _start_user_msg(args: Mapping[str, Any]) -> str | None:
    start = args.get("start_event")
    user_msg = getattr(start, "user_msg", None) if start is not None else None
    if user_msg is None and start is not None and hasattr(start, "get"):
        user_msg = start.get("user_msg", None)
    if isinstance(user_msg, ChatMessage):
        return message_text(user_msg) or None
    if isinstance(user_msg, str) and user_msg.strip():
        return user_msg
    history = getattr(start, "chat_history", None) if start is not None else None
    return latest_user_text(history) if history else None
