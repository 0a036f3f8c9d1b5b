"""Generated conversations (``_conversations.py``) played through every MemLineage surface, with scripted models.

Each surface gets a fresh store, one user, and the same script. A :class:`Director` plays the script's model for
one turn: it reads the prompt the framework built (recalled ``[m:<id>]`` lines, history, tool results), makes the
scripted tool calls only when the values they need are in that prompt (else it asks the user), cites the marker of
the memory a question about the past asks for when it sees it, and answers. Surfaces (:data:`SURFACES`):

- ``langchain-executor``: classic ``AgentExecutor`` (tool-calling agent) + ``LineageMemory`` +
  ``LineageCaptureCallback``;
- ``langchain-middleware``: ``create_agent`` + ``LineageMiddleware`` (its defaults: the agent's model judges
  updates; the scripted model cannot, so the rules decide) + ``LineageStore``;
- ``langchain-history``: ``LineageChatMessageHistory`` under ``RunnableWithMessageHistory`` around a
  ``create_agent`` graph (a chat history only);
- ``langchain-memory-tools``: ``create_agent`` with ``memory_tools(...)`` and the domain tools, the README's
  ``LineageCaptureCallback`` attached; the model stores statements with ``remember``, looks values up with
  ``search_memory`` and fixes a stale fact with ``correct_memory``;
- ``llamaindex-agent``: ``FunctionAgent`` + ``lineage_memory(...)`` + ``capture_run(...)``;
- ``llamaindex-chat-store``: ``FunctionAgent`` + ``ChatMemoryBuffer`` over ``LineageChatStore``.

:func:`play` runs a script through one surface and scores it: exceptions that reached the caller of the agent (none
may), memory failures the adapters swallowed (``stats()["adapter_errors"]``), and for each correction the memories
that left ``active`` (turned suspect, or were superseded/retracted other than the corrected statements) against the
oracle's dependents: precision = marked ∩ expected / marked, recall = marked ∩ expected / expected.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from _conversations import (
    ACK,
    HOTEL_ERROR,
    Oracle,
    Script,
    ScriptTurn,
    TurnLog,
    capture_render,
    normalize,
    transcript_render,
)
from memlineage import MemoryManager, Scope

#: A recalled-memory line: ``- [m:1a2b3c4d] (active, user, 2025-06-01) text``.
_LINE = re.compile(r"\[m:([0-9A-Za-z-]{4,36})\]\s*\(([^)]*)\)\s*(.*)")
#: The first words of the prompt MemLineage's LLM reconciler sends (the agent's model judging an update).
_RECONCILE = "You maintain the long-term memory of an assistant"
LIVE = ("active", "suspect")


class ScriptError(AssertionError):
    """The harness itself went wrong (an unscripted tool call): never counted as the surface's exception."""


def _contains(text: str, value: str) -> bool:
    return re.search(r"(?<![\w])" + re.escape(value.lower()) + r"(?![\w])", text.lower()) is not None


@dataclass
class Reply:
    """One model response: text and tool calls ``(id, name, args)``."""

    text: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


