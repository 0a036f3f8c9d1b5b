"""Paths built for scale: set-based cascade, deferred index status, per-scope exact vector blocks (issue 16)."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import numpy as np
import pytest
from memlineage import Scope, Status
from memlineage.index import IndexFilter, InMemoryIndex, ScopedVectorIndex
from memlineage.ledger import Ledger
from memlineage.ledger._schema import memories
from memlineage.lineage import evaluate_cascade
from memlineage.reconcile import Action, UpdateDecision
from memlineage.testing import FakeEmbedder, make_manager
from sqlalchemy import select, update

pytestmark = pytest.mark.usefixtures("socket_disabled")

ALICE = Scope(user_id="alice")
BOB = Scope(user_id="bob")


# ------------------------------------------------------------------------------------------------ cascade
def _reference_suspects(mm: Any, root: str) -> list[str]:
    """The decision before issue 16: per-id reads of the affected graph, then the shortcut or evaluate_cascade."""
    led = mm.ledger
    depths = led.walk([root], direction="descendants")
    statuses = led.statuses(list(depths))
    counts = led.support_groups(list(depths))
    info = {i: (d, statuses[i], len(counts.get(i, {}))) for i, d in depths.items()}
    if all(n <= 1 for _, _, n in info.values()):  # every active descendant, nearest first (order within a depth: any)
        return [i for i in sorted(info, key=lambda i: (info[i][0], i)) if info[i][1] == Status.ACTIVE.value]
    edges = led.derivation_edges(list(info))
    groups = led.support_groups(list(info))
    statuses = led.statuses(sorted(set(info) | {p for _, p, _ in edges} | {root}))
    statuses[root] = Status.RETRACTED.value
    return evaluate_cascade([root], info, edges, groups, statuses)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_set_based_cascade_matches_the_reference_decision(seed: int) -> None:
    rng = random.Random(seed)
    mm = make_manager()
    ids: list[str] = []
    for i in range(60):
        premises = rng.sample(ids, k=min(len(ids), rng.choice([0, 1, 1, 2, 3])))
        ids.append(mm.remember(f"node {i}", scope=ALICE, source="reasoning", derived_from=premises).id)
        if seed % 2 == 0 and premises and rng.random() < 0.15:  # a second, independent support group
            other = mm.remember(f"evidence {i}", scope=ALICE, source="tool:x")
            again = mm.remember(f"node {i}", scope=ALICE, source="tool:x", derived_from=[other.id])
            assert again.id == ids[-1]
    for mid in rng.sample(ids[:10], 3):  # some descendants are already suspect or archived
        if mm.require(mid, scope=ALICE).status is Status.ACTIVE:
            mm.forget(mid, scope=ALICE) if rng.random() < 0.5 else mm.retract(mid, scope=ALICE)
    root = next(i for i in ids if mm.require(i, scope=ALICE).status is Status.ACTIVE)
    want = _reference_suspects(mm, root)
    depth = mm.ledger.walk([root], direction="descendants")
    single = all(len(g) <= 1 for g in mm.ledger.support_groups(list(depth)).values())

    def same_decision(got: list[str]) -> None:
        if single:  # walk order: the same ids, nearer descendants first
            assert sorted(got) == sorted(want) and [depth[i] for i in got] == sorted(depth[i] for i in got)
        else:  # evaluate_cascade's topological order
            assert got == want

    dry = mm.impact(root, scope=ALICE)
    same_decision(dry.suspect)
    before = {i: mm.require(i, scope=ALICE).status for i in ids}
    report = mm.retract(root, scope=ALICE)
    same_decision(report.suspect)
    for mid in ids:
        now = mm.require(mid, scope=ALICE).status
        if mid == root:
            assert now is Status.RETRACTED
        elif mid in want:
            assert before[mid] is Status.ACTIVE and now is Status.SUSPECT
        else:
            assert now is before[mid]
    events = [e for e in mm.audit(ALICE) if e.type == "suspect" and e["data"].get("cause") == root]
    assert [e["memory_id"] for e in events] == sorted(want)  # one event each, appended in memory-id order
    assert all(e["data"] == {"reason": f"premise {root} retracted", "cause": root} for e in events)


def test_cascade_marks_only_active_descendants_and_their_index_entries_stale() -> None:
    mm = make_manager(exact_max=0)
    root = mm.remember("root", scope=ALICE)
    a = mm.remember("a", scope=ALICE, source="reasoning", derived_from=[root.id])
    b = mm.remember("b", scope=ALICE, source="reasoning", derived_from=[a.id])
    c = mm.remember("c", scope=ALICE, source="reasoning", derived_from=[b.id])
    mm.retract(b.id, scope=ALICE)  # c suspect already
    mm.flush_index()
    report = mm.retract(root.id, scope=ALICE)
    assert report.suspect == [a.id]
    assert sorted(report.unaffected) == sorted([b.id, c.id])
    with mm.ledger.read() as conn:
        rows = {r.id: r for r in conn.execute(select(memories.c.id, memories.c.status, memories.c.index_state))}
    assert rows[a.id].status == "suspect" and rows[c.id].status == "suspect"
    assert [e.type for e in mm.audit(ALICE, memory_id=c.id)].count("suspect") == 1  # no second event for c
    mm.flush_index()
    with mm.ledger.read() as conn:
        states = dict(conn.execute(select(memories.c.id, memories.c.index_state)).all())
    assert all(s == "indexed" for s in states.values())


def test_indexed_mark_is_a_compare_and_set_on_the_status() -> None:
    mm = make_manager(exact_max=0)
    m = mm.remember("a fact", scope=ALICE)
    with mm.ledger.transaction() as conn:
        mm.ledger.update_memories(conn, [m.id], {"status": "suspect", "index_state": "stale"})
    with mm.ledger.transaction() as conn:  # a sync that wrote 'active' (read before the change) must not settle it
        mm.ledger.mark_indexed(conn, [(m.id, "active")])
    assert mm.ledger.memory_rows([m.id])[0]["index_state"] == "stale"
    with mm.ledger.transaction() as conn:
        mm.ledger.mark_indexed(conn, [(m.id, "suspect")])
    assert mm.ledger.memory_rows([m.id])[0]["index_state"] == "indexed"


# ------------------------------------------------------------------------------------------------ deferred sync
class StuckIndex(InMemoryIndex):
    """An index whose metadata updates hang until released (a slow or unreachable vector store)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()

    def update_metadata(self, ids: Any, metadatas: Any) -> None:
        self.entered.set()
        assert self.release.wait(30)
        super().update_metadata(ids, metadatas)


