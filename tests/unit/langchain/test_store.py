"""LineageStore conformance: the same assertions against ours and LangGraph's InMemoryStore (the oracle)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.store.base import BaseStore, GetOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from memlineage import InvalidNamespaceError, MemoryManager, Relation, Status
from memlineage.ledger import Ledger
from memlineage.testing import make_manager

from memlineage_langchain import LineageStore


@pytest.fixture(params=["memory", "file", "oracle"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    if request.param == "oracle":
        yield InMemoryStore()
        return
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") if request.param == "file" else Ledger("sqlite://")
    mm = make_manager(ledger=ledger)
    yield LineageStore(mm)
    mm.close()


@pytest.fixture
def lineage() -> Iterator[LineageStore]:
    mm = make_manager()
    yield LineageStore(mm)
    mm.close()


# ---------------------------------------------------------------------------------------------------- contract
def test_batch_keeps_op_order(store):
    ns = ("alice", "prefs")
    # InMemoryStore applies the puts of a batch after its reads, so reads go in a second batch.
    assert store.batch([PutOp(ns, "a", {"text": "aisle seat"}), PutOp(ns, "b", {"text": "vegetarian"})]) == [
        None,
        None,
    ]
    results = store.batch([GetOp(ns, "b"), SearchOp(ns, limit=10), GetOp(ns, "missing"), GetOp(ns, "a")])
    assert results[0].value == {"text": "vegetarian"}
    assert [i.key for i in results[1]] == ["a", "b"]
    assert results[2] is None
    assert results[3].value == {"text": "aisle seat"}


def test_get_missing_key_is_none(store):
    assert store.get(("alice", "prefs"), "nope") is None


def test_put_existing_key_updates_value_and_updated_at_not_created_at(store):
    ns = ("alice", "prefs")
    store.put(ns, "seat", {"text": "aisle"})
    first = store.get(ns, "seat")
    store.put(ns, "seat", {"text": "window"})
    second = store.get(ns, "seat")
    assert second.value == {"text": "window"}
    if isinstance(store, LineageStore):  # LangGraph's InMemoryStore resets created_at; we keep the first one
        assert second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    assert second.namespace == ns and second.key == "seat"


def test_put_replaces_the_value_when_only_unindexed_fields_change(store):
    ns = ("alice", "docs")
    store.put(ns, "doc", {"title": "parrots", "body": "first draft"}, index=["title"])
    store.put(ns, "doc", {"title": "parrots", "body": "final text"}, index=["title"])
    assert store.get(ns, "doc").value == {"title": "parrots", "body": "final text"}
    store.put(ns, "seat", {"text": "Aisle"})
    store.put(ns, "seat", {"text": "aisle"})  # the same words to a duplicate check, another value to put
    assert store.get(ns, "seat").value == {"text": "aisle"}
    assert [i.value for i in store.search(ns, filter={"body": "final text"})] == [
        {"title": "parrots", "body": "final text"}
    ]


def test_delete_hides_the_item(store):
    ns = ("alice", "prefs")
    store.put(ns, "seat", {"text": "aisle"})
    store.delete(ns, "seat")
    assert store.get(ns, "seat") is None
    assert store.search(ns) == []
    store.delete(ns, "never-there")  # no error


def test_search_filter_limit_offset(store):
    ns = ("alice", "facts")
    for i in range(6):
        store.put(ns, f"k{i}", {"text": f"fact {i}", "n": i, "even": i % 2 == 0})
    assert [i.key for i in store.search(ns, filter={"even": True})] == ["k0", "k2", "k4"]
    assert [i.key for i in store.search(ns, filter={"n": {"$gte": 3}})] == ["k3", "k4", "k5"]
    assert [i.key for i in store.search(ns, limit=2, offset=1)] == ["k1", "k2"]
    assert [i.key for i in store.search(ns, filter={"even": True}, limit=1, offset=1)] == ["k2"]
    assert [i.key for i in store.search(("alice",), limit=3)] == ["k0", "k1", "k2"]


def test_search_with_query_returns_items_of_the_prefix(store):
    store.put(("alice", "facts"), "city", {"text": "lives in Paris"})
    store.put(("alice", "other"), "food", {"text": "likes sushi"})
    found = store.search(("alice", "facts"), query="Paris")
    assert [i.key for i in found] == ["city"]
    for item in found:
        assert item.score is None or 0.0 <= item.score <= 1.0


def test_list_namespaces_prefix_suffix_max_depth(store):
    if isinstance(store, LineageStore):
        store.admin = ("ops@example", "conformance test")  # a cross-user listing is an audited admin read
    for ns in [("alice", "prefs"), ("alice", "facts", "travel"), ("bob", "prefs"), ("bob", "facts", "food")]:
        store.put(ns, "k", {"text": "x"})
    assert store.list_namespaces() == sorted(
        [("alice", "prefs"), ("alice", "facts", "travel"), ("bob", "prefs"), ("bob", "facts", "food")]
    )
    assert store.list_namespaces(prefix=("alice",)) == [("alice", "facts", "travel"), ("alice", "prefs")]
    assert store.list_namespaces(suffix=("prefs",)) == [("alice", "prefs"), ("bob", "prefs")]
    assert store.list_namespaces(max_depth=1) == [("alice",), ("bob",)]
    assert store.list_namespaces(prefix=("*", "facts")) == [
        ("alice", "facts", "travel"),
        ("bob", "facts", "food"),
    ]


@pytest.mark.parametrize("bad", [(), ("alice", ""), ("alice", "a.b"), ("langgraph", "x")])
def test_invalid_namespaces_raise_value_error(store, bad):
    with pytest.raises(ValueError):
        store.put(bad, "k", {"text": "x"})


async def test_abatch_matches_batch(store):
    ns = ("alice", "prefs")
    store.put(ns, "a", {"text": "aisle"})
    ops = [GetOp(ns, "a"), SearchOp(ns, limit=5), GetOp(ns, "zzz")]
    sync = store.batch(ops)
    asynchronous = await store.abatch(ops)
    assert [getattr(r, "value", r) for r in sync[:1]] == [getattr(r, "value", r) for r in asynchronous[:1]]
    assert [i.key for i in sync[1]] == [i.key for i in asynchronous[1]]
    assert sync[2] is None and asynchronous[2] is None
    await store.aput(ns, "b", {"text": "window"})
    assert (await store.aget(ns, "b")).value == {"text": "window"}


# ---------------------------------------------------------------------------------------------------- lineage-specific
@pytest.mark.parametrize("bad", [(), ("alice", ""), ("alice", "a.b"), ("langgraph", "x"), ["alice"]])
def test_our_invalid_namespace_error_is_typed(lineage, bad):
    with pytest.raises(InvalidNamespaceError):
        lineage.put(bad, "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        lineage.batch([GetOp(tuple(bad) + ("",), "k")])


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (("alice",) + tuple(f"l{i}" for i in range(5_000)), "labels"),  # issue 14: thousands deep broke Chroma
        (("alice",) + ("x",) * 16, "labels"),
        (("alice", "y" * 300), "characters"),
        (("alice", "bad \ud800"), "surrogate"),
        (("a" * 256, "prefs"), "characters"),
    ],
)
def test_namespaces_beyond_the_limits_write_nothing(lineage, bad, words):
    before = lineage.manager.stats()
    for call in (
        lambda: lineage.put(bad, "k", {"text": "x"}),
        lambda: lineage.batch([PutOp(bad, "k", {"text": "x"})]),
        lambda: lineage.search(bad),
    ):
        with pytest.raises(InvalidNamespaceError, match=words):
            call()
    assert lineage.manager.stats() == before
    ok = ("alice",) + tuple(f"l{i}" for i in range(15))  # 16 labels: the limit itself
    lineage.put(ok, "k", {"text": "deep but allowed"})
    assert lineage.get(ok, "k").value == {"text": "deep but allowed"}
    assert lineage.manager.verify().ok


def test_ttl_is_not_supported(lineage):
    with pytest.raises(NotImplementedError):
        lineage.put(("alice", "prefs"), "k", {"text": "x"}, ttl=5)


def test_search_requires_a_user_label(lineage):
    with pytest.raises(InvalidNamespaceError, match="user"):
        lineage.search(())


def test_delete_records_an_invalidation_and_keeps_the_version(lineage):
    mm: MemoryManager = lineage.manager
    ns = ("alice", "prefs")
    lineage.put(ns, "seat", {"text": "aisle"})
    (mem,) = mm.find(scope="alice")
    lineage.delete(ns, "seat")
    kept = mm.require(mem.id, scope="alice")
    assert kept.status is Status.RETRACTED
    edges = mm.ledger.edges_touching([mem.id])
    assert any(e["relation"] == Relation.WAS_INVALIDATED_BY.value for e in edges)


def test_update_supersedes_and_marks_derived_memories_suspect(lineage):
    mm: MemoryManager = lineage.manager
    ns = ("alice", "profile")
    lineage.put(ns, "city", {"text": "lives in Paris"})
    (v1,) = mm.find(scope="alice")
    hotel = mm.remember("Book Hotel Lumière in Paris", scope="alice", source="reasoning", derived_from=[v1.id])
    lineage.put(ns, "city", {"text": "lives in Lyon"})
    assert mm.require(v1.id, scope="alice").status is Status.SUPERSEDED
    assert mm.require(hotel.id, scope="alice").status is Status.SUSPECT
    current = mm.find(scope="alice", slot=mm.require(v1.id, scope="alice").slot)[-1]
    assert current.supersedes == v1.id and current.version == 2
    lineage.put(ns, "city", {"text": "lives in Lyon"})  # identical value: no new version
    assert mm.find(scope="alice", slot=current.slot)[-1].id == current.id


def test_same_value_under_two_keys_stays_two_items(lineage):
    ns = ("alice", "prefs")
    lineage.put(ns, "a", {"text": "same"})
    lineage.put(ns, "b", {"text": "same"})
    assert {i.key for i in lineage.search(ns)} == {"a", "b"}


def test_search_scores_are_in_unit_range_higher_is_better(lineage):
    ns = ("alice", "facts")
    lineage.put(ns, "city", {"text": "lives in Paris france"})
    lineage.put(ns, "food", {"text": "likes sushi rolls"})
    found = lineage.search(ns, query="Paris france")
    assert found[0].key == "city"
    assert all(0.0 <= i.score <= 1.0 for i in found)
    assert found == sorted(found, key=lambda i: -i.score)


def test_index_fields_choose_what_is_embedded(lineage):
    ns = ("alice", "facts")
    lineage.put(ns, "doc", {"title": "parrots", "body": "unrelated words"}, index=["title"])
    (mem,) = lineage.manager.find(scope="alice")
    assert mem.content == "facts/doc: parrots"


def test_two_users_never_see_each_others_items(lineage):
    lineage.put(("alice", "prefs"), "seat", {"text": "aisle seat"})
    lineage.put(("bob", "prefs"), "seat", {"text": "window seat"})
    assert [i.value["text"] for i in lineage.search(("bob",), query="aisle seat")] == ["window seat"]
    assert lineage.get(("bob", "prefs"), "seat").value == {"text": "window seat"}
    assert [m.content for m in lineage.manager.find(scope="bob")] == ['prefs/seat: {"text": "window seat"}']


def test_user_label_maps_another_position(tmp_path):
    mm = make_manager()
    store = LineageStore(mm, user_label=1)
    store.put(("memories", "alice"), "k", {"text": "x"})
    assert [m.scope.user_id for m in mm.find(scope="alice")] == ["alice"]
    with pytest.raises(InvalidNamespaceError):
        store.put(("memories",), "k", {"text": "x"})
    mm.close()


def test_list_namespaces_is_scoped_unless_admin(lineage):
    lineage.put(("alice", "prefs"), "k", {"text": "x"})
    lineage.put(("bob", "prefs"), "k", {"text": "y"})
    assert lineage.list_namespaces(prefix=("alice",)) == [("alice", "prefs")]
    with pytest.raises(InvalidNamespaceError, match="admin"):
        lineage.list_namespaces()
    with pytest.raises(InvalidNamespaceError, match="admin"):
        lineage.list_namespaces(prefix=("*", "prefs"))
    lineage.admin = ("ops@example", "support ticket 42")
    assert lineage.list_namespaces() == [("alice", "prefs"), ("bob", "prefs")]
    events = lineage.manager.ledger.events(user_id=None, types=["admin_access"])
    assert [e["data"]["reason"] for e in events] == ["support ticket 42"]


def test_put_rejects_non_dict_values_with_a_typed_error(lineage):
    from memlineage import InvalidInputError

    with pytest.raises(InvalidInputError, match="dicts"):
        lineage.put(("alice", "prefs"), "k", "not a dict")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="dicts"):
        lineage.batch([PutOp(("alice", "prefs"), "k", ["a", "list"])])  # type: ignore[arg-type]