class Director:
    """The scripted model of one turn: it sees the prompt, makes the scripted calls it can, then answers.

    Args:
        turn: The script turn.
        evidence: Per value the turn needs (slot name, or ``"flight"``), the texts it may be read from (the
            statements holding it, the tool output): the model uses the value only when one of them is in its
            prompt, and cites a recalled line only when it holds one (:meth:`Oracle.evidence`).
        memory_tools: The agent manages its memory with ``remember`` / ``search_memory`` / ``correct_memory``.
    """

    def __init__(
        self, turn: ScriptTurn, evidence: dict[str, list[str]] | None = None, *, memory_tools: bool = False
    ) -> None:
        self.turn = turn
        self.evidence = {k: [normalize(e) for e in v if e.strip()] for k, v in (evidence or {}).items()}
        self.memory_tools = memory_tools
        self.log = TurnLog()
        self._done: set[str] = set()
        self._steps = 0

    # -- prompt reading
    @staticmethod
    def lines(prompt: str) -> list[tuple[str, str, str, str]]:
        """``(marker, status, source, text)`` of every recalled-memory line in the prompt."""
        out = []
        for line in prompt.splitlines():
            m = _LINE.search(line)
            if m:
                parts = [p.strip() for p in m.group(2).split(",")]
                status = parts[0].split(":")[0]
                source = parts[1] if len(parts) > 1 else ""
                out.append((m.group(1), status, source, m.group(3)))
        return out

    def _seen(self, slot: str, text: str) -> bool:
        """Whether ``text`` shows where the value of ``slot`` comes from (a holding statement, the result)."""
        return any(e in text for e in self.evidence.get(slot, ()))

    def _call(self, name: str, args: dict[str, Any]) -> Reply:
        self.log.calls.append(name)
        return Reply(calls=[(f"{name}-{self.turn.index}-{len(self.log.calls)}", name, args)])

    def _final(self, text: str, branch: str) -> Reply:
        self.log.answer, self.log.branch = text, branch
        return Reply(text=text)

    def reply(self, messages: Sequence[tuple[str, str]]) -> Reply:
        """The next response, given the prompt as ``(role, text)`` messages."""
        self._steps += 1
        t = self.turn
        prompt = normalize("\n".join(text for _, text in messages))
        if self._steps > 6:
            return self._final(t.answer.format(ref=""), "runaway")
        if "domain" in self._done:  # the tools answered: the scripted answer
            return self._final(t.answer, "scripted")
        if self.memory_tools:
            step = self._memory_step(prompt, messages)
            if step is not None:
                return step
        if t.is_statement or t.correction is not None:
            return self._final(ACK, "ack")
        if t.cite is not None:
            return self._cite(prompt, "\n".join(text for _, text in messages))
        if t.calls:
            if not all(self._seen(need.slot, prompt) for need in t.needs):
                return self._final(t.clarify, "clarify")
            self._done.add("domain")
            self.log.calls.extend(c.name for c in t.calls)
            return Reply(calls=[(c.id, c.name, dict(c.args)) for c in t.calls])
        return self._final(t.answer, "scripted")

    def _memory_step(self, prompt: str, messages: Sequence[tuple[str, str]]) -> Reply | None:
        t = self.turn
        if t.is_statement and "remember" not in self._done:
            self._done.add("remember")
            return self._call("remember", {"content": t.user, "origin": "user"})
        if t.search and "search" not in self._done:
            self._done.add("search")
            return self._call("search_memory", {"query": t.search})
        fix = t.correction
        if fix is not None and "correct" not in self._done:
            self._done.add("correct")
            lines = self.lines("\n".join(text for _, text in messages))
            for marker, status, source, text in lines:  # a live statement still holding the old value
                if (
                    status == "active"
                    and source == "user"
                    and _contains(text, fix.old)
                    and not _contains(text, fix.new)
                ):
                    return self._call("correct_memory", {"memory_id": f"m:{marker}", "new_content": fix.canonical})
        if fix is not None and "correct" in self._done and "corrected" not in self._done:
            self._done.add("corrected")
            last = messages[-1][1] if messages else ""
            if last.startswith("Corrected:"):
                self.log.extra_holders.append(fix.canonical)
        return None

    def _cite(self, prompt: str, raw: str) -> Reply:
        t = self.turn
        cite = t.cite
        assert cite is not None
        found = [x for x in self.lines(raw) if x[1] == "active" and self._seen(cite.slot, normalize(x[3]))]
        if found:
            self.log.cited = found[0][0]
            return self._final(t.answer.format(ref=f" [m:{found[0][0]}]"), "cited")
        if self._seen(cite.slot, prompt):
            return self._final(t.answer.format(ref=""), "plain")
        return self._final(t.clarify, "unknown")


# ====================================================================================== tools
def _outputs(script: Script) -> dict[tuple[str, str], Any]:
    return {(c.name, json.dumps(c.args, sort_keys=True)): c for t in script.turns for c in t.calls}


_FIELDS = {
    "get_weather": ("city",),
    "search_flights": ("city",),
    "book_hotel": ("city",),
    "get_city_guide": ("city",),
    "convert": ("amount", "frm", "to"),
}
_DESCRIPTIONS = {
    "get_weather": "Current weather in a city.",
    "search_flights": "The cheapest flight to a city.",
    "book_hotel": "Book a hotel in a city.",
    "get_city_guide": "The full guide of a city.",
    "convert": "Convert an amount from one currency to another.",
}


