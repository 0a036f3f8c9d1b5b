"""The ledger and manager contract, run unchanged on SQLite and PostgreSQL (the ``ledger_url`` fixture)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from memlineage import (
    Activity,
    InMemoryIndex,
    MemoryManager,
    MemoryNotFoundError,
    Scope,
    Status,
    StorageError,
)
from memlineage.index import IndexFilter
from memlineage.ledger import Ledger
from memlineage.ledger._schema import events, memories
from memlineage.testing import FakeEmbedder
from sqlalchemy import event, select, text

pytestmark = pytest.mark.integration

ALICE = Scope(user_id="alice", session_id="s1")
BOB = Scope(user_id="bob", session_id="s2")


class Clock:
    """A settable UTC clock."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mm(ledger_url: str, clock: Clock) -> Iterator[MemoryManager]:
    manager = MemoryManager(ledger=Ledger(ledger_url), index=InMemoryIndex(), embedder=FakeEmbedder(), clock=clock)
    yield manager
    manager.close()


@pytest.fixture
def ann_mm(ledger_url: str, clock: Clock) -> Iterator[MemoryManager]:
    """A manager whose every memory goes to the (ANN) index: ``exact_max=0``."""
    manager = MemoryManager(
        ledger=Ledger(ledger_url), index=InMemoryIndex(), embedder=FakeEmbedder(), clock=clock, exact_max=0
    )
    yield manager
    manager.close()


def test_round_trip_keeps_every_field(mm: MemoryManager) -> None:
    meta = {"nested": {"a": [1, 2.5, None, "x"], "b": {"c": True}}, "city": "東京"}
    mem = mm.remember(
        "I live in Zürich 🇨🇭 — 我住在苏黎世",
        scope=ALICE,
        source="tool:geo_api",
        kind="semantic",
        tags=["home", "city"],
        metadata=meta,
        confidence=0.9,
        ttl=3600,
        slot="user/city",
        activity_id="run-1",
    )
    got = mm.require(mem.id, scope=ALICE)
    assert got.content == "I live in Zürich 🇨🇭 — 我住在苏黎世"
    assert got.metadata == meta
    assert got.tags == ("city", "home")
    assert got.lineage.source_kind.value == "tool" and got.lineage.source_name == "geo_api"
    assert got.created_at == mem.created_at  # epoch seconds keep microseconds on both backends
    assert got.expires_at == mem.expires_at
    assert got.created_at.tzinfo is not None
    assert got.slot == "user/city" and got.version == 1
    assert mm.get_activity("run-1", scope=ALICE) is not None


def test_duplicates_and_slots(mm: MemoryManager, clock: Clock) -> None:
    a = mm.remember("seat: aisle", scope=ALICE, kind="semantic", slot="seat")
    assert mm.remember("seat: aisle", scope=ALICE, kind="semantic", slot="seat").id == a.id
    clock.advance(1)
    b = mm.remember("seat: window", scope=ALICE, kind="semantic", slot="seat")
    assert b.version == 2 and b.supersedes == a.id
    assert mm.require(a.id, scope=ALICE).status is Status.SUPERSEDED
    types = [e.type for e in mm.audit(ALICE, memory_id=a.id)]
    assert types == ["created", "seen_again", "superseded"]


def test_recursive_walks_and_cascade(mm: MemoryManager) -> None:
    chain = [mm.remember("fact 0", scope=ALICE)]
    for i in range(1, 30):  # deep enough to exercise the recursive CTE
        chain.append(mm.remember(f"fact {i}", scope=ALICE, source="reasoning", derived_from=[chain[-1].id]))
    side = mm.remember("independent", scope=ALICE)
    both = mm.remember("conclusion", scope=ALICE, source="reasoning", derived_from=[chain[5].id, side.id])
    anc = [m.id for m in mm.ancestors(chain[-1].id, scope=ALICE)]
    assert anc == [m.id for m in reversed(chain[:-1])]
    desc = {m.id for m in mm.descendants(chain[0].id, scope=ALICE)}
    assert desc == {m.id for m in chain[1:]} | {both.id}
    assert set(mm.impact(chain[0].id, scope=ALICE).suspect) == desc
    report = mm.retract(chain[0].id, scope=ALICE, reason="wrong")
    assert set(report.suspect) == desc
    statuses = {m.id: m.status for m in mm.get_many([m.id for m in chain], scope=ALICE) if m}
    assert statuses[chain[0].id] is Status.RETRACTED
    assert all(statuses[m.id] is Status.SUSPECT for m in chain[1:])
    assert mm.require(side.id, scope=ALICE).status is Status.ACTIVE


