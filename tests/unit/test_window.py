from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage.errors import ConfigurationError, ContextOverflowError, InvalidInputError
from memlineage.window import ChatMessage, ToolCall, WorkingMemory, count_tokens, get_encoding

# --------------------------------------------------------------------------------------------- strategies


@st.composite
def histories(draw: st.DrawFn) -> list[ChatMessage]:
    """Random chat histories: optional system message, user/assistant turns, parallel tool calls, orphans."""
    out: list[ChatMessage] = []
    if draw(st.booleans()):
        out.append(ChatMessage(role="system", content=draw(st.text(max_size=40))))
    n_steps = draw(st.integers(0, 25))
    call_no = 0
    pending: list[str] = []
    for _ in range(n_steps):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "orphan", "late_result"]))
        text = draw(st.text(max_size=30))
        if kind == "user":
            out.append(ChatMessage(role="user", content=text))
        elif kind == "assistant":
            out.append(ChatMessage(role="assistant", content=text))
        elif kind == "tools":
            k = draw(st.integers(1, 3))
            calls = []
            for _ in range(k):
                call_no += 1
                calls.append(ToolCall(id=f"call{call_no}", name="t", arguments=json.dumps({"x": text})))
            out.append(ChatMessage(role="assistant", tool_calls=tuple(calls)))
            answered = draw(st.integers(0, k))
            for c in calls[:answered]:
                out.append(ChatMessage(role="tool", tool_call_id=c.id, content=draw(st.text(max_size=20))))
            pending.extend(c.id for c in calls[answered:])
        elif kind == "late_result" and pending:
            cid = pending.pop(0)
            out.append(ChatMessage(role="tool", tool_call_id=cid, content=text))
        else:  # orphan result with an unknown call id
            out.append(ChatMessage(role="tool", tool_call_id=f"ghost{len(out)}", content=text))
    return out


def check_invariants(wm: WorkingMemory, history: list[ChatMessage], budget: int) -> None:
    win = wm.window(budget)
    ids = [m.id for m in win.messages]
    hist_ids = [m.id for m in history]
    # ordered subsequence of the history, and a partition with the evicted messages
    pos = [hist_ids.index(i) for i in ids]
    assert pos == sorted(pos)
    assert sorted(ids + [m.id for m in win.evicted]) == sorted(hist_ids)
    # pinned: system message and the current user turn
    if history and history[0].role == "system":
        assert win.messages[0].id == history[0].id
    users = [m for m in history[1 if history and history[0].role == "system" else 0 :] if m.role == "user"]
    if users:
        assert users[-1].id in ids
        last = history[-1]
        if last.id != users[-1].id and not (last.tool_call_id or "").startswith("ghost"):
            assert last.id in ids, "the in-flight step after the current user turn is pinned"
    # budget
    assert win.history_tokens <= budget
    assert win.tokens == sum(wm.tokens_of(m) for m in win.messages)
    # tool groups: a call's results are all in or all out, and no result without its call; no leading tool
    body = [m for m in win.messages if not (history and history[0].role == "system" and m.id == history[0].id)]
    if body:
        assert body[0].role != "tool"
    kept = set(ids)
    for m in history:
        for c in m.tool_calls:
            results = [r for r in history if r.role == "tool" and r.tool_call_id == c.id]
            states = {r.id in kept for r in results} | {m.id in kept}
            assert len(states) == 1, "tool call and results split"
    calls_in = {c.id for m in win.messages for c in m.tool_calls}
    for m in win.messages:
        if m.role == "tool":
            assert m.tool_call_id in calls_in


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), budget=st.integers(0, 400))
def test_window_invariants(history: list[ChatMessage], budget: int) -> None:
    wm = WorkingMemory(max_tokens=budget, encoding="cl100k_base")
    wm.extend(history)
    check_invariants(wm, history, budget)


