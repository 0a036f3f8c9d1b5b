"""Tool-call capture: capture_run() over stream events and LineageEventHandler through the dispatcher."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent, ToolCall, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, ChatResponse
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMChatStartEvent
from llama_index.core.tools import ToolOutput
from memlineage import MemLineageError, MemoryManager, Scope, SourceKind

from memlineage_llamaindex import LineageEventHandler, capture_run, lineage_memory

ALICE = Scope(user_id="alice", session_id="s1")


def _mems(manager: MemoryManager, scope: Scope) -> dict[str, Any]:
    hits = manager.recall("weather time Paris rooms", scope=scope, k=50, reinforce=False, include_suspect=True)
    return {str(h.memory.source): h.memory for h in hits}


def _weather_agent(li: Any, ids: tuple[str, ...] = ("w-1",)) -> FunctionAgent:
    return FunctionAgent(
        tools=li.tools(),
        llm=li.llm(
            li.calls(
                *[(i, "get_weather", {"city": "Paris"}) for i in ids[:1]],
                *[(i, "get_time", {"city": "Paris"}) for i in ids[1:2]],
                *[(i, "book_hotel", {"city": "Paris"}) for i in ids[2:]],
            ),
            li.say("It is 18C and raining in Paris."),
        ),
    )


def _call(manager: MemoryManager, scope: Scope, tool_call_id: str) -> Any:
    """The activity of one tool call, found by the model's call id within the scope."""
    calls = manager.find_activities(scope, tool_call_id=tool_call_id)
    assert len(calls) == 1, calls
    return calls[0]


def _assert_run_lineage(manager: MemoryManager, scope: Scope, tool_id: str) -> None:
    mems = _mems(manager, scope)
    user, tool, answer = mems["user"], mems["tool:get_weather"], mems["agent"]
    assert user.content == "Weather in Paris?"
    call = _call(manager, scope, tool_id)
    assert tool.lineage.activity_id == call.id and tool.metadata["tool_call_id"] == tool_id
    assert tool.derived_from == (user.id,)
    assert tool.id in answer.derived_from and user.id not in answer.derived_from  # it rests on the results
    assert call is not None and call.kind == "tool_call" and call.name == "get_weather" and call.outcome == "success"
    llm = manager.get_activity(call.parent_id or "", scope=scope)
    assert llm is not None and llm.kind == "llm_call"
    run = manager.get_activity(llm.parent_id or "", scope=scope)
    assert run is not None and run.kind == "agent_run" and run.outcome == "success"
    assert user.lineage.activity_id == run.id
    explained = manager.explain(answer.id, scope=scope)
    assert {a.id for a in explained.activities} >= {call.id, llm.id, run.id}


async def test_capture_run_function_agent(manager: MemoryManager, li: Any) -> None:
    result = await capture_run(_weather_agent(li).run(user_msg="Weather in Paris?"), manager, scope=ALICE)
    assert "18C" in str(result)
    _assert_run_lineage(manager, ALICE, "w-1")


async def test_capture_run_tool_error_is_not_a_result(manager: MemoryManager, li: Any) -> None:
    agent = _weather_agent(li, ("w-1", "t-1", "h-1"))
    await capture_run(agent.run(user_msg="Weather in Paris?"), manager, scope=ALICE)
    failed = _call(manager, ALICE, "h-1")
    assert failed is not None and failed.outcome == "error" and "no rooms left" in failed.metadata["error"]
    mems = _mems(manager, ALICE)
    assert "tool:book_hotel" not in mems
    assert all("no rooms" not in m.content for m in mems.values())
    assert mems["agent"].derived_from.count(mems["tool:get_weather"].id) == 1


async def test_capture_run_parallel_tool_calls(manager: MemoryManager, li: Any) -> None:
    agent = _weather_agent(li, ("w-1", "t-1"))
    await capture_run(agent.run(user_msg="Weather in Paris?"), manager, scope=ALICE)
    mems = _mems(manager, ALICE)
    weather, time_ = mems["tool:get_weather"], mems["tool:get_time"]
    assert (weather.lineage.activity_id, time_.lineage.activity_id) == (
        _call(manager, ALICE, "w-1").id,
        _call(manager, ALICE, "t-1").id,
    )
    assert weather.lineage.parent_activity_id == time_.lineage.parent_activity_id  # the same LLM call
    assert set(mems["agent"].derived_from) == {weather.id, time_.id}


async def test_capture_run_react_agent(manager: MemoryManager, li: Any) -> None:
    agent = ReActAgent(
        tools=li.tools(),
        llm=li.llm(
            li.say('Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}'),
            li.say("Thought: I can answer now.\nAnswer: It is 18C and raining in Paris."),
        ),
    )
    memory = lineage_memory(manager, user_id="alice", session_id="s1")
    result = await capture_run(agent.run(user_msg="Weather in Paris?", memory=memory), manager, scope=ALICE)
    assert str(result) == "It is 18C and raining in Paris."
    hits = manager.recall("weather Paris", scope=ALICE, k=20, reinforce=False)
    tool = next(h.memory for h in hits if h.memory.source.kind is SourceKind.TOOL)
    generated_id = tool.lineage.activity_id
    assert generated_id and manager.get_activity(generated_id, scope=ALICE).outcome == "success"  # type: ignore[union-attr]
    answer = next(h.memory for h in hits if h.memory.content == "It is 18C and raining in Paris.")
    assert tool.id in answer.derived_from


async def test_capture_run_failed_run_closes_activity(manager: MemoryManager, li: Any) -> None:
    agent = FunctionAgent(tools=li.tools(), llm=li.llm())  # no scripted response: the LLM raises
    with pytest.raises(Exception, match="ran out"):
        await capture_run(agent.run(user_msg="Weather in Paris?"), manager, scope=ALICE)
    user = _mems(manager, ALICE)["user"]
    run = manager.get_activity(user.lineage.activity_id or "", scope=ALICE)
    assert run is not None and run.outcome == "error"