def test_withdrawn_memory_is_never_served_while_the_index_lags() -> None:
    inner = StuckIndex()
    mm = make_manager(index=inner, exact_max=0)
    root = mm.remember("the hotel in Lyon costs 90 EUR per night", scope=ALICE, source="tool:hotels")
    plan = mm.remember(
        "book the hotel in Lyon for 90 EUR per night", scope=ALICE, source="reasoning", derived_from=[root.id]
    )
    keep = mm.remember("the train to Lyon leaves at 9", scope=ALICE)
    old = mm.remember("my hotel budget is 100 EUR", scope=ALICE, slot="hotel_budget")
    mm.supersede(old.id, "my hotel budget is 120 EUR", scope=ALICE)
    assert inner.entered.wait(10)  # the background sync of the old version is stuck inside the index
    t0 = time.perf_counter()
    report = mm.retract(root.id, scope=ALICE)
    assert time.perf_counter() - t0 < 10  # the cascade does not wait for the index
    assert report.suspect == [plan.id]
    # the index still says 'active' for the withdrawn ones ...
    lag = IndexFilter(user_id="alice", statuses=("active",))
    stale_ids = {h.id for h in inner.query(FakeEmbedder().embed(["hotel Lyon"])[0], 10, lag)}
    assert {root.id, plan.id, old.id} <= stale_ids
    # ... yet no read surface serves them
    withdrawn = {root.id, plan.id, old.id}
    for q in ("hotel in Lyon 90 EUR", "hotel budget", "Lyon"):
        for res in (
            mm.recall(q, scope=ALICE, k=10),
            mm.recall(q, scope=ALICE, k=10, purpose="decision", include_suspect=True),
            mm.admin_recall(q, scope=ALICE, actor="ops", reason="test", k=10),
        ):
            assert not withdrawn & set(res.ids), q
        flagged = mm.recall(q, scope=ALICE, k=10, include_suspect=True)
        assert root.id not in flagged.ids and old.id not in flagged.ids
        assert all(h.flags == ("suspect",) for h in flagged if h.id == plan.id)
    assert keep.id in mm.recall("train to Lyon", scope=ALICE, k=3).ids
    assert mm.stats()["index_pending"] >= 3  # the lag is visible
    inner.release.set()
    mm.flush_index()
    assert inner.get_metadata([root.id, plan.id, old.id]) == [
        {**inner.get_metadata([root.id])[0], "status": "retracted"},
        {**inner.get_metadata([plan.id])[0], "status": "suspect"},
        {**inner.get_metadata([old.id])[0], "status": "superseded"},
    ]
    report = mm.verify()
    assert report.ok and not report.pending
    mm.close()


def test_verify_and_close_flush_deferred_status() -> None:
    inner = InMemoryIndex()
    mm = make_manager(index=inner, exact_max=0)
    root = mm.remember("root", scope=ALICE)
    child = mm.remember("child", scope=ALICE, source="reasoning", derived_from=[root.id])
    mm.services.index_sync._deferred._apply = lambda ids: None  # the background worker never gets anything done
    mm.retract(root.id, scope=ALICE)
    time.sleep(0.05)
    assert inner.get_metadata([child.id])[0]["status"] == "active"  # still lagging
    mm.services.index_sync._deferred._apply = mm.services.index_sync._sync_deferred
    mm.services.index_sync._deferred.defer([root.id, child.id])
    assert mm.verify().ok  # verify applies what is deferred first
    assert inner.get_metadata([child.id])[0]["status"] == "suspect"


