"""``LineageMemory``: a classic LangChain ``BaseMemory`` backed by MemLineage (drop-in for ``AgentExecutor``)."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.config import ensure_config
from memlineage.capture import RunRecorder, ToolCallSpec, ashield, on_memories_erased, on_scope_erased, shield
from memlineage.construct import typed_construction
from memlineage.manager import MemoryManager
from memlineage.models import Memory, Scope, new_id
from memlineage.retrieval import RecallHit
from pydantic import ConfigDict, Field, PrivateAttr, field_validator
from typing_extensions import override

from memlineage_langchain._convert import (
    RECALLED_KEY,
    action_text,
    memory_note,
    optional_scope,
    require_scope,
    scope_from_config,
    scope_from_mapping,
    text_of,
    transcript,
    user_text,
)

__all__ = ["LineageMemory"]

logger = logging.getLogger(__name__)

_MAX_PENDING = 1024
_BLOCK_HEADER = "Recalled memories, best first (cite as [m:<id>]):"


def _turn_messages(mems: Sequence[Memory]) -> list[BaseMessage]:
    """One stored exchange as chat messages: the user's message, each tool call with its result, the answer."""
    out: list[BaseMessage] = []
    for m in mems:
        kind = m.source.kind.value
        if kind == "user":
            out.append(HumanMessage(content=m.content))
        elif kind == "tool":
            call_id = str(m.metadata.get("tool_call_id") or m.id)
            name = str(m.metadata.get("tool_name") or m.source.name or "tool")
            args = m.metadata.get("arguments")
            call = {"name": name, "args": args if isinstance(args, dict) else {}, "id": call_id, "type": "tool_call"}
            out.append(AIMessage(content="", tool_calls=[call]))
            result = m.content.split(" -> ", 1)[1] if " -> " in m.content else m.content
            out.append(ToolMessage(content=result, tool_call_id=call_id, name=name))
        elif kind == "agent" and not m.metadata.get("filler"):
            out.append(AIMessage(content=m.content))
    return out


#: Memories one exchange writes at most, for the read of the recent turns (user message, a model step's text, tool
#: results, the answer); a turn with more tool calls shows its latest ones.
_PER_TURN = 12
#: Memories per exchange read first (the user's message, a tool result, the answer, and one to spare).
_FIRST_PER_TURN = 4