def test_cascades_walk_once_and_reuse_the_walk_table(mm: MemoryManager, clock: Clock) -> None:
    """Each cascade walks the graph with one recursive statement, also several cascades in one transaction.

    PostgreSQL walks once more under the cascade's row locks (the walk that finds nothing new to lock); a dry run
    takes no locks.
    """
    walks = 1 if mm.ledger.is_sqlite else 2
    a, b = mm.remember("premise a", scope=ALICE, ttl=60), mm.remember("premise b", scope=ALICE, ttl=60)
    under_a = [mm.remember(f"from a {i}", scope=ALICE, source="reasoning", derived_from=[a.id]) for i in range(3)]
    under_b = [mm.remember(f"from b {i}", scope=ALICE, source="reasoning", derived_from=[b.id]) for i in range(2)]
    both = mm.remember("from both", scope=ALICE, source="reasoning", derived_from=[a.id, b.id])
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:  # noqa: ANN001 - SQLAlchemy's listener signature
        statements.append(statement)

    event.listen(mm.ledger.engine, "before_cursor_execute", count)
    try:
        dry = mm.impact(a.id, scope=ALICE)
        assert sum("RECURSIVE" in s for s in statements) == 1
        clock.advance(120)
        statements.clear()
        assert sorted(mm.expire_due(scope=ALICE)) == sorted([a.id, b.id])  # one transaction, two cascades
    finally:
        event.remove(mm.ledger.engine, "before_cursor_execute", count)
    assert sum("RECURSIVE" in s for s in statements) == 2 * walks
    assert set(dry.suspect) == {m.id for m in under_a} | {both.id}
    got = {m.id: m.status for m in mm.get_many([m.id for m in [*under_a, *under_b, both]], scope=ALICE) if m}
    assert set(got.values()) == {Status.SUSPECT}
    suspect_events = [e for e in mm.audit(ALICE) if e.type == "suspect"]
    assert sorted(e["memory_id"] for e in suspect_events) == sorted(got)  # one each: "both" only by the first


def test_the_sync_backlog_is_read_through_its_partial_index(mm: MemoryManager) -> None:
    """Only rows not ``indexed`` are in ``ix_ml_memories_backlog``, and the backlog query reaches that index."""
    kept = [mm.remember(f"fact {i}", scope=ALICE) for i in range(5)]
    mm.flush_index()
    assert mm.ledger.index_backlog() == []
    with mm.ledger.transaction() as conn:
        mm.ledger.update_memories(conn, [kept[1].id], {"index_state": "pending"})
    seen: list[tuple[str, object]] = []

    def keep(_conn, _cursor, statement, parameters, *_args) -> None:  # noqa: ANN001 - SQLAlchemy's signature
        seen.append((statement, parameters))

    event.listen(mm.ledger.engine, "before_cursor_execute", keep)
    try:
        assert [r["id"] for r in mm.ledger.index_backlog()] == [kept[1].id]
    finally:
        event.remove(mm.ledger.engine, "before_cursor_execute", keep)
    [(statement, parameters)] = seen
    with mm.ledger.read() as conn:
        if not mm.ledger.is_sqlite:
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")  # five rows: make the planner show its index
        plan = " ".join(
            str(r)
            for r in conn.exec_driver_sql(f"EXPLAIN {'QUERY PLAN ' * mm.ledger.is_sqlite}{statement}", parameters)
        )
    assert "ix_ml_memories_backlog" in plan


def test_corroboration_survives_retraction(mm: MemoryManager) -> None:
    p1 = mm.remember("the museum opens at 9", scope=ALICE, source="tool:web")
    p2 = mm.remember("the guide says 9 am", scope=ALICE, source="tool:guide")
    c = mm.remember("visit at 9", scope=ALICE, source="reasoning", derived_from=[p1.id])
    mm.remember("visit at 9", scope=ALICE, source="agent", derived_from=[p2.id])
    assert mm.retract(p1.id, scope=ALICE).suspect == []
    assert mm.require(c.id, scope=ALICE).status is Status.ACTIVE


