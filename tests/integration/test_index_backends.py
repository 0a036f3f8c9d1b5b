"""One ``VectorIndex`` contract, run on InMemoryIndex and Chroma (ephemeral, persistent and server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from memlineage import MemoryManager, Scope
from memlineage.index import IndexFilter, VectorIndex
from memlineage.ledger import Ledger
from memlineage.testing import FakeEmbedder

pytestmark = pytest.mark.integration

DIM = 8


def vec(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(DIM)
    return (v / np.linalg.norm(v)).tolist()


def meta(user: str = "alice", **kw: Any) -> dict[str, Any]:
    base = {
        "user_id": user, "agent_id": "", "session_id": "", "kind": "episodic", "status": "active",
        "source_kind": "user", "created_at": 1.0, "valid_from": 1.0, "value": 0.5, "content_hash": "h",
    }  # fmt: skip
    base.update(kw)
    return base


def where(user: str = "alice", **kw: Any) -> IndexFilter:
    return IndexFilter(user_id=user, statuses=kw.pop("statuses", ("active",)), **kw)


@pytest.fixture
def index(index_factory: Callable[[], VectorIndex]) -> VectorIndex:
    return index_factory()


def test_is_a_vector_index(index: VectorIndex) -> None:
    assert isinstance(index, VectorIndex)


def test_empty_operations_are_no_ops(index: VectorIndex) -> None:
    index.upsert([], [], [])
    index.update_metadata([], [])
    assert index.delete([]) == 0
    assert index.delete(["never-there"]) == 0
    assert index.get_metadata([]) == []
    assert index.count() == 0 and index.ids() == set()
    assert index.query(vec(0), 5, where()) == []
    assert index.query(vec(0), 0, where()) == []


def test_upsert_query_order_and_similarity(index: VectorIndex) -> None:
    index.upsert(["a", "b", "c"], [vec(1), vec(2), vec(3)], [meta(), meta(), meta()])
    hits = index.query(vec(2), 3, where())
    assert hits[0].id == "b" and hits[0].similarity == pytest.approx(1.0, abs=1e-4)
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)
    assert all(-1.0001 <= h.similarity <= 1.0001 for h in hits)
    assert len(index.query(vec(2), 50, where())) == 3
    index.upsert(["b"], [vec(9)], [meta(status="active")])  # replace
    assert index.query(vec(9), 1, where())[0].id == "b"
    assert index.count() == 3


def test_filters_scope_status_kind_session_tags(index: VectorIndex) -> None:
    index.upsert(
        ["a1", "a2", "a3", "a4", "b1", "a5"],
        [vec(i) for i in range(6)],
        [
            meta(),
            meta(agent_id="planner", session_id="s1", tags=["travel", "paris"]),
            meta(agent_id="other"),
            meta(status="suspect", kind="semantic"),
            meta(user="bob"),
            meta(status="retracted"),
        ],
    )
    ids = lambda f: {h.id for h in index.query(vec(0), 10, f)}  # noqa: E731
    assert ids(where()) == {"a1", "a2", "a3"}
    assert ids(where("bob")) == {"b1"}
    assert ids(where(agent_id="planner")) == {"a1", "a2"}
    assert ids(where(session_id="s1")) == {"a2"}
    assert ids(where(statuses=("active", "suspect"))) == {"a1", "a2", "a3", "a4"}
    assert ids(where(statuses=("active", "suspect"), kinds=("semantic",))) == {"a4"}
    assert ids(where(tags=("travel",))) == {"a2"}
    assert ids(where(tags=("travel", "rome"))) == set()
    assert ids(where("mallory")) == set()


def test_update_metadata_merges_and_skips_missing(index: VectorIndex) -> None:
    index.upsert(["a"], [vec(1)], [meta()])
    index.update_metadata(["a", "missing"], [{"status": "retracted"}, {"status": "active"}])
    got = index.get_metadata(["missing", "a"])
    assert got[0] is None
    assert got[1]["status"] == "retracted" and got[1]["user_id"] == "alice"
    assert index.ids() == {"a"}
    assert index.query(vec(1), 5, where()) == []


def test_delete_counts_existing(index: VectorIndex) -> None:
    index.upsert(["a", "b"], [vec(1), vec(2)], [meta(), meta()])
    assert index.delete(["a", "zzz", "a"]) == 1
    assert index.ids() == {"b"} and index.count() == 1


def test_reset(index: VectorIndex) -> None:
    index.upsert(["a"], [vec(1)], [meta()])
    index.reset()
    assert index.count() == 0
    index.upsert(["b"], [vec(2)], [meta()])
    assert index.ids() == {"b"}


def test_large_batch_and_reopen(index_factory: Callable[[], VectorIndex]) -> None:
    index = index_factory()
    n = 4500  # above ChromaIndex.BATCH
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((n, DIM)).tolist()
    index.upsert([f"m{i}" for i in range(n)], vectors, [meta() for _ in range(n)])
    again = index_factory()  # the same collection / directory, opened again
    assert again.count() == n
    assert len(again.ids()) == n
    assert again.query(vectors[4321], 1, where())[0].id == "m4321"


def test_manager_end_to_end(index_factory: Callable[[], VectorIndex]) -> None:
    # exact_max=0: every memory goes to the backend under test (not held for the exact plan by the ledger)
    mm = MemoryManager(ledger=Ledger("sqlite://"), index=index_factory(), embedder=FakeEmbedder(), exact_max=0)
    alice, bob = Scope(user_id="alice"), Scope(user_id="bob")
    a = mm.remember("alice flies to Lisbon on Friday", scope=alice)
    b = mm.remember("bob flies to Oslo on Friday", scope=bob)
    c = mm.remember("alice prefers aisle seats", scope=alice, kind="semantic", tags=["seat"])
    assert mm.recall("flies Lisbon", scope=alice, k=1).ids == [a.id]
    friday = mm.recall("flies Friday", scope=alice, k=5).ids
    assert a.id in friday and b.id not in friday
    assert mm.recall("seats", scope=alice, tags=["seat"], k=5).ids == [c.id]
    mm.retract(a.id, scope=alice)
    assert a.id not in mm.recall("flies Lisbon", scope=alice, k=5).ids
    receipt = mm.erase(scope=alice)
    assert receipt.index_entries_removed == 2
    assert mm.index.ids() == {b.id}
    assert mm.verify().ok
