"""Issue 28: the README's recommended LangChain path meets no deprecation warning; the older path it replaces does.

Records every warning while the README's ``create_agent`` + ``LineageMiddleware`` + ``LineageStore`` (+ retriever)
snippet runs two turns with a scripted model; any deprecation warning fails. The control constructs the older
``RunnableWithMessageHistory`` path, which LangChain 1.x deprecates, and must be caught by the same check.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from memlineage_langchain import LineageChatMessageHistory, LineageMiddleware, LineageRetriever, LineageStore

from .conftest import get_weather, scripted, tool_calls


def _deprecations(run: Callable[[], Any]) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)) or "deprecat" in str(w.message)
    ]


def test_the_recommended_create_agent_path_warns_nothing(manager, alice) -> None:
    def readme_snippet() -> None:
        model = scripted(
            tool_calls(("get_weather", {"city": "Paris"}, "call_1")),
            AIMessage(content="It is sunny in Paris."),
            AIMessage(content="Noted."),
        )
        agent = create_agent(
            model, [get_weather], middleware=[LineageMiddleware(manager, scope="alice")], store=LineageStore(manager)
        )
        agent.invoke({"messages": [HumanMessage("I live in Paris. Weather?")]})
        agent.invoke({"messages": [HumanMessage("Thanks!")]})
        LineageRetriever(manager=manager, scope=alice, k=5).invoke("Paris")

    assert _deprecations(readme_snippet) == []
    assert manager.find(scope=alice), "the snippet ran and stored its turns"


def test_control_the_older_history_path_is_caught(manager) -> None:
    def older() -> None:
        from langchain_core.runnables import RunnableLambda
        from langchain_core.runnables.history import RunnableWithMessageHistory

        RunnableWithMessageHistory(
            RunnableLambda(lambda x: x), lambda sid: LineageChatMessageHistory(manager, scope="alice", session_id=sid)
        )

    assert any("RunnableWithMessageHistory" in w for w in _deprecations(older))