def test_supersede_revalidate_explain(mm: MemoryManager) -> None:
    mm.record_activity(Activity(id="root", kind="run", scope=ALICE))
    mm.record_activity(Activity(id="child", kind="tool", parent_id="root", scope=ALICE))
    city = mm.remember("I live in Paris", scope=ALICE, kind="semantic", activity_id="child")
    hotel = mm.remember("Hotel Lumière", scope=ALICE, source="reasoning", derived_from=[city.id])
    rep = mm.supersede(city.id, "I live in Lyon", scope=ALICE)
    assert rep.suspect == [hotel.id] and rep.memory is not None
    assert mm.revalidate(hotel.id, scope=ALICE).status is Status.ACTIVE
    exp = mm.explain(hotel.id, scope=ALICE)
    assert [a.id for a in exp.ancestors] == [city.id]
    assert {a.id for a in exp.activities} == {"root", "child"}
    with pytest.raises(MemoryNotFoundError):
        mm.explain(hotel.id, scope=BOB)


def test_scopes_are_separate(mm: MemoryManager) -> None:
    a = mm.remember("alice likes tea", scope=ALICE)
    b = mm.remember("bob likes tea", scope=BOB)
    assert mm.get(a.id, scope=BOB) is None
    assert mm.recall("likes tea", scope=BOB, k=10).ids == [b.id]
    assert all(e["user_id"] == "bob" for e in mm.audit(BOB))
    assert mm.stats(BOB)["memories"] == 1


def test_batches_larger_than_one_chunk(mm: MemoryManager) -> None:
    items = [{"content": f"note number {i}", "scope": ALICE} for i in range(2100)]
    mems = mm.remember_many(items)
    assert len({m.id for m in mems}) == 2100
    got = mm.get_many([m.id for m in mems], scope=ALICE)
    assert [g.id for g in got if g] == [m.id for m in mems]
    assert mm.stats()["by_status"] == {"active": 2100}
    assert mm.verify().ok


def test_audit_limit_and_order(mm: MemoryManager, clock: Clock) -> None:
    ids = []
    for i in range(5):
        clock.advance(1)
        ids.append(mm.remember(f"event {i}", scope=ALICE).id)
    last = mm.audit(ALICE, limit=2)
    assert [e["memory_id"] for e in last] == ids[-2:]
    assert [e["at"] for e in last] == sorted(e["at"] for e in last)


def test_expire_due(mm: MemoryManager, clock: Clock) -> None:
    m = mm.remember("price is 100 EUR", scope=ALICE, ttl=60)
    assert mm.expire_due() == []
    clock.advance(61)
    assert mm.expire_due(scope=ALICE) == [m.id]
    assert mm.require(m.id, scope=ALICE).status is Status.EXPIRED


def test_erase_redacts_rows(mm: MemoryManager) -> None:
    a = mm.remember("secret passport number X123", scope=ALICE, metadata={"doc": "X123"})
    mm.supersede(a.id, "secret passport number X999", scope=ALICE)
    keep = mm.remember("bob's own note X123", scope=BOB)
    receipt = mm.erase(scope=Scope(user_id="alice"))
    assert len(receipt.memory_ids) == 2
    with mm.ledger.read() as conn:
        rows = conn.execute(select(memories.c.user_id, memories.c.content, memories.c.meta)).all()
        payloads = conn.execute(select(events.c.data).where(events.c.user_id == "alice")).all()
    assert all("X" not in r.content and r.meta == {} for r in rows if r.user_id == "alice")
    assert all("X123" not in str(p) and "X999" not in str(p) for p in payloads)
    assert mm.get(keep.id, scope=BOB).content == "bob's own note X123"
    assert mm.recall("passport", scope=Scope(user_id="alice")).hits == []


def test_reopen_repairs_and_verifies(ledger_url: str) -> None:
    index = InMemoryIndex()
    mm = MemoryManager(ledger=Ledger(ledger_url), index=index, embedder=FakeEmbedder(), exact_max=0)
    kept = mm.remember_many([{"content": f"item {i}", "scope": ALICE} for i in range(10)])
    gone = mm.remember("to be archived", scope=ALICE)
    mm.forget(gone.id, scope=ALICE)
    # Simulate a crash between the ledger commit and the index write.
    with mm.ledger.transaction() as conn:
        mm.ledger.update_memories(conn, [m.id for m in kept[:3]], {"index_state": "pending"})
        mm.ledger.update_memories(conn, [kept[3].id], {"status": "retracted", "index_state": "stale"})
    index.delete([m.id for m in kept[:3]])
    mm.close()
    reopened = MemoryManager(
        ledger=Ledger(ledger_url), index=index, embedder=FakeEmbedder(), repair_on_open=False, exact_max=0
    )
    before = reopened.verify()
    assert set(before.pending) == {m.id for m in kept[:4]}
    assert reopened.repair() == {"upserted": 3, "updated": 1, "removed": 0, "quarantined": 0}
    assert reopened.verify().ok
    assert index.get_metadata([kept[3].id])[0]["status"] == "retracted"
    reopened.close()


