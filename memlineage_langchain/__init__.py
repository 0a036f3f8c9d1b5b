"""LangChain and LangGraph adapters for MemLineage.

Thin translators onto :class:`memlineage.MemoryManager`: a classic ``BaseMemory`` (:class:`LineageMemory`), callback
handlers that capture runs with lineage (:class:`LineageCaptureCallback`, :class:`AsyncLineageCaptureCallback`), a
LangGraph ``BaseStore`` (:class:`LineageStore`), a retriever (:class:`LineageRetriever`) and an agent middleware for
``create_agent`` (:class:`LineageMiddleware`).
"""

from memlineage_langchain._callback import AsyncLineageCaptureCallback, LineageCaptureCallback
from memlineage_langchain._memory import LineageMemory

__all__ = [
    "AsyncLineageCaptureCallback",
    "LineageCaptureCallback",
    "LineageMemory",
]