@typed_construction
class LineageMemory(BaseMemory):
    """Classic LangChain memory with lineage: the session's recent turns plus recalled memories, with provenance.

    ``load_memory_variables`` gives the model two things: **the session's recent turns in order** (at most
    ``max_turns`` exchanges: the user's message, the turn's tool calls with their results as an AI message with
    ``tool_calls`` followed by ``ToolMessage``s, and the answer), and **a separate block of recalled memories**,
    the ones most relevant to the current input across the user's sessions, within ``max_memory_tokens`` (best
    first; acknowledgements and what the recent turns already show are left out), delimited as data: a header, a
    note that the lines are quoted data, then between ``<recalled_memories>`` tags one line each with its
    ``[m:<id>]`` marker, status, who said it and date, and the text as one quoted string, so that a tool result
    can never pose as the user's or the system's words. With ``return_messages=True`` the block is one
    ``HumanMessage`` before the turns (never a ``SystemMessage``: what it holds is not the system's word);
    otherwise both are one string, each recent message one line that says who said it, its text quoted.
    ``save_context`` stores the input as a ``user`` memory and the output as an ``agent`` memory derived from what it
    rests on; ``intermediate_steps`` (``AgentExecutor(...,
    return_intermediate_steps=True)``) become tool-call activities and ``tool:<name>`` memories. ``clear()``
    archives this session's memories only (kept in the ledger, never another user's or session's). A failure of
    the store never raises into the agent: it is logged, counted (``stats()["adapter_errors"]``) and the turn goes
    on (an empty load, an unrecorded save).

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
    max_turns: int = Field(default=6, ge=0, description="Recent exchanges of the session given in order.")
    max_memory_tokens: int = Field(
        default=1000, ge=1, description="Token budget of the recalled-memory block (tiktoken cl100k_base)."
    )
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

    @override
    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        _LIVE[id(self)] = self  # an erasure drops what this memory holds of the erased scope (the raw input)

    def _forget(self, manager: Any, user_id: str, session_id: str | None, ids: frozenset[str] | None) -> None:
        if manager is not self.manager:
            return
        with self._lock:
            self._pending = {
                k: v
                for k, v in self._pending.items()
                if not (
                    k[0] == user_id
                    and (session_id is None or k[1] == session_id)
                    and (ids is None or not ids.isdisjoint(v))
                )
            }

    @property
    @override
    def memory_variables(self) -> list[str]:
        return [self.memory_key, RECALLED_KEY]

    # ------------------------------------------------------------------ translation
    def _scope(self, inputs: Mapping[str, Any] | None) -> Scope:
        found = self.scope or scope_from_mapping(inputs) or scope_from_config(ensure_config())
        return require_scope(found, "LineageMemory")

    def _loaded(self, scope: Scope, query: str, hits: Sequence[RecallHit]) -> dict[str, Any]:
        turns, in_turns = self._recent(scope)
        shown: list[RecallHit] = [
            h for h in hits if h.memory.id not in in_turns and not h.memory.metadata.get("filler")
        ]
        block, count = memory_note(_BLOCK_HEADER, shown, self.max_memory_tokens)
        shown = shown[:count]
        # what the model sees, the block and the recent turns, is the turn's context (its possible premises)
        ids = [h.memory.id for h in shown] + sorted(in_turns - {h.memory.id for h in shown})
        with self._lock:
            if len(self._pending) >= _MAX_PENDING:
                self._pending.pop(next(iter(self._pending)))
            self._pending[(scope.user_id, scope.session_id, query)] = ids
        if self.return_messages:
            # the block is data, never the system's voice: a human-side message that says what it holds
            value: Any = ([HumanMessage(content=block)] if block else []) + turns
        else:
            value = "\n\n".join(x for x in (block, transcript(turns)) if x)
        return {self.memory_key: value, RECALLED_KEY: ids}

    def _recent(self, scope: Scope) -> tuple[list[BaseMessage], set[str]]:
        """The session's last ``max_turns`` exchanges as messages, in order, and the ids of their active memories."""
        if scope.session_id is None or self.max_turns == 0:
            return [], set()
        # a turn writes a few memories (the user's message, tool results, the answer): read only the newest ones,
        # a few per turn first and more (up to _PER_TURN per turn) when turns with many tool calls need them
        want = _FIRST_PER_TURN * self.max_turns
        while True:
            runs: dict[str, list[Memory]] = {}
            active: set[str] = set()
            recent = self.manager.find(scope=scope, session_only=True, newest=want)
            for m in recent:
                if m.status.value == "active":
                    active.add(m.id)
                run = m.lineage.activity_id if m.source.kind.value == "user" else m.lineage.parent_activity_id
                if run is not None:
                    runs.setdefault(run, []).append(m)
            # the oldest run read may be cut short: enough when one more run than shown was read, or all there is
            if len(runs) > self.max_turns or len(recent) < want or want >= _PER_TURN * self.max_turns:
                break
            want = min(2 * want, _PER_TURN * self.max_turns)
        messages: list[BaseMessage] = []
        ids: set[str] = set()
        for mems in list(runs.values())[-self.max_turns :]:
            messages.extend(_turn_messages(mems))
            ids.update(m.id for m in mems if m.id in active)  # a suspect one is shown, never taken as a premise
        return messages, ids

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
        return shield(
            self.manager, "LineageMemory.load_memory_variables", self._load, scope, query, default=self._empty(),
            scope=scope,
        )  # fmt: skip

    def _load(self, scope: Scope, query: str) -> dict[str, Any]:
        hits: list[RecallHit] = []
        if query.strip() and self.k > 0:
            hits = list(self.manager.recall(query, scope=scope, k=self.k, include_suspect=self.include_suspect))
        return self._loaded(scope, query, hits)

    @override
    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        scope = self._scope(inputs)
        query = user_text(inputs, self.input_key)
        load = functools.partial(asyncio.to_thread, self._load, scope, query)
        return await ashield(  # type: ignore[no-any-return]
            self.manager, "LineageMemory.aload_memory_variables", load, default=self._empty(), scope=scope
        )

    @override
    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        scope = self._scope(inputs)
        query = user_text(inputs, self.input_key)
        premises = self._recalled(scope, query, inputs)
        shield(self.manager, "LineageMemory.save_context", self._record, scope, query, premises, outputs, scope=scope)

    @override
    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        scope = self._scope(inputs)
        query = user_text(inputs, self.input_key)
        premises = self._recalled(scope, query, inputs)
        record = functools.partial(asyncio.to_thread, self._record, scope, query, premises, outputs)
        await ashield(self.manager, "LineageMemory.asave_context", record, scope=scope)

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


#: Every live LineageMemory (weakly; pydantic models are unhashable, so keyed by id), for the erasure hooks below.
_LIVE: weakref.WeakValueDictionary[int, LineageMemory] = weakref.WeakValueDictionary()


def _scope_erased(manager: Any, scope: Scope) -> None:
    for memory in list(_LIVE.values()):
        memory._forget(manager, scope.user_id, scope.session_id, None)


def _memories_erased(manager: Any, scope: Scope, ids: frozenset[str]) -> None:
    for memory in list(_LIVE.values()):
        memory._forget(manager, scope.user_id, None, ids)


on_scope_erased(_scope_erased)
on_memories_erased(_memories_erased)
