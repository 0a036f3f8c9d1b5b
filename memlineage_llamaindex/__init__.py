"""LlamaIndex adapters for MemLineage: a memory block, a drop-in ``Memory`` and automatic tool-call capture.

Which to use:

* ``lineage_memory(manager, user_id=..., session_id=...)`` gives an agent long-term memory in one line:
  ``agent.run(user_msg=..., memory=lineage_memory(...))``. It stores every message with lineage and
  recalls the relevant memories each turn. ``LineageMemoryBlock`` is the same as a block for your ``Memory``.
* To also capture tool calls (arguments, call ids, errors) and LLM steps as activities, wrap the run with
  ``await capture_run(agent.run(...), manager, scope=...)``. Prefer it: it is per run, so the scope is
  explicit.
* ``LineageEventHandler(...).register()`` captures the same through ``get_dispatcher()`` for code you cannot
  wrap; it is process-global, so give it one scope or tag each run with ``instrument_tags``.

* ``LineageChatStore(manager=..., user_id=...)`` is a ``BaseChatStore`` (keys are session ids) for
  ``ChatMemoryBuffer`` and chat engines: the session's turns in order, each message a memory with lineage.

The memories recalled into a turn's context are premises of its tool results and answer (the block records
them; ``capture_run`` and the handler read them from the run's ``lineage_memory``), so correcting a recalled
memory makes what was built on it suspect.

``memory_tools(manager, scope=...)`` gives agents that manage their memory themselves four ``FunctionTool``s:
``search_memory``, ``remember``, ``correct_memory`` and ``forget_memory``.
"""

from memlineage_llamaindex._block import LineageMemoryBlock
from memlineage_llamaindex._capture import LineageEventHandler, LineageSpanHandler, capture_run
from memlineage_llamaindex._chat_store import LineageChatStore
from memlineage_llamaindex._memory import LineageMemory, lineage_memory
from memlineage_llamaindex._tools import memory_tools

__all__ = [
    "LineageChatStore",
    "LineageEventHandler",
    "LineageMemory",
    "LineageMemoryBlock",
    "LineageSpanHandler",
    "capture_run",
    "lineage_memory",
    "memory_tools",
]