def _tool_fns(script: Script, error: type[Exception]) -> list[tuple[str, Any, Callable[..., str]]]:
    from pydantic import create_model

    calls = _outputs(script)
    out = []
    for name, fields in _FIELDS.items():
        schema = create_model(f"{name}_args", **{f: (str, ...) for f in fields})  # type: ignore[call-overload]

        def run(_name: str = name, **kwargs: Any) -> str:
            call = calls.get((_name, json.dumps(kwargs, sort_keys=True)))
            if call is None:
                msg = f"unscripted call {_name}({kwargs})"
                raise ScriptError(msg)
            if call.error:
                raise error(call.output)
            return str(call.output)

        out.append((name, schema, run))
    return out


# ====================================================================================== LangChain
def _lc_text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)


def _lc_model_class() -> type:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class DirectedChatModel(BaseChatModel):
        """A chat model whose every response comes from a :class:`Director` (one per turn)."""

        director: Any = None
        reconcile_calls: int = 0

        @property
        def _llm_type(self) -> str:
            return "scripted-director"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            texts = [(m.type, _lc_text(m)) for m in messages]
            if texts and texts[-1][1].startswith(_RECONCILE):  # asked to judge an update: a chat model can't
                self.reconcile_calls += 1
                message = AIMessage(content="I can't help with that.")
            else:
                reply = self.director.reply(texts)
                calls = [{"name": n, "args": a, "id": i, "type": "tool_call"} for i, n, a in reply.calls]
                message = AIMessage(content=reply.text, tool_calls=calls)
            return ChatResult(generations=[ChatGeneration(message=message)])

    return DirectedChatModel


def _lc_tools(script: Script, handle_tool_error: Any = True) -> list[Any]:
    from langchain_core.tools import StructuredTool, ToolException

    return [
        StructuredTool.from_function(
            func=run,
            name=name,
            description=_DESCRIPTIONS[name],
            args_schema=schema,
            handle_tool_error=handle_tool_error,
        )  # fmt: skip
        for name, schema, run in _tool_fns(script, ToolException)
    ]


def _executor_error_handler() -> Any:
    """What the README prescribes for tools under ``AgentExecutor``: ``tool_error_text`` (else ``True``)."""
    try:
        from memlineage_langchain import tool_error_text
    except ImportError:  # an older adapter
        return True
    return tool_error_text


class Surface:
    """One surface's setup; :meth:`play` runs one turn and returns the model's log."""

    name = ""
    transcript = False

    def __init__(self, manager: MemoryManager, scope: Scope, script: Script) -> None:
        self.manager, self.scope, self.script = manager, scope, script
        self.reconcile_calls = 0

    def play(self, turn: ScriptTurn, evidence: dict[str, list[str]] | None = None) -> TurnLog:
        director = Director(turn, evidence, memory_tools=self.name == "langchain-memory-tools")
        try:
            self.run(turn, director)
        except ScriptError:
            raise
        except Exception as exc:  # what reached the caller of the agent
            director.log.exception = f"{type(exc).__name__}: {exc}"[:500]
            director.log.traceback = traceback.format_exc()[-3000:]
        return director.log

    def run(self, turn: ScriptTurn, director: Director) -> None:
        raise NotImplementedError

    def close(self) -> None:
        return None


class LangChainSurface(Surface):
    def __init__(self, manager: MemoryManager, scope: Scope, script: Script) -> None:
        super().__init__(manager, scope, script)
        self.model_class = _lc_model_class()
        self.tools = _lc_tools(script)
        self.models: list[Any] = []

    def model(self, director: Director) -> Any:
        model = self.model_class(director=director)
        self.models.append(model)
        return model

    def close(self) -> None:
        self.reconcile_calls = sum(m.reconcile_calls for m in self.models)


