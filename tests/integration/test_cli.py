"""The `memlineage` CLI: refuses a missing store, reads settings, reads while an app holds the store, readable audit
and activities (issue 17)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from memlineage import Activity, MemoryManager, Scope
from memlineage.cli import app
from memlineage.index import InMemoryIndex, default_model_dir
from memlineage.models import short_id
from typer.testing import CliRunner

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (default_model_dir() / "model.onnx").is_file(), reason="embedding model files not available offline"
    ),
]

runner = CliRunner()


@pytest.fixture
def no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A clean environment: no MEMLINEAGE_HOME / LEDGER_URL / CHROMA_HOST, cwd in a fresh directory."""
    for var in ("MEMLINEAGE_HOME", "MEMLINEAGE_LEDGER_URL", "MEMLINEAGE_CHROMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def _seed(store: Path) -> dict[str, str]:
    alice = Scope(user_id="alice", session_id="trip")
    with MemoryManager.open(store) as mm:
        city = mm.remember("I am travelling to Lisbon in May", scope=alice, source="user")
        mm.record_activity(Activity(id="run-1", kind="agent_run", name="AgentExecutor", scope=alice))
        mm.record_activity(
            Activity(
                id="tool-ok",
                kind="tool_call",
                name="search_hotels",
                parent_id="run-1",
                scope=alice,
                metadata={"input": "{'city': 'Lisbon'}"},
            )
        )
        mm.end_activity("tool-ok", scope=alice, outcome="success")
        mm.record_activity(Activity(id="tool-bad", kind="tool_call", name="get_price", parent_id="run-1", scope=alice))
        mm.end_activity("tool-bad", scope=alice, outcome="error", metadata={"error": "TimeoutError('price api')"})
        mm.record_activity(Activity(id="run-2", kind="agent_run", name="AgentExecutor", scope=alice))
        mm.record_activity(Activity(id="tool-late", kind="tool_call", name="weather", parent_id="run-2", scope=alice))
        hotel = mm.remember(
            "Hotel Alfama 95 EUR",
            scope=alice,
            source="tool:search_hotels",
            derived_from=[city.id],
            activity_id="tool-ok",
        )
        mm.remember("Book Hotel Alfama", scope=alice, source="agent", derived_from=[hotel.id])
        mm.remember("bob's secret", scope=Scope(user_id="bob"))
    return {"city": city.id, "hotel": hotel.id}


def test_a_missing_store_is_refused_unless_create(no_settings: Path, tmp_path: Path) -> None:
    typo = tmp_path / "typo"
    out = runner.invoke(app, ["recall", "x", "--user", "alice", "--path", str(typo)])
    assert out.exit_code == 2
    assert "no MemLineage store" in out.output and "--create" in out.output
    assert not typo.exists()
    out = runner.invoke(app, ["stats"])
    assert out.exit_code == 2 and not (no_settings / ".memlineage").exists()
    out = runner.invoke(app, ["stats", "--path", str(typo), "--create"])
    assert out.exit_code == 0, out.output
    assert (typo / "ledger.db").is_file() and '"memories": 0' in out.output


def test_settings_and_options_select_the_store(no_settings: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    store = tmp_path / "app"
    _seed(store)
    monkeypatch.setenv("MEMLINEAGE_HOME", str(store))
    out = runner.invoke(app, ["stats", "--user", "alice"])
    assert out.exit_code == 0, out.output
    assert '"memories": 3' in out.output
    # a ledger that lives elsewhere (as a server ledger does): setting and option both work
    url = f"sqlite:///{store / 'ledger.db'}"
    monkeypatch.setenv("MEMLINEAGE_HOME", str(tmp_path / "elsewhere"))
    out = runner.invoke(app, ["stats", "--user", "alice", "--ledger-url", url])
    assert out.exit_code == 0 and '"memories": 3' in out.output, out.output
    monkeypatch.setenv("MEMLINEAGE_LEDGER_URL", url)
    out = runner.invoke(app, ["recall", "Lisbon trip", "--user", "alice"])
    assert out.exit_code == 0 and "Lisbon" in out.output, out.output
    assert not (tmp_path / "elsewhere").exists()


def test_server_ledger_from_settings_and_missing_schema(pg_schema, monkeypatch: pytest.MonkeyPatch, no_settings):
    out = runner.invoke(app, ["stats", "--ledger-url", pg_schema.url])
    assert out.exit_code == 2 and "no MemLineage tables" in out.output, out.output
    with MemoryManager.open(ledger_url=pg_schema.url, index=InMemoryIndex()) as mm:
        mm.remember("server memory one", scope="alice")
        mm.remember("server memory two", scope="alice")
    monkeypatch.setenv("MEMLINEAGE_LEDGER_URL", pg_schema.url)
    out = runner.invoke(app, ["stats", "--user", "alice"])
    assert out.exit_code == 0 and '"memories": 2' in out.output, out.output
    out = runner.invoke(app, ["recall", "server memory", "--user", "alice", "--json"])
    assert out.exit_code == 0, out.output
    assert sorted(r["content"] for r in json.loads(out.stdout)) == ["server memory one", "server memory two"]


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from memlineage import MemoryManager
    store, ready, stop = map(Path, sys.argv[1:4])
    with MemoryManager.open(store) as mm:
        mm.remember("written while the app runs: Porto day trip", scope="alice", source="user")
        mm.flush_index()  # its Chroma write (behind the ledger commit) is done: the app writes nothing more
        ready.write_text("ok")
        deadline = time.time() + 120
        while not stop.exists() and time.time() < deadline:
            time.sleep(0.05)
    """
)


def test_read_only_views_work_while_an_app_holds_the_store(tmp_path: Path, no_settings: Path) -> None:
    store = tmp_path / "app"
    _seed(store)
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(store), str(ready), str(stop)])
    try:
        deadline = time.time() + 120
        while not ready.exists():
            assert holder.poll() is None, "the app process died"
            assert time.time() < deadline
            time.sleep(0.05)
        before = (store / "ledger.db").stat().st_mtime_ns, (store / "ledger.db-wal").stat().st_size
        out = runner.invoke(app, ["recall", "Porto", "--user", "alice", "--path", str(store)])
        assert out.exit_code == 0, out.output
        assert "Porto day trip" in out.output  # sees the app's own, uncheckpointed write
        for args in (["stats"], ["audit", "--user", "alice"], ["activities", "--user", "alice"]):
            res = runner.invoke(app, [*args, "--path", str(store)])
            assert res.exit_code == 0, (args, res.output)
        assert ((store / "ledger.db").stat().st_mtime_ns, (store / "ledger.db-wal").stat().st_size) == before
        live = runner.invoke(app, ["stats", "--path", str(store), "--live"])
        assert live.exit_code == 2 and "drop --live" in live.output
    finally:
        stop.write_text("stop")
        holder.wait(timeout=60)
    with MemoryManager.open(store) as mm:  # the reads left no trace: no usage recorded
        assert all(m.use_count == 0 for m in mm.find(scope="alice"))


def test_audit_is_one_readable_row_per_event_and_json_for_machines(tmp_path: Path, no_settings: Path) -> None:
    store = tmp_path / "app"
    ids = _seed(store)
    with MemoryManager.open(store) as mm:
        mm.supersede(ids["city"], "I am travelling to Porto in May", scope="alice", source="user")
        n_events = len(mm.audit("alice"))
    out = runner.invoke(app, ["audit", "--user", "alice", "--path", str(store), "--limit", "100"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert len(lines) == n_events
    suspect = [line for line in lines if " suspect " in line]
    assert suspect and "premise" in suspect[0] and short_id(ids["hotel"]) in "".join(suspect)
    assert any(" policy_decision " in line and " -> " in line for line in lines)
    assert "bob" not in out.stdout
    data = json.loads(runner.invoke(app, ["audit", "--user", "alice", "--path", str(store), "--json"]).stdout)
    assert len(data) == n_events and {"at", "type", "memory_id", "data"} <= set(data[0])
    only = runner.invoke(app, ["audit", "--user", "alice", "--path", str(store), "--type", "superseded"])
    assert len(only.stdout.splitlines()) == 1


def test_activities_list_a_runs_tool_calls_and_failures(tmp_path: Path, no_settings: Path) -> None:
    store = tmp_path / "app"
    _seed(store)
    base = ["activities", "--user", "alice", "--path", str(store)]
    out = runner.invoke(app, [*base, "--run", "run-1"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and "weather" not in out.stdout
    assert "search_hotels" in lines[1] and "{'city': 'Lisbon'}" in lines[1]
    failed = runner.invoke(app, [*base, "--failed"]).stdout.splitlines()
    assert len(failed) == 1 and "get_price" in failed[0] and "TimeoutError" in failed[0]
    data = json.loads(runner.invoke(app, [*base, "--kind", "tool_call", "--json"]).stdout)
    assert [a["id"] for a in data] == ["tool-ok", "tool-bad", "tool-late"]
    assert runner.invoke(app, [*base, "--run", "nope"]).exit_code == 2
    assert runner.invoke(app, ["activities", "--user", "bob", "--path", str(store), "--run", "run-1"]).exit_code == 2


def test_unknown_formats_types_and_kinds_are_named_not_silently_ignored(tmp_path: Path, no_settings: Path) -> None:
    store = tmp_path / "app"
    ids = _seed(store)
    bad = runner.invoke(app, ["explain", ids["hotel"], "--user", "alice", "--path", str(store), "--format", "png"])
    assert bad.exit_code == 2 and "unknown --format 'png'" in bad.output and "prov-json" in bad.output
    none = runner.invoke(app, ["audit", "--user", "alice", "--path", str(store), "--type", "bogus"])
    assert none.exit_code == 0 and "no events of type bogus" in none.stderr and "created" in none.stderr
    acts = runner.invoke(app, ["activities", "--user", "alice", "--path", str(store), "--kind", "bogus"])
    assert acts.exit_code == 0 and "kinds in this log: agent_run" in acts.stderr and "tool_call" in acts.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["stats"],
        ["recall", "anything", "--user", "alice"],
        ["migrate"],
        ["stats", "--create"],
    ],
)
def test_errors_never_print_the_ledger_password(command: list[str], no_settings: Path) -> None:
    """Issue 27: a failing server ledger is one readable line without the URL's password."""
    url = "postgresql+psycopg://mluser:hunter2-s3cret@127.0.0.1:5432/no_such_database_here"
    out = runner.invoke(app, [*command, "--ledger-url", url])
    assert out.exit_code == 2, out.output
    assert "hunter2-s3cret" not in out.output and "Traceback" not in out.output
    assert "mluser:***@" in out.output or "cannot" in out.output


def test_a_chroma_server_elsewhere_is_named_and_reached_with_chroma_port(
    pg_schema, chroma_server, no_settings: Path
) -> None:
    """Issue 27/28: ``--chroma-port`` picks the server's port; a wrong one is one line naming host and port."""
    with MemoryManager.open(ledger_url=pg_schema.url, index=InMemoryIndex()) as mm:
        mm.remember("a server memory about kayaks", scope="alice")
    base = ["stats", "--user", "alice", "--ledger-url", pg_schema.url, "--chroma-host", chroma_server.host]
    wrong = runner.invoke(
        app, [*base, "--chroma-port", str(chroma_server.port + 1 if chroma_server.port < 65535 else 1)]
    )
    assert wrong.exit_code == 2 and "cannot reach the Chroma server" in wrong.output, wrong.output
    assert "--chroma-port" in wrong.output and "Traceback" not in wrong.output and len(wrong.output.splitlines()) < 6
    right = runner.invoke(app, [*base, "--chroma-port", str(chroma_server.port)])
    assert right.exit_code == 0 and '"memories": 1' in right.output, right.output


def test_version_and_the_write_side_commands(tmp_path: Path, no_settings: Path) -> None:
    """Issue 28: ``--version``; undo, revalidate, erase, verify, reindex and sweep from the CLI, destructive ones
    confirmed (no terminal and no ``--yes``: refused, nothing changed)."""
    from memlineage import Status

    out = runner.invoke(app, ["--version"])
    assert out.exit_code == 0 and out.output.startswith("memlineage "), out.output
    store = tmp_path / "store"
    alice, bob = Scope(user_id="alice"), Scope(user_id="bob")
    with MemoryManager.open(store) as mm:
        paris = mm.remember("I live in Paris.", scope=alice)
        mm.remember("I moved to Berlin.", scope=alice)
        decision = mm.explain(paris.id, scope=alice).decisions[0].id
        premise = mm.remember("The museum opens at 9.", scope=alice, source="tool:web")
        plan = mm.remember("Go to the museum at 9.", scope=alice, source="agent", derived_from=[premise.id])
        mm.retract(premise.id, scope=alice, reason="wrong hours")
        mm.remember("bob's diary entry", scope=bob)
    where = ["--path", str(store)]

    out = runner.invoke(app, ["undo", short_id(decision), "--user", "alice", *where])  # the short id works
    assert out.exit_code == 0 and "undone" in out.output, out.output
    out = runner.invoke(app, ["revalidate", short_id(plan.id), "--user", "alice", *where])
    assert out.exit_code == 0 and "active" in out.output, out.output
    out = runner.invoke(app, ["erase", "--user", "bob", *where])  # no terminal, no --yes: refused
    assert out.exit_code == 2 and "--yes" in out.output, out.output
    with MemoryManager.open(store) as mm:
        assert mm.stats(bob)["memories"] == 1
    out = runner.invoke(app, ["erase", "--user", "bob", "--yes", *where])
    assert out.exit_code == 0 and '"user_id": "bob"' in out.output, out.output
    for command in (["verify"], ["verify", "--fix"], ["reindex"], ["sweep", "--yes"]):
        out = runner.invoke(app, [*command, *where])
        assert out.exit_code == 0, (command, out.output)
    with MemoryManager.open(store) as mm:
        assert mm.require(paris.id, scope=alice).status is Status.ACTIVE  # the undo held
        assert mm.require(plan.id, scope=alice).status is Status.ACTIVE
        assert mm.find(scope=bob) == [] and mm.verify().ok


def test_an_unreachable_chroma_server_is_one_line_on_every_live_command(tmp_path: Path, no_settings: Path) -> None:
    """Issue 27: a live command (here verify) with a Chroma server that does not answer: exit 2, one line."""
    store = tmp_path / "store"
    assert runner.invoke(app, ["stats", "--path", str(store), "--create"]).exit_code == 0
    out = runner.invoke(app, ["verify", "--path", str(store), "--chroma-host", "127.0.0.1", "--chroma-port", "1"])
    assert out.exit_code == 2 and "cannot reach the Chroma server at 127.0.0.1:1" in out.output, out.output
    assert "Traceback" not in out.output and len(out.output.strip().splitlines()) <= 3
