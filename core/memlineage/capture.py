"""One run recorder behind every framework surface: what a run becomes in the ledger, decided in one place.

Adapters (LangChain callback, middleware and classic memory; LlamaIndex capture and memory block) only translate
framework events into the moments of a run -- :meth:`RunRecorder.start_run`, :meth:`~RunRecorder.recalled`,
:meth:`~RunRecorder.model_step`, :meth:`~RunRecorder.tool_start`, :meth:`~RunRecorder.tool_end`,
:meth:`~RunRecorder.tool_error`, :meth:`~RunRecorder.answer`, :meth:`~RunRecorder.end_run` -- and this module
decides the rest:

- **Memory text and source.** The user turn is a ``user`` memory; a tool result is ``tool:<name>`` with the text
  ``name(arg='v', ...) -> output`` (:func:`tool_result_text`) and its structured arguments in metadata; assistant
  text (also text sent together with tool calls) is an ``agent`` memory.
- **Failures are outcomes, not facts.** A failed or error-handled tool call closes its activity with
  ``outcome="error"`` and the error text; it never becomes a memory and never a premise.
- **Premises with attribution** (stored on each ``wasDerivedFrom`` edge): text that cites ``[m:<id>]`` markers
  derives from exactly those memories (``"cited"``); a tool call derives from the memories and user turns that
  supply its argument values (``"arguments"``); an answer derives from the run's tool results (``"results"``) or
  from the memories whose distinctive words it repeats (``"content"``); only when nothing can be attributed does it
  fall back to the context memories about the topic it adds to the user's turn, else to the user turn alone
  (``"context"``). Acknowledgements and filler ("Noted. I'll remember that.") have
  no premises and are never premises.
- **One run, many observers.** Runs are keyed by scope and framework run id and, while open, by the user turn, so
  a memory component and a capture callback attached to the same run record it once.

The run's records (:class:`CaptureRun`) and the premise rules live in :mod:`memlineage._capture_run`; this module
holds the recorder that writes what they decide.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from memlineage._capture_run import (
    _MARKER,
    ATTRIBUTIONS,
    TOOL_ERROR_PREFIX,
    CaptureRun,
    ToolCallSpec,
    _arguments,
    _Call,
    _per_run,
    call_premises,
    citable,
    cited_ids,
    text_premises,
    tool_result_text,
)
from memlineage._evidence import is_filler
from memlineage._evidence import is_filler_memory as _is_filler_memory
from memlineage._forget import on_memories_erased, on_scope_erased
from memlineage._shield import ashield, hook_span, shield
from memlineage.errors import MemLineageError, StorageError
from memlineage.manager import MemoryManager
from memlineage.models import Activity, Memory, Scope, match_short_id, new_id, normalize_content
from memlineage.reconcile import Reconciler, using_reconciler
from memlineage.tools import MEMORY_TOOL_NAMES, marker

__all__ = [
    "ATTRIBUTIONS",
    "on_memories_erased",
    "on_scope_erased",
    "TOOL_ERROR_PREFIX",
    "CaptureRun",
    "RunRecorder",
    "ToolCallSpec",
    "ashield",
    "cited_ids",
    "hook_span",
    "is_filler",
    "marker",
    "shield",
    "tool_result_text",
]

#: The tool call running in this context (its run and call id), set by adapters around the tool's execution so that
#: what the tool writes through another surface (a LangGraph store) carries the call's activity and premises.
_CURRENT_CALL: contextvars.ContextVar[tuple[CaptureRun, str] | None] = contextvars.ContextVar(
    "memlineage_tool_call", default=None
)

_recorders: weakref.WeakKeyDictionary[Any, RunRecorder] = weakref.WeakKeyDictionary()
_recorders_lock = threading.Lock()


class RunRecorder:
    """Records agent runs in a :class:`~memlineage.MemoryManager`: activities, memories, premises with attribution.

    One recorder per manager (:meth:`of`) is shared by every surface, so a run observed by two of them (a memory
    component and a capture callback) is written once. Thread-safe.

    Args:
        manager: The memory manager written to.
    """

    def __init__(self, manager: MemoryManager) -> None:
        # weakly: the registry maps each manager to its recorder with a weak key, which a strong reference from
        # the recorder back to its manager would keep alive forever (every manager ever captured, leaked)
        self._manager = weakref.ref(manager)
        self._runs: dict[tuple[str, str | None, str], CaptureRun] = {}
        self._turns: dict[tuple[str, str | None, str], CaptureRun] = {}
        self._pending: dict[tuple[str, str | None, str], list[Memory]] = {}
        self._lock = threading.RLock()

    @property
    def manager(self) -> MemoryManager:
        """The memory manager written to.

        Raises:
            StorageError: the manager was garbage-collected (nothing holds it any more).
        """
        manager = self._manager()
        if manager is None:
            msg = "this run recorder's MemoryManager no longer exists; open the store again"
            raise StorageError(msg)
        return manager

    @classmethod
    def of(cls, manager: MemoryManager) -> RunRecorder:
        """The recorder shared by every surface that writes to ``manager``."""
        with _recorders_lock:
            rec = _recorders.get(manager)
            if rec is None:
                rec = _recorders[manager] = cls(manager)
            return rec

    @classmethod
    def forget_scope(cls, manager: object, scope: Scope) -> int:
        """Drop the open runs and pending recalls of ``scope`` held for ``manager`` (after its erasure).

        An open run holds the user's turn and the memories of the run in the process; once the scope is erased
        nothing of it is kept, and a later callback of that run starts a new one. Returns the runs dropped.
        """
        with _recorders_lock:
            rec = _recorders.get(manager)
        if rec is None:
            return 0

        def erased(key: tuple[str, str | None, str], run: CaptureRun | None = None) -> bool:
            if key[0] != scope.user_id or (scope.session_id is not None and key[1] != scope.session_id):
                return False
            return scope.agent_id is None or run is None or run.scope.agent_id == scope.agent_id

        with rec._lock:
            runs = {id(r) for k, r in rec._runs.items() if erased(k, r)}
            rec._runs = {k: r for k, r in rec._runs.items() if id(r) not in runs}
            rec._turns = {k: r for k, r in rec._turns.items() if not erased(k, r)}
            rec._pending = {k: m for k, m in rec._pending.items() if not erased(k)}
        return len(runs)

    @classmethod
    def forget_memories(cls, manager: object, scope: Scope, ids: frozenset[str]) -> int:
        """Drop the open runs of ``scope``'s user that hold one of the erased ``ids`` (turn, context or result).

        A later callback of such a run starts a new one. Returns the runs dropped.
        """
        with _recorders_lock:
            rec = _recorders.get(manager)
        if rec is None or not ids:
            return 0

        def holds(run: CaptureRun) -> bool:
            return run.scope.user_id == scope.user_id and (
                run.user_memory_id in ids or not ids.isdisjoint(run.context) or not ids.isdisjoint(run.results)
            )

        with rec._lock:
            runs = {id(r) for r in rec._runs.values() if holds(r)}
            rec._runs = {k: r for k, r in rec._runs.items() if id(r) not in runs}
            rec._turns = {k: r for k, r in rec._turns.items() if id(r) not in runs and not holds(r)}
            rec._pending = {
                k: ms for k, ms in rec._pending.items() if k[0] != scope.user_id or ids.isdisjoint(m.id for m in ms)
            }
        return len(runs)

    # ------------------------------------------------------------------ lookup
    @staticmethod
    def _key(scope: Scope, key: str) -> tuple[str, str | None, str]:
        return (scope.user_id, scope.session_id, key)

    def run(self, scope: Scope, run_id: str) -> CaptureRun | None:
        """The open run with this framework id in ``scope``, or ``None``."""
        with self._lock:
            return self._runs.get(self._key(scope, run_id))

    def session_run(self, scope: Scope) -> CaptureRun | None:
        """The latest open run of ``scope``'s user and session, or ``None``."""
        with self._lock:
            runs = [r for k, r in self._runs.items() if k[:2] == (scope.user_id, scope.session_id) and not r.ended]
        return runs[-1] if runs else None

    def open_turn(self, scope: Scope, user_text: str) -> CaptureRun | None:
        """The open run of ``scope`` whose user turn is ``user_text``, or ``None``."""
        with self._lock:
            return self._turns.get(self._key(scope, normalize_content(user_text)))

    # ------------------------------------------------------------------ run
    def start_run(
        self,
        scope: Scope,
        run_id: str | None,
        user_text: str | None,
        *,
        name: str | None = None,
        framework: str | None = None,
        recalled: Sequence[Memory | str] = (),
        kind: str | None = None,
        reconciler: Reconciler | None = None,
    ) -> CaptureRun:
        """Start (or join) the run of one user turn: an ``agent_run`` activity and the turn as a ``user`` memory.

        A run already open under ``run_id``, or with the same user turn in the same scope, is joined rather
        than recorded twice.

        Args:
            scope: Owner of the run.
            run_id: The framework's run id; ``None`` = a new one.
            user_text: The user turn ("" / ``None`` = none).
            name: Agent or chain name.
            framework: ``"langchain"`` / ``"llamaindex"``, kept in the activity metadata.
            recalled: Memories (or ids) recalled into the run's context.
            kind: Memory kind of what the run writes; ``None`` = the manager's default (the value model's choice).
            reconciler: Update detection for what the run writes (the agent's model); ``None`` = the store's own.

        Returns:
            The run.
        """
        text = (user_text or "").strip()
        with self._lock:
            run = self._runs.get(self._key(scope, run_id)) if run_id else None
            if run is None and text:
                run = self._turns.get(self._key(scope, normalize_content(text)))
            joined = run is not None
            if run is not None and run_id and run_id not in run.aliases:
                run.aliases.add(run_id)
                self._runs[self._key(scope, run_id)] = run
            if run is None:
                run_id = run_id or new_id()
                run = CaptureRun(
                    scope=scope, run_id=run_id, activity_id=new_id(), user_text=text, aliases={run_id}, kind=kind,
                    reconciler=reconciler,
                )  # fmt: skip
                run.lock.acquire()  # a new run's lock is free; held until its start is recorded
                self._runs[self._key(scope, run_id)] = run
                if text:
                    self._turns[self._key(scope, normalize_content(text))] = run
        if joined:
            if reconciler is not None and run.reconciler is None:
                run.reconciler = reconciler
            self.recalled(run, recalled)
            return run
        try:
            self._record_start(run, text, name, framework, recalled)
        finally:
            run.lock.release()
        return run

    def _record_start(
        self, run: CaptureRun, text: str, name: str | None, framework: str | None, recalled: Sequence[Memory | str]
    ) -> None:
        scope, run_id = run.scope, run.run_id
        meta = {"framework": framework} if framework else {}
        self.manager.record_activity(
            Activity(id=run.activity_id, kind="agent_run", name=name, scope=scope, run_id=run_id, metadata=meta)
        )
        if text:
            with using_reconciler(run.reconciler):
                mem = self.manager.remember(
                    text, scope=scope, source="user", activity_id=run.activity_id, kind=run.kind
                )
            self._link(run, mem, run.activity_id)
            run.user_memory_id = mem.id
            run.context[mem.id] = mem
        with self._lock:
            pending = self._pending.pop(self._key(scope, normalize_content(text)), []) if text else []
        self.recalled(run, [*pending, *recalled])

    @_per_run
    def recalled(self, run: CaptureRun, memories: Sequence[Memory | str]) -> None:
        """Add memories recalled into the run's context (what its markers can cite). Filler is left out."""
        ids = [item for item in memories if isinstance(item, str)]
        loaded = dict(zip(ids, self.manager.get_many(ids, scope=run.scope))) if ids else {}  # one read, not N
        for item in memories:
            mem = loaded.get(item) if isinstance(item, str) else item
            if mem is None or not run.scope.contains(mem.scope) or _is_filler_memory(mem):
                continue
            if mem.id == run.user_memory_id or (run.user_memory_id and run.user_memory_id in mem.derived_from):
                continue  # the turn itself, or what this turn already produced
            run.context.setdefault(mem.id, mem)

    @contextlib.contextmanager
    def in_call(self, run: CaptureRun | None, call_id: str | None) -> Iterator[None]:
        """Mark the tool call ``call_id`` of ``run`` as running in this context (see :meth:`current_call`)."""
        if run is None or call_id is None:
            yield
            return
        token = _CURRENT_CALL.set((run, call_id))
        try:
            yield
        finally:
            _CURRENT_CALL.reset(token)

    @staticmethod
    def current_call(scope: Scope) -> tuple[str, list[str]] | None:
        """The activity id and premises of the tool call running in this context for ``scope``'s user, or None.

        A store write made by the tool (``runtime.store.put(...)``) is generated by that call and rests on what the
        call rests on (the memories that supplied its arguments, else the user turn).
        """
        found = _CURRENT_CALL.get()
        if found is None:
            return None
        run, call_id = found
        call = run.calls.get(call_id)
        if call is None or run.scope.user_id != scope.user_id:
            return None
        return call.activity_id, list(call.premises)

    def _listed(self, run: CaptureRun, output: str) -> list[Memory]:
        """The memories a ``search_memory`` listing shows, by their ``[m:<id>]`` markers (the scope's own only)."""
        keys = [m.group(1) for m in _MARKER.finditer(output)]
        if not keys:
            return []
        live = self.manager.find(scope=Scope(user_id=run.scope.user_id, agent_id=run.scope.agent_id))
        ids = [x.id for x in live]
        by_id = {x.id: x for x in live}
        out = []
        for key in keys:
            found = match_short_id(key, ids)
            if len(found) == 1:
                out.append(by_id[found[0]])
        return out

    def recalled_for(self, scope: Scope, user_text: str, memories: Sequence[Memory]) -> None:
        """Memories recalled for a user turn whose run may not have started yet (it picks them up when it does)."""
        run = self.open_turn(scope, user_text)
        if run is not None:
            self.recalled(run, memories)
            return
        with self._lock:
            key = self._key(scope, normalize_content(user_text))
            self._pending.setdefault(key, []).extend(memories)
            while len(self._pending) > 256:
                self._pending.pop(next(iter(self._pending)))

    @_per_run
    def end_run(self, run: CaptureRun, *, outcome: str = "success", error: str | None = None) -> None:
        """Close the run: open tool calls get outcome ``unknown``; the run activity gets ``outcome``."""
        with self._lock:
            if run.ended:
                return
            run.ended = True
            for alias in run.aliases:
                self._runs.pop(self._key(run.scope, alias), None)
            if run.user_text:
                key = self._key(run.scope, normalize_content(run.user_text))
                if self._turns.get(key) is run:
                    self._turns.pop(key)
        for call in run.calls.values():
            if not call.done:
                call.done = True
                self.manager.end_activity(
                    call.activity_id, scope=run.scope, outcome="unknown",
                    metadata={"reason": "the run ended before the tool reported"},
                )  # fmt: skip
        if run.llm_activity_id:
            self._end_llm(run)
        self.manager.end_activity(
            run.activity_id, scope=run.scope, outcome=outcome, metadata={"error": error} if error else None
        )

    def end_session_turns(self, scope: Scope) -> None:
        """Close the open runs of ``scope``'s session (a memory component that sees no run end calls this)."""
        with self._lock:
            runs = {id(r): r for k, r in self._runs.items() if k[:2] == (scope.user_id, scope.session_id)}
        for run in runs.values():
            self.end_run(run)

    # ------------------------------------------------------------------ model steps
    @_per_run
    def model_step(
        self,
        run: CaptureRun,
        *,
        text: str | None = None,
        reasoning: str | None = None,
        tool_calls: Sequence[ToolCallSpec] = (),
        name: str | None = None,
        framework_id: str | None = None,
    ) -> str:
        """One model call: an ``llm_call`` activity; its text (also next to tool calls) stored as ``agent``.

        Markers cited in ``text`` or ``reasoning`` become the premises of the step's tool calls.

        Returns:
            The ``llm_call`` activity id.
        """
        if tool_calls and run.llm_activity_id and all(spec.id in run.calls for spec in tool_calls):
            return run.llm_activity_id  # the same step reported by a second observer
        if run.llm_activity_id:
            self._end_llm(run)
        meta = {"framework_id": framework_id} if framework_id else {}
        act = self.manager.record_activity(
            Activity(
                kind="llm_call", name=name, parent_id=run.activity_id, scope=run.scope, run_id=run.run_id,
                metadata=meta,
            )
        )  # fmt: skip
        run.llm_activity_id = act.id
        said = " ".join(t for t in (text, reasoning) if t)
        run.step_citations = cited_ids(said, citable(run))
        ids = [self.tool_start(run, spec.id, spec.name, spec.arguments) for spec in tool_calls]
        if text and text.strip():
            if tool_calls:  # text sent with tool calls rests on what the calls rest on, unless it cites
                step: dict[str, str] = {}
                for call_id in ids:
                    step.update({p: a for p, a in run.calls[call_id].premises.items() if p not in step})
                self._agent_text(run, text.strip(), act.id, step)
            else:
                self.answer(run, text)
        return act.id

    def _end_llm(self, run: CaptureRun) -> None:
        llm, run.llm_activity_id = run.llm_activity_id, None
        if llm:
            self.manager.end_activity(llm, scope=run.scope)

    # ------------------------------------------------------------------ tools
    @_per_run
    def tool_start(
        self,
        run: CaptureRun,
        tool_call_id: str | None,
        name: str,
        arguments: object,
        *,
        framework_id: str | None = None,
    ) -> str:
        """A tool call: a ``tool_call`` activity with the structured arguments; attributes its premises now.

        Args:
            run: The run.
            tool_call_id: The model's call id (``None`` = a new one).
            name: Tool name.
            arguments: The arguments the tool receives (a dict, a JSON string or a scalar input).
            framework_id: The framework's id of the tool run (e.g. a LangChain tool ``run_id``), kept in metadata.

        Returns:
            The call id under which :meth:`tool_end` / :meth:`tool_error` find it.
        """
        call_id = tool_call_id or new_id()
        args = _arguments(arguments)
        existing = run.calls.get(call_id)
        if existing is not None:
            if not existing.arguments and args:
                existing.arguments = args
            if framework_id and not existing.done:  # the framework's own id of a call the model step announced
                act = self.manager.get_activity(existing.activity_id, scope=run.scope)
                if act is not None and act.metadata.get("framework_id") != framework_id:
                    known = {**act.metadata, "framework_id": framework_id}
                    self.manager.record_activity(act.model_copy(update={"metadata": known}))
            return call_id
        premises = call_premises(run, args)
        meta: dict[str, Any] = {"tool_call_id": call_id, "arguments": args}
        if framework_id:
            meta["framework_id"] = framework_id
        act = self.manager.record_activity(
            Activity(
                kind="tool_call", name=name, parent_id=run.llm_activity_id or run.activity_id, scope=run.scope,
                run_id=run.run_id, tool_call_id=call_id, metadata=meta,
            )
        )  # fmt: skip
        run.calls[call_id] = _Call(activity_id=act.id, name=name, arguments=args, premises=premises)
        return call_id

    @_per_run
    def tool_end(
        self, run: CaptureRun, tool_call_id: str | None, output: str, *, name: str | None = None,
        arguments: object = None, tags: Sequence[str] = (),
    ) -> Memory | None:  # fmt: skip
        """A tool's successful result: a ``tool:<name>`` memory generated by the call, derived from its premises.

        A call not seen starting is started here (``name`` / ``arguments`` needed then). A repeated report of the
        same call (two observers) is ignored.

        Returns:
            The result memory, or ``None`` (empty output, or already recorded).
        """
        if output.startswith(TOOL_ERROR_PREFIX):  # a handled error handed on as text: an outcome, never a fact
            self.tool_error(run, tool_call_id, output[len(TOOL_ERROR_PREFIX) :], name=name, arguments=arguments)
            return None
        call_id = self.tool_start(run, tool_call_id, name or "tool", arguments)
        call = run.calls[call_id]
        if call.done:
            return None
        call.done = True
        if not output.strip():
            self.manager.end_activity(call.activity_id, scope=run.scope)
            return None
        if call.name in MEMORY_TOOL_NAMES:
            # A memory tool's listing is a view of the store, not a new fact: a stored copy would outlive the
            # correction it precedes. The call stays an activity (what the agent searched, corrected, forgot), and
            # what it listed joins the run's context: a tool argument taken from it names it as its premise.
            self.manager.end_activity(call.activity_id, scope=run.scope, metadata={"memory_tool": True})
            self.recalled(run, self._listed(run, output))
            return None
        text = tool_result_text(call.name, call.arguments, output)
        with using_reconciler(run.reconciler):
            mem = self.manager.remember(
                text, scope=run.scope, source=f"tool:{call.name}", activity_id=call.activity_id,
                parent_activity_id=run.activity_id, derived_from=list(call.premises), tags=list(tags), kind=run.kind,
                metadata={"tool_call_id": call_id, "tool_name": call.name, "arguments": call.arguments},
            )  # fmt: skip
        self._link(run, mem, call.activity_id)
        self._attribute(run, mem, call.premises, call.activity_id)
        run.results[mem.id] = mem
        call.memory_id = mem.id
        self.manager.end_activity(call.activity_id, scope=run.scope, metadata={"memory_id": mem.id})
        return mem

    @_per_run
    def tool_error(
        self,
        run: CaptureRun,
        tool_call_id: str | None,
        error: str,
        *,
        name: str | None = None,
        arguments: object = None,
    ) -> None:
        """A failed or error-handled tool call: ``outcome="error"`` with the error text; never a memory.

        When another observer of the same run already stored the call's text as a result (LlamaIndex's memory
        receives the tool message before the stream event says it failed), that memory is retracted: a failure is
        an outcome, never a fact.
        """
        call_id = self.tool_start(run, tool_call_id, name or "tool", arguments)
        call = run.calls[call_id]
        if call.done and call.memory_id is None:
            return
        stored, call.done, call.memory_id, call.failed = call.memory_id, True, None, True
        if stored is not None:
            run.results.pop(stored, None)
            self.manager.retract(
                stored, scope=run.scope, reason="the tool call failed: its text is an error, not a result"
            )
        self.manager.end_activity(call.activity_id, scope=run.scope, outcome="error", metadata={"error": error})

    def call_name(self, run: CaptureRun, tool_call_id: str) -> str | None:
        """The tool name of a call the run has seen (a result arriving apart from its call keeps its name)."""
        call = run.calls.get(tool_call_id)
        return call.name if call is not None else None

    # ------------------------------------------------------------------ answers
    @_per_run
    def answer(self, run: CaptureRun, text: str) -> Memory | None:
        """The run's final answer as an ``agent`` memory (once per run), with attributed premises."""
        if run.answered or not text.strip():
            return None
        run.answered = True
        activity = run.llm_activity_id or run.activity_id
        return self._agent_text(run, text.strip(), activity)

    @_per_run
    def say(self, run: CaptureRun, text: str) -> Memory | None:
        """Assistant text that may or may not be the final answer (a memory component cannot tell).

        Stored as an ``agent`` memory with attributed premises, without closing the run's answer.
        """
        if not text.strip():
            return None
        return self._agent_text(run, text.strip(), run.llm_activity_id or run.activity_id)

    def _agent_text(
        self, run: CaptureRun, text: str, activity_id: str, default: Mapping[str, str] | None = None
    ) -> Memory | None:
        key = normalize_content(text)
        if key in run.texts:
            return None
        run.texts.add(key)
        cited = cited_ids(text, citable(run))
        if is_filler(text):
            premises: dict[str, str] = {}
        elif cited or not default:
            premises = text_premises(run, text)
        else:
            premises = dict(default)
        meta: dict[str, Any] = {"filler": True} if is_filler(text) else {}
        mem = self.manager.remember(
            text, scope=run.scope, source="agent", activity_id=activity_id, parent_activity_id=run.activity_id,
            derived_from=list(premises), metadata=meta, kind=run.kind,
        )  # fmt: skip
        self._link(run, mem, activity_id)
        self._attribute(run, mem, premises, activity_id)
        return mem

    # ------------------------------------------------------------------ helpers
    def _link(self, run: CaptureRun, mem: Memory, activity_id: str) -> None:
        """Link a memory to this run's activity when an earlier identical write absorbed the write."""
        if mem.lineage.activity_id != activity_id:
            try:
                self.manager.link(mem.id, activity_id, scope=run.scope)
            except MemLineageError:  # e.g. the absorbing memory is another agent's; the write itself stands
                return

    def _attribute(self, run: CaptureRun, mem: Memory, premises: Mapping[str, str], activity_id: str) -> None:
        own = {p: a for p, a in premises.items() if p in mem.derived_from}
        if own:
            self.manager.services.activities.set_attribution(mem.id, own, scope=run.scope, activity_id=activity_id)


on_scope_erased(RunRecorder.forget_scope)  # an erased scope's open runs leave the process
on_memories_erased(RunRecorder.forget_memories)  # ... and those holding an erased memory
