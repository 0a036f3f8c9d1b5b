"""The run tree behind the LangChain capture handlers: callback events → ``RunRecorder`` moments.

:class:`_Recorder` keeps the LangChain runs a handler has seen (their parents, scopes and pending agent actions) and
translates each event into the recorder's moments; the handlers in :mod:`memlineage_langchain._callback` only
unpack LangChain's arguments and guard against failures.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.agents import AgentAction, AgentFinish
from langchain_core.messages import AIMessage
from langchain_core.outputs import LLMResult
from memlineage.capture import CaptureRun, RunRecorder, ToolCallSpec
from memlineage.manager import MemoryManager
from memlineage.models import Activity, Scope, new_id

from memlineage_langchain._convert import (
    RECALLED_KEY,
    action_text,
    final_ai_text,
    require_scope,
    scope_from_mapping,
    text_of,
    tool_output,
    user_text,
)

#: The handlers' logger: its name stays the module users know them by.
logger = logging.getLogger("memlineage_langchain._callback")

#: Tool names AgentExecutor uses for parse-error and unknown-tool fallbacks: their outputs are not tool results.
_FALLBACK_TOOLS = frozenset({"_Exception", "invalid_tool"})


@dataclass
class _Action:
    """An ``on_agent_action`` waiting for its tool run (AgentExecutor gives tool hooks no ``tool_call_id``)."""

    tool: str
    tool_input: Any
    tool_call_id: str | None


@dataclass
class _Run:
    """A LangChain run seen by the handler: its place in the run tree and, for the root, the recorded run."""

    id: str
    kind: str
    name: str | None
    parent: str | None
    scope: Scope | None
    capture: CaptureRun | None = None
    actions: list[_Action] = field(default_factory=list)
    tool_call_id: str | None = None
    recorded: bool = False


class _Recorder:
    """Translates LangChain callback events into :class:`~memlineage.capture.RunRecorder` moments (no rules here)."""

    def __init__(
        self,
        manager: MemoryManager,
        scope: Scope | None,
        *,
        capture_user_input: bool,
        capture_reasoning: bool,
        strict: Callable[[], bool],
        tool_tags: Mapping[str, Sequence[str]] | None = None,
        reconciler: Any = None,
    ) -> None:
        self.manager = manager
        self.reconciler = reconciler
        self.recorder = RunRecorder.of(manager)
        self.scope = scope
        self.capture_user_input = capture_user_input
        self.capture_reasoning = capture_reasoning
        self.tool_tags = {name: tuple(tags) for name, tags in (tool_tags or {}).items()}
        self._strict = strict
        self._runs: dict[str, _Run] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ run tree
    def _scope_for(self, metadata: Mapping[str, Any] | None, parent: str | None) -> Scope | None:
        if self.scope is not None:
            return self.scope
        found = scope_from_mapping(metadata)
        if found is None and parent is not None:
            with self._lock:
                p = self._runs.get(parent)
            found = p.scope if p else None
        return found

    def _root(self, run_id: str | None) -> _Run | None:
        """The top-level run above ``run_id`` (the one that owns the recorded agent run)."""
        seen: set[str] = set()
        with self._lock:
            cur = self._runs.get(run_id) if run_id else None
            while cur is not None and cur.parent is not None and cur.id not in seen:
                seen.add(cur.id)
                nxt = self._runs.get(cur.parent)
                if nxt is None:
                    break
                cur = nxt
        return cur

    def _capture(self, run_id: str | None) -> CaptureRun | None:
        root = self._root(run_id)
        return root.capture if root is not None else None

    def _writable(self, scope: Scope | None, run_id: str, what: str) -> Scope | None:
        if scope is not None:
            return scope
        if self._strict():
            require_scope(None, f"LineageCaptureCallback ({what})")
        logger.warning("LineageCaptureCallback: no scope for run %s; %s not remembered", run_id, what)
        return None

    # ------------------------------------------------------------------ chains
    def chain_start(
        self, inputs: Any, run_id: str, parent: str | None, metadata: Mapping[str, Any] | None, name: str | None
    ) -> None:
        run = _Run(id=run_id, kind="chain", name=name, parent=parent, scope=self._scope_for(metadata, parent))
        with self._lock:
            self._runs[run_id] = run
        if parent is not None or self._writable(run.scope, run_id, "run") is None:
            return
        assert run.scope is not None
        recalled = inputs.get(RECALLED_KEY) if isinstance(inputs, Mapping) else None
        text = user_text(inputs) if self.capture_user_input else ""
        run.capture = self.recorder.start_run(
            run.scope, run_id, text, name=name, framework="langchain",
            recalled=[x for x in recalled if isinstance(x, str)] if isinstance(recalled, list) else (),
            reconciler=self.reconciler,
        )  # fmt: skip

    def chain_end(self, outputs: Any, run_id: str, outcome: str, error: BaseException | None = None) -> None:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            return
        cap = run.capture
        if cap is not None:
            for action in run.actions:  # actions whose tool run this handler never saw (attached at construction)
                self.recorder.tool_start(cap, action.tool_call_id, action.tool, action.tool_input)
            run.actions.clear()
            if outcome == "success" and isinstance(outputs, Mapping):
                messages = outputs.get("messages")
                text = final_ai_text(messages) if isinstance(messages, list) else ""
                if text.strip():
                    self.recorder.answer(cap, text)
            self.recorder.end_run(cap, outcome=outcome, error=repr(error) if error is not None else None)
        with self._lock:
            if run.parent is None:  # forget the whole run tree
                for other in [r.id for r in self._runs.values()]:
                    root = self._root(other)
                    if root is not None and root.id == run_id:
                        self._runs.pop(other, None)
            self._runs.pop(run_id, None)

    # ------------------------------------------------------------------ model calls and retrievals
    def llm_start(
        self, run_id: str, parent: str | None, metadata: Mapping[str, Any] | None, name: str | None,
        kind: str = "llm_call",
    ) -> None:  # fmt: skip
        run = _Run(id=run_id, kind=kind, name=name, parent=parent, scope=self._scope_for(metadata, parent))
        with self._lock:
            self._runs[run_id] = run
        if kind == "retrieval" and run.scope is not None:  # the retriever records `used` edges from this id
            self.manager.record_activity(
                Activity(id=run_id, kind=kind, name=name, scope=run.scope, metadata={"framework": "langchain"})
            )
            run.recorded = True

    def llm_end(self, run_id: str, outcome: str, payload: Any = None) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is None:
            return
        if run.recorded and run.scope is not None:  # recorded runs always have a scope
            meta = payload if isinstance(payload, dict) else None
            self.manager.end_activity(run_id, scope=run.scope, outcome=outcome, metadata=meta)
            return
        cap = self._capture(run.parent)
        if cap is None or outcome != "success" or not isinstance(payload, LLMResult):
            return
        message = _ai_message(payload)
        if message is None:
            return
        calls = [ToolCallSpec(c["id"] or new_id(), c["name"], c.get("args") or {}) for c in message.tool_calls]
        # Text without tool calls is not yet the answer: AgentExecutor reports it through on_agent_finish and
        # ReAct models write their actions as text.
        self.recorder.model_step(cap, text=text_of(message) if calls else None, tool_calls=calls, name=run.name)

    # ------------------------------------------------------------------ agent steps
    def agent_action(self, action: AgentAction, run_id: str) -> None:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            return
        call_id = getattr(action, "tool_call_id", None)
        with self._lock:
            run.actions.append(_Action(action.tool, action.tool_input, call_id))
        cap = self._capture(run_id)
        if cap is None or call_id is not None:  # tool-calling agents: the model step already recorded the call
            return
        # Text-based agents (ReAct): the action log is the step's reasoning; markers in it are citations.
        log = action_text(action.log)
        reasoning = log if self.capture_reasoning else None
        self.recorder.model_step(cap, reasoning=reasoning, name=run.name)

    def agent_finish(self, finish: AgentFinish, run_id: str) -> None:
        cap = self._capture(run_id)
        if cap is None:
            return
        values = finish.return_values or {}
        text = text_of(values.get("output", next(iter(values.values()), "")))
        if text.strip():
            self.recorder.answer(cap, text)

    # ------------------------------------------------------------------ tools
    def tool_start(
        self, run_id: str, parent: str | None, name: str, input_str: str, inputs: Any, tool_call_id: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> None:  # fmt: skip
        action = self._match_action(parent, name, inputs, input_str) if parent is not None else None
        if tool_call_id is None and action is not None:
            tool_call_id = action.tool_call_id
        arguments = inputs if isinstance(inputs, Mapping) else (action.tool_input if action else input_str)
        run = _Run(id=run_id, kind="tool_call", name=name, parent=parent, scope=self._scope_for(metadata, parent))
        with self._lock:
            self._runs[run_id] = run
        cap = self._capture(parent)
        if cap is not None:
            run.tool_call_id = self.recorder.tool_start(cap, tool_call_id, name, arguments, framework_id=run_id)

    def _match_action(self, parent: str, name: str, inputs: Any, input_str: str) -> _Action | None:
        """Pair an AgentExecutor tool run with its ``on_agent_action``: same executor run, same tool, same input."""
        with self._lock:
            owner = self._runs.get(parent)
            if owner is None:
                return None
            same_tool = [a for a in owner.actions if a.tool == name]
            exact = [a for a in same_tool if a.tool_input == inputs or a.tool_input == input_str]
            candidates = exact or same_tool
            chosen = candidates[0] if candidates else None
            if chosen is not None:
                owner.actions.remove(chosen)
            return chosen

    def tool_end(self, output: Any, run_id: str) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        cap = self._capture(run.parent) if run is not None else None
        if run is None or cap is None:
            return
        text, outcome, _ = tool_output(output)
        if outcome == "error" or run.name in _FALLBACK_TOOLS:
            self.recorder.tool_error(cap, run.tool_call_id, text, name=run.name)
            return
        tags = self.tool_tags.get(run.name or "", ())
        self.recorder.tool_end(cap, run.tool_call_id, text, name=run.name, tags=tags)

    def tool_error(self, error: BaseException, run_id: str, tool_call_id: str | None) -> None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        cap = self._capture(run.parent) if run is not None else None
        if run is None or cap is None:
            return
        text = f"{type(error).__name__}: {error}"
        self.recorder.tool_error(cap, run.tool_call_id or tool_call_id, text, name=run.name)


def _ai_message(response: LLMResult) -> AIMessage | None:
    """The AI message of a chat model response (``None`` for plain-text LLMs)."""
    for generations in response.generations:
        for gen in generations:
            message = getattr(gen, "message", None)
            if isinstance(message, AIMessage):
                return message
    return None
