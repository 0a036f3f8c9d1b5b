"""`memlineage demo`: the LangChain AgentExecutor story and the core story run offline end to end."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from memlineage.cli import app
from memlineage.errors import InvalidInputError
from memlineage.index import default_model_dir
from memlineage.models import short_id
from rich.console import Console
from typer.testing import CliRunner

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (default_model_dir() / "model.onnx").is_file(), reason="embedding model files not available offline"
    ),
]


def test_agent_demo_story(tmp_path: Path) -> None:
    from memlineage_langchain._demo import run_agent_demo

    console = Console(record=True, width=120)
    summary = run_agent_demo(tmp_path / "store", console)
    text = console.export_text()
    # Only what rested on the destination: the two Paris tool results and the recommendation built on them
    # (not the acknowledgement, not the user's request).
    assert summary["suspect_sources"] == ["agent", "tool:get_flight_price", "tool:search_hotels"]
    assert "via arguments" in text and "via results" in text and "<-arguments-" in text
    assert summary["stale_served"] is False
    assert summary["refreshed"] is True
    assert summary["lookups"] == 3  # Paris, Lyon, and the freshness refresh
    assert all(Path(p).exists() for p in summary["pictures"])
    assert "flowchart BT" in (tmp_path / "store" / "lineage.mmd").read_text()
    assert "Recommendation: Flight to Lyon" in text
    assert "builtin.freshness.flight_price" in text
    assert "why suspect: premise" in text and "expired" in text

    # The store the demo leaves reads the same afterwards, on the real clock: a new process opening it (CLI or app)
    # sees the statuses the demo ended with, and a recall (which expires what is past its TTL) changes nothing.
    from memlineage import MemoryManager, Scope

    runner = CliRunner()
    cli_stats = runner.invoke(app, ["stats", "--path", str(tmp_path / "store"), "--user", "alice"])
    assert cli_stats.exit_code == 0, cli_stats.output
    assert json.loads(cli_stats.output)["by_status"] == summary["stats"]["by_status"]
    with MemoryManager.open(tmp_path / "store") as mm:
        res = mm.recall("flight price to Lyon", scope=Scope(user_id="alice"), k=5)
        assert any("Lyon" in h.content and str(h.memory.source) == "tool:get_flight_price" for h in res)
        assert mm.stats(Scope(user_id="alice"))["by_status"] == summary["stats"]["by_status"]


def test_travel_world_clock_ends_before_the_real_time() -> None:
    from datetime import datetime, timezone

    from memlineage_langchain._demo import STORY_SPAN, TravelWorld

    before = datetime.now(timezone.utc)
    world = TravelWorld()
    assert before - STORY_SPAN - timedelta(minutes=1) <= world.clock() <= before - STORY_SPAN + timedelta(minutes=1)
    world.advance(2.5)  # the story's span
    assert world.clock() < datetime.now(timezone.utc)
    assert TravelWorld(start=before).fare("Lyon", "2026-05-03").startswith("Flight to Lyon")
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        TravelWorld(start=datetime(2026, 4, 20, 9, 0))


def test_cli_core_demo_and_views(tmp_path: Path) -> None:
    runner = CliRunner()
    store = tmp_path / "core"
    result = runner.invoke(app, ["demo", "--core", "--path", str(store)])
    assert result.exit_code == 0, result.output
    assert "cascade marked 2 derived memories suspect" in result.output
    stats = runner.invoke(app, ["stats", "--path", str(store), "--user", "alice"])
    assert stats.exit_code == 0 and '"suspect": 2' in stats.output
    recall = runner.invoke(app, ["recall", "hotel", "--user", "alice", "--path", str(store)])
    assert recall.exit_code == 0 and "Lumière" not in recall.output
    audit = runner.invoke(app, ["audit", "--user", "alice", "--path", str(store)])
    assert audit.exit_code == 0 and "superseded" in audit.output
    bad = runner.invoke(app, ["explain", "nope", "--user", "alice", "--path", str(store)])
    assert bad.exit_code == 2 and "no memory" in bad.output


def test_cli_explain_accepts_the_short_ids_recall_prints(tmp_path: Path) -> None:
    from memlineage import MemoryManager, Scope
    from memlineage.testing import FakeEmbedder

    store = tmp_path / "s"
    with MemoryManager.open(store, embedder=FakeEmbedder()) as mm:
        m = mm.remember("short ids work", scope=Scope(user_id="alice"))
    result = CliRunner().invoke(app, ["explain", short_id(m.id), "--user", "alice", "--path", str(store)])
    assert result.exit_code == 0, result.output
    assert "short ids work" in result.output


def test_demo_refuses_a_used_path_and_a_model_it_cannot_build_leaving_nothing(tmp_path: Path) -> None:
    runner = CliRunner()
    used = tmp_path / "used"
    used.mkdir()
    (used / "ledger.db").write_bytes(b"an earlier run")
    result = runner.invoke(app, ["demo", "--path", str(used)])
    assert result.exit_code == 2 and "not an empty directory" in result.output
    assert sorted(p.name for p in used.iterdir()) == ["ledger.db"]
    fresh = tmp_path / "fresh"
    for spec, words in (("openai:gpt-4o-mini", "langchain-openai"), ("nonsense:zzz", "init_chat_model")):
        result = runner.invoke(app, ["demo", "--path", str(fresh), "--model", spec])
        assert result.exit_code == 2 and words in result.output, result.output
        assert not fresh.exists()  # the model is built before the store: a bad spec leaves nothing behind
