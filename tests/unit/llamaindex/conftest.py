"""Fixtures for the LlamaIndex adapter tests: an in-memory manager, scripted LLMs and a clean dispatcher."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock  # noqa: E402
from llama_index.core.instrumentation import get_dispatcher  # noqa: E402
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from memlineage import MemoryManager  # noqa: E402
from memlineage.testing import make_manager  # noqa: E402


@pytest.fixture
def manager() -> Iterator[MemoryManager]:
    mm = make_manager()
    yield mm
    mm.close()


@pytest.fixture(autouse=True)
def _close_lineage_memories(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close every chat-store engine lineage_memory() opened in the test, as LineageMemory.close() would.

    Tests build memories inline; this keeps their aiosqlite connections from outliving the test (ResourceWarning).
    """
    import memlineage_llamaindex._memory as module

    opened: list[Any] = []
    real = module.create_async_engine

    def tracked(*args: Any, **kwargs: Any) -> Any:
        engine = real(*args, **kwargs)
        opened.append(engine)
        return engine

    monkeypatch.setattr(module, "create_async_engine", tracked)
    yield
    for engine in opened:
        asyncio.run(engine.dispose())


@pytest.fixture
def dispatcher() -> Iterator[Any]:
    """The root dispatcher, with its handler lists restored after the test (add_* only appends)."""
    d = get_dispatcher()
    events, spans = list(d.event_handlers), list(d.span_handlers)
    yield d
    d.event_handlers, d.span_handlers = events, spans


def calls(*specs: tuple[str, str, dict[str, Any]]) -> ChatMessage:
    """An assistant message requesting tool calls: ``calls(("id1", "tool", {"a": 1}), ...)``."""
    blocks = [ToolCallBlock(tool_call_id=i, tool_name=n, tool_kwargs=kw) for i, n, kw in specs]
    return ChatMessage(role="assistant", blocks=blocks)


def say(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def scripted_llm(*responses: ChatMessage) -> MockFunctionCallingLLM:
    """A function-calling mock that answers each chat call with the next scripted message."""
    queue = list(responses)

    def generate(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        if not queue:
            raise AssertionError("the scripted LLM ran out of responses")
        return queue.pop(0)

    return MockFunctionCallingLLM(response_generator=generate)


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C and light rain in {city}"


def get_time(city: str) -> str:
    """Local time in a city."""
    return f"14:05 in {city}"


def book_hotel(city: str) -> str:
    """Book a hotel (always fails in tests)."""
    raise RuntimeError(f"no rooms left in {city}")


def tools() -> list[FunctionTool]:
    return [FunctionTool.from_defaults(fn) for fn in (get_weather, get_time, book_hotel)]


@pytest.fixture
def li() -> Any:
    """Helpers as one namespace (``--import-mode=importlib`` forbids importing conftest from tests)."""
    from types import SimpleNamespace

    return SimpleNamespace(calls=calls, say=say, llm=scripted_llm, tools=tools)