class LangChainExecutor(LangChainSurface):
    name = "langchain-executor"

    def __init__(self, manager: MemoryManager, scope: Scope, script: Script) -> None:
        from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

        from memlineage_langchain import LineageCaptureCallback, LineageMemory

        super().__init__(manager, scope, script)
        self.tools = _lc_tools(script, _executor_error_handler())
        self.memory = LineageMemory(manager=manager, scope=scope, memory_key="chat_history", return_messages=True)
        self.capture = LineageCaptureCallback(manager, scope=scope)
        self.prompt = ChatPromptTemplate.from_messages(
            [
                ("system", "You are a helpful travel assistant."),
                MessagesPlaceholder("chat_history", optional=True),
                ("human", "{input}"),
                MessagesPlaceholder("agent_scratchpad"),
            ]
        )

    def run(self, turn: ScriptTurn, director: Director) -> None:
        from langchain_classic.agents import AgentExecutor, create_tool_calling_agent

        agent = create_tool_calling_agent(self.model(director), self.tools, self.prompt)
        executor = AgentExecutor(agent=agent, tools=self.tools, memory=self.memory)
        executor.invoke({"input": turn.user}, config={"callbacks": [self.capture]})


class LangChainMiddleware(LangChainSurface):
    name = "langchain-middleware"

    def __init__(self, manager: MemoryManager, scope: Scope, script: Script) -> None:
        from memlineage_langchain import LineageMiddleware, LineageStore

        super().__init__(manager, scope, script)
        self.middleware = LineageMiddleware(manager, scope=scope)
        self.store = LineageStore(manager)

    def run(self, turn: ScriptTurn, director: Director) -> None:
        from langchain.agents import create_agent
        from langchain_core.messages import HumanMessage

        agent = create_agent(self.model(director), self.tools, middleware=[self.middleware], store=self.store)
        agent.invoke({"messages": [HumanMessage(turn.user)]})


class LangChainHistory(LangChainSurface):
    name = "langchain-history"
    transcript = True

    def __init__(self, manager: MemoryManager, scope: Scope, script: Script) -> None:
        from memlineage_langchain import LineageChatMessageHistory

        super().__init__(manager, scope, script)
        self.history = LineageChatMessageHistory(manager, scope=scope.user_id, session_id=scope.session_id)

    def run(self, turn: ScriptTurn, director: Director) -> None:
        from langchain.agents import create_agent
        from langchain_core.messages import HumanMessage
        from langchain_core.runnables import RunnableLambda
        from langchain_core.runnables.history import RunnableWithMessageHistory

        agent = create_agent(self.model(director), self.tools)

        def respond(inputs: dict[str, Any]) -> list[Any]:
            messages = [*inputs["history"], HumanMessage(inputs["input"])]
            return agent.invoke({"messages": messages})["messages"][len(messages) :]

        with warnings.catch_warnings():  # deprecated in favour of LangGraph persistence, still what many apps use
            warnings.simplefilter("ignore", DeprecationWarning)
            chain = RunnableWithMessageHistory(
                RunnableLambda(respond),
                lambda session_id: self.history,
                input_messages_key="input",
                history_messages_key="history",
            )
        chain.invoke({"input": turn.user}, config={"configurable": {"session_id": self.scope.session_id}})


class LangChainMemoryTools(LangChainSurface):
    name = "langchain-memory-tools"

    def __init__(self, manager: MemoryManager, scope: Scope, script: Script) -> None:
        from memlineage_langchain import LineageCaptureCallback, memory_tools

        super().__init__(manager, scope, script)
        self.tools = [*memory_tools(manager, scope=scope), *self.tools]
        self.capture = LineageCaptureCallback(manager, scope=scope)

    def run(self, turn: ScriptTurn, director: Director) -> None:
        from langchain.agents import create_agent
        from langchain_core.messages import HumanMessage

        agent = create_agent(self.model(director), self.tools)
        agent.invoke({"messages": [HumanMessage(turn.user)]}, config={"callbacks": [self.capture]})


# ====================================================================================== LlamaIndex
def _li_tools(script: Script) -> list[Any]:
    from llama_index.core.tools import FunctionTool

    return [
        FunctionTool.from_defaults(fn=run, name=name, description=_DESCRIPTIONS[name], fn_schema=schema)
        for name, schema, run in _tool_fns(script, RuntimeError)
    ]