def test_verify_reports_and_fixes_each_difference(ann_mm: MemoryManager) -> None:
    mm = ann_mm
    mems = mm.remember_many([{"content": f"row {i}", "scope": ALICE} for i in range(6)])
    archived = mm.remember("archived one", scope=ALICE)
    mm.forget(archived.id, scope=ALICE)
    assert mm.verify().ok
    index = mm.index
    index.delete([mems[0].id])  # missing
    index.upsert(["ghost"], [[1.0] * 64], [{"user_id": "alice", "status": "active"}])  # orphan
    index.upsert([archived.id], [[1.0] * 64], [{"user_id": "alice", "status": "archived"}])  # not removed
    index.update_metadata([mems[1].id], [{"user_id": "mallory"}])  # scope
    index.update_metadata([mems[2].id], [{"status": "retracted"}])  # status
    index.update_metadata([mems[3].id], [{"content_hash": "0" * 16}])  # content
    report = mm.verify(fix=True)
    assert report.missing == [mems[0].id]
    assert report.orphans == ["ghost"]
    assert report.not_removed == [archived.id]
    assert report.scope_mismatch == [mems[1].id]
    assert report.status_mismatch == [mems[2].id]
    assert report.hash_mismatch == [mems[3].id]
    assert report.fixed == 6 and not report.ok
    assert mm.verify().ok
    assert mm.recall("row 0", scope=ALICE, k=1).ids == [mems[0].id]


def test_open_with_ledger_url_and_embedded_index(ledger_url: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryManager.open(store, ledger_url=ledger_url, embedder=FakeEmbedder()) as mm:
        m = mm.remember("server ledger, embedded index", scope=ALICE)
    with MemoryManager.open(store, ledger_url=ledger_url, embedder=FakeEmbedder()) as mm:
        assert mm.recall("server ledger", scope=ALICE, k=1).ids == [m.id]
        assert mm.verify().ok


def test_ledger_schema_parameter(pg_schema) -> None:  # noqa: ANN001 - fixture type lives in conftest
    ledger = Ledger(pg_schema.admin_url, schema=pg_schema.name)
    mm = MemoryManager(ledger=ledger, index=InMemoryIndex(), embedder=FakeEmbedder())
    m = mm.remember("lives in its own schema", scope=ALICE)
    with ledger.engine.connect() as conn:
        tables = {
            r[0]
            for r in conn.execute(
                text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"), {"s": pg_schema.name}
            )
        }
        assert conn.execute(text(f'SELECT count(*) FROM "{pg_schema.name}".ml_memories')).scalar_one() == 1
    assert {"ml_memories", "ml_edges", "ml_events", "ml_activities", "ml_supports"} <= tables
    assert mm.require(m.id, scope=ALICE).content == "lives in its own schema"
    mm.close()


def test_unreachable_database_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match="cannot open the ledger"):
        Ledger("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")


def test_a_missing_postgresql_schema_or_database_says_what_to_create(pg_server: str) -> None:
    url = f"{pg_server}?options=-csearch_path%3Dml_no_such_schema"
    with pytest.raises(StorageError) as err:
        Ledger(url)
    text = str(err.value)
    assert "schema 'ml_no_such_schema'" in text and 'CREATE SCHEMA "ml_no_such_schema"' in text
    assert "reachable" not in text and "CREATE TABLE" not in text
    base = pg_server.rsplit("/", 1)[0]
    with pytest.raises(StorageError, match=r"database 'ml_no_such_db' does not exist; create it first \(createdb"):
        Ledger(f"{base}/ml_no_such_db")
    from sqlalchemy.engine import make_url

    secret = make_url(pg_server).set(password="s3cret", database="ml_no_such_db").render_as_string(hide_password=False)
    with pytest.raises(StorageError) as err:
        Ledger(secret)
    assert "s3cret" not in str(err.value) and "***" in str(err.value)  # a password in the URL is never printed


