"""Memories read by id reuse the object built from an unchanged row, and never serve a changed one (issue 26)."""

from __future__ import annotations

import numpy as np
import pytest
from memlineage import MemoryManager, Scope, Status
from memlineage.index import IndexFilter, InMemoryIndex, ScopedVectorIndex
from memlineage.ledger import Ledger
from memlineage.testing import FakeEmbedder, make_manager

ALICE = Scope(user_id="alice")


@pytest.fixture
def mm() -> MemoryManager:
    return make_manager()


def test_an_unchanged_row_gives_the_same_object(mm):
    m = mm.remember("I live in Lisbon", scope=ALICE)
    first = mm.ledger.memories([m.id])[0]
    reused = mm.ledger._reader.reused
    assert mm.ledger.memories([m.id, "missing", m.id]) == [first, None, first]
    assert mm.ledger.memories([m.id])[0] is first
    assert mm.ledger._reader.reused > reused


def test_every_change_of_the_row_is_read(mm):
    premise = mm.remember("Flights to Lisbon are cheap in May", scope=ALICE, source="tool")
    m = mm.remember("Book the May flight to Lisbon", scope=ALICE, source="reasoning", derived_from=[premise.id])
    before = mm.ledger.memories([m.id])[0]
    assert before is not None and before.status is Status.ACTIVE and before.lineage.derived_from == (premise.id,)
    mm.recall("Lisbon flight", scope=ALICE)  # use counts and value change
    used = mm.ledger.memories([m.id])[0]
    assert used is not before and used.use_count == 1
    mm.retract(premise.id, scope=ALICE, reason="prices changed")
    after = mm.ledger.memories([m.id])[0]
    assert after is not used and after.status is Status.SUSPECT
    assert after == mm.require(m.id, scope=ALICE)


def test_a_rolled_back_read_is_not_served(mm):
    m = mm.remember("I live in Lisbon", scope=ALICE)
    with pytest.raises(RuntimeError), mm.ledger.transaction() as conn:
        mm.ledger.update_memories(conn, [m.id], {"status": Status.RETRACTED.value})
        assert mm.ledger.memories([m.id], conn)[0].status is Status.RETRACTED
        raise RuntimeError("roll back")
    assert mm.ledger.memories([m.id])[0].status is Status.ACTIVE


def test_an_erasure_empties_the_reader(mm):
    m = mm.remember("My locker code is 4471", scope=ALICE)
    mm.ledger.memories([m.id])
    mm.erase(m.id, scope=ALICE)
    assert not any("4471" in held.content for _, held in mm.ledger._reader._built.values())
    (erased,) = mm.ledger.memories([m.id])
    assert erased is not None and erased.status is Status.ERASED and erased.content == ""


def test_held_vectors_come_from_the_loaded_block_only():
    emb, ledger = FakeEmbedder(), Ledger("sqlite://")
    index = ScopedVectorIndex.over_ledger(InMemoryIndex(), ledger)
    mm = make_manager(ledger=ledger, index=index, embedder=emb)
    a = mm.remember("I live in Lisbon", scope=ALICE)
    b = mm.remember("I work at a bakery", scope=ALICE)
    mm.flush_index()
    index.query(emb.embed(["Lisbon"])[0], 2, IndexFilter(user_id="alice", statuses=("active",)))
    held = index.held_vectors("alice", [a.id, b.id, "missing"])
    assert set(held) == {a.id, b.id}
    stored = mm.ledger.vectors([a.id])[a.id]
    assert np.allclose(held[a.id], stored / np.linalg.norm(stored), atol=1e-6)
    assert index.held_vectors("bob", [a.id]) == {}  # another scope's block never answers for alice's ids