class LlamaIndexSurface(Surface):
    def __init__(self, manager: MemoryManager, scope: Scope, script: Script) -> None:
        super().__init__(manager, scope, script)
        self.loop = asyncio.new_event_loop()
        self.tools = _li_tools(script)

    def llm(self, director: Director) -> Any:
        from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
        from llama_index.core.llms.mock import MockFunctionCallingLLM

        surface = self

        def generate(messages: Sequence[Any], **kwargs: Any) -> Any:
            texts = [(str(m.role.value), m.content or "") for m in messages]
            if texts and texts[-1][1].startswith(_RECONCILE):
                surface.reconcile_calls += 1
                return ChatMessage(role="assistant", content="I can't help with that.")
            reply = director.reply(texts)
            if not reply.calls:
                return ChatMessage(role="assistant", content=reply.text)
            blocks: list[Any] = [TextBlock(text=reply.text)] if reply.text else []
            blocks += [ToolCallBlock(tool_call_id=i, tool_name=n, tool_kwargs=a) for i, n, a in reply.calls]
            return ChatMessage(role="assistant", blocks=blocks)

        return MockFunctionCallingLLM(response_generator=generate)

    def run(self, turn: ScriptTurn, director: Director) -> None:
        self.loop.run_until_complete(self.arun(turn, director))

    async def arun(self, turn: ScriptTurn, director: Director) -> None:
        raise NotImplementedError

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.aclose())
        finally:
            self.loop.close()

    async def aclose(self) -> None:
        return None


class LlamaIndexAgent(LlamaIndexSurface):
    name = "llamaindex-agent"

    def __init__(self, manager: MemoryManager, scope: Scope, script: Script) -> None:
        from memlineage_llamaindex import lineage_memory

        super().__init__(manager, scope, script)
        self.memory = lineage_memory(manager, user_id=scope.user_id, session_id=scope.session_id)

    async def arun(self, turn: ScriptTurn, director: Director) -> None:
        from llama_index.core.agent.workflow import FunctionAgent

        from memlineage_llamaindex import capture_run

        handler = FunctionAgent(tools=self.tools, llm=self.llm(director)).run(user_msg=turn.user, memory=self.memory)
        await capture_run(handler, self.manager, scope=self.scope)

    async def aclose(self) -> None:
        await self.memory.aclose()


