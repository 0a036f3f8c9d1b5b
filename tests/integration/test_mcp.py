"""`memlineage mcp`: the MCP server end to end with the SDK's own clients, over stdio and streamable HTTP (issue 28).

The scope is the server's, never the model's; every tool call is an activity carrying the client's name; errors are
MCP tool errors that reveal nothing about other users; corrections made through MCP make dependants suspect.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from memlineage import MemoryManager, Scope
from memlineage.index import default_model_dir
from memlineage.models import short_id
from typer.testing import CliRunner

mcp = pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, types  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import McpError  # noqa: E402

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (default_model_dir() / "model.onnx").is_file(), reason="embedding model files not available offline"
    ),
]

CLIENT = types.Implementation(name="memlineage-test-client", version="9.8.7")
TOOLS = {"search_memory", "remember", "correct_memory", "forget_memory", "explain_memory"}
ALICE = Scope(user_id="alice")
BOB = Scope(user_id="bob")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["MEMLINEAGE_EMBEDDING_MODEL_DIR"] = str(default_model_dir())
    env["ANONYMIZED_TELEMETRY"] = "False"
    for var in ("MEMLINEAGE_HOME", "MEMLINEAGE_LEDGER_URL", "MEMLINEAGE_CHROMA_HOST", "MEMLINEAGE_MCP_USER"):
        env.pop(var, None)
    return env


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _ok(result: types.CallToolResult) -> str:
    assert not result.isError, _text(result)
    return _text(result)


def _error(result: types.CallToolResult) -> str:
    assert result.isError, _text(result)
    return _text(result)


def _marker(text: str) -> str:
    m = re.search(r"\[m:([0-9a-f]{8})\]", text)
    assert m, text
    return f"m:{m.group(1)}"


def _same_answer(a: str, b: str) -> None:
    """Two error texts that differ only in the ids they quote (so one reveals no more than the other)."""
    strip = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){0,4}([0-9a-f]{8})?")
    assert strip.sub("<id>", a) == strip.sub("<id>", b)


def _seed(store: Path) -> dict[str, str]:
    """Alice: a fact and a conclusion derived from it; Bob: a secret. Written through the library."""
    with MemoryManager.open(store) as mm:
        fact = mm.remember("I live in Paris", scope=ALICE, source="user")
        airport = mm.remember(
            "The user's nearest airport is Charles de Gaulle", scope=ALICE, source="agent", derived_from=[fact.id]
        )
        secret = mm.remember("Bob's vault code is 4321", scope=BOB, source="user")
    return {"fact": fact.id, "airport": airport.id, "secret": secret.id}


async def _check_tools_and_templates(session: ClientSession) -> None:
    tools = (await session.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:  # the scope is never a tool argument
        assert not {"user", "user_id", "scope", "agent_id", "session_id"} & set(tool.inputSchema.get("properties", {}))
    templates = (await session.list_resource_templates()).resourceTemplates
    assert [t.uriTemplate for t in templates] == ["memlineage://memory/{memory_id}/lineage"]


async def _lineage(session: ClientSession, memory_id: str) -> dict[str, Any]:
    res = await session.read_resource(f"memlineage://memory/{memory_id}/lineage")  # type: ignore[arg-type]
    content = res.contents[0]
    assert isinstance(content, types.TextResourceContents)
    return json.loads(content.text)


# ---------------------------------------------------------------------------------------------------- stdio
async def test_stdio_tools_lineage_scope_and_activities(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = _seed(store)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memlineage.cli", "mcp", "--path", str(store), "--user", "alice"],
        env=_env(),
        cwd=str(tmp_path),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, client_info=CLIENT) as session:
        await session.initialize()
        await _check_tools_and_templates(session)

        # remember, then search finds it
        tea = _marker(_ok(await session.call_tool("remember", {"content": "I drink green tea", "origin": "user"})))
        found = _ok(await session.call_tool("search_memory", {"query": "green tea", "k": 3}))
        assert tea in found and "green tea" in found

        # correct the fact (written by the library) through MCP: the conclusion derived from it becomes suspect
        fixed = _ok(
            await session.call_tool(
                "correct_memory", {"memory_id": f"m:{short_id(ids['fact'])}", "new_content": "I live in Berlin"}
            )
        )
        assert f"m:{short_id(ids['airport'])}" in fixed and "suspect" in fixed
        airport = _ok(await session.call_tool("search_memory", {"query": "nearest airport", "k": 5}))
        line = next(x for x in airport.splitlines() if short_id(ids["airport"]) in x)
        assert "suspect" in line

        # explain: the conclusion rests on the (now superseded) Paris fact
        why = _ok(await session.call_tool("explain_memory", {"memory_id": f"[m:{short_id(ids['airport'])}]"}))
        assert "suspect" in why and '"I live in Paris"' in why and "<recalled_memories>" in why  # quoted lines

        # the lineage resource, both ways
        lin = await _lineage(session, ids["airport"])
        assert lin["memory"]["status"] == "suspect"
        assert ids["fact"] in [m["id"] for m in lin["ancestors"]]
        up = await _lineage(session, f"m:{short_id(ids['fact'])}")
        assert up["memory"]["status"] == "superseded"
        assert ids["airport"] in [m["id"] for m in up["descendants"]]

        # forget
        assert "Withdrew" in _ok(await session.call_tool("forget_memory", {"memory_id": tea, "reason": "user asked"}))
        assert tea not in _ok(await session.call_tool("search_memory", {"query": "green tea"}))

        # a tool argument cannot choose the user: refused, and nothing is written anywhere
        refused = _error(await session.call_tool("remember", {"content": "Bob likes jazz", "user_id": "bob"}))
        assert "user_id" in refused and "configuration" in refused
        # another user's memory: the same answer as an id that exists nowhere, and no content
        theirs = _error(await session.call_tool("explain_memory", {"memory_id": ids["secret"]}))
        nowhere = _error(await session.call_tool("explain_memory", {"memory_id": "0" * 8 + ids["secret"][8:]}))
        _same_answer(theirs, nowhere)
        assert "4321" not in theirs
        assert "4321" not in _text(await session.call_tool("search_memory", {"query": "vault code"}))
        for args in ({"memory_id": ids["secret"], "new_content": "x"}, {"memory_id": ids["secret"], "reason": "x"}):
            tool = "correct_memory" if "new_content" in args else "forget_memory"
            assert "4321" not in _error(await session.call_tool(tool, args))
        with pytest.raises(McpError) as exc:
            await _lineage(session, ids["secret"])
        assert "4321" not in str(exc.value)
        # bad input is a tool error, and the server keeps serving
        _error(await session.call_tool("remember", {"content": "   "}))
        _error(await session.call_tool("search_memory", {"query": "tea", "k": 99}))
        _ok(await session.call_tool("search_memory", {"query": "Berlin"}))

    # the server has exited (stdin closed) and released the store
    with MemoryManager.open(store) as mm:
        assert mm.get(ids["airport"], scope=ALICE).status.value == "suspect"  # type: ignore[union-attr]
        assert [m.content for m in mm.find(scope=BOB)] == ["Bob's vault code is 4321"]
        assert mm.activities(BOB) == []
        calls = mm.activities(ALICE, kinds=["tool_call"])
        assert len(calls) == 16
        for act in calls:
            assert act.metadata["client"] == {"name": "memlineage-test-client", "version": "9.8.7"}
            assert act.metadata["transport"] == "stdio"
            assert act.outcome in ("success", "error")
        assert {a.name for a in calls} == TOOLS
        # the memories MCP wrote were generated by the MCP call's activity (explain shows who wrote them)
        berlin = next(m for m in mm.find(scope=ALICE) if m.content == "I live in Berlin")
        assert berlin.lineage.activity_id in {a.id for a in calls if a.name == "correct_memory"}
        bad = [a for a in calls if a.metadata["input"].get("user_id") == "bob"]
        assert len(bad) == 1 and bad[0].outcome == "error" and "user_id" in bad[0].metadata["error"]


# ---------------------------------------------------------------------------------------------------- HTTP
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _http_in_thread(mm: MemoryManager, scope: Scope | None, **options: Any) -> Iterator[str]:
    """A MemLineage MCP server for ``scope`` on a free port, served by uvicorn in a thread; yields its URL."""
    import uvicorn
    from memlineage.mcp_server import build_server

    port = _free_port()
    app = build_server(mm, scope, port=port, **options).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the HTTP server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)


@asynccontextmanager
async def _http_session(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers=headers or {}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write, client_info=CLIENT) as session,
    ):
        await session.initialize()
        yield session


async def test_http_two_servers_two_users_never_meet(tmp_path: Path) -> None:
    with (
        MemoryManager.open(tmp_path / "store") as mm,
        _http_in_thread(mm, ALICE) as alice_url,
        _http_in_thread(mm, BOB) as bob_url,
    ):
        async with _http_session(alice_url) as alice, _http_session(bob_url) as bob:
            await _check_tools_and_templates(alice)
            passport = _marker(_ok(await alice.call_tool("remember", {"content": "My passport number is X123"})))
            full = next(m.id for m in mm.find(scope=ALICE) if short_id(m.id) == passport[2:])
            _marker(_ok(await bob.call_tool("remember", {"content": "My passport expires in 2031"})))

            # neither sees the other's memories
            assert "X123" not in _ok(await bob.call_tool("search_memory", {"query": "passport number"}))
            assert "2031" not in _ok(await alice.call_tool("search_memory", {"query": "passport expires"}))
            # Bob cannot reach Alice's memory by its id: the answer is the one for an id that exists nowhere
            for memory_id in (passport, full):
                theirs = _error(await bob.call_tool("explain_memory", {"memory_id": memory_id}))
                nowhere = _error(await bob.call_tool("explain_memory", {"memory_id": "m:00000000"}))
                _same_answer(theirs, nowhere)
                _error(await bob.call_tool("correct_memory", {"memory_id": memory_id, "new_content": "stolen"}))
                _error(await bob.call_tool("forget_memory", {"memory_id": memory_id, "reason": "because"}))
                with pytest.raises(McpError) as exc:
                    await _lineage(bob, memory_id)
                assert "X123" not in str(exc.value)
            # nor by arguments, nor by a header on a server that was not started to honour it
            _error(await bob.call_tool("search_memory", {"query": "passport", "user_id": "alice"}))
        async with _http_session(bob_url, {"X-MemLineage-User": "alice"}) as spoof:
            refused = _error(await spoof.call_tool("search_memory", {"query": "passport number"}))
            assert "X-MemLineage-User" in refused and "X123" not in refused

        mine = mm.get(full, scope=ALICE)
        assert mine is not None and mine.status.value == "active" and mine.content == "My passport number is X123"
        assert [m.content for m in mm.find(scope=BOB)] == ["My passport expires in 2031"]
        for scope in (ALICE, BOB):
            for act in mm.activities(scope, kinds=["tool_call"]):
                assert act.metadata["client"]["name"] == "memlineage-test-client"
                assert act.metadata["transport"] == "http"
                assert act.metadata.get("mcp_session")


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("the MCP server did not listen in time")


async def test_cli_http_per_connection_user_only_when_allowed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    port = _free_port()
    cmd = [sys.executable, "-m", "memlineage.cli", "mcp", "--transport", "http", "--port", str(port)]
    cmd += ["--path", str(store), "--create", "--user", "carol", "--allow-user-header"]
    log = tmp_path / "server.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, env=_env(), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait_for_port(port, proc, log)
        url = f"http://127.0.0.1:{port}/mcp"
        async with _http_session(url) as carol, _http_session(url, {"X-MemLineage-User": "dave"}) as dave:
            _ok(await carol.call_tool("remember", {"content": "Carol's locker is number 12"}))
            _ok(await dave.call_tool("remember", {"content": "Dave's locker is number 40"}))
            seen_by_dave = _ok(await dave.call_tool("search_memory", {"query": "locker number"}))
            seen_by_carol = _ok(await carol.call_tool("search_memory", {"query": "locker number"}))
            assert "Dave's locker" in seen_by_dave and "Carol" not in seen_by_dave
            assert "Carol's locker" in seen_by_carol and "Dave" not in seen_by_carol
    finally:
        proc.terminate()
        proc.wait(20)
    with MemoryManager.open(store) as mm:
        assert [m.content for m in mm.find(scope=Scope(user_id="carol"))] == ["Carol's locker is number 12"]
        assert [m.content for m in mm.find(scope=Scope(user_id="dave"))] == ["Dave's locker is number 40"]
        for user in ("carol", "dave"):
            acts = mm.activities(Scope(user_id=user), kinds=["tool_call"])
            assert [a.name for a in acts] == ["remember", "search_memory"]
            assert all(a.metadata["client"]["version"] == "9.8.7" for a in acts)


def test_cli_refuses_a_server_without_a_user_or_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlineage.cli import app

    monkeypatch.delenv("MEMLINEAGE_MCP_USER", raising=False)
    runner = CliRunner()
    res = runner.invoke(app, ["mcp", "--path", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "--user" in res.output
    res = runner.invoke(app, ["mcp", "--user", "alice", "--path", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "no MemLineage store" in res.output
    res = runner.invoke(app, ["mcp", "--user", "alice", "--allow-user-header"])
    assert res.exit_code == 2 and "--transport http" in res.output
