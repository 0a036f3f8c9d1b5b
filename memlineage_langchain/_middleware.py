"""``LineageMiddleware``: memory with lineage for ``langchain.agents.create_agent``."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command
from memlineage.capture import CaptureRun, RunRecorder, ToolCallSpec, ashield, shield
from memlineage.errors import InvalidInputError
from memlineage.manager import MemoryManager
from memlineage.models import Scope, new_id
from typing_extensions import NotRequired, override

from memlineage_langchain._convert import (
    final_ai_text,
    last_human_text,
    memory_note,
    require_scope,
    scope_from_config,
    scope_from_mapping,
    text_of,
    tool_output,
)

__all__ = ["LineageMiddleware"]

logger = logging.getLogger(__name__)


class LineageState(AgentState[Any]):
    """Agent state with MemLineage's private keys (never part of the agent's input or output schema)."""

    memlineage_run: NotRequired[Annotated[str, PrivateStateAttr]]
    memlineage_notes: NotRequired[Annotated[str, PrivateStateAttr]]


def _runtime_scope(runtime: Any) -> Scope | None:
    context = getattr(runtime, "context", None)
    found = scope_from_mapping(context) if isinstance(context, Mapping) else None
    if found is None and context is not None and getattr(context, "user_id", None):
        found = scope_from_mapping({k: getattr(context, k, None) for k in ("user_id", "agent_id", "session_id")})
    if found is None:
        found = scope_from_config(getattr(runtime, "config", None))
    if found is None:
        try:
            from langgraph.config import get_config

            found = scope_from_config(get_config())
        except RuntimeError:  # outside a runnable context
            found = None
    return found


def _ai_messages(response: Any) -> list[AIMessage]:
    """The AI messages of a model call's result (``ModelResponse``, ``ExtendedModelResponse`` or an AIMessage)."""
    if isinstance(response, AIMessage):
        return [response]
    inner = getattr(response, "model_response", None)
    result = getattr(inner if inner is not None else response, "result", None)
    return [m for m in result or [] if isinstance(m, AIMessage)]


