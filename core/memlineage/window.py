"""Token-budgeted working memory: the window of chat history that reaches the model.

The window is a *read-time view* over a chat history. Nothing is deleted from the history when the window is
built; messages that no longer fit are handed (once) to an ``on_evict`` callback, which is where the write gate
(value model, ``MemoryManager.remember``) decides what is worth keeping. Because trimming happens at read time, a
history backend that returns copies on every read still gets a window within budget.

Rules the window keeps (checked after every build):

* Pinned, always in the window and accounted outside the history budget: the leading system message, the
  current user turn (the last ``user`` message) and the in-flight step (the last message group after that turn:
  typically the assistant's tool call and the results received so far). A history budget of 0 returns only the
  pinned items.
* An assistant message with tool calls and all of its tool results are kept or dropped together (parallel calls
  included), reach ``on_evict`` together in one batch, and the history part of the window never begins with a
  tool result. (A result that arrives after its call was already evicted is reported on its own.)
* The history part is the longest run of most-recent message groups that fits the budget (contiguous: an old
  group never comes back after a newer one was dropped).
* :meth:`WorkingMemory.render` never drops the pinned items to fit the context: it cuts the in-flight tool results
  (largest first, with a visible ``[truncated ...]`` marker) and raises :class:`ContextOverflowError` only when
  even that cannot fit.
* Text is valid Unicode: lone surrogates (broken UTF-16 from a model or a tool) become U+FFFD when a
  :class:`ChatMessage` is built, so counting, rendering and the write gate never fail on them.

Token counts come from tiktoken. The encoding files for ``cl100k_base`` and ``o200k_base`` ship inside this
package (``memlineage/_static/tiktoken_cache``) and are verified by sha256 before tiktoken reads them; nothing is
ever downloaded. Special-token strings such as ``<|endoftext|>`` inside text are counted as ordinary text.

Example:
    >>> wm = WorkingMemory(max_tokens=200)
    >>> wm.add(ChatMessage(role="system", content="You are terse."))
    >>> wm.add(ChatMessage(role="user", content="Hello"))
    >>> [m.role for m in wm.window().messages]
    ['system', 'user']
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memlineage.errors import ConfigurationError, ContextOverflowError, InvalidInputError, MemLineageError
from memlineage.models import Memory, Scope, new_id
from memlineage.window_chat import ChatMessage, HistoryBackend, ToolCall
from memlineage.window_tokens import DEFAULT_ENCODING, count_tokens, decode_prefix, fit_to_budget, get_encoding

__all__ = [
    "ChatMessage",
    "HistoryBackend",
    "Rendered",
    "ToolCall",
    "Window",
    "WorkingMemory",
    "WriteGateSink",
    "count_tokens",
    "fit_to_budget",
    "get_encoding",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Window:
    """A built window: what reaches the model, in chronological order.

    Attributes:
        messages: Pinned system message, kept history, current user turn (and what follows it), oldest first.
        tokens: Tokens of ``messages`` including per-message overhead, >= 0.
        pinned_tokens: Tokens of the pinned part (system message, current user turn, in-flight step), >= 0.
        history_tokens: Tokens of the non-pinned part; <= the history budget.
        budget: History budget used for this build, in tokens.
        evicted: Messages outside the window (all of them, not only the newly evicted ones), oldest first.
    """

    messages: tuple[ChatMessage, ...]
    tokens: int
    pinned_tokens: int
    history_tokens: int
    budget: int
    evicted: tuple[ChatMessage, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class Rendered:
    """What :meth:`WorkingMemory.render` assembled within the model context.

    Attributes:
        messages: Final message list, oldest first: system (with the memory block), history, current user
            turn.
        tokens: Total tokens of ``messages`` including overheads; <= ``context_tokens``.
        context_tokens: Total context available for the prompt, in tokens.
        memories_used: How many of the recalled memories fitted (they are dropped from the end, lowest rank
            first).
        window: The history window that was used (with the untruncated messages).
        truncated: Ids of the in-flight tool results whose text was cut to fit the context (their text in
            ``messages`` ends with a ``[truncated ...]`` marker; the history keeps the full text).
    """

    messages: tuple[ChatMessage, ...]
    tokens: int
    context_tokens: int
    memories_used: int
    window: Window
    truncated: tuple[str, ...] = ()


class _ListHistory:
    """Default in-process history: an append-only list."""

    def __init__(self) -> None:
        self.items: list[ChatMessage] = []

    def messages(self) -> Sequence[ChatMessage]:
        return self.items


class WorkingMemory:
    """Token-budgeted window over a chat history.

    Setup:
        Nothing to install; tiktoken files ship with MemLineage.

    Instantiate:
        ``WorkingMemory(context_window=128_000)`` gives the history 40 % of the context (``window_share``);
        ``WorkingMemory(max_tokens=2_000)`` sets the history budget directly. Pass ``on_evict`` to hand
        messages that fall out of the window to the write gate, and ``history`` to read from an external
        store.

    Use:
        ``add()`` / ``extend()`` messages, then ``window()`` for the trimmed history or
        ``render(memories=...)``
        for the full prompt within the context.

    Args:
        max_tokens: History budget in tokens (>= 0); default ``floor(context_window * window_share)``.
        encoding: Shipped tiktoken encoding, ``"o200k_base"`` (default) or ``"cl100k_base"``.
        context_window: Model context available for the prompt, in tokens (> 0); default 128,000.
        window_share: Share of ``context_window`` for the history, in [0, 1]; default 0.4.
        on_evict: Called with the messages that newly fell out of the window (oldest first), each message at
            most
            once after the call returns normally. If it raises, the error propagates and the same messages are
            offered again on the next build, so nothing vanishes silently.
        history: Optional backend holding the history; when given, ``add``/``extend`` are not available and
            the
            window is computed from ``history.messages()`` on every build.
        message_overhead: Tokens added per message for role and separators; default 3 (OpenAI chat format).
        tool_call_overhead: Tokens added per tool call for the call wrapper; default 3.

    Raises:
        ConfigurationError: invalid budget, share, context or encoding.

    Example:
        >>> evicted = []
        >>> wm = WorkingMemory(max_tokens=12, on_evict=evicted.extend)
        >>> wm.extend(
        ...     [
        ...         ChatMessage(role="user", content="first question about Paris"),
        ...         ChatMessage(role="assistant", content="an answer about Paris"),
        ...         ChatMessage(role="user", content="second question"),
        ...     ]
        ... )
        >>> [m.content for m in wm.window().messages]
        ['an answer about Paris', 'second question']
        >>> [m.content for m in evicted]
        ['first question about Paris']
    """

    def __init__(
        self,
        max_tokens: int | None = None,
        *,
        encoding: str = DEFAULT_ENCODING,
        context_window: int = 128_000,
        window_share: float = 0.4,
        on_evict: Callable[[list[ChatMessage]], Any] | None = None,
        history: HistoryBackend | None = None,
        message_overhead: int = 3,
        tool_call_overhead: int = 3,
    ) -> None:
        if context_window <= 0:
            msg = f"context_window must be > 0 tokens, got {context_window}"
            raise ConfigurationError(msg)
        if not 0.0 <= window_share <= 1.0:
            msg = f"window_share must be in [0, 1], got {window_share}"
            raise ConfigurationError(msg)
        if max_tokens is not None and max_tokens < 0:
            msg = f"max_tokens must be >= 0, got {max_tokens}"
            raise ConfigurationError(msg)
        if message_overhead < 0 or tool_call_overhead < 0:
            msg = "message_overhead and tool_call_overhead must be >= 0"
            raise ConfigurationError(msg)
        self._encoding_name = encoding
        self._encoding = get_encoding(encoding)
        self.context_window = context_window
        self.window_share = window_share
        self.max_tokens = max_tokens if max_tokens is not None else int(context_window * window_share)
        self.on_evict = on_evict
        self.message_overhead = message_overhead
        self.tool_call_overhead = tool_call_overhead
        self._own = history is None
        self._history: HistoryBackend = _ListHistory() if history is None else history
        self._counts: dict[tuple[Any, ...], int] = {}
        self._reported: set[str] = set()
        self._lock = threading.RLock()

    # -- history
    # -----------------------------------------------------------------------------------------------

    def add(self, message: ChatMessage | Mapping[str, Any]) -> None:
        """Append one message (a :class:`ChatMessage` or an OpenAI-style dict) and cache its token count.

        Raises:
            ConfigurationError: the history lives in an external backend (append there instead).
            InvalidInputError: the dict is not a valid chat message.
        """
        self.extend((message,))

    def extend(self, messages: Iterable[ChatMessage | Mapping[str, Any]]) -> None:
        """Append messages in order; see :meth:`add`."""
        if not self._own:
            msg = "this WorkingMemory reads an external history backend; append to the backend instead"
            raise ConfigurationError(msg)
        items = [m if isinstance(m, ChatMessage) else ChatMessage.from_openai(m) for m in messages]
        with self._lock:
            for m in items:
                self.tokens_of(m)
            self._history.items.extend(items)  # type: ignore[attr-defined]

    def messages(self) -> list[ChatMessage]:
        """Return the full history (a new list; messages are immutable), oldest first."""
        return list(self._history.messages())

    def clear(self) -> None:
        """Forget the in-process history and the eviction bookkeeping (caches of token counts are kept)."""
        with self._lock:
            if self._own:
                self._history.items.clear()  # type: ignore[attr-defined]
            self._reported.clear()

    # -- counting
    # ----------------------------------------------------------------------------------------------

    def count(self, text: str) -> int:
        """Tokens of ``text`` with this window's encoding (special tokens counted as text), >= 0."""
        return len(self._encoding.encode_ordinary(text)) if text else 0

    def tokens_of(self, message: ChatMessage) -> int:
        """Tokens one message costs in the prompt: text, reasoning, tool names, JSON arguments and overheads.

        Counts are cached by message id and content, so copies of the same message are counted once.
        """
        key = (message.id, message.content, message.reasoning, message.tool_calls, message.name)
        n = self._counts.get(key)
        if n is None:
            n = self.message_overhead + self.count(message.content)
            if message.reasoning:
                n += self.count(message.reasoning)
            if message.name:
                n += 1 + self.count(message.name)
            for call in message.tool_calls:
                n += self.tool_call_overhead + self.count(call.name) + self.count(call.arguments)
            self._counts[key] = n
        return n

    # -- building
    # ----------------------------------------------------------------------------------------------

    def window(self, budget: int | None = None) -> Window:
        """Build the window for a history budget and hand newly evicted messages to ``on_evict``.

        Args:
            budget: History budget in tokens (>= 0); default ``max_tokens``. Pinned items do not count
                against it.

        Returns:
            The :class:`Window`.

        Raises:
            InvalidInputError: ``budget`` is negative.
        """
        budget = self.max_tokens if budget is None else budget
        if budget < 0:
            msg = f"budget must be >= 0 tokens, got {budget}"
            raise InvalidInputError(msg)
        with self._lock:
            history = list(self._history.messages())
            win = self._build(history, budget)
            _check_window(win.messages, history)
            self._report(win.evicted)
            return win

    def _build(self, history: list[ChatMessage], budget: int) -> Window:
        n = len(history)
        tokens = [self.tokens_of(m) for m in history]
        start = 1 if n and history[0].role == "system" else 0
        user_idx = -1
        for i in range(n - 1, start - 1, -1):
            if history[i].role == "user":
                user_idx = i
                break
        # Groups: each non-tool message starts one; a tool result joins the group of the assistant message
        # that
        # called it (merging every group in between, so a call and its results stay together); a tool result
        # with no earlier call is an orphan and never enters the window.
        group_start: list[int] = []  # first message index of each group
        group_of_call: dict[str, int] = {}
        orphans: set[int] = set()
        member_group = [0] * n
        for i in range(start, n):
            m = history[i]
            if m.role == "tool":
                g = group_of_call.get(m.tool_call_id or "", -1)
                if g < 0 or not group_start:
                    orphans.add(i)
                    member_group[i] = -1
                    continue
                if g < len(group_start) - 1:  # merge groups g+1.. into g
                    del group_start[g + 1 :]
                    for j in range(group_start[g], i):
                        if member_group[j] >= 0:
                            member_group[j] = g
                    for cid, cg in group_of_call.items():
                        if cg > g:
                            group_of_call[cid] = g
                member_group[i] = g
            else:
                group_start.append(i)
                g = len(group_start) - 1
                member_group[i] = g
                for call in m.tool_calls:
                    group_of_call[call.id] = g
        ng = len(group_start)
        group_tokens = [0] * ng
        for i in range(start, n):
            g = member_group[i]
            if g >= 0:
                group_tokens[g] += tokens[i]
        # Pinned: the group of the current user turn (it may have absorbed a tool call spanning the turn) and the
        # in-flight step, the last group after that turn (the tool call whose results are still arriving).
        pinned: set[int] = set()
        if user_idx >= 0:
            pinned.add(member_group[user_idx])
            if ng and group_start[-1] > user_idx:
                pinned.add(ng - 1)
        keep = [g in pinned for g in range(ng)]
        used = 0
        for g in range(ng - 1, -1, -1):
            if g in pinned:
                continue
            if used + group_tokens[g] > budget:
                break
            used += group_tokens[g]
            keep[g] = True
        kept: list[ChatMessage] = []
        evicted: list[ChatMessage] = []
        pinned_tokens = 0
        if start:
            kept.append(history[0])
            pinned_tokens += tokens[0]
        for i in range(start, n):
            g = member_group[i]
            if g >= 0 and keep[g]:
                kept.append(history[i])
                if g in pinned:
                    pinned_tokens += tokens[i]
            else:
                evicted.append(history[i])
        return Window(
            messages=tuple(kept),
            tokens=pinned_tokens + used,
            pinned_tokens=pinned_tokens,
            history_tokens=used,
            budget=budget,
            evicted=tuple(evicted),
        )

    def _report(self, evicted: Sequence[ChatMessage]) -> None:
        if self.on_evict is None:
            return
        fresh = [m for m in evicted if m.id not in self._reported]
        if not fresh:
            return
        self.on_evict(fresh)  # may raise: then nothing is marked, and the messages are offered again
        self._reported.update(m.id for m in fresh)

    # -- rendering
    # ---------------------------------------------------------------------------------------------

    def render(
        self,
        memories: Sequence[str] = (),
        *,
        system: str | None = None,
        context_tokens: int | None = None,
        memory_header: str = "Relevant memories:",
    ) -> Rendered:
        """Assemble the prompt: system message + recalled memories, history window, current user turn.

        Budget split: the history gets ``min(max_tokens, context - pinned)``; the recalled memories get what
        is
        left of the context after the pinned items and the history actually used. Memories are appended to the
        system message as a bulleted block and are dropped from the end (lowest rank first) until they fit.

        Args:
            memories: Recalled memory texts, best first.
            system: System prompt; overrides the history's leading system message if given.
            context_tokens: Total prompt budget in tokens; default ``context_window``.
            memory_header: First line of the memory block.

        The pinned items (system message, current user turn, in-flight tool call and its results) are never
        dropped: when they exceed the context, the in-flight tool results are cut (largest first, each ending with
        a ``[truncated by MemLineage ...]`` marker; ``Rendered.truncated`` lists them).

        Returns:
            The :class:`Rendered` prompt, with ``tokens <= context_tokens``.

        Raises:
            ContextOverflowError: the pinned items exceed ``context_tokens`` even with every in-flight tool result
                cut to its marker (a subclass of :class:`InvalidInputError`).
        """
        total = self.context_window if context_tokens is None else context_tokens
        with self._lock:
            history = list(self._history.messages())
            if system is not None:
                sys_msg = ChatMessage(role="system", content=system, id="memlineage-system")
                history = [sys_msg, *(history[1:] if history and history[0].role == "system" else history)]
            probe = self._build(history, 0)
            cut: dict[str, ChatMessage] = {}
            pinned = probe.pinned_tokens
            if pinned > total:
                cut = self._truncate_pinned_results(probe, total)
                pinned -= sum(self.tokens_of(m) - self.tokens_of(cut[m.id]) for m in probe.messages if m.id in cut)
            win = self._build(history, min(self.max_tokens, total - pinned))
            _check_window(win.messages, history)
            self._report(win.evicted)
            if cut:
                saved = sum(self.tokens_of(m) - self.tokens_of(cut[m.id]) for m in win.messages if m.id in cut)
                msgs_cut = tuple(cut.get(m.id, m) for m in win.messages)
                win = Window(
                    messages=msgs_cut,
                    tokens=win.tokens - saved,
                    pinned_tokens=win.pinned_tokens - saved,
                    history_tokens=win.history_tokens,
                    budget=win.budget,
                    evicted=win.evicted,
                )
        room = total - win.tokens
        base = win.messages[0] if win.messages and win.messages[0].role == "system" else None
        base_text = base.content if base is not None else ""
        chosen: list[str] = []
        block = ""
        if memories:
            lines = [memory_header]
            cost_base = self.count(base_text) - (0 if base is not None else self.message_overhead)
            for text in memories:
                candidate = "\n".join([*lines, f"- {text}"])
                new_sys = f"{base_text}\n\n{candidate}" if base_text else candidate
                if self.count(new_sys) - cost_base > room:
                    break
                lines.append(f"- {text}")
                chosen.append(text)
            if chosen:
                block = "\n".join(lines)
        msgs = list(win.messages)
        tokens = win.tokens
        if block:
            new_text = f"{base_text}\n\n{block}" if base_text else block
            sys_msg = ChatMessage(role="system", content=new_text, id=base.id if base else new_id())
            if base is not None:
                tokens += self.tokens_of(sys_msg) - self.tokens_of(base)
                msgs[0] = sys_msg
            else:
                tokens += self.tokens_of(sys_msg)
                msgs.insert(0, sys_msg)
        return Rendered(
            messages=tuple(msgs),
            tokens=tokens,
            context_tokens=total,
            memories_used=len(chosen),
            window=win,
            truncated=tuple(cut),
        )

    def _truncate_pinned_results(self, probe: Window, total: int) -> dict[str, ChatMessage]:
        """Cut the pinned tool results so the pinned part fits ``total`` tokens; return id -> cut message.

        Water-filling: every result keeps at most ``cap`` tokens of its text (the largest cap that fits), so the
        largest results are cut first and small ones stay whole. Raises ContextOverflowError when even a cap of 0
        (markers only) does not fit.
        """
        results = [m for m in probe.messages if m.role == "tool"]
        fixed = probe.pinned_tokens - sum(self.tokens_of(m) for m in results)
        room = total - fixed
        encoded = [self._encoding.encode_ordinary(m.content) for m in results]

        def marker(kept: int, size: int) -> str:
            return f"\n[truncated by MemLineage to fit the context: {size - kept} of {size} tokens not shown]"

        def cut_at(cap: int) -> list[ChatMessage]:
            out = []
            for m, toks in zip(results, encoded):
                if len(toks) <= cap:
                    out.append(m)
                else:
                    text = decode_prefix(self._encoding, toks, cap) + marker(cap, len(toks))
                    out.append(m.model_copy(update={"content": text}))
            return out

        def cost(cap: int) -> int:
            return sum(self.tokens_of(m) for m in cut_at(cap))

        if not results or cost(0) > room:
            msg = (
                f"the system prompt, the current user turn and the in-flight tool call need {probe.pinned_tokens} "
                f"tokens ({fixed} without tool results, which are already cut to their markers at most) but the "
                f"context allows {total}; shorten the system prompt or the user turn, or raise context_tokens"
            )
            raise ContextOverflowError(msg)
        lo, hi = 0, max(len(t) for t in encoded)  # cost(lo) fits, cost(hi) does not (pinned > total)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if cost(mid) <= room:
                lo = mid
            else:
                hi = mid
        cut = cut_at(lo)
        logger.info("render: cut %d tool result(s) to %d tokens each to fit %d tokens", len(cut), lo, total)
        return {m.id: c for m, c in zip(results, cut) if c is not m}