def test_retract_after_forget_keeps_index_consistent(mm: MemoryManager) -> None:
    """Regression: a status change on an archived memory used to mark it indexed although it was not."""
    m = mm.remember("archive me, then retract me", scope=ALICE)
    mm.forget(m.id, scope=ALICE)
    mm.retract(m.id, scope=ALICE)
    assert mm.verify().ok
    assert mm.recall("archive me", scope=ALICE, k=5).ids == []


def test_reopen_in_the_same_process_sees_other_writers(tmp_path: Path) -> None:
    """Regression: close() must release the embedded Chroma client, or a reopen serves a stale cached index."""
    import subprocess
    import sys

    store = tmp_path / "store"
    with MemoryManager.open(store, embedder=FakeEmbedder()) as mm:
        mm.remember("written by the test process", scope=ALICE)
        assert len(mm.recall("written", scope=ALICE).hits) == 1  # loads Chroma's in-memory index
    code = (
        "import sys\nfrom memlineage import MemoryManager\nfrom memlineage.testing import FakeEmbedder\n"
        "with MemoryManager.open(sys.argv[1], embedder=FakeEmbedder()) as mm:\n"
        "    mm.remember_many([{'content': f'other process {i}', 'scope': 'alice'} for i in range(50)])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(store)], check=True, timeout=120)  # noqa: S603
    with MemoryManager.open(store, embedder=FakeEmbedder()) as mm:
        found = {m.content for m in mm.recall("other process", scope=ALICE, k=60).memories}
        assert {f"other process {i}" for i in range(50)} <= found
        assert mm.verify().ok


def test_new_slot_value_derived_from_the_old_one_is_indexed_with_its_status(mm: MemoryManager) -> None:
    """Regression: the new version turned suspect in its own transaction was indexed as active."""
    old = mm.remember("city: Paris", scope=ALICE, kind="semantic", slot="city")
    new = mm.remember(
        "city: Lyon", scope=ALICE, kind="semantic", slot="city", source="reasoning", derived_from=[old.id]
    )
    assert mm.require(new.id, scope=ALICE).status is Status.SUSPECT
    assert mm.verify().ok
    assert new.id not in mm.recall("city Lyon", scope=ALICE, k=5).ids


def test_erasing_a_premise_syncs_the_suspect_descendants(ann_mm: MemoryManager) -> None:
    """Regression: erase() left the descendants it made suspect unsynced (index still said active)."""
    mm = ann_mm
    premise = mm.remember("premise to erase", scope=ALICE)
    child = mm.remember("conclusion from it", scope=ALICE, source="reasoning", derived_from=[premise.id])
    receipt = mm.erase(premise.id, scope=ALICE)
    assert receipt.suspect == [child.id]
    assert mm.verify().ok
    assert mm.index.get_metadata([child.id])[0]["status"] == "suspect"


def test_small_scopes_are_read_exactly_and_written_to_the_ann_index(ledger_url: str, clock: Clock) -> None:
    """Every memory reaches the ANN index (Chroma, the store of record), behind the ledger commit for a scope the
    exact plan reads from memory; status changes, erasure and a rebuild keep both in step, and a scope that grows
    past ``exact_max`` switches plans without losing one.
    """
    inner = InMemoryIndex()
    mm = MemoryManager(ledger=Ledger(ledger_url), index=inner, embedder=FakeEmbedder(), clock=clock, exact_max=20)
    bob = Scope(user_id="bob")
    first = mm.remember_many([{"content": f"alice note {i} about topic{i % 3}", "scope": ALICE} for i in range(15)])
    bobs = mm.remember_many([{"content": f"bob note {i}", "scope": bob} for i in range(5)])
    assert mm.recall("alice note 7 about topic1", scope=ALICE, k=1).ids == [first[7].id]  # before Chroma has it
    mm.flush_index()
    assert inner.count() == 20 and mm.stats()["index_exact"] == 0 and mm.stats()["index_pending"] == 0
    assert mm.index.plan("alice") == "exact"
    mm.retract(first[7].id, scope=ALICE)
    mm.flush_index()
    assert first[7].id not in mm.recall("alice note 7 about topic1", scope=ALICE, k=15).ids
    assert inner.get_metadata([first[7].id])[0]["status"] == "retracted"
    receipt = mm.erase(bobs[0].id, scope=bob)
    assert receipt.index_entries_removed == 1 and bobs[0].id not in inner.ids()
    assert mm.ledger.memory_rows([bobs[0].id], embedding=False)[0]["index_state"] == "removed"
    assert bobs[0].id not in mm.recall("bob note 0", scope=bob, include_suspect=True, k=5).ids
    assert mm.verify().ok

    more = mm.remember_many([{"content": f"alice later {i}", "scope": ALICE} for i in range(10)])  # 25 > 20
    report = mm.verify()
    assert report.ok, report.differences()
    alice_rows = [*first, *more]
    assert {m.id for m in alice_rows} <= inner.ids()
    # the scope stays on the exact plan until the background writes put all of it in the ANN index
    mm.flush_index()
    assert mm.index.plan("alice") == "ann" and mm.index.plan("bob") == "exact"
    assert mm.recall("alice later 3", scope=ALICE, k=1).ids == [more[3].id]
    assert mm.recall("bob note 2", scope=bob, k=1).ids == [bobs[2].id]

    assert mm.reindex() == 29  # rebuilt from the ledger, every live memory in the ANN index
    mm.flush_index()
    assert inner.count() == 29 and mm.stats()["index_exact"] == 0
    assert mm.verify().ok
    mm.close()


def test_a_process_sees_what_another_process_wrote_to_a_scope_it_has_loaded(ledger_url: str) -> None:
    """Server mode: two managers on one ledger (and one ANN index, as with a Chroma server), no writer lock.

    Each keeps the scopes it queried in memory (vector block, lexical leg); a write by the other never passes
    through them, so before each query they compare the scope's size in the ledger with what they hold.
    """
    shared_index = InMemoryIndex()
    a = MemoryManager(ledger=Ledger(ledger_url), index=shared_index, embedder=FakeEmbedder(), exact_max=12)
    b = MemoryManager(ledger=Ledger(ledger_url), index=shared_index, embedder=FakeEmbedder(), exact_max=12)
    first = a.remember_many([{"content": f"alice fact {i}", "scope": ALICE} for i in range(5)])
    assert a.recall("alice fact 3", scope=ALICE, k=1).ids == [first[3].id]  # a loads alice's block and BM25 index
    new = b.remember("alice owns a red kayak", scope=ALICE)
    assert a.recall("red kayak", scope=ALICE, k=1).ids == [new.id]
    assert a.index.plan("alice") == "exact"
    b.erase(first[0].id, scope=ALICE)
    assert first[0].id not in a.recall("alice fact 0", scope=ALICE, k=6, include_suspect=True).ids
    b.erase(first[1].id, scope=ALICE)  # one removed, one added: the same count, a greater id
    swap = b.remember("alice bought a blue tent", scope=ALICE)
    assert a.recall("blue tent", scope=ALICE, k=1).ids == [swap.id]
    # b takes alice past exact_max: b hands her memories to the shared ANN index; a follows once it is done
    more = b.remember_many([{"content": f"alice later {i}", "scope": ALICE} for i in range(9)])
    b.flush_index()
    assert shared_index.ids() == {m.id for m in [*first[2:], new, swap, *more]}
    assert a.recall("alice later 7", scope=ALICE, k=1).ids == [more[7].id]
    assert a.index.plan("alice") == "ann"
    # a writes to the large scope now: straight to the ANN index, which b reads
    last = a.remember("alice flies on Sunday", scope=ALICE)
    assert last.id in shared_index.ids() and b.recall("flies on Sunday", scope=ALICE, k=1).ids == [last.id]
    assert a.verify().ok and b.verify().ok
    a.close()
    b.close()


class _SlowAddIndex(InMemoryIndex):
    """An ANN index whose writes take a while (a loaded Chroma server): they stay queued behind the commit."""

    def add(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.4)
        super().add(*args, **kwargs)

    def upsert(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.4)
        super().upsert(*args, **kwargs)


def test_a_process_sees_another_process_write_while_its_own_writes_are_queued(ledger_url: str) -> None:
    """Server mode: a's own Chroma writes still queued must not hide b's write from a's next query.

    The flaky CI failure of the test above: a's background add of its five facts had not finished when a
    queried again, and the comparison with the ledger was skipped while a's queue was busy.
    """
    shared_index = _SlowAddIndex()
    a = MemoryManager(ledger=Ledger(ledger_url), index=shared_index, embedder=FakeEmbedder(), exact_max=12)
    b = MemoryManager(ledger=Ledger(ledger_url), index=shared_index, embedder=FakeEmbedder(), exact_max=12)
    first = a.remember_many([{"content": f"alice fact {i}", "scope": ALICE} for i in range(5)])
    assert a.recall("alice fact 3", scope=ALICE, k=1).ids == [first[3].id]
    new = b.remember("alice owns a red kayak", scope=ALICE)
    assert a.recall("red kayak", scope=ALICE, k=1).ids == [new.id]
    live = IndexFilter(user_id="alice", statuses=("active",))
    assert [h.id for h in a.parts.lexical.query("red kayak", 1, live)] == [new.id]
    a.close()
    b.close()


def test_processes_agree_on_which_scopes_go_to_the_ann_index(ledger_url: str) -> None:
    """Server mode: the ledger, not what one process holds, decides whether a write goes to the ANN index."""
    shared_index = InMemoryIndex()

    def manager() -> MemoryManager:
        return MemoryManager(ledger=Ledger(ledger_url), index=shared_index, embedder=FakeEmbedder(), exact_max=5)

    a, b = manager(), manager()
    b.remember("note zero kiwi", scope=ALICE)
    b.recall("kiwi", scope=ALICE)  # b holds a one-memory block of alice
    mems = [a.remember(f"note {i} kiwi w{i}", scope=ALICE) for i in range(6)]  # a takes alice past exact_max
    a.flush_index()
    assert a.recall("kiwi w3", scope=ALICE, k=1).ids == [mems[3].id] and a.index.plan("alice") == "ann"
    late = b.remember("banana smoothie recipe", scope=ALICE)  # b's block is stale; the ledger says 'handed over'
    b.flush_index()
    assert late.id in shared_index.ids()
    assert a.recall("banana smoothie recipe", scope=ALICE, k=1).ids == [late.id]
    for m in mems[:4]:  # alice shrinks below exact_max; a still queries the ANN index for her
        a.forget(m.id, scope=ALICE)
    c = manager()
    after = c.remember("pancake batter recipe", scope=ALICE)  # a scope handed over stays handed over
    c.flush_index()
    assert after.id in shared_index.ids()
    assert a.recall("pancake batter recipe", scope=ALICE, k=1).ids == [after.id]
    for m in (a, b, c):
        assert m.verify().ok
        m.close()


def test_a_process_sees_another_process_swap_and_revalidate_memories(ledger_url: str) -> None:
    """Server mode: a removal plus an insert elsewhere, then an own write; and a status change made elsewhere."""
    shared_index = InMemoryIndex()
    a = MemoryManager(ledger=Ledger(ledger_url), index=shared_index, embedder=FakeEmbedder())
    b = MemoryManager(ledger=Ledger(ledger_url), index=shared_index, embedder=FakeEmbedder())
    a.remember("I like apples", scope=ALICE)
    pears = a.remember("I like pears", scope=ALICE)
    assert len(a.recall("like", scope=ALICE, k=10).ids) == 2  # a holds alice in memory
    kiwis = b.remember("I like kiwis", scope=ALICE)
    b.forget(pears.id, scope=ALICE)  # the count is unchanged ...
    plums = a.remember("I like plums", scope=ALICE)  # ... and a's own write follows
    assert kiwis.id in a.recall("like", scope=ALICE, k=10).ids
    assert set(a.recall("like", scope=ALICE, k=10).ids) == set(b.recall("like", scope=ALICE, k=10).ids)
    premise = a.remember("fares are in euros", scope=ALICE, source="tool:fares")
    plan = a.remember("the fare is 70 euros", scope=ALICE, source="reasoning", derived_from=[premise.id])
    a.retract(premise.id, scope=ALICE)
    a.flush_index()
    assert plan.id not in a.recall("fare 70 euros", scope=ALICE, k=10).ids  # suspect in a's memory
    b.revalidate(plan.id, scope=ALICE)  # made active again elsewhere
    assert plan.id in a.recall("fare 70 euros", scope=ALICE, k=10).ids
    assert plums.id in b.recall("plums", scope=ALICE, k=10).ids
    a.close()
    b.close()


def test_crafted_schema_name_is_quoted_not_executed(pg_server: str) -> None:
    """Issue 14 kind 6: ``schema=`` is an identifier; a name holding SQL creates that schema and nothing else."""
    import uuid

    import psycopg
    from psycopg import sql

    tag = uuid.uuid4().hex[:10]
    crafted = f'i{tag}";CREATE TABLE public.p{tag}(i int);--'
    dsn = pg_server.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        ledger = Ledger(pg_server, schema=crafted)
        mm = MemoryManager(ledger=ledger, index=InMemoryIndex(), embedder=FakeEmbedder())
        m = mm.remember("kept in the crafted schema", scope=ALICE)
        assert mm.require(m.id, scope=ALICE).content == "kept in the crafted schema"
        mm.close()
        with psycopg.connect(dsn) as conn:
            schemas = {r[0] for r in conn.execute("SELECT schema_name FROM information_schema.schemata")}
            pwned = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = %s", (f"p{tag}",)
            ).fetchone()
        assert crafted in schemas
        assert pwned == (0,)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(crafted)))
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier("public", f"p{tag}")))


