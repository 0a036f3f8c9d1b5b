"""``LineageCaptureCallback``: LangChain callback events → MemLineage activities and memories with lineage."""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.agents import AgentAction, AgentFinish
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.outputs import LLMResult
from memlineage.manager import MemoryManager
from memlineage.models import Activity, Scope
from typing_extensions import override

from memlineage_langchain._convert import (
    RECALLED_KEY,
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
    """What the handler remembers about an open LangChain run."""

    id: str
    kind: str
    name: str | None
    parent: str | None
    scope: Scope | None
    recorded: bool = False
    context: list[str] = field(default_factory=list)
    produced: list[str] = field(default_factory=list)
    actions: list[_Action] = field(default_factory=list)
    tool_call_id: str | None = None
    answered: bool = False


class _Recorder:
    """The state machine shared by the sync and async handlers; every ledger write is one manager call."""

    def __init__(
        self,
        manager: MemoryManager,
        scope: Scope | None,
        *,
        capture_user_input: bool,
        capture_reasoning: bool,
        strict: Callable[[], bool],
        tool_tags: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.manager = manager
        self.scope = scope
        self.capture_user_input = capture_user_input
        self.capture_reasoning = capture_reasoning
        self.tool_tags = {name: tuple(tags) for name, tags in (tool_tags or {}).items()}
        self._strict = strict
        self._runs: dict[str, _Run] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ helpers
    def _scope_for(self, metadata: Mapping[str, Any] | None, parent: str | None) -> Scope | None:
        if self.scope is not None:
            return self.scope
        found = scope_from_mapping(metadata)
        if found is None and parent is not None:
            with self._lock:
                p = self._runs.get(parent)
            found = p.scope if p else None
        return found

    def _writable(self, run: _Run, what: str) -> Scope | None:
        if run.scope is not None:
            return run.scope
        if self._strict():
            require_scope(None, f"LineageCaptureCallback ({what})")
        logger.warning("LineageCaptureCallback: no scope for run %s; %s not remembered", run.id, what)
        return None

    def _chain(self, run_id: str | None) -> list[_Run]:
        """The run and its open ancestors, nearest first."""
        out: list[_Run] = []
        with self._lock:
            cur = self._runs.get(run_id) if run_id else None
            while cur is not None and cur not in out:
                out.append(cur)
                cur = self._runs.get(cur.parent) if cur.parent else None
        return out

    def _context(self, run_id: str | None) -> list[str]:
        ids: list[str] = []
        for r in self._chain(run_id):
            ids.extend(r.context)
        return list(dict.fromkeys(ids))

    def _recorded_parent(self, parent: str | None) -> str | None:
        for r in self._chain(parent):
            if r.recorded:
                return r.id
        return None

    def _add(self, run: _Run) -> None:
        with self._lock:
            self._runs[run.id] = run

    def _record(self, run: _Run, metadata: dict[str, Any]) -> None:
        if run.scope is None:  # activities are never global: an unscoped run is not recorded
            return
        self.manager.record_activity(
            Activity(
                id=run.id,
                kind=run.kind,
                name=run.name,
                parent_id=self._recorded_parent(run.parent),
                scope=run.scope,
                metadata=metadata,
            )
        )
        run.recorded = True

    def _close_open_tools(self, run_id: str) -> None:
        """Tool runs under ``run_id`` that never reported an end: closed with an ``unknown`` outcome."""
        with self._lock:
            open_tools = [r for r in self._runs.values() if r.kind == "tool_call" and r.id != run_id]
        for tool in open_tools:
            if any(a.id == run_id for a in self._chain(tool.parent)):
                with self._lock:
                    self._runs.pop(tool.id, None)
                self.manager.end_activity(
                    tool.id,
                    scope=tool.scope,
                    outcome="unknown",
                    metadata={"reason": "parent run ended before the tool reported"},
                )

    # ------------------------------------------------------------------ chains
    def chain_start(
        self,
        inputs: Any,
        run_id: str,
        parent: str | None,
        metadata: Mapping[str, Any] | None,
        name: str | None,
    ) -> None:
        run = _Run(id=run_id, kind="agent_run" if parent is None else "chain", name=name, parent=parent,
                   scope=self._scope_for(metadata, parent))  # fmt: skip
        if isinstance(inputs, Mapping):
            recalled = inputs.get(RECALLED_KEY)
            if isinstance(recalled, list):
                run.context.extend(x for x in recalled if isinstance(x, str))
        self._add(run)
        if parent is not None:
            return
        self._record(run, {"framework": "langchain"})
        text = user_text(inputs) if self.capture_user_input else ""
        if text.strip() and self._writable(run, "user input") is not None:
            mem = self.manager.remember(text, scope=run.scope, source="user", activity_id=run.id)
            run.context.insert(0, mem.id)

    def chain_end(self, outputs: Any, run_id: str, outcome: str, error: BaseException | None = None) -> None:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            return
        self._close_open_tools(run_id)
        for action in run.actions if run.scope is not None else ():  # tool runs this handler never saw
            self.manager.record_activity(
                Activity(
                    kind="tool_call", name=action.tool, parent_id=run.id if run.recorded else None, scope=run.scope,
                    ended_at=self.manager.clock(), outcome="unknown",
                    metadata={"tool_call_id": action.tool_call_id, "reason": "tool run not observed"},
                )
            )  # fmt: skip
        run.actions.clear()
        if run.parent is None and outcome == "success" and not run.answered and isinstance(outputs, Mapping):
            messages = outputs.get("messages")
            text = final_ai_text(messages) if isinstance(messages, list) else ""
            if text.strip():
                self._answer(run, text)
        with self._lock:
            if run.parent is None:  # forget whatever is left of this run tree
                for other in [r.id for r in self._runs.values()]:
                    chain = self._chain(other)
                    if chain and chain[-1].id == run_id and other != run_id:
                        self._runs.pop(other, None)
            self._runs.pop(run_id, None)
        if run.recorded:
            meta = {"error": repr(error)} if error is not None else None
            self.manager.end_activity(run.id, scope=run.scope, outcome=outcome, metadata=meta)

    def _answer(self, run: _Run, text: str) -> None:
        if self._writable(run, "final answer") is None:
            return
        premises = list(dict.fromkeys([*self._context(run.id), *run.produced]))
        self.manager.remember(
            text, scope=run.scope, source="agent", activity_id=run.id if run.recorded else None,
            derived_from=premises,
        )  # fmt: skip
        run.answered = True

    # ------------------------------------------------------------------ LLM calls
    def llm_start(
        self, run_id: str, parent: str | None, metadata: Mapping[str, Any] | None, name: str | None,
        kind: str = "llm_call",
    ) -> None:  # fmt: skip
        run = _Run(id=run_id, kind=kind, name=name, parent=parent, scope=self._scope_for(metadata, parent))
        self._add(run)
        self._record(run, {"framework": "langchain"})

    def llm_end(self, run_id: str, outcome: str, meta: dict[str, Any] | None = None) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is not None and run.recorded:
            self.manager.end_activity(run_id, scope=run.scope, outcome=outcome, metadata=meta)

    # ------------------------------------------------------------------ agent steps
    def agent_action(self, action: AgentAction, run_id: str) -> None:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            return
        with self._lock:
            run.actions.append(_Action(action.tool, action.tool_input, getattr(action, "tool_call_id", None)))
        # Tool-calling agents log only "Invoking: `tool` with `{...}`": that is the call, not reasoning.
        log = _INVOKING.sub("", action.log or "").strip()
        if self.capture_reasoning and log and self._writable(run, "reasoning") is not None:
            self.manager.remember(
                log, scope=run.scope, source="reasoning", activity_id=self._recorded_parent(run_id),
                derived_from=self._context(run_id),
            )  # fmt: skip

    def agent_finish(self, finish: AgentFinish, run_id: str) -> None:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            return
        values = finish.return_values or {}
        text = text_of(values.get("output", next(iter(values.values()), "")))
        if text.strip():
            self._answer(run, text)

    # ------------------------------------------------------------------ tools
    def tool_start(
        self,
        run_id: str,
        parent: str | None,
        name: str,
        input_str: str,
        inputs: Any,
        tool_call_id: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> None:
        if tool_call_id is None and parent is not None:
            tool_call_id = self._match_action(parent, name, inputs, input_str)
        run = _Run(id=run_id, kind="tool_call", name=name, parent=parent, scope=self._scope_for(metadata, parent),
                   tool_call_id=tool_call_id)  # fmt: skip
        self._add(run)
        self._record(run, {"tool_call_id": tool_call_id, "input": input_str[:4000]})

    def _match_action(self, parent: str, name: str, inputs: Any, input_str: str) -> str | None:
        """Pair an AgentExecutor tool run with its ``on_agent_action``: same executor run, same tool, same input."""
        with self._lock:
            owner = self._runs.get(parent)
            if owner is None:
                return None
            same_tool = [a for a in owner.actions if a.tool == name]
            exact = [a for a in same_tool if a.tool_input == inputs or a.tool_input == input_str]
            chosen = (exact or same_tool or [None])[0]
            if chosen is None:
                return None
            owner.actions.remove(chosen)
            return chosen.tool_call_id

    def tool_end(self, output: Any, run_id: str) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is None:
            return
        text, outcome, call_id = tool_output(output)
        run.tool_call_id = run.tool_call_id or call_id
        if run.name in _FALLBACK_TOOLS:
            outcome = "fallback"
        if run.recorded:
            self.manager.end_activity(
                run.id, scope=run.scope, outcome=outcome, metadata={"tool_call_id": run.tool_call_id}
            )
        if text.strip():
            self._tool_memory(run, text, outcome)

    def tool_error(self, error: BaseException, run_id: str, tool_call_id: str | None) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is None:
            return
        run.tool_call_id = run.tool_call_id or tool_call_id
        if run.recorded:
            self.manager.end_activity(
                run.id,
                scope=run.scope,
                outcome="error",
                metadata={"tool_call_id": run.tool_call_id, "error": repr(error)},
            )
        self._tool_memory(run, f"{run.name} failed: {type(error).__name__}: {error}", "error")

    def _tool_memory(self, run: _Run, text: str, outcome: str) -> None:
        if self._writable(run, "tool result") is None:
            return
        mem = self.manager.remember(
            text,
            scope=run.scope,
            source=f"tool:{run.name}",
            activity_id=run.id,
            parent_activity_id=self._recorded_parent(run.parent),
            derived_from=self._context(run.parent),
            tags=self.tool_tags.get(run.name, ()) + (() if outcome == "success" else (f"outcome:{outcome}",)),
            metadata={"tool_call_id": run.tool_call_id, "outcome": outcome},
        )
        if outcome == "success":
            with self._lock:
                for r in self._chain(run.parent):
                    r.produced.append(mem.id)


_INVOKING = re.compile(r"^\s*Invoking: `[^`]*` with `.*?`\s*(?:responded: )?", re.MULTILINE | re.DOTALL)


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
        try:
            return fn(self, *args, **kwargs)
        except Exception:
            if self.raise_error:
                raise
            logger.exception("%s.%s failed; the host run continues", type(self).__name__, fn.__name__)
            return None

    return wrapper  # type: ignore[return-value]


def _aguard(fn: F) -> F:
    """Async :func:`_guard`."""

    @functools.wraps(fn)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(self, *args, **kwargs)
        except Exception:
            if self.raise_error:
                raise
            logger.exception("%s.%s failed; the host run continues", type(self).__name__, fn.__name__)
            return None

    return wrapper  # type: ignore[return-value]


def _llm_meta(response: LLMResult) -> dict[str, Any] | None:
    usage = (response.llm_output or {}).get("token_usage")
    return {"token_usage": usage} if isinstance(usage, Mapping) else None


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
        )


class LineageCaptureCallback(_CaptureSetup, BaseCallbackHandler):
    """Capture LangChain runs as MemLineage activities and memories with lineage.

    Chain, LLM / chat-model and tool runs become activities (ids are LangChain ``run_id`` / ``parent_run_id``);
    the user input of a top-level run becomes a ``user`` memory; tool results become ``tool:<name>`` memories
    ``wasGeneratedBy`` the tool-call activity and ``wasDerivedFrom`` the memories in the run's context (the user
    turn and the memories :class:`LineageMemory` recalled into it); action logs become ``reasoning`` memories and
    final answers ``agent`` memories derived from the context and the run's tool results.

    Tool calls are joined by run ids: under ``AgentExecutor`` the tool hooks get no ``tool_call_id``, so the id is
    taken from the matching ``on_agent_action`` of the executor run (same tool, same input; parallel calls to the
    same tool are paired one to one); under ``create_agent`` it comes with ``on_tool_start`` / the
    ``ToolMessage``. A tool that never reports an end is closed with outcome ``unknown`` when its parent ends;
    errors and fallbacks are stored with an ``outcome`` flag (metadata and an ``outcome:<x>`` tag), never as
    successful results. Handler failures are logged and never break the host run unless ``raise_error=True``.

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
        capture_reasoning: Remember agent action logs as ``reasoning`` memories.
        raise_error: Re-raise handler failures (for tests).
        tool_tags: Tags per tool name added to that tool's result memories, so policies can target them (e.g.
            ``{"get_flight_price": ["flight_price"]}`` with a ``freshness("flight_price", 3600)`` policy).
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
        self._recorder.llm_end(str(run_id), "success", _llm_meta(response))

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
        await asyncio.to_thread(self._recorder.llm_end, str(run_id), "success", _llm_meta(response))

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