class LineageMiddleware(AgentMiddleware[LineageState, Any, Any]):
    """Recall memories into the model call and capture the run with lineage, for ``create_agent``.

    Every moment is handed to the shared :class:`~memlineage.capture.RunRecorder`, which decides what is stored:

    - ``before_agent``: recalls the memories relevant to the user's last message and starts the run (the message
      becomes a ``user`` memory).
    - ``wrap_model_call``: appends the recalled memories to the system message as one delimited data block
      (``<recalled_memories>`` ... ``</recalled_memories>``, after the header and a note that the lines are quoted
      data): one line each with its citable ``[m:<id>]`` marker, status, who said it and date, and the text as one
      quoted string, so a tool result can never pose as the user's or the system's words (the message history is
      untouched); the model's tool calls and the text sent with them are recorded.
    - ``wrap_tool_call``: the tool result becomes a ``tool:<name>`` memory derived from what supplied the call's
      arguments; an error (``ToolMessage(status="error")`` or raised) closes the call with ``outcome="error"``
      and is never stored as a memory; raised errors propagate.
    - ``after_agent``: the final answer becomes an ``agent`` memory derived from what it cites, else from the
      run's tool results; the run is closed.

    The scope is the constructor's, else ``user_id`` / ``session_id`` from the runtime context or the run config
    (``metadata`` or ``configurable``; ``thread_id`` serves as the session). Without one it raises
    ``InvalidInputError``.

    Setup:
        ``pip install "memlineage[langchain]"``.

    Instantiate:
        >>> from memlineage.testing import make_manager
        >>> middleware = LineageMiddleware(make_manager(), scope="alice")

    Use:
        ``agent = create_agent(model, tools, middleware=[middleware])``, then
        ``agent.invoke({"messages": [...]}, config={"metadata": {"user_id": "alice"}})``.

    Args:
        manager: The memory manager.
        scope: Fixed scope; ``None`` = from the runtime context / run config.
        k: Memories recalled per turn.
        include_suspect: Also recall suspect memories (flagged in the note).
        header: Text put before the recalled memories in the system message.
        max_note_tokens: Token budget of that note (header included, tiktoken ``cl100k_base``), ≥ 1; memories are
            added best first while they fit, and a memory longer than what is left is cut with an ellipsis.
            Default 1,000. Only the memories shown become the run's context.
        model: The chat model that judges whether what the user says updates a memory
            (:meth:`~memlineage.MemoryManager.model_reconciler`): ``"agent"`` (default) = the agent's own model,
            learnt from its first model call (the first turn of a middleware's life is judged by the store's rules);
            a model object; or None = the store's reconciler only. A store opened with ``reconciler=None`` stays
            without update detection.

    Raises:
        InvalidInputError: ``max_note_tokens`` is not a positive int.
    """

    state_schema = LineageState

    def __init__(
        self,
        manager: MemoryManager,
        *,
        scope: Scope | Mapping[str, Any] | str | None = None,
        k: int = 5,
        include_suspect: bool = False,
        header: str = "Relevant memories (cite the ones you use as [m:<id>]):",
        max_note_tokens: int = 1000,
        model: Any = "agent",
    ) -> None:
        super().__init__()
        self.model = model
        if isinstance(max_note_tokens, bool) or not isinstance(max_note_tokens, int) or max_note_tokens < 1:
            msg = f"max_note_tokens must be a positive int, got {max_note_tokens!r}"
            raise InvalidInputError(msg)
        self.max_note_tokens = max_note_tokens
        self.manager = manager
        self.scope = Scope.coerce(scope) if scope is not None else None
        self.k = k
        self.include_suspect = include_suspect
        self.header = header
        self._recorder = RunRecorder.of(manager)

    def _scope(self, runtime: Any) -> Scope:
        return require_scope(self.scope or _runtime_scope(runtime), "LineageMiddleware")

    def _reconciler(self) -> Any:
        """The agent's model as reconciler (see ``model``), or None for the store's own."""
        model = None if isinstance(self.model, str) else self.model
        return self.manager.model_reconciler(model)

    def _learn_model(self, request: ModelRequest[Any]) -> None:
        if self.model == "agent" and getattr(request, "model", None) is not None:
            self.model = request.model

    def _run(self, state: Any, runtime: Any) -> CaptureRun | None:
        """The run recorded for this agent invocation (state and run are keyed by scope and run id)."""
        run_id = state.get("memlineage_run") if isinstance(state, Mapping) else None
        return self._recorder.run(self._scope(runtime), run_id) if run_id else None

    # ------------------------------------------------------------------ turn start / end
    def _start(self, scope: Scope, text: str, hits: list[Any]) -> dict[str, Any]:
        note, count = memory_note(self.header, hits, self.max_note_tokens)
        shown = [h.memory for h in hits[:count]]
        run = self._recorder.start_run(
            scope, new_id(), text, name="create_agent", framework="langchain", recalled=shown,
            reconciler=self._reconciler(),
        )  # fmt: skip
        return {"memlineage_run": run.run_id, "memlineage_notes": note}

    @override
    def before_agent(self, state: LineageState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        scope = self._scope(runtime)
        text = last_human_text(state.get("messages", []))
        if not text.strip():
            return None
        return shield(self.manager, "LineageMiddleware.before_agent", self._begin, scope, text, scope=scope)

    def _begin(self, scope: Scope, text: str) -> dict[str, Any]:
        recalled = self.manager.recall(text, scope=scope, k=self.k, include_suspect=self.include_suspect)
        return self._start(scope, text, list(recalled))

    @override
    async def abefore_agent(self, state: LineageState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        scope = self._scope(runtime)
        text = last_human_text(state.get("messages", []))
        if not text.strip():
            return None
        begin = functools.partial(asyncio.to_thread, self._begin, scope, text)
        return await ashield(self.manager, "LineageMiddleware.before_agent", begin, scope=scope)

    def _finish(self, state: LineageState, runtime: Any) -> None:
        run = self._run(state, runtime)
        if run is None:
            return
        self._recorder.answer(run, final_ai_text(state.get("messages", [])))
        self._recorder.end_run(run)

    @override
    def after_agent(self, state: LineageState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        shield(self.manager, "LineageMiddleware.after_agent", self._finish, state, runtime, scope=self.scope)
        return None

    @override
    async def aafter_agent(self, state: LineageState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        finish = functools.partial(asyncio.to_thread, self._finish, state, runtime)
        await ashield(self.manager, "LineageMiddleware.after_agent", finish, scope=self.scope)
        return None

    # ------------------------------------------------------------------ model calls
    def _with_notes(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        notes = request.state.get("memlineage_notes") if isinstance(request.state, Mapping) else None
        if not notes:
            return request
        base = text_of(request.system_message) if request.system_message is not None else ""
        content = f"{base}\n\n{notes}" if base else str(notes)
        return request.override(system_message=SystemMessage(content=content))

    def _model_step(self, request: ModelRequest[Any], response: Any) -> None:
        run = self._run(request.state, request.runtime)
        if run is None:
            return
        for message in _ai_messages(response):
            if message.tool_calls:
                calls = [ToolCallSpec(c["id"] or new_id(), c["name"], c.get("args") or {}) for c in message.tool_calls]
                self._recorder.model_step(run, text=text_of(message), tool_calls=calls)

    @override
    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        self._learn_model(request)
        noted = shield(self.manager, "LineageMiddleware.wrap_model_call", self._with_notes, request, default=request)
        response = handler(noted)
        shield(self.manager, "LineageMiddleware.wrap_model_call", self._model_step, request, response)
        return response

    @override
    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        self._learn_model(request)
        noted = shield(self.manager, "LineageMiddleware.awrap_model_call", self._with_notes, request, default=request)
        response = await handler(noted)
        step = functools.partial(asyncio.to_thread, self._model_step, request, response)
        await ashield(self.manager, "LineageMiddleware.awrap_model_call", step)
        return response

    # ------------------------------------------------------------------ tool calls
    def _tool_start(self, request: ToolCallRequest) -> tuple[CaptureRun | None, str | None]:
        run = self._run(request.state, request.runtime)
        if run is None:
            return None, None
        call = request.tool_call
        return run, self._recorder.tool_start(run, call.get("id"), call["name"], call.get("args") or {})

    def _tool_end(self, run: CaptureRun | None, call_id: str | None, result: Any) -> None:
        if run is None:
            return
        text, outcome, _ = tool_output(result)
        if outcome == "error":
            self._recorder.tool_error(run, call_id, text)
        else:
            if run.reconciler is None:
                run.reconciler = self._reconciler()  # learnt from the model call that asked for the tool
            self._recorder.tool_end(run, call_id, text)

    def _tool_failed(self, run: CaptureRun | None, call_id: str | None, exc: BaseException) -> None:
        if run is not None:
            self._recorder.tool_error(run, call_id, f"{type(exc).__name__}: {exc}")

    @override
    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        where = "LineageMiddleware.wrap_tool_call"
        run, call_id = shield(self.manager, where, self._tool_start, request, default=(None, None))
        try:
            with self._recorder.in_call(run, call_id):  # the tool's own store writes carry this call's lineage
                result = handler(request)
        except Exception as exc:
            shield(self.manager, where, self._tool_failed, run, call_id, exc)
            raise  # the tool's own error, not memory's: the framework handles it as it would without memory
        shield(self.manager, where, self._tool_end, run, call_id, result)
        return result

    @override
    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        where = "LineageMiddleware.awrap_tool_call"
        start = functools.partial(asyncio.to_thread, self._tool_start, request)
        run, call_id = await ashield(self.manager, where, start, default=(None, None))
        try:
            with self._recorder.in_call(run, call_id):
                result = await handler(request)
        except Exception as exc:
            await ashield(
                self.manager, where, functools.partial(asyncio.to_thread, self._tool_failed, run, call_id, exc)
            )
            raise  # the tool's own error, not memory's
        await ashield(self.manager, where, functools.partial(asyncio.to_thread, self._tool_end, run, call_id, result))
        return result