@pytest.mark.parametrize("bad", ["", "x" * 64, "a\x00b", 5])
def test_bad_schema_name_is_a_typed_error(bad: object) -> None:
    from memlineage import InvalidInputError

    with pytest.raises(InvalidInputError, match="schema"):
        Ledger("sqlite://", schema=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda mm: mm.remember("nul \x00 inside", scope=ALICE), "NUL"),
        (lambda mm: mm.remember("fine", scope=ALICE, metadata={"k": "v\x00"}), "NUL"),
        (lambda mm: mm.remember("fine", scope={"user_id": "u" * 256}), "255"),
        (lambda mm: mm.remember("fine", scope=ALICE, slot="s" * 256), "255"),
        (lambda mm: mm.remember("fine", scope=ALICE, source="tool:" + "n" * 256), "255"),
        (lambda mm: mm.find(scope=ALICE, slot="a\x00"), "NUL"),
        (lambda mm: mm.get("id\x00", scope=ALICE), "NUL"),
        (lambda mm: mm.recall("anything", scope=ALICE, k=2**63), "k"),
        (lambda mm: mm.audit(ALICE, limit=2**63), "limit"),
    ],
)
def test_both_backends_refuse_the_same_input(mm: MemoryManager, call, words: str) -> None:  # noqa: ANN001
    """Issue 14 kind 7: PostgreSQL raised StorageError where SQLite accepted; now both raise InvalidInputError."""
    from memlineage import InvalidInputError

    before = mm.stats()
    with pytest.raises(InvalidInputError, match=words):
        call(mm)
    assert mm.stats() == before


