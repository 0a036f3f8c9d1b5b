"""Which LlamaIndex tool calls failed, for the stores that see only their messages.

A workflow agent (``FunctionAgent``, ``ReActAgent``) writes a failed call's message into its memory as a plain
``role="tool"`` message whose text is the error: ``ToolOutput.is_error`` stays behind in the ``ToolCallResult``.
:class:`FailedCallWatcher` is a span handler on LlamaIndex's root dispatcher that sees every
``BaseWorkflowAgent.call_tool`` span end and remembers the ``(tool_id, error text)`` of each failed call, so that
:class:`~memlineage_llamaindex.LineageChatStore` can keep such a message in the transcript while withdrawing its
memory (a failure is an outcome, never a fact). It writes nothing and holds no scope: a message counts as failed
only when both its call id and its exact text match a failure seen in this process (an id another agent reused for a
successful call does not). The agent writes its messages after its tool steps, so the failure is known in time.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import OrderedDict
from typing import Any

from llama_index.core.agent.workflow import ToolCallResult
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.span import SimpleSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from memlineage.models import normalize_content
from typing_extensions import override

__all__ = ["FailedCallWatcher", "failed_call", "watch_failures"]

logger = logging.getLogger(__name__)

#: Failures remembered per process (the oldest are forgotten first); a store reads a call's message within its run.
MAX_FAILURES = 4096

_LOCK = threading.Lock()
_WATCHER: FailedCallWatcher | None = None


class FailedCallWatcher(BaseSpanHandler[SimpleSpan]):
    """Span handler that remembers the failed tool calls of workflow agents (``ToolOutput.is_error``).

    Registered once per process by :func:`watch_failures`; read with :func:`failed_call`.
    """

    _failed: OrderedDict[tuple[str, str], None] = PrivateAttr(default_factory=OrderedDict)
    _mutex: Any = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        """Name used by LlamaIndex serialisation."""
        return "MemLineageFailedCallWatcher"

    @override
    def new_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        return None  # nothing is kept per span: only a failed call's end matters

    @override
    def prepare_to_exit_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        try:
            if isinstance(result, ToolCallResult) and result.tool_output.is_error and result.tool_id:
                self.remember(str(result.tool_id), str(result.tool_output.content or ""))
        except Exception as exc:  # noqa: BLE001 - a span handler runs inside every LlamaIndex call: never raise
            logger.warning("MemLineage: could not note a failed tool call (%s); the agent goes on", exc)
        return None

    @override
    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        return None

    def remember(self, tool_id: str, text: str) -> None:
        """Record a failed call: its id and the text its message carries."""
        key = (tool_id, normalize_content(text))
        with self._mutex:
            self._failed[key] = None
            self._failed.move_to_end(key)
            while len(self._failed) > MAX_FAILURES:
                self._failed.popitem(last=False)

    def failed(self, tool_id: str, text: str) -> bool:
        """Whether the call ``tool_id`` failed with exactly ``text`` (whitespace and case aside)."""
        with self._mutex:
            return (tool_id, normalize_content(text)) in self._failed


def watch_failures() -> FailedCallWatcher:
    """The process's watcher, on LlamaIndex's root dispatcher (added again if the dispatcher's handlers were reset).

    Idempotent and thread-safe.
    """
    global _WATCHER
    with _LOCK:
        if _WATCHER is None:
            _WATCHER = FailedCallWatcher()
        dispatcher = get_dispatcher()
        if not any(h is _WATCHER for h in dispatcher.span_handlers):
            dispatcher.add_span_handler(_WATCHER)
        return _WATCHER


def failed_call(tool_id: str | None, text: str) -> bool:
    """Whether a tool message (its call id and text) is the message of a call seen failing in this process."""
    return bool(tool_id) and _WATCHER is not None and _WATCHER.failed(str(tool_id), text)
