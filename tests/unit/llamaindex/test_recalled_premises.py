"""Recalled memories are premises of what rests on them; capture_run keeps the user turn's run link.

The scripted model below reads the city from the messages it is given (the recalled-memory block in the system
message, or the chat history of the same session), as a real model would, and asks the tools for that city.
Correcting the city afterwards must therefore make the tool results and the answer suspect.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool
from memlineage import MemoryManager, Scope, SourceKind, Status
from memlineage.models import short_id

from memlineage_llamaindex import LineageEventHandler, LineageMemoryBlock, capture_run, lineage_memory

STATEMENT = "I'm planning a trip to Paris from 3 to 7 May."
REQUEST = "Find me a flight and a hotel."
_ids = itertools.count()


def search_flights(city: str) -> str:
    """Flights to a city."""
    return f"Flight AF{len(city)}1 to {city}, 120 EUR"


def search_hotels(city: str) -> str:
    """Hotels in a city."""
    return f"Hotel Central in {city}, 95 EUR a night"


def _text(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(str(m.content or "") for m in messages)


def travel_llm() -> MockFunctionCallingLLM:
    """Acknowledges statements; for a request, calls both tools for the city found in its input, then answers."""

    def generate(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        if "Find me" not in str(messages[last_user].content):
            return ChatMessage(role="assistant", content="Noted.")
        everything = _text(messages)
        city = "Lyon" if "Lyon" in everything else "Paris" if "Paris" in everything else "nowhere"
        results = [m for m in messages[last_user:] if m.role == "tool"]
        if not results:
            n = next(_ids)
            blocks = [
                ToolCallBlock(tool_call_id=f"f-{n}", tool_name="search_flights", tool_kwargs={"city": city}),
                ToolCallBlock(tool_call_id=f"h-{n}", tool_name="search_hotels", tool_kwargs={"city": city}),
            ]
            return ChatMessage(role="assistant", blocks=blocks)
        return ChatMessage(role="assistant", content=f"Your trip to {city}: " + "; ".join(_text(results).split("\n")))

    return MockFunctionCallingLLM(response_generator=generate)


def _agent() -> FunctionAgent:
    return FunctionAgent(
        tools=[FunctionTool.from_defaults(search_flights), FunctionTool.from_defaults(search_hotels)],
        llm=travel_llm(),
    )


async def _ask(manager: MemoryManager, memory: Any, text: str, capture: bool) -> Any:
    handler = _agent().run(user_msg=text, memory=memory)
    if capture:
        scope = Scope(user_id="alice", session_id=memory.session_id)
        return await capture_run(handler, manager, scope=scope)
    return await handler


def _find(manager: MemoryManager, start: str) -> Any:
    found = [m for m in manager.find(scope="alice") if m.content.startswith(start)]
    assert len(found) == 1, [m.content for m in manager.find(scope="alice")]
    return found[0]


@pytest.mark.parametrize("capture", [False, True], ids=["memory", "memory+capture_run"])
@pytest.mark.parametrize("same_session", [True, False], ids=["same-session", "new-session"])
async def test_correcting_a_recalled_memory_makes_the_turn_suspect(
    manager: MemoryManager, capture: bool, same_session: bool
) -> None:
    first = lineage_memory(manager, user_id="alice", session_id="s1")
    await _ask(manager, first, STATEMENT, capture)
    second = first if same_session else lineage_memory(manager, user_id="alice", session_id="s2")
    result = await _ask(manager, second, REQUEST, capture)
    assert "Your trip to Paris" in str(result)

    paris = _find(manager, STATEMENT)
    flight, hotel = _find(manager, "search_flights("), _find(manager, "search_hotels(")
    answer = _find(manager, "Your trip to Paris")
    assert "Paris" in flight.content and "Paris" in hotel.content
    for produced in (flight, hotel):  # the recalled statement supplied the tools' argument "Paris"
        assert produced.derived_from == (paris.id,), produced.content
    assert set(answer.derived_from) == {flight.id, hotel.id}  # the answer rests on the results

    report = manager.supersede(
        paris.id, "I'm planning a trip to Lyon from 3 to 7 May.", scope=Scope(user_id="alice"), source="user"
    )

    assert {flight.id, hotel.id, answer.id} <= set(report.suspect)
    request = _find(manager, REQUEST)
    assert request.id not in report.suspect  # the user's own words do not depend on the old statement
    assert manager.require(answer.id, scope="alice").status is Status.SUSPECT


async def test_each_turn_product_is_stored_once_without_cycles(manager: MemoryManager) -> None:
    """Both mechanisms write the same results; a turn's own products are never premises of each other."""
    memory = lineage_memory(manager, user_id="alice", session_id="s1")
    await _ask(manager, memory, STATEMENT, True)
    await _ask(manager, memory, REQUEST, True)
    contents = [m.content for m in manager.find(scope="alice")]
    assert len(contents) == len(set(contents)), contents
    paris, request, flight = _find(manager, STATEMENT), _find(manager, REQUEST), _find(manager, "search_flights(")
    assert flight.derived_from == (paris.id,) and request.id not in flight.derived_from
    for mem in manager.find(scope="alice"):
        assert mem.id not in {a.id for a in manager.ancestors(mem.id, scope="alice")}


