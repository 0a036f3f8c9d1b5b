"""``LineageMemory``: a classic LangChain ``BaseMemory`` backed by MemLineage (drop-in for ``AgentExecutor``)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core.runnables.config import ensure_config
from memlineage._construct import typed_construction
from memlineage.capture import RunRecorder, ToolCallSpec
from memlineage.manager import MemoryManager
from memlineage.models import Scope, new_id
from memlineage.retrieval import RecallHit
from pydantic import ConfigDict, Field, PrivateAttr, field_validator
from typing_extensions import override

from memlineage_langchain._convert import (
    RECALLED_KEY,
    action_text,
    format_memories,
    memory_to_message,
    optional_scope,
    require_scope,
    scope_from_config,
    scope_from_mapping,
    text_of,
    user_text,
)

__all__ = ["LineageMemory"]

logger = logging.getLogger(__name__)

_MAX_PENDING = 1024


@typed_construction
class LineageMemory(BaseMemory):
    """Classic LangChain memory with lineage: recall on load, remember with provenance on save.

    ``load_memory_variables`` recalls the memories most relevant to the current input within the scope;
    ``save_context`` stores the input as a ``user`` memory and the output as an ``agent`` memory derived from the
    user turn and the memories recalled for it; ``intermediate_steps`` (``AgentExecutor(...,
    return_intermediate_steps=True)``) become tool-call activities and ``tool:<name>`` memories. ``clear()``
    archives this session's memories only (kept in the ledger, never another user's or session's).

    The scope is the constructor's; else ``user_id`` / ``session_id`` in the chain inputs; else the metadata of
    the enclosing run config (visible when the chain runs inside a runnable or graph; a top-level
    ``Chain.invoke`` does not hand its config to memory). With none of them it raises ``InvalidInputError`` rather
    than write to a global pool.

    Setup:
        ``pip install "memlineage[langchain]"``.

    Instantiate:
        >>> from memlineage import Scope
        >>> from memlineage.testing import make_manager
        >>> memory = LineageMemory(
        ...     manager=make_manager(),
        ...     scope=Scope(user_id="alice", session_id="s1"),
        ...     memory_key="chat_history",
        ... )

    Use:
        >>> memory.save_context({"input": "I live in Paris"}, {"output": "Noted."})
        >>> "Paris" in memory.load_memory_variables({"input": "Where do I live?"})["chat_history"]
        True

        With an agent: ``AgentExecutor(agent=agent, tools=tools, memory=memory)``; set ``return_messages=True``
        for a ``MessagesPlaceholder``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    manager: MemoryManager = Field(description="The memory manager to read from and write to.")
    scope: Scope | None = Field(
        default=None,
        description="Fixed scope (a Scope, a user id string or a mapping); None = from inputs or run metadata.",
    )
    coerce_scope = field_validator("scope", mode="before")(optional_scope)
    memory_key: str = Field(default="history", description="Input key the recalled memories are loaded into.")
    input_key: str | None = Field(default=None, description="Input key of the user turn; None = 'input'...")
    output_key: str | None = Field(default=None, description="Output key of the answer; None = 'output'...")
    k: int = Field(default=5, ge=0, description="Number of memories recalled per turn.")
    return_messages: bool = Field(default=False, description="Load chat messages instead of one string.")
    include_suspect: bool = Field(default=False, description="Also recall suspect memories (flagged).")
    kind: str | None = Field(
        default=None,
        description="Memory kind of saved turns; None = episodic, or semantic when the value model promotes them.",
    )
    llm: Any = Field(
        default=None,
        description="The agent's chat model, to judge whether what the user says updates a memory "
        "(MemoryManager.model_reconciler); None = the store's reconciler (the offline rules by default).",
    )

    _pending: dict[tuple[str, str | None, str], list[str]] = PrivateAttr(default_factory=dict)
    _written: list[str] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    @override
    def memory_variables(self) -> list[str]:
        return [self.memory_key, RECALLED_KEY]

    # ------------------------------------------------------------------ translation
    def _scope(self, inputs: Mapping[str, Any] | None) -> Scope:
        found = self.scope or scope_from_mapping(inputs) or scope_from_config(ensure_config())
        return require_scope(found, "LineageMemory")

    def _loaded(self, scope: Scope, query: str, hits: Sequence[RecallHit]) -> dict[str, Any]:
        memories = [h.memory for h in hits]
        ids = [m.id for m in memories]
        with self._lock:
            if len(self._pending) >= _MAX_PENDING:
                self._pending.pop(next(iter(self._pending)))
            self._pending[(scope.user_id, scope.session_id, query)] = ids
        value: Any = [memory_to_message(m) for m in memories] if self.return_messages else format_memories(hits)
        return {self.memory_key: value, RECALLED_KEY: ids}

    def _empty(self) -> dict[str, Any]:
        return {self.memory_key: [] if self.return_messages else "", RECALLED_KEY: []}

    def _recalled(self, scope: Scope, query: str, inputs: Mapping[str, Any]) -> list[str]:
        given = inputs.get(RECALLED_KEY)
        with self._lock:
            pending = self._pending.pop((scope.user_id, scope.session_id, query), None)
        if isinstance(given, list):
            return [x for x in given if isinstance(x, str)]
        return pending or []

    def _answer_text(self, outputs: Mapping[str, Any]) -> str:
        if self.output_key:
            return text_of(outputs.get(self.output_key))
        for key in ("output", "answer", "text", "response"):
            if key in outputs:
                return text_of(outputs[key])
        rest = [v for k, v in outputs.items() if k != "intermediate_steps"]
        return text_of(rest[0]) if len(rest) == 1 else ""

    def _record(self, scope: Scope, query: str, premises: list[str], outputs: Mapping[str, Any]) -> None:
        """Record the turn through the shared run recorder, unless a capture callback is recording it already."""
        recorder = RunRecorder.of(self.manager)
        if query.strip() and recorder.open_turn(scope, query) is not None:
            return  # LineageCaptureCallback on the same run writes it (once)
        run = recorder.start_run(
            scope, None, query, name="LineageMemory", framework="langchain", recalled=premises, kind=self.kind,
            reconciler=self.manager.model_reconciler(self.llm),
        )  # fmt: skip
        if run.user_memory_id:
            self._written.append(run.user_memory_id)
        for step in outputs.get("intermediate_steps") or ():
            if not isinstance(step, (tuple, list)) or len(step) != 2:
                continue
            action, observation = step
            name = str(getattr(action, "tool", "tool"))
            call_id = getattr(action, "tool_call_id", None)
            said = action_text(getattr(action, "log", ""))
            spec = ToolCallSpec(call_id or new_id(), name, getattr(action, "tool_input", None))
            recorder.model_step(run, text=said or None, tool_calls=[spec])
            mem = recorder.tool_end(run, spec.id, text_of(observation), name=name, arguments=spec.arguments)
            if mem is not None:
                self._written.append(mem.id)
        answer = recorder.answer(run, self._answer_text(outputs))
        if answer is not None:
            self._written.append(answer.id)
        recorder.end_run(run)

    # ------------------------------------------------------------------ BaseMemory
    @override
    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        scope = self._scope(inputs)
        query = user_text(inputs, self.input_key)
        if not query.strip() or self.k == 0:
            return self._empty()
        result = self.manager.recall(query, scope=scope, k=self.k, include_suspect=self.include_suspect)
        return self._loaded(scope, query, list(result))

    @override
    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        scope = self._scope(inputs)
        query = user_text(inputs, self.input_key)
        if not query.strip() or self.k == 0:
            return self._empty()
        result = await self.manager.arecall(query, scope=scope, k=self.k, include_suspect=self.include_suspect)
        return self._loaded(scope, query, list(result))

    @override
    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        scope = self._scope(inputs)
        query = user_text(inputs, self.input_key)
        self._record(scope, query, self._recalled(scope, query, inputs), outputs)

    @override
    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        scope = self._scope(inputs)
        query = user_text(inputs, self.input_key)
        await asyncio.to_thread(self._record, scope, query, self._recalled(scope, query, inputs), outputs)

    def _to_clear(self, scope: Scope) -> list[str]:
        if scope.session_id is not None:
            return [m.id for m in self.manager.find(scope=scope, session_only=True)]
        live = {m.id for m in self.manager.find(scope=scope)}
        return [i for i in dict.fromkeys(self._written) if i in live]

    @override
    def clear(self) -> None:
        """Archive this session's memories (or, without a session id, the ones this instance wrote)."""
        scope = self._scope(None)
        for mid in self._to_clear(scope):
            self.manager.forget(mid, scope=scope, reason="LineageMemory.clear()")
        self._written.clear()

    @override
    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        scope = self._scope(None)
        for mem in await self.manager.afind(scope=scope, session_only=True) if scope.session_id else []:
            await self.manager.aforget(mem.id, scope=scope, reason="LineageMemory.clear()")
        if scope.session_id is None:
            for mid in self._to_clear(scope):
                await self.manager.aforget(mid, scope=scope, reason="LineageMemory.clear()")
        self._written.clear()