@settings(max_examples=80, deadline=None)
@given(history=histories(), budgets=st.lists(st.integers(0, 300), min_size=1, max_size=4))
def test_evicted_messages_reach_the_write_gate_once(history: list[ChatMessage], budgets: list[int]) -> None:
    seen: list[str] = []
    wm = WorkingMemory(max_tokens=0, on_evict=lambda ms: seen.extend(m.id for m in ms))
    wm.extend(history)
    evicted_ever: set[str] = set()
    for b in budgets:
        evicted_ever |= {m.id for m in wm.window(b).evicted}
    assert len(seen) == len(set(seen))
    assert set(seen) == evicted_ever


def test_budget_zero_returns_only_pinned() -> None:
    wm = WorkingMemory(max_tokens=0)
    wm.extend(
        [
            ChatMessage(role="system", content="sys"),
            ChatMessage(role="user", content="old"),
            ChatMessage(role="assistant", content="reply"),
            ChatMessage(role="user", content="current question"),
        ]
    )
    assert [m.content for m in wm.window().messages] == ["sys", "current question"]


def test_parallel_tool_calls_kept_or_dropped_together() -> None:
    calls = (
        ToolCall(id="a", name="weather", arguments='{"city":"Paris"}'),
        ToolCall(id="b", name="fx", arguments="{}"),
    )
    msgs = [
        ChatMessage(role="user", content="plan my trip"),
        ChatMessage(role="assistant", tool_calls=calls),
        ChatMessage(role="tool", tool_call_id="a", content="sunny " * 20),
        ChatMessage(role="tool", tool_call_id="b", content="1.08"),
        ChatMessage(role="assistant", content="It is sunny."),
        ChatMessage(role="user", content="and tomorrow?"),
    ]
    wm = WorkingMemory(max_tokens=10_000)
    wm.extend(msgs)
    group = sum(wm.tokens_of(m) for m in msgs[1:4])
    tail = wm.tokens_of(msgs[4])
    assert len(wm.window(tail + group).messages) == 5  # everything but the first user turn
    win = wm.window(tail + group - 1)  # one token short: the whole group goes, never a lone result
    assert [m.content for m in win.messages] == ["It is sunny.", "and tomorrow?"]


def test_tool_names_arguments_and_reasoning_count() -> None:
    wm = WorkingMemory()
    plain = ChatMessage(role="assistant", content="ok")
    call = ChatMessage(
        role="assistant", content="ok", tool_calls=(ToolCall(id="1", name="lookup", arguments='{"q": "x"}'),)
    )
    reasoning = ChatMessage(role="assistant", content="ok", reasoning="because the user asked twice")
    assert wm.tokens_of(call) > wm.tokens_of(plain)
    assert wm.tokens_of(reasoning) > wm.tokens_of(plain)


def test_copy_on_read_backend_respects_budget() -> None:
    stored = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"message number {i}") for i in range(50)]

    class Backend:
        reads = 0

        def messages(self) -> list[ChatMessage]:
            Backend.reads += 1
            return [m.model_copy(deep=True) for m in stored]

    wm = WorkingMemory(max_tokens=60, history=Backend())
    win = wm.window()
    assert win.history_tokens <= 60
    assert "message number 48" in [m.content for m in win.messages]  # the current user turn
    assert wm.window().messages == win.messages
    with pytest.raises(ConfigurationError):
        wm.add(ChatMessage(role="user", content="x"))


def test_failing_write_gate_does_not_lose_messages() -> None:
    calls = {"n": 0}

    def gate(ms: list[ChatMessage]) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("ledger down")

    wm = WorkingMemory(max_tokens=0, on_evict=gate)
    wm.extend([ChatMessage(role="user", content="a"), ChatMessage(role="user", content="b")])
    with pytest.raises(RuntimeError):
        wm.window()
    wm.window()
    assert calls["n"] == 2


def test_render_fits_context_and_drops_low_ranked_memories() -> None:
    wm = WorkingMemory(context_window=300, window_share=0.4)
    wm.add(ChatMessage(role="system", content="You are helpful."))
    for i in range(30):
        wm.add(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} about the trip to Lisbon"))
    wm.add(ChatMessage(role="user", content="Where am I going?"))
    memories = [f"memory {i}: the user likes window seats and quiet hotels" for i in range(40)]
    out = wm.render(memories)
    assert out.tokens <= 300
    assert out.tokens == sum(wm.tokens_of(m) for m in out.messages)
    assert 0 < out.memories_used < 40
    assert out.window.history_tokens <= 120
    assert out.messages[0].role == "system" and "memory 0" in out.messages[0].content
    assert out.messages[-1].content == "Where am I going?"