async def test_block_records_recall_before_a_flushed_turn(manager: MemoryManager, li: Any) -> None:
    """Flush mode: the recall happens while the turn is live; the turn reaches the block later."""
    block = LineageMemoryBlock(manager=manager, user_id="alice")
    await block.aput([ChatMessage(role="user", content=STATEMENT)], session_id="s1")
    paris = _find(manager, STATEMENT)
    shown = await block.aget([ChatMessage(role="user", content=REQUEST)], session_id="s2")
    assert f"[m:{short_id(paris.id)}" in shown
    await block.aput(
        [
            ChatMessage(role="user", content=REQUEST),
            li.calls(("f-x", "search_flights", {"city": "Paris"})),
            ChatMessage(role="tool", content="Flight to Paris", additional_kwargs={"tool_call_id": "f-x"}),
            li.say("Here is your Paris flight."),
        ],
        session_id="s2",
    )
    request = _find(manager, REQUEST)
    tool, answer = _find(manager, "search_flights("), _find(manager, "Here is your Paris flight.")
    assert tool.derived_from == (paris.id,) and request.id not in tool.derived_from
    assert answer.derived_from == (tool.id,)


async def test_capture_run_links_the_user_turn_to_its_run(manager: MemoryManager) -> None:
    """With both mechanisms the block stores the user turn first; explain still shows the agent run."""
    memory = lineage_memory(manager, user_id="alice", session_id="s1")
    await _ask(manager, memory, STATEMENT, True)
    await _ask(manager, memory, REQUEST, True)
    for text in (STATEMENT, REQUEST):
        user = _find(manager, text)
        assert user.source.kind is SourceKind.USER
        kinds = {a.kind for a in manager.explain(user.id, scope="alice").activities}
        assert "agent_run" in kinds, text
    answer = _find(manager, "Your trip to Paris")
    kinds = {a.kind for a in manager.explain(answer.id, scope="alice").activities}
    assert {"agent_run", "llm_call"} <= kinds


@pytest.mark.parametrize("how", ["capture_run", "event-handler"])
async def test_capture_derives_from_the_recalled_memories_itself(
    manager: MemoryManager, dispatcher: Any, how: str
) -> None:
    """Flush mode: the block stores nothing of the new turn; its recall still reaches the capture's run.

    The block hands what it recalled to the shared recorder, so ``capture_run`` (with or without ``memory=``)
    and the dispatcher handler derive from it.
    """
    first = lineage_memory(manager, user_id="alice", session_id="s1")
    await _ask(manager, first, STATEMENT, False)
    second = lineage_memory(manager, user_id="alice", session_id="s2", write_through=False)
    scope = Scope(user_id="alice", session_id="s2")
    if how == "event-handler":
        handler = LineageEventHandler(manager=manager, scope=scope, raise_error=True).register(dispatcher)
        try:
            await _agent().run(user_msg=REQUEST, memory=second)
        finally:
            handler.unregister()
    else:
        await capture_run(_agent().run(user_msg=REQUEST, memory=second), manager, scope=scope)
    paris, request = _find(manager, STATEMENT), _find(manager, REQUEST)
    flight, answer = _find(manager, "search_flights("), _find(manager, "Your trip to Paris")
    noted = _find(manager, "Noted.")  # an acknowledgement: recalled, but never a premise
    assert flight.derived_from == (paris.id,)
    assert noted.id not in answer.derived_from and flight.id in answer.derived_from
    assert request.lineage.activity_id is not None  # the capture stored the turn


async def test_capture_run_ignores_another_users_recall(manager: MemoryManager) -> None:
    """A memory of another user than the capture scope contributes no premises (never a cross-scope edge)."""
    await _ask(manager, lineage_memory(manager, user_id="bob", session_id="b1"), STATEMENT, False)
    bobs = lineage_memory(manager, user_id="bob", session_id="b2", write_through=False)
    await capture_run(
        _agent().run(user_msg=REQUEST, memory=bobs), manager, scope=Scope(user_id="alice", session_id="a1")
    )
    flight = _find(manager, "search_flights(")
    assert flight.derived_from == (_find(manager, REQUEST).id,)


@pytest.mark.parametrize("capture", [False, True], ids=["memory", "memory+capture_run"])
async def test_a_value_read_from_the_chat_history_rests_on_its_message_when_recall_misses_it(
    manager: MemoryManager, monkeypatch: pytest.MonkeyPatch, capture: bool
) -> None:
    """In a long session recall may rank the statement below many similar requests; the model still reads it in the
    chat history, so the tool calls that take its city rest on it, recalled or not."""
    memory = lineage_memory(manager, user_id="alice", session_id="s1")
    await _ask(manager, memory, STATEMENT, capture)

    async def recall_that_misses(*args: Any, **kwargs: Any) -> list[Any]:
        return []

    monkeypatch.setattr(manager, "arecall", recall_that_misses)
    await _ask(manager, memory, REQUEST, capture)
    paris = _find(manager, STATEMENT)
    flight, hotel = _find(manager, "search_flights("), _find(manager, "search_hotels(")
    assert "Paris" in flight.content
    assert flight.derived_from == (paris.id,) and hotel.derived_from == (paris.id,)
    report = manager.supersede(
        paris.id, "I'm planning a trip to Lyon from 3 to 7 May.", scope=Scope(user_id="alice"), source="user"
    )
    assert {flight.id, hotel.id} <= set(report.suspect)