def _check_window(window: Sequence[ChatMessage], history: Sequence[ChatMessage]) -> None:
    """Raise if a built window breaks an invariant (a bug, never bad input)."""
    body = list(window[1:] if window and window[0].role == "system" and history and window[0] is history[0] else window)
    if body and body[0].role == "tool":
        msg = "internal error: the window begins with a tool result; please report this with the history"
        raise MemLineageError(msg)
    calls: set[str] = set()
    for m in body:
        for c in m.tool_calls:
            calls.add(c.id)
        if m.role == "tool" and m.tool_call_id not in calls:
            msg = "internal error: a tool result is in the window without its call; please report this"
            raise MemLineageError(msg)


class MemoryWriter(Protocol):
    """What :class:`WriteGateSink` calls on its manager (a :class:`~memlineage.MemoryManager` has it)."""

    def remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[Memory]:
        """Store the items (``remember``'s keyword arguments) in one batch; one memory per item."""
        ...


class WriteGateSink:
    """An ``on_evict`` callback that hands messages leaving the window to a manager's write gate.

    Evicted messages do not vanish: user turns are remembered with source ``user``, assistant text with
    ``agent`` and tool results with ``tool:<name>`` (the activity id is the tool-call id), all in ``scope``. With a
    value model on the manager, the write gate decides what reaches long-term memory; without one, every message
    is stored. System messages are never stored; exact duplicates are merged by the manager.

    Example:
        >>> from memlineage.testing import make_manager
        >>> mm = make_manager()
        >>> wm = WorkingMemory(max_tokens=8, on_evict=WriteGateSink(mm, scope="alice"))

    Args:
        manager: A :class:`~memlineage.MemoryManager`.
        scope: Scope the evicted messages belong to.
        kind: Memory kind for the stored messages (default ``episodic``).
    """

    def __init__(
        self, manager: MemoryWriter, *, scope: Scope | Mapping[str, Any] | str, kind: str = "episodic"
    ) -> None:
        self.manager = manager
        self.scope = Scope.coerce(scope)
        self.kind = kind
        self._tool_names: dict[str, str] = {}

    def __call__(self, messages: list[ChatMessage]) -> list[Any]:
        """Store ``messages`` (oldest first); returns the stored (or buffered) memories."""
        items: list[dict[str, Any]] = []
        for m in messages:
            for call in m.tool_calls:
                self._tool_names[call.id] = call.name
            if m.role == "system" or not m.content.strip():
                continue
            item: dict[str, Any] = {
                "content": m.content,
                "scope": self.scope,
                "kind": self.kind,
                "metadata": {"message_id": m.id, "evicted_from": "working_memory"},
            }
            if m.role == "user":
                item["source"] = "user"
            elif m.role == "assistant":
                item["source"] = "agent"
            else:
                tool = m.name or self._tool_names.get(m.tool_call_id or "", "tool")
                item["source"] = f"tool:{tool}"
                item["activity_id"] = m.tool_call_id
                item["metadata"]["tool_call_id"] = m.tool_call_id
            items.append(item)
        return self.manager.remember_many(items) if items else []