def test_render_raises_when_pinned_items_exceed_context() -> None:
    wm = WorkingMemory(context_window=20)
    wm.add(ChatMessage(role="user", content="word " * 100))
    with pytest.raises(InvalidInputError, match="context"):
        wm.render()


def test_special_tokens_are_counted_as_text() -> None:
    n = count_tokens("<|endoftext|> and <|fim_prefix|>", "cl100k_base")
    assert n > 3
    wm = WorkingMemory()
    assert wm.tokens_of(ChatMessage(role="user", content="<|endoftext|>")) > wm.message_overhead + 1


def test_cjk_counting() -> None:
    text = "我们明天去北京看长城，天气怎么样？"
    for name in ("cl100k_base", "o200k_base"):
        n = count_tokens(text, name)
        assert n == len(get_encoding(name).encode_ordinary(text))
        assert 5 <= n <= 2 * len(text)
    assert count_tokens("") == 0


def test_unknown_encoding_and_bad_config() -> None:
    with pytest.raises(ConfigurationError):
        get_encoding("p50k_base")
    with pytest.raises(ConfigurationError):
        WorkingMemory(window_share=1.5)
    with pytest.raises(InvalidInputError):
        WorkingMemory().window(-1)


def test_from_openai_roundtrip() -> None:
    data = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    m = ChatMessage.from_openai(data)
    assert m.to_openai() == {**data, "content": ""}
    with pytest.raises(InvalidInputError):
        ChatMessage.from_openai({"content": "no role"})


