"""``LineageMiddleware``: memory with lineage for ``langchain.agents.create_agent``."""

from __future__ import annotations

import logging
import threading
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
from memlineage.manager import MemoryManager
from memlineage.models import Activity, Scope
from typing_extensions import NotRequired, override

from memlineage_langchain._convert import (
    final_ai_text,
    format_memories,
    last_human_text,
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

    memlineage_context: NotRequired[Annotated[list[str], PrivateStateAttr]]
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


class LineageMiddleware(AgentMiddleware[LineageState, Any, Any]):
    """Recall memories into the model call and capture tool calls with lineage, for ``create_agent``.

    - ``before_agent``: recalls the memories relevant to the user's last message, then remembers that message as
      a ``user`` memory; both go into private state as the turn's context.
    - ``wrap_model_call``: appends the recalled memories to the system message (the message history is untouched).
    - ``wrap_tool_call``: records a ``tool_call`` activity (with the ``tool_call_id``) and remembers the result as
      a ``tool:<name>`` memory derived from the turn's context; errors (``ToolMessage(status="error")`` or raised)
      are stored with an ``outcome`` flag, never as successes, and raised errors propagate.
    - ``after_agent``: remembers the final answer as an ``agent`` memory derived from the context and the turn's
      tool results.

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
    """

    state_schema = LineageState

    def __init__(
        self,
        manager: MemoryManager,
        *,
        scope: Scope | Mapping[str, Any] | str | None = None,
        k: int = 5,
        include_suspect: bool = False,
        header: str = "Relevant memories (with their sources):",
    ) -> None:
        super().__init__()
        self.manager = manager
        self.scope = Scope.coerce(scope) if scope is not None else None
        self.k = k
        self.include_suspect = include_suspect
        self.header = header
        self._results: dict[tuple[str, str | None, str], str] = {}  # (user, session, tool_call_id) -> memory
        self._lock = threading.Lock()

    def _scope(self, runtime: Any) -> Scope:
        return require_scope(self.scope or _runtime_scope(runtime), "LineageMiddleware")

    # ------------------------------------------------------------------ turn start / end
    @override
    def before_agent(self, state: LineageState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        scope = self._scope(runtime)
        text = last_human_text(state.get("messages", []))
        if not text.strip():
            return None
        recalled = self.manager.recall(text, scope=scope, k=self.k, include_suspect=self.include_suspect)
        turn = self.manager.remember(text, scope=scope, source="user")
        return self._context(turn.id, [h.memory for h in recalled])

    @override
    async def abefore_agent(self, state: LineageState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        scope = self._scope(runtime)
        text = last_human_text(state.get("messages", []))
        if not text.strip():
            return None
        recalled = await self.manager.arecall(text, scope=scope, k=self.k, include_suspect=self.include_suspect)
        turn = await self.manager.aremember(text, scope=scope, source="user")
        return self._context(turn.id, [h.memory for h in recalled])

    def _context(self, turn_id: str, memories: list[Any]) -> dict[str, Any]:
        notes = f"{self.header}\n{format_memories(memories)}" if memories else ""
        ids = list(dict.fromkeys([turn_id, *(m.id for m in memories)]))
        return {"memlineage_context": ids, "memlineage_notes": notes}

    def _answer(self, state: LineageState, scope: Scope) -> tuple[str, list[str]]:
        messages = state.get("messages", [])
        text = final_ai_text(messages)
        call_ids = []
        for m in reversed(messages):
            if isinstance(m, ToolMessage):
                call_ids.append(m.tool_call_id)
            elif not isinstance(m, AIMessage):
                break
        with self._lock:
            keys = [(scope.user_id, scope.session_id, c) for c in reversed(call_ids)]
            tools = [self._results.pop(k) for k in keys if k in self._results]
        return text, list(dict.fromkeys([*state.get("memlineage_context", []), *tools]))

    @override
    def after_agent(self, state: LineageState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        scope = self._scope(runtime)
        text, premises = self._answer(state, scope)
        if text.strip():
            self.manager.remember(text, scope=scope, source="agent", derived_from=premises)
        return None

    @override
    async def aafter_agent(self, state: LineageState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        scope = self._scope(runtime)
        text, premises = self._answer(state, scope)
        if text.strip():
            await self.manager.aremember(text, scope=scope, source="agent", derived_from=premises)
        return None

    # ------------------------------------------------------------------ model calls
    def _with_notes(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        notes = request.state.get("memlineage_notes") if isinstance(request.state, Mapping) else None
        if not notes:
            return request
        base = text_of(request.system_message) if request.system_message is not None else ""
        content = f"{base}\n\n{notes}" if base else notes
        return request.override(system_message=SystemMessage(content=content))

    @override
    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return handler(self._with_notes(request))

    @override
    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(self._with_notes(request))

    # ------------------------------------------------------------------ tool calls
    def _tool_start(self, request: ToolCallRequest) -> tuple[Scope, Activity, list[str]]:
        scope = self._scope(request.runtime)
        call = request.tool_call
        act = Activity(
            kind="tool_call", name=call["name"], scope=scope, tool_call_id=call.get("id"),
            metadata={"tool_call_id": call.get("id"), "input": text_of(call.get("args"))[:4000]},
        )  # fmt: skip
        state = request.state if isinstance(request.state, Mapping) else {}
        return scope, act, list(state.get("memlineage_context", []))

    def _tool_item(self, scope: Scope, act: Activity, premises: list[str], text: str, outcome: str) -> dict[str, Any]:
        return {
            "content": text, "scope": scope, "source": f"tool:{act.name}", "activity_id": act.id,
            "derived_from": premises, "metadata": {"tool_call_id": act.metadata["tool_call_id"], "outcome": outcome},
            "tags": () if outcome == "success" else (f"outcome:{outcome}",),
        }  # fmt: skip

    def _keep(self, act: Activity, memory_id: str, outcome: str) -> None:
        call_id = act.metadata.get("tool_call_id")
        if outcome == "success" and call_id and act.scope is not None:
            with self._lock:
                self._results[(act.scope.user_id, act.scope.session_id, call_id)] = memory_id

    @override
    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        scope, act, premises = self._tool_start(request)
        self.manager.record_activity(act)
        try:
            result = handler(request)
        except Exception as exc:
            self.manager.end_activity(act.id, scope=scope, outcome="error", metadata={"error": repr(exc)})
            text = f"{act.name} failed: {type(exc).__name__}: {exc}"
            self.manager.remember(**self._tool_item(scope, act, premises, text, "error"))
            raise
        text, outcome, _ = tool_output(result)
        self.manager.end_activity(act.id, scope=scope, outcome=outcome)
        if text.strip():
            mem = self.manager.remember(**self._tool_item(scope, act, premises, text, outcome))
            self._keep(act, mem.id, outcome)
        return result

    @override
    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        scope, act, premises = self._tool_start(request)
        await self.manager.arecord_activity(act)
        try:
            result = await handler(request)
        except Exception as exc:
            await self.manager.aend_activity(act.id, scope=scope, outcome="error", metadata={"error": repr(exc)})
            text = f"{act.name} failed: {type(exc).__name__}: {exc}"
            await self.manager.aremember(**self._tool_item(scope, act, premises, text, "error"))
            raise
        text, outcome, _ = tool_output(result)
        await self.manager.aend_activity(act.id, scope=scope, outcome=outcome)
        if text.strip():
            mem = await self.manager.aremember(**self._tool_item(scope, act, premises, text, outcome))
            self._keep(act, mem.id, outcome)
        return result