async def test_event_handler_through_dispatcher(manager: MemoryManager, li: Any, dispatcher: Any) -> None:
    handler = LineageEventHandler(manager=manager, scope=ALICE, raise_error=True).register(dispatcher)
    try:
        await _weather_agent(li, ("w-1", "t-1", "h-1")).run(user_msg="Weather in Paris?")
    finally:
        handler.unregister()
    assert handler not in dispatcher.event_handlers
    _assert_run_lineage(manager, ALICE, "w-1")
    call = _call(manager, ALICE, "w-1")
    assert call is not None and call.metadata["framework_id"].startswith("BaseWorkflowAgent.call_tool-")
    llm = manager.get_activity(call.parent_id or "", scope=ALICE)
    assert llm is not None and ".astream_chat-" in llm.metadata["framework_id"]  # the LLM span id
    assert _call(manager, ALICE, "h-1").outcome == "error"  # type: ignore[union-attr]
    assert "tool:book_hotel" not in _mems(manager, ALICE)
    assert not handler._runs and not handler._parents  # no state left behind


async def test_event_handler_scope_from_instrument_tags(manager: MemoryManager, li: Any, dispatcher: Any) -> None:
    handler = LineageEventHandler(manager=manager, raise_error=True).register(dispatcher)
    try:
        await _weather_agent(li, ("untagged-1",)).run(user_msg="Weather in Paris?")
        with instrument_tags({"memlineage.user_id": "bob", "memlineage.session_id": "b1"}):
            await _weather_agent(li, ("bob-1",)).run(user_msg="Weather in Paris?")
    finally:
        handler.unregister()
    assert not any(
        manager.find_activities(u, tool_call_id="untagged-1") for u in ("alice", "bob")
    )  # no scope: nothing written anywhere
    bob = Scope(user_id="bob", session_id="b1")
    _assert_run_lineage(manager, bob, "bob-1")
    assert _mems(manager, ALICE) == {}


def test_handler_methods_called_directly(manager: MemoryManager) -> None:
    handler = LineageEventHandler(manager=manager, scope=ALICE, raise_error=True)
    spans = handler.span_handler

    class Agent:  # stands in for the span's instance; only the run span needs a real agent
        pass

    # an LLM event outside any captured run is ignored
    handler.handle(LLMChatStartEvent(messages=[], additional_kwargs={}, model_dict={}, span_id="llm-x"))
    assert manager.get_activity("llm-x", scope=ALICE) is None

    # a tool span under a captured run: enter with ToolCall, exit with an error ToolCallResult
    from memlineage_llamaindex._capture import _Run

    handler._runs["run-1"] = _Run(run_id="run-1", scope=ALICE)
    call = ToolCall(tool_name="book_hotel", tool_kwargs={"city": "Paris"}, tool_id="h-9")
    sig = inspect.signature(lambda ctx, ev: None)
    bound = sig.bind(None, call)
    spans.span_enter(id_="BaseWorkflowAgent.call_tool-1", bound_args=bound, instance=Agent(), parent_id="run-1")
    out = ToolOutput(content="no rooms", tool_name="book_hotel", raw_input={}, raw_output="no rooms", is_error=True)
    result = ToolCallResult(
        tool_name="book_hotel",
        tool_kwargs={"city": "Paris"},
        tool_id="h-9",
        tool_output=out,
        return_direct=False,
    )
    spans.span_exit(id_="BaseWorkflowAgent.call_tool-1", bound_args=bound, instance=Agent(), result=result)
    act = _call(manager, ALICE, "h-9")
    run = manager.get_activity(act.parent_id, scope=ALICE)
    assert act.outcome == "error" and act.metadata["framework_id"] == "BaseWorkflowAgent.call_tool-1"
    assert run is not None and run.kind == "agent_run" and run.run_id == "run-1"
    assert manager.stats(ALICE)["memories"] == 0


def test_raise_error_switch(manager: MemoryManager) -> None:
    from memlineage_llamaindex._capture import _Run

    quiet = LineageEventHandler(manager=manager, scope=ALICE)
    loud = LineageEventHandler(manager=manager, scope=ALICE, raise_error=True)
    for h in (quiet, loud):
        h._runs["run-x"] = _Run(run_id="run-x", scope=ALICE)
        h._parents["llm-y"] = "run-x"
    manager.close()  # every core call now fails
    end = LLMChatEndEvent(
        messages=[], response=ChatResponse(message=ChatMessage(role="assistant", content="hi")), span_id="llm-y"
    )
    quiet.handle(end)
    with pytest.raises(MemLineageError):
        loud.handle(end)


async def test_two_users_same_tool_call_id_keep_their_own_activities(manager: MemoryManager, li: Any) -> None:
    bob = Scope(user_id="bob", session_id="b1")
    await capture_run(_weather_agent(li, ("w-1",)).run(user_msg="Weather in Paris?"), manager, scope=ALICE)
    await capture_run(_weather_agent(li, ("w-1",)).run(user_msg="Weather in Paris?"), manager, scope=bob)
    mine, his = _call(manager, ALICE, "w-1"), _call(manager, bob, "w-1")
    assert mine.id != his.id and mine.scope.user_id == "alice" and his.scope.user_id == "bob"
    _assert_run_lineage(manager, ALICE, "w-1")  # the first user's run still explains with its own activity
    _assert_run_lineage(manager, bob, "w-1")
    assert manager.get_activity(his.id, scope=ALICE) is None
