"""Activities are scoped like memories: every read and write carries a scope; framework ids never collide."""

from __future__ import annotations

import sqlite3

import pytest
from memlineage import Activity, InvalidInputError, MemoryManager, MemoryNotFoundError, Scope, ScopeViolationError
from memlineage.index import InMemoryIndex
from memlineage.ledger import Ledger
from memlineage.testing import FakeEmbedder


def test_same_tool_call_id_for_two_users_gives_two_activities(mm, alice, bob):
    a = mm.record_activity(Activity(kind="tool_call", name="hotels", run_id="r1", tool_call_id="call_1", scope=alice))
    b = mm.record_activity(Activity(kind="tool_call", name="hotels", run_id="r1", tool_call_id="call_1", scope=bob,
                                    metadata={"arguments": {"city": "Oslo"}}))  # fmt: skip
    assert a.id != b.id
    assert [x.id for x in mm.find_activities(alice, tool_call_id="call_1")] == [a.id]
    assert [x.id for x in mm.find_activities(bob, tool_call_id="call_1")] == [b.id]
    mm.end_activity(b.id, scope=bob, outcome="error", metadata={"error": "bob's secret error"})
    mine = mm.get_activity(a.id, scope=alice)
    assert mine is not None and mine.outcome is None and "error" not in mine.metadata


def test_another_users_activity_is_neither_readable_nor_writable(mm, alice, bob):
    act = mm.record_activity(Activity(id="run-1", kind="agent_run", scope=alice, metadata={"arguments": "private"}))
    assert mm.get_activity("run-1", scope=bob) is None
    assert mm.find_activities(bob) == []
    with pytest.raises(MemoryNotFoundError):
        mm.end_activity("run-1", scope=bob, outcome="error")
    with pytest.raises(ScopeViolationError):  # never takes over the first user's activity
        mm.record_activity(Activity(id="run-1", kind="agent_run", scope=bob))
    with pytest.raises(ScopeViolationError):  # nor links a memory to it
        mm.remember("I like tea", scope=bob, source="user", activity_id="run-1")
    assert mm.stats(bob)["memories"] == 0
    kept = mm.get_activity(act.id, scope=alice)
    assert kept is not None and kept.scope is not None and kept.scope.user_id == "alice"
    assert kept.metadata == {"arguments": "private"} and kept.outcome is None


def test_record_activity_needs_a_scope(mm, alice, bob):
    with pytest.raises(InvalidInputError, match="scope"):
        mm.record_activity(Activity(kind="run"))
    with pytest.raises(ScopeViolationError):
        mm.record_activity(Activity(kind="run", scope=alice), scope=bob)
    act = mm.record_activity(Activity(kind="run"), scope=alice)
    assert mm.get_activity(act.id, scope=alice) is not None


def test_tool_call_id_is_unique_per_user_and_run(mm, alice):
    mm.record_activity(Activity(kind="tool_call", run_id="r1", tool_call_id="call_1", scope=alice))
    mm.record_activity(Activity(kind="tool_call", run_id="r2", tool_call_id="call_1", scope=alice))  # other run
    with pytest.raises(InvalidInputError, match="already recorded"):
        mm.record_activity(Activity(kind="tool_call", run_id="r1", tool_call_id="call_1", scope=alice))
    assert len(mm.find_activities(alice, tool_call_id="call_1")) == 2
    assert len(mm.find_activities(alice, run_id="r1")) == 1


def test_find_activities_lists_failed_calls_of_a_run(mm, alice):
    ok = mm.record_activity(Activity(kind="tool_call", run_id="r1", tool_call_id="c1", scope=alice))
    bad = mm.record_activity(Activity(kind="tool_call", run_id="r1", tool_call_id="c2", scope=alice))
    mm.end_activity(ok.id, scope=alice)
    mm.end_activity(bad.id, scope=alice, outcome="error", metadata={"error": "hotel API down"})
    failed = mm.find_activities(alice, run_id="r1", outcome="error")
    assert [a.id for a in failed] == [bad.id] and failed[0].metadata["error"] == "hotel API down"


def test_explain_shows_only_own_activities(mm, alice, bob):
    act = mm.record_activity(Activity(kind="tool_call", name="hotels", scope=alice))
    mem = mm.remember("Hotel Lumière has rooms", scope=alice, source="tool:hotels", activity_id=act.id)
    assert [a.id for a in mm.explain(mem.id, scope=alice).activities] == [act.id]


def test_old_ledger_gains_the_new_columns(tmp_path):
    path = tmp_path / "ledger.db"
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE ml_activities (id VARCHAR(255) PRIMARY KEY, kind VARCHAR(64) NOT NULL, name VARCHAR(255),"
        " parent_id VARCHAR(255), user_id VARCHAR(255), agent_id VARCHAR(255), session_id VARCHAR(255),"
        " started_at FLOAT NOT NULL, ended_at FLOAT, outcome VARCHAR(32), meta JSON NOT NULL)"
    )
    con.execute("INSERT INTO ml_activities VALUES ('old', 'run', NULL, NULL, 'alice', NULL, NULL, 0, NULL, NULL, '{}')")
    con.commit()
    con.close()
    mm = MemoryManager(ledger=Ledger(f"sqlite:///{path}"), index=InMemoryIndex(), embedder=FakeEmbedder(), policy=None)
    try:
        alice = Scope(user_id="alice")
        assert mm.get_activity("old", scope=alice) is not None
        new = mm.record_activity(Activity(kind="tool_call", run_id="r", tool_call_id="c", scope=alice))
        assert mm.find_activities(alice, tool_call_id="c")[0].id == new.id
    finally:
        mm.close()


def test_activity_times_follow_the_stores_clock_so_nothing_ends_before_it_starts(alice):
    from datetime import datetime, timedelta, timezone

    now = {"t": datetime(2020, 1, 1, 12, 0, tzinfo=timezone.utc)}  # a simulated clock far behind the wall clock
    mm = MemoryManager(
        ledger=Ledger("sqlite://"), index=InMemoryIndex(), embedder=FakeEmbedder(), clock=lambda: now["t"]
    )
    act = mm.record_activity(Activity(id="run-1", kind="agent_run", scope=alice))
    assert act.started_at == now["t"]
    now["t"] += timedelta(minutes=5)
    mm.record_activity(Activity(id="run-1", kind="agent_run", scope=alice, metadata={"step": 2}))  # an update
    ended = mm.end_activity("run-1", scope=alice, outcome="success")
    assert ended.started_at == datetime(2020, 1, 1, 12, 0, tzinfo=timezone.utc)  # the update kept the start
    assert ended.ended_at == now["t"] and ended.ended_at >= ended.started_at
    given = datetime(2019, 6, 1, tzinfo=timezone.utc)
    assert mm.record_activity(Activity(id="run-2", kind="agent_run", scope=alice, started_at=given)).started_at == given
    mm.close()
