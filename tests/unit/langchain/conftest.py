"""Fixtures for the LangChain adapter tests: scripted fake chat models and real tools (offline)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("langchain_classic")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import ToolException, tool
from memlineage import Memory, MemoryManager, Scope
from memlineage.testing import make_manager

warnings.filterwarnings("ignore", category=DeprecationWarning, module="langchain_classic.*")


class ScriptedChatModel(FakeMessagesListChatModel):
    """Replays ``responses`` in order; ``bind_tools`` returns the model itself (tools are not sent anywhere)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self


def tool_calls(*calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in calls])


def scripted(*responses: BaseMessage) -> ScriptedChatModel:
    return ScriptedChatModel(responses=list(responses))


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"Sunny in {city}"


@tool
def flaky_api(query: str) -> str:
    """A tool that always fails."""
    raise ToolException(f"upstream timeout for {query}")


@tool
def broken_api(query: str) -> str:
    """A tool that raises an unexpected error."""
    raise RuntimeError("boom")


@pytest.fixture
def manager() -> Iterator[MemoryManager]:
    mm = make_manager()
    yield mm
    mm.close()


@pytest.fixture
def alice() -> Scope:
    return Scope(user_id="alice", session_id="s1")


@pytest.fixture
def bob() -> Scope:
    return Scope(user_id="bob", session_id="s2")


def by_source(mm: MemoryManager, scope: Scope, source: str) -> list[Memory]:
    return [m for m in mm.find(scope=scope) if str(m.source) == source]