def test_crash_before_the_deferred_sync_is_repaired_on_open(tmp_path) -> None:
    from memlineage.ledger import Ledger

    url = f"sqlite:///{tmp_path / 'l.db'}"
    inner = InMemoryIndex()
    mm = make_manager(ledger=Ledger(url), index=inner, exact_max=0)
    root = mm.remember("root", scope=ALICE)
    child = mm.remember("child", scope=ALICE, source="reasoning", derived_from=[root.id])
    mm.services.index_sync._deferred._apply = lambda ids: None  # the process dies before the worker runs
    mm.retract(root.id, scope=ALICE)
    mm.ledger.close()
    reopened = make_manager(ledger=Ledger(url), index=inner, exact_max=0)  # repair() on open finishes the stale entries
    assert inner.get_metadata([root.id, child.id])[0]["status"] == "retracted"
    assert inner.get_metadata([child.id])[0]["status"] == "suspect"
    assert reopened.verify().ok


# ------------------------------------------------------------------------------------------------ scoped blocks
def _unit_rows(n: int, seed: int, dims: int = 8) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _meta(user: str, status: str = "active", **kw: Any) -> dict[str, Any]:
    return {"user_id": user, "status": status, "kind": "episodic", "agent_id": "", "session_id": "", **kw}


def test_block_never_serves_another_scope() -> None:
    vecs = _unit_rows(40, 1)
    store: dict[str, list[tuple[str, Any, dict[str, Any]]]] = {"alice": [], "bob": []}
    for i in range(40):
        user = "alice" if i % 2 else "bob"
        store[user].append((f"{user}-{i}", vecs[i], _meta(user)))
    # a corrupted loader row naming another user is refused, never admitted into the block
    store["alice"].append(("bob-intruder", vecs[0], _meta("bob")))
    idx = ScopedVectorIndex(InMemoryIndex(), loader=lambda u: store.get(u, []))
    for rows in store.values():
        idx.inner.upsert([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    for q in vecs[:10]:
        hits = idx.query(q, 40, IndexFilter(user_id="alice", statuses=("active",)))
        assert hits and all(h.id.startswith("alice-") for h in hits)
    assert idx.plan("alice") == "exact" and idx.exact_queries == 10
    # the same vector written for bob (identical to one of alice's) stays out of alice's block
    idx.upsert(["bob-twin"], [vecs[1]], [_meta("bob")])
    assert "bob-twin" not in [h.id for h in idx.query(vecs[1], 5, IndexFilter(user_id="alice", statuses=("active",)))]
    # an id whose metadata moves it to bob leaves alice's block and enters bob's
    assert idx.plan("bob") == "exact"
    idx.upsert(["alice-1"], [vecs[1]], [_meta("bob")])
    assert "alice-1" not in [h.id for h in idx.query(vecs[1], 40, IndexFilter(user_id="alice", statuses=("active",)))]
    assert "alice-1" in [h.id for h in idx.query(vecs[1], 40, IndexFilter(user_id="bob", statuses=("active",)))]


def test_exact_block_answers_like_exact_search_with_every_filter() -> None:
    vecs = _unit_rows(300, 2)
    rng = random.Random(5)
    rows = []
    for i in range(300):
        rows.append(
            (
                f"m{i:03d}",
                vecs[i],
                _meta(
                    "u",
                    status=rng.choice(["active", "active", "suspect", "retracted"]),
                    kind=rng.choice(["episodic", "semantic"]),
                    agent_id=rng.choice(["", "a1", "a2"]),
                    session_id=rng.choice(["s1", "s2"]),
                    tags=rng.choice([[], ["x"], ["x", "y"]]),
                ),
            )
        )
    ref = InMemoryIndex()
    ref.upsert([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    idx = ScopedVectorIndex(InMemoryIndex(), loader=lambda u: rows if u == "u" else [])
    filters = [
        IndexFilter(user_id="u", statuses=("active",)),
        IndexFilter(user_id="u", statuses=("active", "suspect"), agent_id="a1"),
        IndexFilter(user_id="u", statuses=("active",), session_id="s2", kinds=("semantic",)),
        IndexFilter(user_id="u", statuses=("active", "suspect"), tags=("x", "y")),
        IndexFilter(user_id="u", statuses=("erased",)),
    ]
    for w in filters:
        for q in _unit_rows(5, 9):
            want = [(h.id, round(h.similarity, 5)) for h in ref.query(q, 7, w)]
            assert [(h.id, round(h.similarity, 5)) for h in idx.query(q, 7, w)] == want
    # writes after loading keep the block equal to exact search: status change, delete, new entry
    changed = [r[0] for r in rows[:50]]
    for target in (ref, idx):
        target.update_metadata(changed, [{"status": "suspect"}] * 50)
        target.delete([r[0] for r in rows[50:200]])  # most rows deleted: the block compacts
        target.upsert(["new"], [vecs[0]], [_meta("u", agent_id="a1", session_id="s1")])
    for w in filters:
        for q in _unit_rows(5, 11):
            want = [h.id for h in ref.query(q, 7, w)]
            assert [h.id for h in idx.query(q, 7, w)] == want


def test_plan_switches_by_scope_size_and_evicts_lru() -> None:
    vecs = _unit_rows(30, 3)
    data = {u: [(f"{u}{i}", vecs[i], _meta(u)) for i in range(n)] for u, n in (("small", 3), ("big", 12))}
    inner = InMemoryIndex()
    for rows in data.values():
        inner.upsert([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    idx = ScopedVectorIndex(
        inner, loader=lambda u: data.get(u, []), counter=lambda u: len(data.get(u, [])), exact_max=10, cache_vectors=5
    )
    assert idx.plan("big") == "ann" and idx.plan("small") == "exact"
    w = IndexFilter(user_id="small", statuses=("active",))
    for i in range(3, 11):  # small grows past exact_max through writes: it moves to the ANN plan
        row = (f"small{i}", vecs[i], _meta("small"))
        data["small"].append(row)
        idx.upsert([row[0]], [row[1]], [row[2]])
    assert idx.plan("small") == "ann"
    assert [h.id for h in idx.query(vecs[10], 1, w)] == ["small10"]
    # cache_vectors=5: loading a second scope evicts the first; both still answer correctly
    data.update({u: [(f"{u}{i}", vecs[i], _meta(u)) for i in range(4)] for u in ("p", "q")})
    for u in ("p", "q"):
        inner.upsert([r[0] for r in data[u]], [r[1] for r in data[u]], [r[2] for r in data[u]])
    assert idx.plan("p") == "exact" and idx.plan("q") == "exact"
    assert list(idx._blocks) == ["q"]
    idx.upsert(["p9"], [vecs[9]], [_meta("p")])  # written while p is evicted: the reload reads it
    data["p"].append(("p9", vecs[9], _meta("p")))
    assert [h.id for h in idx.query(vecs[9], 1, IndexFilter(user_id="p", statuses=("active",)))] == ["p9"]


def test_manager_blocks_follow_write_erase_and_supersede() -> None:
    mm = make_manager()
    assert isinstance(mm.index, ScopedVectorIndex)
    a = mm.remember("I live in Paris", scope=ALICE, slot="home_city")
    mm.remember("Bob lives in Rome", scope=BOB)
    assert mm.recall("Paris", scope=ALICE, k=3).ids == [a.id]
    assert mm.index.plan("alice") == "exact"
    b = mm.remember("my favourite food is ramen", scope=ALICE)  # written after the block was loaded
    assert b.id in mm.recall("ramen", scope=ALICE, k=3).ids
    new = mm.supersede(a.id, "I live in Berlin", scope=ALICE).memory
    res = mm.recall("where do I live", scope=ALICE, k=5)
    assert new.id in res.ids and a.id not in res.ids
    mm.flush_index()
    w = IndexFilter(user_id="alice", statuses=("active",))
    q = FakeEmbedder().embed(["I live in Paris"])[0]
    assert a.id not in [h.id for h in mm.index.query(q, 10, w)]  # the block got the status change
    mm.erase(b.id, scope=ALICE)
    assert b.id not in [h.id for h in mm.index.query(FakeEmbedder().embed(["ramen"])[0], 10, w)]
    assert b.id not in mm.index.inner.ids()
    assert all(h.memory.scope.user_id == "alice" for h in mm.recall("lives in Rome", scope=ALICE, k=5))
    mm.erase(scope=ALICE)
    assert mm.index.query(q, 10, IndexFilter(user_id="alice", statuses=("active", "suspect", "erased"))) == []
    assert mm.verify().ok


def test_rewiring_a_part_applies_deferred_status_first() -> None:
    inner = InMemoryIndex()
    mm = make_manager(index=inner, exact_max=0)
    root = mm.remember("root", scope=ALICE)
    child = mm.remember("child", scope=ALICE, source="reasoning", derived_from=[root.id])
    old_sync = mm.services.index_sync
    deferred = old_sync._deferred

    def queue_only(ids: Any) -> None:  # no worker thread: the ids wait in the queue
        with deferred._cond:
            deferred._pending.update(dict.fromkeys(ids))

    deferred.defer = queue_only  # type: ignore[method-assign]
    mm.retract(root.id, scope=ALICE)
    assert inner.get_metadata([child.id])[0]["status"] == "active"
    mm.retrieval = mm.retrieval  # any part assignment re-wires the services; the old sync is flushed and closed
    assert mm.services.index_sync is not old_sync
    assert inner.get_metadata([root.id, child.id]) == [
        {**inner.get_metadata([root.id])[0], "status": "retracted"},
        {**inner.get_metadata([child.id])[0], "status": "suspect"},
    ]
    mm.close()


def test_background_sync_leaves_removals_to_the_call_that_made_them() -> None:
    inner = InMemoryIndex()
    mm = make_manager(index=inner, exact_max=0)
    a = mm.remember("alice flies to Lisbon", scope=ALICE)
    with mm.ledger.transaction() as conn:  # the state an erasure leaves between its commit and its own sync
        mm.ledger.update_memories(conn, [a.id], {"status": "erased", "index_state": "removing"})
    sync = mm.services.index_sync
    assert sync._sync_deferred([a.id]) == 0  # a late background batch for this id must not remove it ...
    assert a.id in inner.ids() and mm.ledger.memory_rows([a.id])[0]["index_state"] == "removing"
    assert sync.sync([a.id]) == 1  # ... so the erasure's receipt counts what it removed
    assert a.id not in inner.ids()


def test_erase_right_after_retract_counts_every_entry_it_removed() -> None:
    for _ in range(5):
        mm = make_manager()
        a = mm.remember("alice flies to Lisbon on Friday", scope=ALICE)
        mm.remember("alice prefers aisle seats", scope=ALICE)
        mm.remember("bob flies to Oslo", scope=BOB)
        mm.retract(a.id, scope=ALICE)
        assert mm.erase(scope=ALICE).index_entries_removed == 2
        assert mm.verify().ok
        mm.close()


class _Spy:
    """A reconciler that records the candidates each statement is offered and decides nothing."""

    wants_neighbours = False
    name = "spy"

    def __init__(self) -> None:
        self.offered: list[set[str]] = []

    def decide(self, items: Any) -> list[Any]:
        self.offered.extend({c.id for c in cands} for _, cands in items)
        return [UpdateDecision(action=Action.NEW) for _ in items]


def test_update_detection_neighbours_skip_withdrawals_the_index_has_not_applied(monkeypatch) -> None:  # noqa: ANN001
    """The nearest live statements are offered even when withdrawn ones still look live in a lagging index.

    The index plan of a large scope (here: every scope, ``exact_max=0``) learns of status changes from the deferred
    sync only; until it runs, withdrawn statements can fill the nearest slots.
    """
    spy = _Spy()
    ledger = Ledger("sqlite://")
    index = ScopedVectorIndex.over_ledger(InMemoryIndex(), ledger, exact_max=0)
    mm = make_manager(ledger=ledger, index=index, reconciler=spy)
    near = [mm.remember(f"the team dinner with Bob is on Monday at eight note {i}", scope=ALICE) for i in range(8)]
    live = [
        mm.remember("the team dinner is on Monday", scope=ALICE),
        mm.remember("dinner with Bob on Monday", scope=ALICE),
    ]
    held: list[str] = []  # the background sync has not run yet: the retractions wait here
    monkeypatch.setattr(mm.services.index_sync, "defer", held.extend)
    for m in near:
        mm.retract(m.id, scope=ALICE)
    query = FakeEmbedder().embed(["actually the team dinner with Bob is on Tuesday at eight"])[0]
    lag = IndexFilter(user_id="alice", statuses=("active", "suspect"))
    assert {h.id for h in mm.index.query(query, 8, lag)} == {m.id for m in near}  # all withdrawn, all look live
    spy.offered.clear()
    mm.remember("actually the team dinner with Bob is on Tuesday at eight", scope=ALICE)
    assert spy.offered, "a correction cue asks for the nearest statements"
    assert {m.id for m in live} <= spy.offered[-1]
    assert not {m.id for m in near} & spy.offered[-1]
    monkeypatch.undo()
    mm.services.index_sync.defer(held)
    mm.close()


def test_bulk_steps_pause_the_cyclic_collector_and_restore_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``remember_many`` and cascades run with the collector paused; it comes back as it was, also after errors."""
    import gc

    import memlineage.services.cascade as cascade_service
    from memlineage._gcpause import gc_paused

    seen: list[bool] = []
    plan = cascade_service.plan_cascade

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return plan(*args, **kwargs)

    monkeypatch.setattr(cascade_service, "plan_cascade", spy)
    mm = make_manager()
    locked = mm.services.writes.remember_locked

    def spy_write(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return locked(*args, **kwargs)

    monkeypatch.setattr(mm.services.writes, "remember_locked", spy_write)
    [root] = mm.remember_many([{"content": "the office is in Lyon", "scope": ALICE}])
    mm.remember("meet at the Lyon office", scope=ALICE, source="reasoning", derived_from=[root.id])
    assert gc.isenabled() and len(seen) == 2
    mm.retract(root.id, scope=ALICE, reason="moved")
    assert seen == [False, False, False] and gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        with gc_paused():  # nested: the collector stays paused until the outer block ends
            pass
        assert not gc.isenabled()
        raise RuntimeError
    assert gc.isenabled()
    gc.disable()  # the application's own choice is kept
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    mm.close()


# ------------------------------------------------------------------------- exact-plan scopes stay out of the ANN index
def test_local_writes_stay_out_of_the_ann_index_until_the_scope_is_handed_over() -> None:
    vecs = _unit_rows(12, 7)
    held: list[tuple[str, Any, dict[str, Any]]] = []  # the ledger's rows for "u"
    inner = InMemoryIndex()
    idx = ScopedVectorIndex(inner, loader=lambda u: list(held) if u == "u" else [], counter=lambda u: len(held),
                            exact_max=5)  # fmt: skip
    w = IndexFilter(user_id="u", statuses=("active",))
    assert idx.wants_ann("u") is False and idx.plan("u") == "exact"
    for i in range(8):  # written while the scope fits: the block only, never the wrapped index
        held.append((f"m{i}", vecs[i], _meta("u")))
        idx.put_local([f"m{i}"], [vecs[i]], [_meta("u")])
    assert inner.count() == 0
    # past exact_max, the block still holds memories the wrapped index lacks: the scope keeps the exact plan
    assert idx.wants_ann("u") is True and idx.plan("u") == "exact"
    assert [h.id for h in idx.query(vecs[6], 1, w)] == ["m6"]
    idx.upsert([f"m{i}" for i in range(7)], vecs[:7], [_meta("u")] * 7)  # handed over, all but one
    assert idx.plan("u") == "exact"
    idx.upsert(["m7"], [vecs[7]], [_meta("u")])  # the last one: now the wrapped index holds the whole scope
    assert idx.plan("u") == "ann" and inner.count() == 8
    assert [h.id for h in idx.query(vecs[7], 1, w)] == ["m7"] and idx.ann_queries == 1
    # status changes and removals of local entries never reach the wrapped index
    idx2 = ScopedVectorIndex(InMemoryIndex(), loader=lambda u: held[:3], counter=lambda u: 3, exact_max=5)
    assert idx2.plan("u") == "exact"
    idx2.update_local(["m1"], [{"status": "retracted"}])
    assert "m1" not in {h.id for h in idx2.query(vecs[1], 3, w)}
    assert idx2.drop_local(["m2", "nope"]) == 1
    assert {h.id for h in idx2.query(vecs[2], 3, w)} == {"m0"}
    assert idx2.inner.count() == 0


def test_a_scope_past_exact_max_still_awaiting_the_hand_over_is_loaded_whatever_its_size() -> None:
    from memlineage.index._scoped import IN_ANN

    vecs = _unit_rows(10, 8)
    rows = [(f"m{i}", vecs[i], {**_meta("u"), IN_ANN: i >= 6}) for i in range(10)]
    inner = InMemoryIndex()  # holds m6..m9 only; m0..m5 are ledger-held ('exact' / 'pending')
    inner.upsert([r[0] for r in rows[6:]], [r[1] for r in rows[6:]], [_meta("u")] * 4)
    waiting = {"n": 6}
    idx = ScopedVectorIndex(inner, loader=lambda u: rows, counter=lambda u: 10, awaiting=lambda u: waiting["n"],
                            exact_max=5)  # fmt: skip
    w = IndexFilter(user_id="u", statuses=("active",))
    assert idx.plan("u") == "exact"  # the ANN index would miss m0..m5
    assert [h.id for h in idx.query(vecs[0], 1, w)] == ["m0"]
    idx.upsert([r[0] for r in rows[:6]], [r[1] for r in rows[:6]], [_meta("u")] * 6)
    assert idx.plan("u") == "ann"
    waiting["n"] = 0
    fresh = ScopedVectorIndex(inner, loader=lambda u: rows, counter=lambda u: 10, awaiting=lambda u: 0, exact_max=5)
    assert fresh.plan("u") == "ann"  # nothing awaited: a large scope goes straight to the ANN index


def test_wants_ann_counts_an_unloaded_scope_once_then_follows_its_writes() -> None:
    calls = {"n": 0}

    def counter(user: str) -> int:
        calls["n"] += 1
        return 3

    idx = ScopedVectorIndex(InMemoryIndex(), loader=lambda u: [], counter=counter, exact_max=5)
    vec = _unit_rows(1, 9)[0]
    assert idx.wants_ann("u") is False
    idx.put_local(["a"], [vec], [_meta("u")], new=True)
    assert idx.wants_ann("u") is False
    idx.put_local(["b"], [vec], [_meta("u")], new=True)
    idx.put_local(["a"], [vec], [_meta("u")])  # a rewrite of one already counted (a status change) adds nothing
    assert idx.wants_ann("u") is False  # 3 counted + 2 written = exact_max: still fits
    idx.put_local(["c"], [vec], [_meta("u")], new=True)
    assert idx.wants_ann("u") is True and calls["n"] == 1  # past exact_max
    idx.invalidate("u")
    idx.wants_ann("u")
    assert calls["n"] == 2


def test_a_crash_before_chroma_is_written_is_finished_on_open(tmp_path: Any) -> None:
    """Chroma is written behind the ledger commit for scopes the exact plan serves: a crash there loses nothing."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    inner = InMemoryIndex()
    mm = make_manager(ledger=Ledger(url), index=inner, exact_max=10)
    mm.services.index_sync._deferred.defer = lambda ids: None  # the process dies before the worker runs
    mems = mm.remember_many([{"content": f"note {i}", "scope": ALICE} for i in range(8)])
    assert inner.count() == 0 and mm.stats()["index_pending"] == 8  # served from the block, Chroma not yet
    assert mm.recall("note 7", scope=ALICE, k=1).ids == [mems[7].id]
    reopened = make_manager(ledger=Ledger(url), index=inner, exact_max=10)  # repair() on open writes them
    assert inner.ids() == {m.id for m in mems} and reopened.verify().ok
    assert reopened.recall("note 7", scope=ALICE, k=1).ids == [mems[7].id]


def test_a_store_of_the_exact_only_plan_is_written_to_chroma_on_open(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    inner = InMemoryIndex()
    mm = make_manager(ledger=Ledger(url), index=inner)
    mems = mm.remember_many([{"content": f"note {i}", "scope": ALICE} for i in range(4)])
    mm.flush_index()
    mm.close()
    with Ledger(url).transaction() as conn:  # as an earlier version left it: small scopes never reached Chroma
        conn.execute(update(memories).values(index_state="exact"))
    inner.reset()
    reopened = make_manager(ledger=Ledger(url), index=inner)
    assert inner.ids() == {m.id for m in mems} and reopened.stats()["index_exact"] == 0 and reopened.verify().ok


def test_manager_exact_max_is_validated() -> None:
    from memlineage import ConfigurationError

    for bad in (-1, 2.5, True, "10"):
        with pytest.raises(ConfigurationError, match="exact_max"):
            make_manager(exact_max=bad)


def test_reindex_rebuilds_chroma_with_every_live_memory(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    inner = InMemoryIndex()
    old = make_manager(ledger=Ledger(url), index=inner, exact_max=0)
    mems = old.remember_many([{"content": f"note {i}", "scope": ALICE if i % 2 else BOB} for i in range(10)])
    old.retract(mems[1].id, scope=ALICE)
    old.close()
    assert inner.count() == 10
    mm = make_manager(ledger=Ledger(url), index=inner)  # default exact_max: existing entries keep working
    assert mm.verify().ok and mm.recall("note 3", scope=ALICE, k=1).ids == [mems[3].id]
    new = mm.remember("note new", scope=ALICE)
    mm.flush_index()
    assert new.id in inner.ids()
    inner.delete([mems[3].id])  # an entry lost
    assert mm.reindex() == 11
    assert inner.count() == 11 and mm.stats()["index_exact"] == 0 and mm.verify().ok
    assert mm.recall("note 3", scope=ALICE, k=1).ids == [mems[3].id]
    assert mems[1].id not in mm.recall("note 1", scope=ALICE, k=11).ids
    mm.close()


def test_an_erasure_during_a_hand_over_counts_what_search_could_return() -> None:
    for hold in (False, True):
        mm = make_manager(exact_max=5)
        if hold:  # the background hand-over has not run yet (or the process died before it)
            mm.services.index_sync._deferred.defer = lambda ids: None
        mems = [mm.remember(f"note {i} kiwi word{i}", scope=ALICE) for i in range(7)]
        if not hold:
            mm.flush_index()
        assert mm.erase(mems[0].id, scope=ALICE).index_entries_removed == 1
        assert mm.erase(scope=ALICE).index_entries_removed == 6
        assert mm.verify().ok


def test_stamp_keys_follow_creation_time_above_random_bits() -> None:
    """``stamp_key`` is the creation slot (1/32 s, an ~18-hour cycle) above 10 random bits: rows written one after
    another sit next to each other in ``ix_ml_memories_stamp``, so a cascade's status change rewrites neighbouring
    index pages (random keys put each row's entry on a random page)."""
    from memlineage.ledger._ledger import STAMP_RANDOM_BITS, STAMP_SLOTS_PER_S, STAMP_TIME_BITS, new_stamp_key

    t0 = 1_796_678_243 * 10**9
    slot_ns = 10**9 // STAMP_SLOTS_PER_S
    keys = [new_stamp_key(t0 + i * slot_ns) for i in range(200)]
    assert all(0 <= k < 2**31 for k in keys)
    assert keys == sorted(keys)  # one slot apart: in creation order whatever the random bits
    same_slot = {new_stamp_key(t0) for _ in range(64)}
    assert len(same_slot) > 32  # the low bits are random
    assert {k >> STAMP_RANDOM_BITS for k in same_slot} == {keys[0] >> STAMP_RANDOM_BITS}
    cycle_ns = (1 << STAMP_TIME_BITS) * slot_ns
    assert new_stamp_key(t0 + cycle_ns) >> STAMP_RANDOM_BITS == keys[0] >> STAMP_RANDOM_BITS  # wraps, still 31 bits


def test_rows_written_later_get_later_stamp_keys() -> None:
    mm = make_manager()
    first = mm.remember("the first note", scope=ALICE)
    time.sleep(0.1)  # a few 1/32 s slots
    second = mm.remember("the second note", scope=ALICE)
    with mm.ledger.read() as conn:
        rows = dict(conn.execute(select(memories.c.id, memories.c.stamp_key)).all())
    cycle = 1 << 21
    gap = ((rows[second.id] >> 10) - (rows[first.id] >> 10)) % cycle
    assert 1 <= gap <= 32  # at least one slot later (modulo the cycle), not a random key


def test_own_writes_keep_the_in_memory_legs_in_step_with_the_ledger_stamp() -> None:
    """Server mode checks the ledger's stamp before each query; this process's own writes must never trigger a
    reload (a leg whose tally drifted from the ledger would reload the scope on every query)."""
    mm = make_manager()  # no writer lock: stamps are checked
    loads = {"vector": 0, "lexical": 0}
    vector_loader, lexical_loader = mm.index._loader, mm.lexical._loader

    def count(name: str, fn: Any) -> Any:
        def wrapped(user: str) -> Any:
            loads[name] += 1
            return fn(user)

        return wrapped

    mm.index._loader, mm.lexical._loader = count("vector", vector_loader), count("lexical", lexical_loader)

    def ask(text: str) -> list[str]:
        return mm.recall(text, scope=ALICE, k=30, include_suspect=True).ids

    mems = mm.remember_many([{"content": f"alice note {i} about topic{i % 4}", "scope": ALICE} for i in range(20)])
    ask("topic1")
    premise = mm.remember("fares are in euros", scope=ALICE, source="tool:fares")
    plan = mm.remember("the fare is 70 euros", scope=ALICE, source="reasoning", derived_from=[premise.id])
    ask("fare")
    mm.retract(premise.id, scope=ALICE)
    mm.flush_index()
    ask("fare")
    mm.revalidate(plan.id, scope=ALICE)
    ask("fare")
    mm.erase(mems[0].id, scope=ALICE)
    ask("alice note")
    mm.supersede(mems[1].id, "alice note 1 about topic9", scope=ALICE)
    ask("topic9")
    mm.forget(mems[2].id, scope=ALICE)
    assert mems[2].id not in ask("alice note 2")
    assert loads == {"vector": 1, "lexical": 1}


def test_a_large_deferred_cascade_is_left_to_the_background_sync_and_never_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Server mode: a cascade past ``LOCAL_STATUSES_MAX`` memories is not read back for the in-memory legs (that
    read would double its cost); the legs then differ from the ledger's stamp, so a query reloads the scope, and
    nothing withdrawn is served either way."""
    import memlineage.services.index_sync as index_sync

    monkeypatch.setattr(index_sync, "LOCAL_STATUSES_MAX", 2)
    mm = make_manager()  # no writer lock: stamps are checked
    reads: list[int] = []
    local = mm.services.index_sync._local_statuses
    mm.services.index_sync._local_statuses = lambda ids: (reads.append(len(ids)), local(ids))[1]
    root = mm.remember("fares are quoted in euros", scope=ALICE, source="tool:fares")
    plans = [
        mm.remember(f"the fare to city {i} is {70 + i} euros", scope=ALICE, source="reasoning", derived_from=[root.id])
        for i in range(3)
    ]
    keep = mm.remember("the train leaves at 9", scope=ALICE)
    assert set(mm.recall("fare euros", scope=ALICE, k=10).ids) >= {root.id, *(p.id for p in plans)}
    mm.retract(root.id, scope=ALICE)  # four status changes: past the limit
    assert reads == []
    served = mm.recall("fare euros train", scope=ALICE, k=10).ids
    assert keep.id in served and not {root.id, *(p.id for p in plans)} & set(served)
    mm.supersede(keep.id, "the train leaves at 10", scope=ALICE)  # one status change: into the legs at once
    assert reads == [1]
    mm.close()


@pytest.mark.parametrize("shared", [False, True], ids=["embedded", "server"])
def test_a_revision_that_takes_a_scope_past_exact_max_hands_it_over(shared: bool) -> None:
    ledger = Ledger("sqlite://")
    inner = InMemoryIndex()
    index = ScopedVectorIndex.over_ledger(inner, ledger, exact_max=3, shared=shared)
    mm = make_manager(ledger=ledger, index=index)
    mems = mm.remember_many([{"content": f"note {i}", "scope": ALICE} for i in range(3)])
    new = mm.supersede(mems[0].id, "note 0, revised", scope=ALICE).memory  # the old version stays indexable: 4
    mm.flush_index()
    assert new is not None and inner.ids() == {*(m.id for m in mems), new.id}
    assert mm.stats()["index_exact"] == 0 and mm.verify().ok
