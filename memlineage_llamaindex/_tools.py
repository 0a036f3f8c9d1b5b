"""``memory_tools()``: LlamaIndex ``FunctionTool``s to search, store, correct and withdraw memories.

Thin wrappers over :class:`memlineage.tools.MemoryTools` (names, descriptions, checks, result text and error
messages live there). A failed call raises :class:`~memlineage.tools.MemoryToolError`; workflow agents turn it into
a ``ToolOutput(is_error=True)`` whose text the model reads.

LlamaIndex does not hand the tool call id to the tool function. To still record a memory as ``wasGeneratedBy``
the tool call (the activity ``capture_run`` / ``LineageEventHandler`` record under the same ``tool_id``), the first
``memory_tools()`` call adds one small span handler to the root instrumentation dispatcher that remembers, for the
duration of each ``call_tool`` span, which ``tool_id`` it serves; the tool looks its own span up there. Outside an
agent run (a direct ``tool.acall``) the tools record an activity of their own.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from llama_index.core.agent.workflow import ToolCall
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.span import SimpleSpan, active_span_id
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.tools import FunctionTool, ToolMetadata
from memlineage.manager import MemoryManager
from memlineage.models import Scope
from memlineage.tools import ARG_SCHEMAS, TOOL_SPECS, MemoryTools
from typing_extensions import override

__all__ = ["memory_tools"]


class _ToolCallIds(BaseSpanHandler[SimpleSpan]):
    """Span id -> the ``tool_id`` of the workflow ``call_tool`` step it runs in (open spans only)."""

    _ids: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        """Name used by LlamaIndex serialisation."""
        return "MemLineageToolCallIds"

    def tool_id(self, span_id: str | None) -> str | None:
        return self._ids.get(span_id) if span_id else None

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
        ev = bound_args.arguments.get("ev")
        if isinstance(ev, ToolCall) and ev.tool_id:
            self._ids[id_] = ev.tool_id
        elif parent_span_id in self._ids:
            self._ids[id_] = self._ids[parent_span_id]
        return None

    @override
    def prepare_to_exit_span(
        self, id_: str, bound_args: inspect.BoundArguments, instance: Any | None = None, result: Any = None, **kw: Any
    ) -> SimpleSpan | None:
        self._ids.pop(id_, None)
        return None

    @override
    def prepare_to_drop_span(
        self, id_: str, bound_args: inspect.BoundArguments, instance: Any | None = None, err: Any = None, **kw: Any
    ) -> SimpleSpan | None:
        self._ids.pop(id_, None)
        return None


_CALL_IDS: _ToolCallIds | None = None
_CALL_IDS_LOCK = threading.Lock()


def _call_ids() -> _ToolCallIds:
    """The process's one :class:`_ToolCallIds`, added to the root dispatcher on first use."""
    global _CALL_IDS
    with _CALL_IDS_LOCK:
        dispatcher = get_dispatcher()
        if _CALL_IDS is None or _CALL_IDS not in dispatcher.span_handlers:
            _CALL_IDS = _CALL_IDS or _ToolCallIds()
            dispatcher.add_span_handler(_CALL_IDS)
        return _CALL_IDS


def _wrap(toolkit: MemoryTools, op: str, ids: _ToolCallIds) -> Callable[..., Awaitable[str]]:
    method = getattr(toolkit, f"a{op}")

    async def call(**kwargs: Any) -> str:
        return await method(**kwargs, activity_id=ids.tool_id(active_span_id.get()))

    return call


def memory_tools(
    manager: MemoryManager,
    scope: Scope | Mapping[str, Any] | str,
    *,
    k: int = 5,
    allow_user_origin: bool = True,
    llm: Any = None,
) -> list[FunctionTool]:
    """The four memory tools of one scope as async ``FunctionTool``s for ``FunctionAgent`` / ``ReActAgent``.

    What each tool does is described in :mod:`memlineage.tools` (the same in every framework). A bad argument,
    an unknown id or another user's id raises :class:`~memlineage.tools.MemoryToolError`; the agent hands its
    message back to the model as an error tool output, and nothing is written.

    Args:
        manager: The memory store.
        scope: Whose memory the tools manage (a ``Scope``, mapping or user id); required.
        k: Default number of search results (1..20).
        allow_user_origin: Let ``origin="user"`` store ``user``-sourced memories (relayed by the agent:
            confidence 0.9, ``metadata.relayed_by="agent"``); ``False`` makes every tool act as the agent (writes
            stored as ``agent``; ``correct_memory`` and ``forget_memory`` refused on what the user asserted).
        llm: The agent's model: it judges whether a ``remember`` updates a memory; None = the store's reconciler.

    Returns:
        ``[search_memory, remember, correct_memory, forget_memory]`` (async ``FunctionTool``s).

    Raises:
        InvalidInputError: no or bad scope, ``k`` out of range.

    Example:
        >>> from memlineage.testing import make_manager
        >>> [t.metadata.name for t in memory_tools(make_manager(), scope="alice")]
        ['search_memory', 'remember', 'correct_memory', 'forget_memory']
    """
    toolkit = MemoryTools(manager, scope, k=k, allow_user_origin=allow_user_origin, llm=llm)
    ids = _call_ids()
    tools = []
    for op in ("search", "remember", "correct", "forget"):
        spec = TOOL_SPECS[op]
        meta = ToolMetadata(name=spec.name, description=spec.description, fn_schema=ARG_SCHEMAS[op])
        tools.append(FunctionTool.from_defaults(async_fn=_wrap(toolkit, op, ids), tool_metadata=meta))
    return tools