def test_erased_values_leave_the_postgresql_files_after_vacuum_full(pg_schema) -> None:  # noqa: ANN001
    """Issue 14 kind 3: erased values stayed in the table's data file; ``vacuum(full=True)`` rewrites it.

    Reads every relation file of the schema (tables, their TOAST tables and indexes) through
    ``pg_read_binary_file`` (the test role is a superuser) and searches the bytes.
    """
    secret = "Okapi-Secret-90127"
    ledger = Ledger(pg_schema.admin_url, schema=pg_schema.name)
    mm = MemoryManager(ledger=ledger, index=InMemoryIndex(), embedder=FakeEmbedder())
    scope = Scope(user_id="alice", session_id="Okapi-Session-5")
    for i in range(20):
        mm.remember(f"note {i} {secret} " + "padding " * (400 if i % 2 else 1), scope=scope, tags=[secret],
                    metadata={"k": secret})  # fmt: skip
    mm.remember("bob stays", scope=BOB)

    def files_holding(needle: str) -> list[str]:
        with ledger.engine.connect() as conn:
            conn.exec_driver_sql("CHECKPOINT")
            rels = conn.execute(
                text(
                    "SELECT c.oid::regclass::text, pg_relation_filepath(c.oid) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = :s "
                    "UNION SELECT t.oid::regclass::text, pg_relation_filepath(t.oid) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid "
                    "WHERE n.nspname = :s"
                ),
                {"s": pg_schema.name},
            ).all()
            found = []
            for name, path in rels:
                if path is None:
                    continue
                data = conn.execute(text("SELECT pg_read_binary_file(:p)"), {"p": path}).scalar_one()
                if needle.encode() in bytes(data):
                    found.append(name)
            return found

    assert files_holding(secret), "the secret must be in the files before the erasure"
    mm.erase(scope=Scope(user_id="alice"), reason="gdpr")
    ledger.vacuum(full=True)
    assert files_holding(secret) == []
    assert mm.find(scope=BOB)[0].content == "bob stays"
    mm.close()
