"""LineageChatStore: a LlamaIndex BaseChatStore whose sessions are memories with lineage (issue 17)."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.storage.chat_store.base import BaseChatStore
from memlineage import InvalidInputError, MemoryManager, Scope, Status

from memlineage_llamaindex import LineageChatStore

from .conftest import calls


def test_class() -> None:
    assert BaseChatStore.__name__ in [b.__name__ for b in LineageChatStore.__mro__]
    assert LineageChatStore.class_name() == "LineageChatStore"


def test_session_turns_in_order_with_tool_calls_and_lineage(manager: MemoryManager) -> None:
    store = LineageChatStore(manager=manager, user_id="alice")
    sent = [
        ChatMessage(role="user", content="Weather in Paris?"),
        calls(("c1", "get_weather", {"city": "Paris"})),
        ChatMessage(role="tool", content="Sunny", additional_kwargs={"tool_call_id": "c1", "name": "get_weather"}),
        ChatMessage(role="assistant", content="It is sunny."),
        ChatMessage(role="user", content="yes"),
        ChatMessage(role="assistant", content="Booked."),
        ChatMessage(role="user", content="yes"),
    ]
    for m in sent:
        store.add_message("s1", m)
    got = store.get_messages("s1")
    assert [m.role for m in got] == [m.role for m in sent]
    assert [m.content for m in got] == [m.content for m in sent]
    block = next(b for b in got[1].blocks if isinstance(b, ToolCallBlock))
    assert (block.tool_call_id, block.tool_name, block.tool_kwargs) == ("c1", "get_weather", {"city": "Paris"})
    assert got[2].additional_kwargs["tool_call_id"] == "c1"
    mems = {m.content: m for m in manager.find(scope=Scope(user_id="alice"))}
    assert str(mems["Sunny"].source) == "tool:get_weather" and mems["Sunny"].scope.session_id == "s1"
    answer = mems["It is sunny."]
    assert str(answer.source) == "agent"
    assert set(answer.derived_from) == {mems["Weather in Paris?"].id, mems["Sunny"].id}
    assert store.get_keys() == ["s1"]
    assert LineageChatStore(manager=manager, user_id="bob").get_keys() == []
    assert LineageChatStore(manager=manager, user_id="bob").get_messages("s1") == []


def test_chat_memory_buffer_and_a_chat_engine_keep_the_conversation(manager: MemoryManager) -> None:
    store = LineageChatStore(manager=manager, user_id="alice")
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="trip-1", token_limit=2000)
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=5), memory=memory)
    engine.chat("I want to visit Lisbon")
    engine.chat("In May please")
    got = store.get_messages("trip-1")
    assert [m.role for m in got] == [MessageRole.USER, MessageRole.ASSISTANT] * 2
    assert [got[0].content, got[2].content] == ["I want to visit Lisbon", "In May please"]
    # a fresh buffer on the same store sees the same history (it lives in MemLineage, not in the buffer)
    again = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="trip-1")
    assert [m.content for m in again.get_all()] == [m.content for m in got]


def test_deletes_are_invalidations(manager: MemoryManager) -> None:
    store = LineageChatStore(manager=manager, user_id="alice")
    store.set_messages(
        "s1", [ChatMessage(role="user", content="I live in Lyon"), ChatMessage(role="assistant", content="Noted.")]
    )
    ids = {m.content: m.id for m in manager.find(scope="alice")}
    removed = store.delete_last_message("s1")
    assert removed is not None and removed.content == "Noted."
    assert [m.content for m in store.get_messages("s1")] == ["I live in Lyon"]
    assert manager.require(ids["Noted."], scope="alice").status is Status.RETRACTED  # kept, invalidated
    store.set_messages("s1", [ChatMessage(role="user", content="I live in Nice")])
    assert [m.content for m in store.get_messages("s1")] == ["I live in Nice"]
    # withdrawn: the new history is appended before the old turns are cleared, so "I live in Nice" supersedes it
    assert manager.require(ids["I live in Lyon"], scope="alice").status in (Status.RETRACTED, Status.SUPERSEDED)
    assert [m.content for m in store.delete_messages("s1") or []] == ["I live in Nice"]
    assert store.get_messages("s1") == [] and store.delete_messages("s1") is None
    assert store.delete_message("s1", 3) is None
    with pytest.raises(InvalidInputError, match="append-only"):
        store.add_message("s1", ChatMessage(role="user", content="x"), idx=5)
    with pytest.raises(InvalidInputError):
        LineageChatStore(manager=manager, user_id="")


def test_async_twins(manager: MemoryManager) -> None:
    store = LineageChatStore(manager=manager, user_id="alice", on_clear="forget")

    async def run() -> list[str | None]:
        await store.async_add_message("s1", ChatMessage(role="user", content="async hi"))
        await store.aset_messages("s2", [ChatMessage(role="user", content="other session")])
        got = [m.content for m in await store.aget_messages("s1")]
        assert sorted(await store.aget_keys()) == ["s1", "s2"]
        await store.adelete_messages("s2")
        return got

    assert asyncio.run(run()) == ["async hi"]
    assert store.get_keys() == ["s1"]
    archived = [m for m in manager.find(scope="alice") if m.content == "other session"]
    assert archived == []  # forgotten: archived memories are out of find()


# ---------------------------------------------------------------------------------------------------- hardening (h27)
def test_blocks_keep_their_order_and_images_their_bytes(manager: MemoryManager) -> None:
    from llama_index.core.base.llms.types import ImageBlock, TextBlock

    store = LineageChatStore(manager=manager, user_id="alice")
    sent = ChatMessage(
        role="user",
        blocks=[
            TextBlock(text="Compare this"),
            ImageBlock(image=bytes(range(256)) * 4, image_mimetype="image/png"),
            TextBlock(text="  with that:  "),
            ImageBlock(image=b"\x89PNG\r\n\x1a\n\x00", image_mimetype="image/png"),
        ],
        additional_kwargs={"raw": b"\x00\xff"},
    )
    store.add_message("s1", sent)
    (got,) = store.get_messages("s1")
    assert got == sent
    assert got.blocks[1].resolve_image().read() == bytes(range(256)) * 4


def test_a_restated_message_comes_back_as_said(manager: MemoryManager) -> None:
    store = LineageChatStore(manager=manager, user_id="alice")
    for text in ("I live in Paris.", "i live in paris."):
        store.add_message("s1", ChatMessage(role="user", content=text))
    assert [m.content for m in store.get_messages("s1")] == ["I live in Paris.", "i live in paris."]


def test_setting_the_same_history_again_changes_nothing(manager: MemoryManager) -> None:
    store = LineageChatStore(manager=manager, user_id="alice")
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="s1")
    memory.put(ChatMessage(role="user", content="I'm planning a trip to Rome."))
    memory.put(ChatMessage(role="assistant", content="In Rome I suggest the Colosseum."))
    (plan,) = [m for m in manager.find(scope="alice") if m.content.startswith("I'm planning")]
    built = manager.remember("Colosseum tickets: 18 EUR", scope="alice", source="reasoning", derived_from=[plan.id])
    before = store.history("s1").turns()
    memory.set(memory.get_all())
    memory.set([*memory.get_all(), ChatMessage(role="user", content="Thanks!")])
    after = store.history("s1").turns()
    assert [t.activity_id for t in after[:2]] == [t.activity_id for t in before]
    assert [m.content for m in store.get_messages("s1")][-1] == "Thanks!"
    assert manager.require(plan.id, scope="alice").status is Status.ACTIVE
    assert manager.require(built.id, scope="alice").status is Status.ACTIVE


def test_a_bad_new_history_keeps_the_old_one_and_never_raises(manager: MemoryManager) -> None:
    store = LineageChatStore(manager=manager, user_id="alice")
    store.add_message("s1", ChatMessage(role="user", content="keep me"))
    bad_tool = ChatMessage(
        role="tool", content="Sunny", additional_kwargs={"tool_call_id": "c1", "name": "bad\x00name"}
    )
    store.set_messages("s1", [ChatMessage(role="user", content="new start"), bad_tool])
    assert [m.content for m in store.get_messages("s1")] == ["keep me"]
    assert [m.content for m in manager.find(scope="alice")] == ["keep me"]
    assert manager.stats()["adapter_errors"]["LineageChatStore.set_messages"] == 1


async def test_a_failed_tool_call_stays_in_the_transcript_and_is_never_a_fact(manager: MemoryManager) -> None:
    """LlamaIndex writes a failed call's message without ``is_error``: the store learns it from the agent's span."""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool

    from .conftest import say, scripted_llm

    def book_hotel(city: str) -> str:
        """Book a hotel in a city."""
        raise RuntimeError("Booking service unavailable (HTTP 503)")

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}"

    store = LineageChatStore(manager=manager, user_id="alice")
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="s1")
    llm = scripted_llm(
        calls(("h-1", "book_hotel", {"city": "Rome"}), ("w-1", "get_weather", {"city": "Rome"})),
        say("Sunny in Rome, but the booking service is down."),
    )
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(fn=f) for f in (book_hotel, get_weather)], llm=llm)
    await agent.run(user_msg="Book me a hotel in Rome and check the weather.", memory=memory)

    tools = [m for m in store.get_messages("s1") if m.role == MessageRole.TOOL]
    assert [m.additional_kwargs["tool_call_id"] for m in tools] == ["h-1", "w-1"]  # the transcript keeps both
    assert "HTTP 503" in (tools[0].content or "")
    scope = Scope(user_id="alice")
    live = [m.content for m in manager.find(scope=scope)]
    assert "Sunny in Rome" in live and not any("HTTP 503" in c for c in live)
    hits = manager.recall("booking service unavailable", scope=scope, k=10, reinforce=False)
    assert not any("HTTP 503" in h.memory.content for h in hits)


def test_a_call_id_that_failed_elsewhere_does_not_withdraw_a_result(manager: MemoryManager) -> None:
    """A failure is matched by call id and text: another agent's successful call with a reused id stays a fact."""
    from memlineage_llamaindex._failures import watch_failures

    watch_failures().remember("call_0", "Booking service unavailable (HTTP 503)")
    store = LineageChatStore(manager=manager, user_id="bob")
    store.add_message("s1", calls(("call_0", "get_weather", {"city": "Oslo"})))
    for text in ("Snow in Oslo", "Booking service unavailable (HTTP 503)"):
        store.add_message("s1", ChatMessage(role="tool", content=text, additional_kwargs={"tool_call_id": "call_0"}))
    live = [m.content for m in manager.find(scope=Scope(user_id="bob"))]
    assert any("Snow in Oslo" in c for c in live) and not any("HTTP 503" in c for c in live)
    assert len([m for m in store.get_messages("s1") if m.role == MessageRole.TOOL]) == 2
