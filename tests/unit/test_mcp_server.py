"""The MCP server in process: error handling and packaging (end to end: tests/integration/test_mcp.py)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from memlineage import Scope
from memlineage.testing import make_manager

pytest.importorskip("mcp")

from mcp import types  # noqa: E402
from mcp.shared.memory import create_connected_server_and_client_session  # noqa: E402
from memlineage.mcp_server import MemoryMCP  # noqa: E402

ALICE = Scope(user_id="alice")


def test_the_cli_loads_the_mcp_sdk_only_for_the_mcp_command() -> None:
    code = "import sys, memlineage.cli\nprint(sorted(m for m in ('mcp', 'uvicorn', 'starlette') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_a_failing_store_is_a_tool_error_that_reveals_nothing_and_the_server_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mm = make_manager()
    server = MemoryMCP(mm, ALICE).server
    real_recall = mm.recall

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("connection to db-secret-host:5432 lost")

    client = types.Implementation(name="unit-client", version="1.0")
    async with create_connected_server_and_client_session(server._mcp_server, client_info=client) as session:
        assert not (await session.call_tool("remember", {"content": "I like tea"})).isError
        monkeypatch.setattr(mm, "recall", broken)
        failed = await session.call_tool("search_memory", {"query": "tea"})
        assert failed.isError
        text = failed.content[0].text  # type: ignore[union-attr]
        assert "RuntimeError" in text and "db-secret-host" not in text
        monkeypatch.setattr(mm, "recall", real_recall)
        again = await session.call_tool("search_memory", {"query": "tea"})
        assert not again.isError and "I like tea" in again.content[0].text  # type: ignore[union-attr]
    calls = mm.activities(ALICE, kinds=["tool_call"])
    assert [(a.name, a.outcome) for a in calls] == [
        ("remember", "success"), ("search_memory", "error"), ("search_memory", "success"),
    ]  # fmt: skip
    assert "db-secret-host" not in calls[1].metadata["error"]
    assert calls[0].metadata["client"] == {"name": "unit-client", "version": "1.0"}
    mm.close()


def test_a_server_needs_a_user_unless_each_request_names_one() -> None:
    from memlineage.errors import InvalidInputError

    mm = make_manager()
    with pytest.raises(InvalidInputError, match="needs a user"):
        MemoryMCP(mm, None)
    MemoryMCP(mm, None, allow_user_header=True)
    mm.close()
