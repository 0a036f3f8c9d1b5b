"""``LineageCaptureCallback``: LangChain callback events → MemLineage activities and memories with lineage.

The handlers unpack LangChain's arguments and guard each hook; the run tree they share and the translation of each
event live in :mod:`memlineage_langchain._capture_events`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.agents import AgentAction, AgentFinish
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.outputs import LLMResult
from memlineage.capture import hook_span
from memlineage.manager import MemoryManager
from memlineage.models import Scope
from typing_extensions import override

from memlineage_langchain._capture_events import _Recorder

__all__ = ["AsyncLineageCaptureCallback", "LineageCaptureCallback"]

#: The handlers' logger (``_capture_events`` logs its warnings under this name too).
logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


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
