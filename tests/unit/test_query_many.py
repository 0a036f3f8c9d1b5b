"""The write gate asks the index once per scope for a batch's nearest memories (issue 26: ingest into one scope)."""

from __future__ import annotations

import numpy as np
import pytest
from memlineage import Scope
from memlineage.index import IndexFilter, InMemoryIndex, ScopedVectorIndex
from memlineage.ledger import Ledger
from memlineage.testing import FakeEmbedder, make_manager
from memlineage.value import ValueModel

ALICE = Scope(user_id="alice")


def _scoped(exact_max: int = 100_000) -> tuple[ScopedVectorIndex, Ledger]:
    ledger = Ledger("sqlite://")
    return ScopedVectorIndex.over_ledger(InMemoryIndex(), ledger, exact_max=exact_max), ledger


@pytest.mark.parametrize("exact_max", [100_000, 0])  # the exact block, and the wrapped index (ANN plan)
def test_query_many_answers_as_query_does(exact_max):
    index, ledger = _scoped(exact_max)
    emb = FakeEmbedder()
    mm = make_manager(ledger=ledger, index=index, embedder=emb)
    texts = [f"note {i} about topic {i % 7} in city {i % 5}" for i in range(60)]
    mm.remember_many([{"content": t, "scope": ALICE} for t in texts[:50]])
    mm.remember_many([{"content": t, "scope": Scope(user_id="bob")} for t in texts[50:]])
    mm.flush_index()
    where = IndexFilter(user_id="alice", statuses=("active",))
    asks = [emb.embed([f"topic {i} city {i}"])[0] for i in range(7)]
    many = index.query_many(asks, 5, where)
    one = [index.query(v, 5, where) for v in asks]
    assert [[h.id for h in hits] for hits in many] == [[h.id for h in hits] for hits in one]
    assert all(
        np.allclose([h.similarity for h in a], [h.similarity for h in b], atol=1e-5)
        for a, b in zip(many, one, strict=True)
    )
    owners = {m.id: m.scope.user_id for m in mm.find(scope="alice")}
    assert all(h.id in owners for hits in many for h in hits)  # bob's memories never answer for alice
    assert index.query_many([], 5, where) == []
    assert index.query_many(asks[:2], 0, where) == [[], []]  # as query() answers k = 0


def test_query_many_takes_vectors_of_mixed_sizes_one_by_one():
    index, ledger = _scoped()
    emb = FakeEmbedder()
    mm = make_manager(ledger=ledger, index=index, embedder=emb)
    mm.remember("I live in Lisbon", scope=ALICE)
    mm.flush_index()
    where = IndexFilter(user_id="alice", statuses=("active",))
    good = emb.embed(["Lisbon"])[0]
    answers = index.query_many([good, [1.0, 0.0, 0.0]], 3, where)
    assert [len(a) for a in answers] == [1, 0]  # a vector of another size matches nothing, as with query()


def test_a_batch_scores_novelty_as_one_by_one():
    """The value each memory gets does not depend on whether its batch asked the index at once."""

    def values(batched: bool) -> list[tuple[str, float]]:
        index, ledger = _scoped()
        mm = make_manager(ledger=ledger, index=index, embedder=FakeEmbedder(), value_model=ValueModel())
        said = ["Bike chain snapped near Elm hill", "Garden fence leans after storm", "Kitchen sink drips nightly"]
        mm.remember_many([{"content": t, "scope": ALICE} for t in said])
        # each new statement shares words with one earlier statement and none with the others of its batch
        new = ["bike chain snapped twice", "fence leans more", "sink drips slowly", "radio hums loudly"]
        items = [{"content": t, "scope": ALICE} for t in new] + [
            {"content": "我住在上海浦东", "scope": ALICE},
            {"content": "I live in Porto", "scope": ALICE, "slot": "user.city"},
        ]
        if batched:
            got = mm.remember_many(items)
        else:
            got = [mm.remember(**item) for item in items]
        return [(m.content, round(m.value, 5)) for m in got if m is not None]

    batched = values(batched=True)
    assert len({v for _, v in batched}) > 2  # the drafts differ in novelty: a mix-up between them would show
    assert batched == values(batched=False)
