"""LineageChatMessageHistory: ordered turns as memories with lineage, RunnableWithMessageHistory, clear (issue 17)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from memlineage import InvalidInputError, MemoryManager, Scope, Status

from memlineage_langchain import LineageChatMessageHistory

from .conftest import ScriptedChatModel, tool_calls


class RecordingModel(ScriptedChatModel):
    """A scripted model that also records the messages each call received."""

    seen: ClassVar[list[list[BaseMessage]]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def test_turns_come_back_in_order_with_tool_calls_and_repeats(manager: MemoryManager) -> None:
    history = LineageChatMessageHistory(manager, scope="alice", session_id="s1")
    call = tool_calls(("get_weather", {"city": "Paris"}, "call_1"))
    sent = [
        SystemMessage("You are a travel agent."),
        HumanMessage("What is the weather in Paris?"),
        call,
        ToolMessage("Sunny in Paris", tool_call_id="call_1", name="get_weather"),
        AIMessage("It is sunny in Paris."),
        HumanMessage("yes"),
        AIMessage("Booked."),
        HumanMessage("yes"),
    ]
    history.add_messages(sent[:4])
    for m in sent[4:]:
        history.add_message(m)
    got = history.messages
    assert [type(m) for m in got] == [type(m) for m in sent]
    assert [m.content for m in got] == [m.content for m in sent]
    assert got[2].tool_calls[0]["args"] == {"city": "Paris"} and got[2].tool_calls[0]["id"] == "call_1"
    assert got[3].tool_call_id == "call_1"
    assert [
        m.content for m in LineageChatMessageHistory(manager, scope="alice", session_id="s1", max_messages=2).messages
    ] == ["Booked.", "yes"]
    # each message is a memory with its source and session, and the answer derives from its question
    mems = {m.content: m for m in manager.find(scope=Scope(user_id="alice"))}
    assert str(mems["What is the weather in Paris?"].source) == "user"
    assert str(mems["Sunny in Paris"].source) == "tool:get_weather"
    answer = mems["It is sunny in Paris."]
    assert str(answer.source) == "agent" and answer.scope.session_id == "s1"
    assert set(answer.derived_from) == {mems["What is the weather in Paris?"].id, mems["Sunny in Paris"].id}
    assert 'called get_weather({"city": "Paris"})' in mems
    # correcting the question makes the answer suspect
    manager.retract(mems["What is the weather in Paris?"].id, scope="alice")
    assert manager.require(answer.id, scope="alice").status is Status.SUSPECT


def test_sessions_and_users_are_separate(manager: MemoryManager) -> None:
    LineageChatMessageHistory(manager, scope="alice", session_id="s1").add_user_message("hello from s1")
    LineageChatMessageHistory(manager, scope="alice", session_id="s2").add_user_message("hello from s2")
    LineageChatMessageHistory(manager, scope=Scope(user_id="bob", session_id="s1")).add_user_message("bob here")
    assert [m.content for m in LineageChatMessageHistory(manager, scope="alice", session_id="s1").messages] == [
        "hello from s1"
    ]
    assert [
        m.content for m in LineageChatMessageHistory(manager, scope={"user_id": "bob", "session_id": "s1"}).messages
    ] == ["bob here"]
    with pytest.raises(InvalidInputError, match="session"):
        LineageChatMessageHistory(manager, scope="alice")


def test_clear_invalidates_and_never_deletes(manager: MemoryManager) -> None:
    history = LineageChatMessageHistory(manager, scope="alice", session_id="s1")
    history.add_messages([HumanMessage("I live in Lyon"), AIMessage("Noted: Lyon.")])
    other = LineageChatMessageHistory(manager, scope="alice", session_id="s2")
    other.add_user_message("I live in Lyon")  # the same words in another session: one memory, two occurrences
    mems = {m.content: m.id for m in manager.find(scope=Scope(user_id="alice"))}
    history.clear()
    assert history.messages == []
    assert [m.content for m in other.messages] == ["I live in Lyon"]  # another session's turn is untouched
    after = manager.get_many(list(mems.values()), scope="alice")
    assert all(m is not None for m in after)  # nothing deleted
    assert manager.require(mems["Noted: Lyon."], scope="alice").status is Status.RETRACTED
    assert manager.require(mems["I live in Lyon"], scope="alice").status is Status.ACTIVE  # s2 still says it
    assert [e["memory_id"] for e in manager.audit("alice", types=["retracted"])] == [mems["Noted: Lyon."]]
    other.clear()
    assert manager.require(mems["I live in Lyon"], scope="alice").status is Status.RETRACTED
    history.add_user_message("I live in Nice")  # the session goes on after a clear
    assert [m.content for m in history.messages] == ["I live in Nice"]


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history_keeps_the_conversation(manager: MemoryManager) -> None:
    RecordingModel.seen = []
    model = RecordingModel(responses=[AIMessage("Hi Alice, where to?"), AIMessage("Lisbon it is.")])
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a travel agent."), MessagesPlaceholder("history"), ("human", "{input}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: LineageChatMessageHistory(manager, scope="alice", session_id=session_id),
        input_messages_key="input",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "trip-1"}}
    assert chain.invoke({"input": "Hi, I am Alice"}, config=config).content == "Hi Alice, where to?"
    assert chain.invoke({"input": "Lisbon please"}, config=config).content == "Lisbon it is."
    second_call = [m.content for m in RecordingModel.seen[1]]
    assert second_call == ["You are a travel agent.", "Hi, I am Alice", "Hi Alice, where to?", "Lisbon please"]
    stored = LineageChatMessageHistory(manager, scope="alice", session_id="trip-1").messages
    assert [m.content for m in stored] == ["Hi, I am Alice", "Hi Alice, where to?", "Lisbon please", "Lisbon it is."]
    assert [m.type for m in stored] == ["human", "ai", "human", "ai"]


def test_async_twins(manager: MemoryManager) -> None:
    history = LineageChatMessageHistory(manager, scope="alice", session_id="s1")

    async def run() -> list[str]:
        await history.aadd_messages([HumanMessage("async hello"), AIMessage("async answer")])
        got = [m.content for m in await history.aget_messages()]
        await history.aclear()
        return got

    assert asyncio.run(run()) == ["async hello", "async answer"]
    assert history.messages == []


# ---------------------------------------------------------------------------------------------------- hardening (h27)
def test_a_restated_message_comes_back_as_said(manager: MemoryManager) -> None:
    history = LineageChatMessageHistory(manager, scope="alice", session_id="s1")
    sent = [HumanMessage("I live in Paris."), AIMessage("Noted."), HumanMessage("i live in paris."), AIMessage("OK!")]
    history.add_messages(sent)
    assert [m.content for m in history.messages] == [m.content for m in sent]


def test_the_window_never_starts_with_a_tool_result_whose_call_is_cut_off(manager: MemoryManager) -> None:
    LineageChatMessageHistory(manager, scope="alice", session_id="s1").add_messages(
        [
            HumanMessage("Weather in Rome?"),
            tool_calls(("get_weather", {"city": "Rome"}, "c1")),
            ToolMessage("Sunny in Rome", tool_call_id="c1", name="get_weather"),
            AIMessage("It is sunny in Rome."),
        ]
    )
    window = LineageChatMessageHistory(manager, scope="alice", session_id="s1", max_messages=2).messages
    assert [type(m) for m in window] == [AIMessage]  # the result went with its call
    window = LineageChatMessageHistory(manager, scope="alice", session_id="s1", max_messages=3).messages
    assert [type(m) for m in window] == [AIMessage, ToolMessage, AIMessage] and window[0].tool_calls


def test_content_blocks_images_and_bytes_round_trip_exactly(manager: MemoryManager) -> None:
    history = LineageChatMessageHistory(manager, scope="alice", session_id="s1")
    sent = [
        HumanMessage(
            content=[
                {"type": "text", "text": "What is in "},
                {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
                {"type": "text", "text": "this picture?"},
            ],
            additional_kwargs={"raw": b"\x89PNG\x00\xff"},
        ),
        AIMessage("A cat.", additional_kwargs={"audio": {"data": bytes(range(256))}}),
    ]
    history.add_messages(sent)
    assert history.messages == sent


def test_two_histories_on_one_session_keep_each_batch_together(manager: MemoryManager) -> None:
    import threading

    writers = [LineageChatMessageHistory(manager, scope="alice", session_id="s1") for _ in range(3)]
    start = threading.Barrier(len(writers))

    def chat(n: int, history: LineageChatMessageHistory) -> None:
        start.wait()
        for k in range(3):
            history.add_messages([HumanMessage(f"question {n}.{k}"), AIMessage(f"answer {n}.{k}")])

    threads = [threading.Thread(target=chat, args=(n, h)) for n, h in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = writers[0].messages
    assert len(got) == 18
    for q, a in zip(got[::2], got[1::2]):
        assert isinstance(q, HumanMessage) and isinstance(a, AIMessage)
        assert a.content == str(q.content).replace("question", "answer")
    assert [t.position for t in writers[1].history.turns()] == list(range(18))


def test_a_bad_message_in_a_batch_stores_nothing_and_never_raises(manager: MemoryManager) -> None:
    history = LineageChatMessageHistory(manager, scope="alice", session_id="s1")
    history.add_messages([HumanMessage("first"), AIMessage("broken \ud800 text"), HumanMessage("third")])
    assert history.messages == [] and manager.find(scope="alice") == []
    assert manager.stats()["adapter_errors"]["LineageChatMessageHistory.add_messages"] == 1


def test_async_reads_never_raise_into_the_chain(manager: MemoryManager, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlineage import StorageError

    history = LineageChatMessageHistory(manager, scope="alice", session_id="s1")
    history.add_messages([HumanMessage("hello")])

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("ledger down")

    monkeypatch.setattr(history.history, "turns", broken)
    assert asyncio.run(history.aget_messages()) == [] and history.messages == []
