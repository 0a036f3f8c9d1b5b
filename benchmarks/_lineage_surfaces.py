"""Scripted agent turns played through each MemLineage capture surface (shared by bench_lineage and the tests).

A :class:`Turn` is what the user says, the tool calls the scripted model makes (with their outputs), the text it
sends with them and its answer. :data:`SURFACES` maps a surface name to a driver that plays a list of turns into a
manager through that surface, with real framework agents and scripted models (offline, deterministic):

- ``langchain-callback``: ``AgentExecutor`` (tool-calling agent) with ``LineageMemory`` and
  ``LineageCaptureCallback`` (the README's setup);
- ``langchain-middleware``: ``create_agent`` with ``LineageMiddleware``;
- ``langchain-memory``: ``AgentExecutor`` with ``LineageMemory`` alone (``return_intermediate_steps=True``);
- ``llamaindex-capture``: ``FunctionAgent`` with ``lineage_memory`` and ``capture_run``;
- ``llamaindex-block``: ``FunctionAgent`` with ``lineage_memory`` alone.

Only public APIs are used, so the same drivers also run against older versions of the package.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlineage import MemoryManager, Scope

warnings.filterwarnings("ignore", category=DeprecationWarning)


@dataclass(frozen=True)
class Call:
    """One tool call of a turn: model call id, tool name, arguments and the tool's output (or its error)."""

    id: str
    name: str
    args: dict[str, Any]
    output: str
    error: bool = False


@dataclass(frozen=True)
class Turn:
    """One user turn: the user text, the model's tool calls (one step), text sent with them, and the answer."""

    user: str
    answer: str
    calls: tuple[Call, ...] = ()
    text: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _outputs(turns: Sequence[Turn]) -> dict[tuple[str, str], Call]:
    return {(c.name, json.dumps(c.args, sort_keys=True)): c for t in turns for c in t.calls}


def _tool_names(turns: Sequence[Turn]) -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for t in turns:
        for c in t.calls:
            names.setdefault(c.name, sorted(c.args))
    return names


def _run_tool(calls: dict[tuple[str, str], Call], name: str, kwargs: dict[str, Any], error: type[Exception]) -> str:
    call = calls.get((name, json.dumps(kwargs, sort_keys=True)))
    if call is None:
        msg = f"unscripted call {name}({kwargs})"
        raise AssertionError(msg)
    if call.error:
        raise error(call.output)
    return call.output


# ====================================================================================== LangChain
def _tool_specs(turns: Sequence[Turn], error: type[Exception]) -> list[tuple[str, Any, Callable[..., str]]]:
    """``(name, argument schema, function)`` per scripted tool; a failing call raises ``error``."""
    from pydantic import create_model

    calls = _outputs(turns)
    out = []
    for name, fields in _tool_names(turns).items():
        schema = create_model(f"{name}_args", **{f: (str, ...) for f in fields})  # type: ignore[call-overload]

        def run(_name: str = name, **kwargs: Any) -> str:
            return _run_tool(calls, _name, kwargs, error)

        out.append((name, schema, run))
    return out


def _lc_tools(turns: Sequence[Turn]) -> list[Any]:
    from langchain_core.tools import StructuredTool, ToolException

    return [
        StructuredTool.from_function(
            func=run, name=name, description=f"The {name} tool.", args_schema=schema, handle_tool_error=True
        )
        for name, schema, run in _tool_specs(turns, ToolException)
    ]


def _lc_model(turn: Turn) -> Any:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    class Scripted(FakeMessagesListChatModel):
        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Scripted:
            return self

    responses = []
    if turn.calls:
        calls = [{"name": c.name, "args": c.args, "id": c.id, "type": "tool_call"} for c in turn.calls]
        responses.append(AIMessage(content=turn.text, tool_calls=calls))
    responses.append(AIMessage(content=turn.answer))
    return Scripted(responses=responses)


_PROMPT: Any = None


def _executor(turn: Turn, tools: list[Any], memory: Any, **kwargs: Any) -> Any:
    from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

    global _PROMPT
    if _PROMPT is None:
        _PROMPT = ChatPromptTemplate.from_messages(
            [
                ("system", "You are a helpful assistant."),
                MessagesPlaceholder("chat_history", optional=True),
                ("human", "{input}"),
                MessagesPlaceholder("agent_scratchpad"),
            ]
        )
    agent = create_tool_calling_agent(_lc_model(turn), tools, _PROMPT)
    return AgentExecutor(agent=agent, tools=tools, memory=memory, **kwargs)


