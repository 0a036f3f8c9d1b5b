"""``memory_tools()``: LangChain tools with which an agent searches, stores, corrects and withdraws its memories.

Thin wrappers over :class:`memlineage.tools.MemoryTools` (names, descriptions, checks, result text and error
messages live there). Each tool passes its LangChain tool run id as the activity of what it writes, so with a
:class:`~memlineage_langchain.LineageCaptureCallback` attached the memory is ``wasGeneratedBy`` the captured tool
call; without one the tool records that activity itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.tools import BaseTool, ToolException
from memlineage.capture import TOOL_ERROR_PREFIX
from memlineage.manager import MemoryManager
from memlineage.models import Scope
from memlineage.tools import ARG_SCHEMAS, TOOL_SPECS, MemoryToolError, MemoryTools
from pydantic import ConfigDict, Field, ValidationError

__all__ = ["memory_tools"]

#: Tag on every memory tool, so callbacks and policies can tell them from tools that fetch outside data.
MEMORY_TOOL_TAG = "memlineage:memory_tool"


def _validation_message(error: ValidationError) -> str:
    parts = [f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in error.errors()[:3]]
    return "invalid arguments: " + "; ".join(parts)


class MemoryToolException(ToolException, MemoryToolError):
    """A memory tool error LangChain hands back to the model (``handle_tool_error``); also a ``MemLineageError``."""


class MemoryTool(BaseTool):
    """One memory tool: the :class:`MemoryTools` method ``op`` with the LangChain tool run id as its activity.

    Built by :func:`memory_tools`; the name, description and argument schema come from ``op``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    toolkit: MemoryTools = Field(exclude=True)
    op: Literal["search", "remember", "correct", "forget"]
    handle_tool_error: bool = True
    handle_validation_error: Any = _validation_message
    tags: list[str] | None = Field(default_factory=lambda: [MEMORY_TOOL_TAG])

    def __init__(self, *, toolkit: MemoryTools, op: str, **kwargs: Any) -> None:
        spec = TOOL_SPECS[op]
        kwargs.setdefault("name", spec.name)
        kwargs.setdefault("description", spec.description)
        kwargs.setdefault("args_schema", ARG_SCHEMAS[op])
        super().__init__(toolkit=toolkit, op=op, **kwargs)

    def _run(self, run_manager: CallbackManagerForToolRun | None = None, **kwargs: Any) -> str:
        aid = str(run_manager.run_id) if run_manager is not None else None
        try:
            return getattr(self.toolkit, self.op)(**kwargs, activity_id=aid)
        except MemoryToolError as exc:
            raise MemoryToolException(str(exc)) from exc

    async def _arun(self, run_manager: AsyncCallbackManagerForToolRun | None = None, **kwargs: Any) -> str:
        aid = str(run_manager.run_id) if run_manager is not None else None
        try:
            return await getattr(self.toolkit, f"a{self.op}")(**kwargs, activity_id=aid)
        except MemoryToolError as exc:
            raise MemoryToolException(str(exc)) from exc


def memory_tools(
    manager: MemoryManager,
    scope: Scope | Mapping[str, Any] | str,
    *,
    k: int = 5,
    allow_user_origin: bool = True,
    llm: Any = None,
) -> list[BaseTool]:
    """The four memory tools of one scope, for ``create_agent``, ``AgentExecutor`` or any tool-calling model.

    ``search_memory`` (results with ``[m:<id>]`` markers, status, source and date), ``remember``,
    ``correct_memory`` (supersede by id; the old value keeps its history, its dependents become suspect) and
    ``forget_memory`` (retract with a reason; never a hard delete). A bad argument, an unknown id or another
    user's id comes back to the model as a tool error message (``ToolMessage(status="error")``) and writes
    nothing. The tools carry the tag ``memlineage:memory_tool``.

    Args:
        manager: The memory store.
        scope: Whose memory the tools manage (a ``Scope``, mapping or user id); required.
        k: Default number of search results (1..20).
        allow_user_origin: Let ``origin="user"`` store ``user``-sourced memories (relayed by the agent:
            confidence 0.9, ``metadata.relayed_by="agent"``); ``False`` makes every tool act as the agent (writes
            stored as ``agent``; ``correct_memory`` and ``forget_memory`` refused on what the user asserted).
        llm: The agent's model: it judges whether a ``remember`` updates a memory; None = the store's reconciler.

    Returns:
        ``[search_memory, remember, correct_memory, forget_memory]`` as LangChain ``BaseTool``s.

    Raises:
        InvalidInputError: no or bad scope, ``k`` out of range.

    Example:
        >>> from memlineage.testing import make_manager
        >>> tools = memory_tools(make_manager(), scope="alice")
        >>> [t.name for t in tools]
        ['search_memory', 'remember', 'correct_memory', 'forget_memory']
    """
    toolkit = MemoryTools(manager, scope, k=k, allow_user_origin=allow_user_origin, llm=llm)
    return [MemoryTool(toolkit=toolkit, op=op) for op in ("search", "remember", "correct", "forget")]


def tool_error_text(error: Exception) -> str:
    """``handle_tool_error`` for tools run by a classic ``AgentExecutor``: the model gets the error, memory knows.

    ``AgentExecutor`` hands a handled ``ToolException`` to callbacks as plain text, like a result; the capture could
    not tell it from one. Pass this instead of ``True`` (``tool.handle_tool_error = tool_error_text``): the model
    reads ``"Tool error: <message>"`` and the capture records the call with ``outcome="error"`` and stores nothing.

    Example:
        >>> from langchain_core.tools import ToolException
        >>> tool_error_text(ToolException("upstream timeout"))
        'Tool error: upstream timeout'
    """
    return f"{TOOL_ERROR_PREFIX}{error}"