def test_offline_counting_with_sockets_disabled(socket_disabled: None) -> None:
    # A fresh interpreter: sockets blocked, tiktoken's downloader replaced by a tripwire, no cache dir set.
    code = textwrap.dedent(
        """
        import os, socket
        os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        def _blocked(*a, **k):
            raise RuntimeError("network used")
        socket.socket.connect = _blocked
        socket.create_connection = _blocked
        import tiktoken.load
        tiktoken.load.read_file = _blocked
        from memlineage.window import count_tokens
        print(count_tokens("hello <|endoftext|> 世界", "cl100k_base"), count_tokens("hello", "o200k_base"))
        assert "TIKTOKEN_CACHE_DIR" not in os.environ
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    a, b = map(int, out.stdout.split())
    assert a > 5 and b == 1


def test_evicted_messages_reach_the_write_gate():
    from memlineage import Scope
    from memlineage.testing import make_manager
    from memlineage.window import ChatMessage, ToolCall, WorkingMemory, WriteGateSink

    mm = make_manager()
    alice = Scope(user_id="alice", session_id="s1")
    wm = WorkingMemory(max_tokens=40, on_evict=WriteGateSink(mm, scope=alice))
    wm.add(ChatMessage(role="system", content="You are a travel agent."))
    wm.add(ChatMessage(role="user", content="I prefer aisle seats on every flight I take, always."))
    call = ToolCall(id="call_1", name="get_flight_price", arguments='{"city": "Paris"}')
    wm.add(ChatMessage(role="assistant", tool_calls=(call,)))
    wm.add(ChatMessage(role="tool", tool_call_id="call_1", content="Paris flight costs 120 EUR on 3 May."))
    wm.add(ChatMessage(role="assistant", content="The Paris flight costs 120 EUR and has aisle seats."))
    for i in range(6):
        wm.add(ChatMessage(role="user", content=f"filler question number {i} about nothing in particular"))
    wm.window()
    stored = {str(m.source): m for m in mm.find(scope=alice)}
    assert "user" in stored and "agent" in stored
    tool = stored["tool:get_flight_price"]
    assert tool.lineage.activity_id == "call_1" and tool.metadata["evicted_from"] == "working_memory"
    assert all(m.content != "You are a travel agent." for m in stored.values())


# ------------------------------------------------------------------------ the in-flight turn (issue 17)


def _in_flight_turn(result_words: int) -> list[ChatMessage]:
    call = ToolCall(id="c1", name="search", arguments='{"q": "hotels in Paris"}')
    return [
        ChatMessage(role="system", content="You are a travel agent."),
        ChatMessage(role="user", content="Find me a hotel in Paris"),
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id="c1", name="search", content="hotel " * result_words),
    ]


def test_render_keeps_the_in_flight_tool_call_and_truncates_its_result() -> None:
    wm = WorkingMemory(max_tokens=2000)
    turn = _in_flight_turn(5000)
    wm.extend(turn)
    out = wm.render(context_tokens=4000)
    assert [m.role for m in out.messages] == ["system", "user", "assistant", "tool"]
    assert out.tokens <= 4000
    assert out.tokens == sum(wm.tokens_of(m) for m in out.messages)
    result = out.messages[-1]
    assert result.id == turn[-1].id and out.truncated == (turn[-1].id,)
    assert result.content.startswith("hotel hotel")
    assert "[truncated by MemLineage to fit the context:" in result.content
    assert out.tokens > 3900  # cut only as much as needed
    assert wm.messages()[-1].content == turn[-1].content  # the history keeps the full text
    # small results are never cut: the budget goes to the large one
    small = WorkingMemory()
    small.extend(_in_flight_turn(10))
    assert small.render(context_tokens=4000).truncated == ()


def test_render_cuts_the_largest_parallel_result_first() -> None:
    calls = (ToolCall(id="a", name="big", arguments="{}"), ToolCall(id="b", name="small", arguments="{}"))
    wm = WorkingMemory(max_tokens=100)
    wm.extend(
        [
            ChatMessage(role="user", content="compare"),
            ChatMessage(role="assistant", tool_calls=calls),
            ChatMessage(role="tool", tool_call_id="a", content="alpha " * 3000),
            ChatMessage(role="tool", tool_call_id="b", content="beta " * 50),
        ]
    )
    out = wm.render(context_tokens=1000)
    assert out.tokens <= 1000
    by_call = {m.tool_call_id: m.content for m in out.messages if m.role == "tool"}
    assert by_call["b"] == "beta " * 50
    assert "truncated by MemLineage" in by_call["a"]


def test_render_raises_a_typed_error_when_even_the_markers_do_not_fit() -> None:
    wm = WorkingMemory()
    wm.extend(_in_flight_turn(5000))
    with pytest.raises(ContextOverflowError, match="raise context_tokens"):
        wm.render(system="rules " * 500, context_tokens=300)
    assert issubclass(ContextOverflowError, InvalidInputError)


def test_in_flight_step_is_pinned_and_older_steps_of_the_turn_go_first() -> None:
    c1, c2 = ToolCall(id="c1", name="a", arguments="{}"), ToolCall(id="c2", name="b", arguments="{}")
    wm = WorkingMemory(max_tokens=0)
    msgs = [
        ChatMessage(role="user", content="plan"),
        ChatMessage(role="assistant", tool_calls=(c1,)),
        ChatMessage(role="tool", tool_call_id="c1", content="first result"),
        ChatMessage(role="assistant", tool_calls=(c2,)),  # its result has not arrived yet
    ]
    wm.extend(msgs)
    win = wm.window()
    assert [m.id for m in win.messages] == [msgs[0].id, msgs[3].id]
    assert [m.id for m in win.evicted] == [msgs[1].id, msgs[2].id]


@pytest.mark.parametrize("budget", [0, 5, 20, 50, 150])
def test_a_tool_group_reaches_on_evict_in_one_batch(budget: int) -> None:
    batches: list[list[ChatMessage]] = []
    wm = WorkingMemory(max_tokens=budget, on_evict=batches.append)
    c1, c2 = ToolCall(id="c1", name="s", arguments="{}"), ToolCall(id="c2", name="s", arguments="{}")
    steps = [
        ChatMessage(role="user", content="q1"),
        ChatMessage(role="assistant", content="thinking", tool_calls=(c1,)),
        ChatMessage(role="tool", tool_call_id="c1", content="big " * 100),
        ChatMessage(role="assistant", content="more", tool_calls=(c2,)),
        ChatMessage(role="tool", tool_call_id="c2", content="big " * 100),
        ChatMessage(role="assistant", content="answer"),
        ChatMessage(role="user", content="q2"),
        ChatMessage(role="assistant", content="a2"),
        ChatMessage(role="user", content="q3"),
    ]
    for step in steps:  # a window is built after every message, as an agent loop does
        wm.add(step)
        wm.window()
    for cid in ("c1", "c2"):
        holding = [b for b in batches if any(m.tool_call_id == cid or cid in {c.id for c in m.tool_calls} for m in b)]
        assert len(holding) <= 1, f"call {cid} and its result were evicted in different batches"
        if holding:
            assert {m.role for m in holding[0] if m.tool_call_id == cid or m.tool_calls} == {"assistant", "tool"}
    assert batches, "something was evicted"


def test_a_lone_surrogate_never_blocks_the_window_or_loses_evicted_messages() -> None:
    from memlineage.testing import make_manager
    from memlineage.window import WriteGateSink

    mm = make_manager()
    wm = WorkingMemory(max_tokens=0, on_evict=WriteGateSink(mm, scope="alice"))
    wm.add(ChatMessage(role="user", content="hello there"))
    wm.add({"role": "assistant", "content": "broken \ud800 text from a model"})
    wm.add(ChatMessage(role="user", content="next question"))
    wm.window()
    wm.add(ChatMessage(role="assistant", content="fine"))
    wm.add(ChatMessage(role="user", content="third"))
    wm.window()  # later builds keep working
    stored = sorted(m.content for m in mm.find(scope="alice"))
    assert stored == ["broken \ufffd text from a model", "fine", "hello there", "next question"]
    assert wm.tokens_of(ChatMessage(role="user", content="x\udc00y")) > wm.message_overhead


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_token_cuts_end_at_a_character_boundary(encoding: str) -> None:
    """Chinese and emoji span several bytes a token may split: no cut leaves a U+FFFD in the prompt."""
    from memlineage.window import fit_to_budget

    text = "我们明天去东京塔看日落🌅，然后吃寿司🍣和拉面🍜，晚上去涩谷🎌散步。👨‍👩‍👧 " * 20
    for budget in range(6, 80):
        lines = fit_to_budget(["header", text], budget, encoding=encoding)
        assert not any("\ufffd" in line for line in lines)
        assert sum(count_tokens(line, encoding) for line in lines) + len(lines) - 1 <= budget
    for cap in (100, 400, 900):
        wm = WorkingMemory(encoding=encoding)
        call = ToolCall(id="c1", name="guide", arguments="{}")
        wm.extend(
            [
                ChatMessage(role="user", content="东京有什么好玩的？"),
                ChatMessage(role="assistant", tool_calls=(call,)),
                ChatMessage(role="tool", tool_call_id="c1", content=text * 3),
            ]
        )
        out = wm.render(context_tokens=cap)
        assert out.truncated and not any("\ufffd" in m.content for m in out.messages)
        assert out.tokens <= cap


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_shipped_encodings_match_tiktoken_and_leave_the_environment_alone(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: the shipped encodings are built from their files without setting ``TIKTOKEN_CACHE_DIR``."""
    import os

    import tiktoken
    from memlineage import window_tokens

    monkeypatch.setattr(window_tokens, "_ENCODINGS", {})
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    seen: list[str | None] = []
    real = tiktoken.Encoding.__init__

    def spy(self: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(os.environ.get("TIKTOKEN_CACHE_DIR"))
        real(self, *args, **kwargs)

    monkeypatch.setattr(tiktoken.Encoding, "__init__", spy)
    mine = window_tokens.get_encoding(name)
    assert seen == [None] and "TIKTOKEN_CACHE_DIR" not in os.environ  # never set, not even during the load
    monkeypatch.setattr(tiktoken.Encoding, "__init__", real)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(window_tokens._CACHE_DIR))  # tiktoken's own loader, offline
    reference = tiktoken.get_encoding(name)
    for text in ("Hello <|endoftext|> world", "我住在上海 😀", "def f(x):\n    return x ** 2\n", "a  b\t\tc"):
        assert mine.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
        assert mine.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())