def run_langchain_callback(manager: MemoryManager, scope: Scope, turns: Sequence[Turn], k: int = 20) -> None:
    """``AgentExecutor`` + ``LineageMemory`` + ``LineageCaptureCallback``."""
    from memlineage_langchain import LineageCaptureCallback, LineageMemory

    tools = _lc_tools(turns)
    memory = LineageMemory(manager=manager, scope=scope, memory_key="chat_history", return_messages=True, k=k)
    handler = LineageCaptureCallback(manager, scope=scope, raise_error=True)
    for turn in turns:
        _executor(turn, tools, memory).invoke({"input": turn.user}, config={"callbacks": [handler]})


def run_langchain_memory(manager: MemoryManager, scope: Scope, turns: Sequence[Turn], k: int = 20) -> None:
    """``AgentExecutor`` + ``LineageMemory`` alone (tool calls from ``intermediate_steps``)."""
    from memlineage_langchain import LineageMemory

    tools = _lc_tools(turns)
    memory = LineageMemory(manager=manager, scope=scope, memory_key="chat_history", return_messages=True, k=k)
    for turn in turns:
        _executor(turn, tools, memory, return_intermediate_steps=True).invoke({"input": turn.user})


def run_langchain_middleware(manager: MemoryManager, scope: Scope, turns: Sequence[Turn], k: int = 20) -> None:
    """``create_agent`` + ``LineageMiddleware``."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from memlineage_langchain import LineageMiddleware

    tools = _lc_tools(turns)
    middleware = LineageMiddleware(manager, scope=scope, k=k)
    for turn in turns:
        agent = create_agent(_lc_model(turn), tools, middleware=[middleware])
        agent.invoke({"messages": [HumanMessage(turn.user)]})


# ====================================================================================== LlamaIndex
def _li_tools(turns: Sequence[Turn]) -> list[Any]:
    from llama_index.core.tools import FunctionTool

    return [
        FunctionTool.from_defaults(fn=run, name=name, description=f"The {name} tool.", fn_schema=schema)
        for name, schema, run in _tool_specs(turns, RuntimeError)
    ]


def _li_llm(turn: Turn) -> Any:
    from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    queue = []
    if turn.calls:
        blocks: list[Any] = [TextBlock(text=turn.text)] if turn.text else []
        blocks += [ToolCallBlock(tool_call_id=c.id, tool_name=c.name, tool_kwargs=c.args) for c in turn.calls]
        queue.append(ChatMessage(role="assistant", blocks=blocks))
    queue.append(ChatMessage(role="assistant", content=turn.answer))

    def generate(messages: Sequence[Any], **kwargs: Any) -> Any:
        if not queue:
            msg = "the scripted LLM ran out of responses"
            raise AssertionError(msg)
        return queue.pop(0)

    return MockFunctionCallingLLM(response_generator=generate)


async def _li_turns(manager: MemoryManager, scope: Scope, turns: Sequence[Turn], k: int, capture: bool) -> None:
    from llama_index.core.agent.workflow import FunctionAgent

    from memlineage_llamaindex import capture_run, lineage_memory

    tools = _li_tools(turns)
    memory = lineage_memory(manager, user_id=scope.user_id, session_id=scope.session_id, k=k)
    for turn in turns:
        handler = FunctionAgent(tools=tools, llm=_li_llm(turn)).run(user_msg=turn.user, memory=memory)
        if capture:
            await capture_run(handler, manager, scope=scope)
        else:
            await handler


def run_llamaindex_capture(manager: MemoryManager, scope: Scope, turns: Sequence[Turn], k: int = 20) -> None:
    """``FunctionAgent`` + ``lineage_memory`` + ``capture_run``."""
    asyncio.run(_li_turns(manager, scope, turns, k, capture=True))


def run_llamaindex_block(manager: MemoryManager, scope: Scope, turns: Sequence[Turn], k: int = 20) -> None:
    """``FunctionAgent`` + ``lineage_memory`` alone."""
    asyncio.run(_li_turns(manager, scope, turns, k, capture=False))


Driver = Callable[[MemoryManager, Scope, Sequence[Turn], int], None]

#: Every capture surface, by name.
SURFACES: dict[str, Driver] = {
    "langchain-callback": run_langchain_callback,
    "langchain-middleware": run_langchain_middleware,
    "langchain-memory": run_langchain_memory,
    "llamaindex-capture": run_llamaindex_capture,
    "llamaindex-block": run_llamaindex_block,
}


def find_one(manager: MemoryManager, scope: Scope, key: str) -> Any:
    """The one live memory of ``scope``'s user whose content contains ``key``.

    Raises:
        LookupError: none or several.
    """
    found = [m for m in _all(manager, scope) if key in m.content]
    if len(found) != 1:
        msg = f"{len(found)} memories contain {key!r}: {[m.content for m in found]}"
        raise LookupError(msg)
    return found[0]


def _all(manager: MemoryManager, scope: Scope) -> list[Any]:
    return manager.find(scope=Scope(user_id=scope.user_id))