class LlamaIndexChatStore(LlamaIndexSurface):
    """``ChatMemoryBuffer`` over ``LineageChatStore``.

    Args:
        token_limit: The buffer's budget (None: LlamaIndex's default, 3,000 tokens).
        fast_tokenizer: Count a token per 4 characters instead of tiktoken. ``ChatMemoryBuffer.get`` re-tokenizes
            the remaining history once per message it drops, which is quadratic: after a few hundred turns with
            12k-token tool results a turn takes seconds there, none of it MemLineage's. Long benchmarks pass a
            budget that drops nothing and this tokenizer.
    """

    name = "llamaindex-chat-store"
    transcript = True

    def __init__(
        self,
        manager: MemoryManager,
        scope: Scope,
        script: Script,
        *,
        token_limit: int | None = None,
        fast_tokenizer: bool = False,
    ) -> None:
        from llama_index.core.memory import ChatMemoryBuffer

        from memlineage_llamaindex import LineageChatStore

        super().__init__(manager, scope, script)
        self.store = LineageChatStore(manager=manager, user_id=scope.user_id)
        extra: dict[str, Any] = {"token_limit": token_limit} if token_limit else {}
        if fast_tokenizer:
            extra["tokenizer_fn"] = lambda text: range(len(text) // 4)
        self.memory = ChatMemoryBuffer.from_defaults(chat_store=self.store, chat_store_key=scope.session_id, **extra)

    async def arun(self, turn: ScriptTurn, director: Director) -> None:
        from llama_index.core.agent.workflow import FunctionAgent

        await FunctionAgent(tools=self.tools, llm=self.llm(director)).run(user_msg=turn.user, memory=self.memory)


#: Every surface, by name.
SURFACES: dict[str, type[Surface]] = {
    cls.name: cls
    for cls in (
        LangChainExecutor,
        LangChainMiddleware,
        LangChainHistory,
        LangChainMemoryTools,
        LlamaIndexAgent,
        LlamaIndexChatStore,
    )
}


# ====================================================================================== scoring
@dataclass
class CorrectionResult:
    """One correction scored against the oracle."""

    turn: int
    slot: str
    template: str
    applied: bool
    expected: int
    marked: int
    hit: int
    late: int
    missed: list[str]
    false: list[str]
    stayed: list[str] = field(default_factory=list)  # corrected statements still live after the correction

    @property
    def exact(self) -> bool:
        """The memories that left ``active`` are exactly the oracle's dependents."""
        return self.hit == self.expected == self.marked


@dataclass
class SurfaceResult:
    """A surface's figures for one script."""

    surface: str
    turns: int
    exceptions: list[dict[str, Any]]
    adapter_errors: dict[str, int]
    adapter_error_messages: list[str]
    corrections: list[CorrectionResult]
    branches: dict[str, int]
    failed_calls_stored: int
    reconcile_calls: int
    seconds: float
    injected: dict[str, int] = field(default_factory=dict)

    def precision_recall(self, applied_only: bool = False) -> tuple[float, float]:
        """Micro-averaged lineage precision and recall over the corrections (only the applied ones if asked)."""
        rows = [c for c in self.corrections if c.applied or not applied_only]
        hit, marked, expected = (sum(getattr(c, k) for c in rows) for k in ("hit", "marked", "expected"))
        return (hit / marked if marked else 1.0, hit / expected if expected else 1.0)

    def as_dict(self) -> dict[str, Any]:
        p, r = self.precision_recall()
        pa, ra = self.precision_recall(applied_only=True)
        return {
            "turns": self.turns,
            "exceptions_into_agent": len(self.exceptions),
            "exceptions": self.exceptions[:10],
            "adapter_errors": self.adapter_errors,
            "adapter_error_messages": self.adapter_error_messages[:10],
            "corrections": len(self.corrections),
            "corrections_applied": sum(c.applied for c in self.corrections),
            "corrections_exact": sum(c.exact for c in self.corrections),
            "precision": round(p, 4),
            "recall": round(r, 4),
            "precision_applied": round(pa, 4),
            "recall_applied": round(ra, 4),
            "marked": sum(c.marked for c in self.corrections),
            "expected": sum(c.expected for c in self.corrections),
            "hit": sum(c.hit for c in self.corrections),
            "branches": self.branches,
            "failed_calls_stored": self.failed_calls_stored,
            "reconcile_calls": self.reconcile_calls,
            "injected_store_failures": self.injected,
            "seconds": round(self.seconds, 2),
            "rows": [c.__dict__ for c in self.corrections],
        }


def _snapshot(manager: MemoryManager, scope: Scope) -> dict[str, tuple[str, str]]:
    return {m.id: (normalize(m.content), m.status.value) for m in manager.find(scope=Scope(user_id=scope.user_id))}


def _status(manager: MemoryManager, scope: Scope, live: dict[str, tuple[str, str]], mid: str) -> str:
    if mid in live:
        return live[mid][1]
    mem = manager.get(mid, scope=Scope(user_id=scope.user_id))
    return mem.status.value if mem is not None else "missing"


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."


class _AdapterLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "reconciler" not in text:
            self.messages.append(_short(text) + (f" | {record.exc_text[-300:]}" if record.exc_text else ""))


def play(
    surface: str,
    script: Script,
    manager: MemoryManager,
    *,
    user_id: str = "traveller",
    faults: bool = False,
    **options: Any,
) -> SurfaceResult:
    """Play ``script`` through ``surface`` on ``manager`` (a fresh store) and score it.

    With ``faults``, the store fails every 4th write and 5th recall (:func:`inject_faults`): the lineage figures
    then mean little, what counts is that no exception reaches the agent's caller. ``options`` go to the surface's
    constructor.
    """
    scope = Scope(user_id=user_id, session_id="s1")
    driver = SURFACES[surface](manager, scope, script, **options)
    oracle = Oracle(transcript_render() if driver.transcript else capture_render())
    logs = _AdapterLog()
    watched = [logging.getLogger(n) for n in ("memlineage", "memlineage_langchain", "memlineage_llamaindex")]
    for lg in watched:
        lg.addHandler(logs)
    exceptions: list[dict[str, Any]] = []
    corrections: list[CorrectionResult] = []
    branches: dict[str, int] = {}
    injected = inject_faults(manager) if faults else {}
    t0 = time.perf_counter()
    try:
        for turn in script.turns:
            fix = turn.correction
            if fix is not None:
                current, cone, late_cone = oracle.expectation(fix.slot)
                before = _snapshot(manager, scope)
            log = driver.play(turn, oracle.evidence(turn))
            oracle.add_turn(turn, log)
            branches[log.branch or "none"] = branches.get(log.branch or "none", 0) + 1
            if log.exception:
                exceptions.append({"turn": turn.index, "kind": turn.kind, "user": _short(turn.user),
                                   "error": log.exception,
                                   "traceback": log.traceback[-1200:]})  # fmt: skip
            if fix is None:
                continue
            after = _snapshot(manager, scope)
            holders = {i for i, (c, s) in before.items() if c in current and s in LIVE}
            active = {i for i, (_, s) in before.items() if s == "active"}
            expected = {i for i in active if before[i][0] in cone}
            # the corrected statements must leave 'active' (applied); catching what rests on a value replaced
            # earlier is late, neither a hit nor a false mark
            neutral = {i for i in active if before[i][0] in late_cone | current} - expected
            left = {i for i in active if _status(manager, scope, after, i) != "active"}
            marked = left - neutral
            applied = bool(holders) and all(_status(manager, scope, after, h) not in LIVE for h in holders)
            corrections.append(
                CorrectionResult(
                    turn=turn.index, slot=fix.slot, template=fix.template, applied=applied,
                    expected=len(expected), marked=len(marked), hit=len(marked & expected),
                    late=len(left & neutral - holders),
                    missed=[_short(before[i][0]) for i in sorted(expected - marked)][:5],
                    false=[f"{_short(before[i][0])} -> {_status(manager, scope, after, i)}"
                           for i in sorted(marked - expected)][:5],
                    stayed=[f"{_short(before[i][0])} -> {_status(manager, scope, after, i)}"
                            for i in sorted(holders) if _status(manager, scope, after, i) in LIVE][:5],
                )
            )  # fmt: skip
    finally:
        driver.close()
        for lg in watched:
            lg.removeHandler(logs)
    stats = manager.stats()
    failed = sum(1 for m in manager.find(scope=Scope(user_id=user_id)) if HOTEL_ERROR in m.content)
    return SurfaceResult(
        surface=surface, turns=len(script.turns), exceptions=exceptions,
        adapter_errors=dict(stats.get("adapter_errors", {})), adapter_error_messages=logs.messages,
        corrections=corrections, branches=branches, failed_calls_stored=failed,
        reconcile_calls=driver.reconcile_calls, seconds=time.perf_counter() - t0, injected=dict(injected),
    )  # fmt: skip


def inject_faults(manager: MemoryManager, *, write_every: int = 4, read_every: int = 5) -> dict[str, int]:
    """Make ``manager`` fail like a sick store: every ``write_every``-th write and ``read_every``-th recall raise.

    Patches the instance's ``remember`` and ``recall`` (their async twins and every adapter go through them) with
    a :class:`~memlineage.errors.StorageError`. Deterministic. Returns the live counts of injected failures.
    """
    from memlineage.errors import StorageError

    counts = {"writes": 0, "reads": 0, "failed_writes": 0, "failed_reads": 0}
    remember, recall = manager.remember, manager.recall

    def failing_remember(*args: Any, **kwargs: Any) -> Any:
        counts["writes"] += 1
        if counts["writes"] % write_every == 0:
            counts["failed_writes"] += 1
            raise StorageError("injected: the ledger is unavailable (disk full)")
        return remember(*args, **kwargs)

    def failing_recall(*args: Any, **kwargs: Any) -> Any:
        counts["reads"] += 1
        if counts["reads"] % read_every == 0:
            counts["failed_reads"] += 1
            raise StorageError("injected: the index is unavailable")
        return recall(*args, **kwargs)

    manager.remember = failing_remember  # type: ignore[method-assign]
    manager.recall = failing_recall  # type: ignore[method-assign]
    return counts


def new_manager(kind: str = "memory", path: str | None = None) -> MemoryManager:
    """A fresh store with ``open()``'s defaults (policies, value model, update detection) and the fake embedder.

    ``kind="memory"``: in-memory SQLite and index (``memlineage.testing.make_manager``); ``"open"``:
    ``MemoryManager.open(path)`` (SQLite file + Chroma in ``path``).
    """
    from memlineage.testing import FakeEmbedder, make_manager

    if kind == "open":
        if path is None:
            msg = "kind='open' needs a path"
            raise ValueError(msg)
        return MemoryManager.open(path, embedder=FakeEmbedder())
    return make_manager(**MemoryManager.default_options())
