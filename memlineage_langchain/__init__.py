"""LangChain and LangGraph adapters for MemLineage.

Thin translators onto :class:`memlineage.MemoryManager`: a classic ``BaseMemory`` (:class:`LineageMemory`), callback
handlers that capture runs with lineage (:class:`LineageCaptureCallback`, :class:`AsyncLineageCaptureCallback`), a
chat message history for ``RunnableWithMessageHistory`` (:class:`LineageChatMessageHistory`), a LangGraph
``BaseStore`` (:class:`LineageStore`), a retriever (:class:`LineageRetriever`), an agent middleware for
``create_agent`` (:class:`LineageMiddleware`), and :func:`memory_tools` for agents that manage their memory
themselves (search, remember, correct, forget).
"""

from memlineage_langchain._callback import AsyncLineageCaptureCallback, LineageCaptureCallback
from memlineage_langchain._history import LineageChatMessageHistory
from memlineage_langchain._memory import LineageMemory
from memlineage_langchain._middleware import LineageMiddleware
from memlineage_langchain._retriever import LineageRetriever
from memlineage_langchain._store import LineageStore
from memlineage_langchain._tools import memory_tools, tool_error_text

__all__ = [
    "AsyncLineageCaptureCallback",
    "LineageCaptureCallback",
    "LineageChatMessageHistory",
    "LineageMemory",
    "LineageMiddleware",
    "LineageRetriever",
    "LineageStore",
    "memory_tools",
    "tool_error_text",
]
