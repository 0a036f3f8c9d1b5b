"""Bad input anywhere → a typed ``MemLineageError`` whose message says what to do, and no partial write.

Every case snapshots the whole ledger (every row of every table) and the index before the call and compares after.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage import (
    Activity,
    InvalidInputError,
    LineageCycleError,
    MemLineageError,
    MemoryManager,
    MemoryNotFoundError,
    Scope,
    ScopeViolationError,
    Source,
    StorageError,
)
from memlineage.index import InMemoryIndex
from memlineage.ledger._schema import metadata as ledger_tables
from memlineage.testing import FakeEmbedder, make_manager
from sqlalchemy import select

ALICE = Scope(user_id="alice", session_id="s1")
BOB = Scope(user_id="bob", session_id="s9")


def snapshot(mm: MemoryManager) -> dict[str, Any]:
    """Every ledger row of every table, the index ids and their metadata."""
    out: dict[str, Any] = {}
    with mm.ledger.read() as conn:
        for table in ledger_tables.sorted_tables:
            rows = [tuple(r) for r in conn.execute(select(table))]
            out[table.name] = sorted(rows, key=repr)
    ids = sorted(mm.index.ids())
    out["index"] = list(zip(ids, mm.index.get_metadata(ids), strict=True))
    out["stats"] = mm.stats()
    return out


@pytest.fixture
def store() -> Iterator[tuple[MemoryManager, dict[str, str]]]:
    """A manager holding a small lineage: alice's fact → conclusion, bob's fact, one retracted, one erased."""
    mm = make_manager()
    fact = mm.remember("Alice lives in Paris", scope=ALICE, kind="semantic", slot="city")
    concl = mm.remember("Book a hotel in Paris", scope=ALICE, source="reasoning", derived_from=[fact.id])
    bob_fact = mm.remember("Bob lives in Rome", scope=BOB)
    old = mm.remember("Alice's old phone number", scope=ALICE)
    mm.retract(old.id, scope=ALICE)
    gone = mm.remember("Alice's erased secret", scope=ALICE)
    mm.erase(gone.id, scope=ALICE)
    mm.flush_index()  # the retraction's index status catches up in the background: settle it before snapshots
    yield mm, {"fact": fact.id, "concl": concl.id, "bob": bob_fact.id, "retracted": old.id, "erased": gone.id}
    mm.close()


def refused(mm: MemoryManager, call: Callable[[], Any], error: type[MemLineageError], *words: str) -> MemLineageError:
    """Assert ``call`` raises ``error`` mentioning ``words`` and leaves the store exactly as it was."""
    before = snapshot(mm)
    with pytest.raises(error) as info:
        call()
    assert snapshot(mm) == before, "a refused call changed the store"
    message = str(info.value)
    for w in words:
        assert w.lower() in message.lower(), f"{w!r} not in {message!r}"
    return info.value


# ------------------------------------------------------------------------------------------------ content
@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, ("str",)),
        ("", ("empty",)),
        ("   \n\t ", ("empty",)),
        (b"bytes", ("str", "bytes")),
        (42, ("str", "int")),
        (["a list"], ("str",)),
        ("lone \ud800 surrogate", ("surrogate",)),
        ("\udfff", ("surrogate",)),
    ],
)
def test_bad_content(store: tuple[MemoryManager, dict[str, str]], content: Any, words: tuple[str, ...]) -> None:
    mm, _ = store
    refused(mm, lambda: mm.remember(content, scope=ALICE), InvalidInputError, *words)


def test_one_megabyte_content_round_trips(store: tuple[MemoryManager, dict[str, str]]) -> None:
    mm, _ = store
    big = ("lorem ipsum dolor sit amet 東京 " * 40_000)[: 1 << 20]
    m = mm.remember(big, scope=ALICE)
    assert mm.require(m.id, scope=ALICE).content == big
    assert m.id in mm.recall("lorem ipsum dolor", scope=ALICE, k=3).ids
    assert mm.verify().ok


# ------------------------------------------------------------------------------------------------ scope
def test_a_missing_scope_on_a_read_says_what_to_pass_not_that_it_writes(
    store: tuple[MemoryManager, dict[str, str]],
) -> None:
    mm, _ = store
    with pytest.raises(InvalidInputError) as err:
        mm.recall("Paris", scope=None)
    text = str(err.value)
    assert "scope='alice'" in text and "read" in text
    assert "never writes" not in text


@pytest.mark.parametrize(
    "scope",
    [
        None,
        "",
        "   ",
        42,
        {"user_id": ""},
        {"agent_id": "x"},
        {"user_id": None},
        {"user_id": "a", "bogus": 1},
        ["alice"],
        "\ud800",
        {"user_id": "a", "session_id": "\udc00"},
    ],
)
def test_bad_scope_on_every_verb(store: tuple[MemoryManager, dict[str, str]], scope: Any) -> None:
    mm, ids = store
    calls: list[Callable[[], Any]] = [
        lambda: mm.remember("x", scope=scope),
        lambda: mm.get(ids["fact"], scope=scope),
        lambda: mm.get_many([ids["fact"]], scope=scope),
        lambda: mm.recall("Paris", scope=scope),
        lambda: mm.retract(ids["fact"], scope=scope),
        lambda: mm.supersede(ids["fact"], "Alice lives in Nice", scope=scope),
        lambda: mm.forget(ids["fact"], scope=scope),
        lambda: mm.erase(scope=scope),
        lambda: mm.explain(ids["concl"], scope=scope),
        lambda: mm.audit(scope),
        lambda: mm.ancestors(ids["concl"], scope=scope),
        lambda: mm.descendants(ids["fact"], scope=scope),
        lambda: mm.impact(ids["fact"], scope=scope),
    ]
    for call in calls:
        refused(mm, call, InvalidInputError, "scope")


# ------------------------------------------------------------------------------------------------ metadata
@pytest.mark.parametrize(
    ("meta", "words"),
    [
        ({"score": math.nan}, ("nan",)),
        ({"score": math.inf}, ("inf",)),
        ({"score": -math.inf}, ("inf",)),
        ({"outer": {"inner": math.nan}}, ("nan",)),
        ({"list": [1.0, math.inf]}, ("inf",)),
        ({"_ml_status": "active"}, ("reserved", "_ml_")),
        ({"_ml_": 1}, ("reserved",)),
        ({1: "int key"}, ("key",)),
        ({"": "empty key"}, ("key",)),
        ({"outer": {2: "x"}}, ("key",)),
        ({"obj": object()}, ("type",)),
        ({"bytes": b"raw"}, ("type",)),
        ({"text": "bad \ud800"}, ("surrogate",)),
        ("not a dict", ("mapping",)),
        ([("a", 1)], ("mapping",)),
    ],
)
def test_bad_metadata(store: tuple[MemoryManager, dict[str, str]], meta: Any, words: tuple[str, ...]) -> None:
    mm, ids = store
    refused(mm, lambda: mm.remember("x", scope=ALICE, metadata=meta), InvalidInputError, *words)
    refused(mm, lambda: mm.supersede(ids["fact"], "Alice lives in Nice", scope=ALICE, metadata=meta), InvalidInputError)


def test_nested_metadata_is_kept(store: tuple[MemoryManager, dict[str, str]]) -> None:
    mm, _ = store
    meta = {"a": {"b": {"c": [1, 2, {"d": None}]}}, "when": datetime(2024, 1, 2), "set": {3, 1}}
    m = mm.remember("nested", scope=ALICE, metadata=meta)
    got = mm.require(m.id, scope=ALICE).metadata
    assert got["a"] == {"b": {"c": [1, 2, {"d": None}]}}
    assert got["when"].startswith("2024-01-02T00:00:00") and got["set"] == [1, 3]


# ------------------------------------------------------------------------------------------------ other arguments
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"source": "martian"}, ("source",)),
        ({"source": 42}, ("source",)),
        ({"source": ""}, ("source",)),
        ({"kind": "dream"}, ("kind",)),
        ({"kind": 5}, ("kind",)),  # None is the default: kind decided by the value model
        ({"tags": [1]}, ("tag",)),
        ({"tags": [""]}, ("tag",)),
        ({"tags": 5}, ("tag",)),
        ({"confidence": -0.1}, ("confidence",)),
        ({"confidence": 1.5}, ("confidence",)),
        ({"confidence": math.nan}, ("confidence",)),
        ({"confidence": "high"}, ("confidence",)),
        ({"confidence": True}, ("confidence",)),
        ({"trust": 2}, ("trust",)),
        ({"trust": math.nan}, ("trust",)),
        ({"ttl": 0}, ("ttl",)),
        ({"ttl": -5}, ("ttl",)),
        ({"ttl": "1h"}, ("ttl",)),
        ({"ttl": math.nan}, ("ttl",)),
        ({"ttl": math.inf}, ("ttl",)),
        ({"ttl": timedelta(0)}, ("ttl",)),
        ({"ttl": True}, ("ttl",)),
        ({"ttl": 10**12}, ("ttl",)),
        ({"activity_id": "bad \ud800"}, ("surrogate",)),
        ({"valid_from": "2024-01-01"}, ("valid_from",)),
        ({"valid_from": 1700000000}, ("valid_from",)),
        ({"activity_id": ""}, ("activity_id",)),
        ({"activity_id": 5}, ("activity_id",)),
        ({"parent_activity_id": []}, ("parent_activity_id",)),
        ({"slot": "  "}, ("slot",)),
        ({"slot": 3}, ("slot",)),
        ({"context_hash": 5}, ("context_hash",)),
        ({"derived_from": 5}, ("derived_from",)),
        ({"derived_from": [None]}, ("derived_from",)),
        ({"derived_from": [""]}, ("derived_from",)),
        ({"embedding": ["a", "b"]}, ("embedding",)),
        ({"embedding": [math.nan, 1.0]}, ("embedding",)),
        ({"embedding": []}, ("embedding",)),
        ({"embedding": "vector"}, ("embedding",)),
        ({"embedding": 3.0}, ("embedding",)),
    ],
)
def test_bad_arguments(
    store: tuple[MemoryManager, dict[str, str]], kwargs: dict[str, Any], words: tuple[str, ...]
) -> None:
    mm, _ = store
    refused(mm, lambda: mm.remember("a fine sentence", scope=ALICE, **kwargs), InvalidInputError, *words)
    refused(
        mm,
        lambda: mm.remember_many([{"content": "ok one", "scope": ALICE}, {"content": "x", "scope": ALICE, **kwargs}]),
        InvalidInputError,
    )


def test_premises_unknown_foreign_erased(store: tuple[MemoryManager, dict[str, str]]) -> None:
    mm, ids = store
    refused(mm, lambda: mm.remember("x", scope=ALICE, derived_from=["no-such-id"]), MemoryNotFoundError, "no-such-id")
    refused(mm, lambda: mm.remember("x", scope=ALICE, derived_from=[ids["bob"]]), ScopeViolationError, "scope")
    refused(mm, lambda: mm.remember("x", scope=ALICE, derived_from=[ids["erased"]]), InvalidInputError, "erased")
    batch = [{"content": "good", "scope": ALICE}, {"content": "bad", "scope": ALICE, "derived_from": [ids["bob"]]}]
    refused(mm, lambda: mm.remember_many(batch), ScopeViolationError)


def test_cycles_are_refused(store: tuple[MemoryManager, dict[str, str]]) -> None:
    mm, ids = store
    # The same words derived from the fact's own conclusion are a new memory, never a corroboration that would
    # make the fact its own ancestor.
    again = mm.remember(
        "Alice lives in Paris", scope=ALICE, kind="semantic", source="agent", derived_from=[ids["concl"]]
    )
    assert again.id != ids["fact"]
    assert ids["concl"] not in {m.id for m in mm.ancestors(ids["fact"], scope=ALICE)}
    assert again.id not in {m.id for m in mm.ancestors(again.id, scope=ALICE)}
    mm.flush_index()  # settle its deferred index write before the snapshots below
    # A new version of a memory cannot derive from the memory's own descendants.
    refused(
        mm,
        lambda: mm.supersede(ids["fact"], "Alice lives in Nice", scope=ALICE, derived_from=[ids["concl"]]),
        LineageCycleError,
    )
    refused(
        mm,
        lambda: mm.supersede(ids["fact"], "Alice lives in Nice", scope=ALICE, derived_from=[ids["fact"]]),
        LineageCycleError,
    )


def test_remember_many_shapes(store: tuple[MemoryManager, dict[str, str]]) -> None:
    mm, _ = store
    refused(mm, lambda: mm.remember_many("content"), InvalidInputError, "list")
    refused(mm, lambda: mm.remember_many({"content": "x", "scope": ALICE}), InvalidInputError, "list")
    refused(mm, lambda: mm.remember_many(None), InvalidInputError)
    refused(mm, lambda: mm.remember_many([{"content": "ok", "scope": ALICE}, "x"]), InvalidInputError, "dict")
    refused(
        mm,
        lambda: mm.remember_many([{"content": "ok", "scope": ALICE}, {"scope": ALICE}]),
        InvalidInputError,
        "content",
    )
    refused(
        mm, lambda: mm.remember_many([{"content": "ok", "scope": ALICE, "colour": "red"}]), InvalidInputError, "colour"
    )
    assert mm.remember_many([]) == []


# ------------------------------------------------------------------------------------------------ ids and reads
@pytest.mark.parametrize("bad_id", [None, "", "   ", 42, ["id"], b"id", "\ud800"])
def test_bad_ids(store: tuple[MemoryManager, dict[str, str]], bad_id: Any) -> None:
    mm, _ = store
    for call in (
        lambda: mm.get(bad_id, scope=ALICE),
        lambda: mm.require(bad_id, scope=ALICE),
        lambda: mm.retract(bad_id, scope=ALICE),
        lambda: mm.supersede(bad_id, "new", scope=ALICE),
        lambda: mm.forget(bad_id, scope=ALICE),
        lambda: mm.revalidate(bad_id, scope=ALICE),
        lambda: mm.explain(bad_id, scope=ALICE),
        lambda: mm.ancestors(bad_id, scope=ALICE),
        lambda: mm.descendants(bad_id, scope=ALICE),
        lambda: mm.impact(bad_id, scope=ALICE),
    ):
        refused(mm, call, InvalidInputError, "id")
    if bad_id is not None:  # None means "the whole scope" for these two
        refused(mm, lambda: mm.audit(ALICE, memory_id=bad_id), InvalidInputError, "id")
        refused(mm, lambda: mm.erase(bad_id, scope=ALICE), InvalidInputError, "id")


@pytest.mark.parametrize("which", ["unknown", "bob"])
def test_unknown_or_foreign_ids_are_not_found(store: tuple[MemoryManager, dict[str, str]], which: str) -> None:
    mm, ids = store
    mid = "5d2b0f3e-0000-4000-8000-000000000000" if which == "unknown" else ids["bob"]
    assert mm.get(mid, scope=ALICE) is None
    assert mm.get_many([mid, ids["fact"]], scope=ALICE)[0] is None
    for call in (
        lambda: mm.require(mid, scope=ALICE),
        lambda: mm.retract(mid, scope=ALICE),
        lambda: mm.supersede(mid, "new", scope=ALICE),
        lambda: mm.forget(mid, scope=ALICE),
        lambda: mm.revalidate(mid, scope=ALICE),
        lambda: mm.erase(mid, scope=ALICE),
        lambda: mm.explain(mid, scope=ALICE),
        lambda: mm.ancestors(mid, scope=ALICE),
        lambda: mm.descendants(mid, scope=ALICE),
        lambda: mm.impact(mid, scope=ALICE),
        lambda: mm.audit(ALICE, memory_id=mid),
    ):
        err = refused(mm, call, MemoryNotFoundError, "scope")
        assert "bob" not in str(err).lower() and "Rome" not in str(err)


def test_state_errors(store: tuple[MemoryManager, dict[str, str]]) -> None:
    mm, ids = store
    refused(mm, lambda: mm.supersede(ids["retracted"], "again", scope=ALICE), InvalidInputError, "retracted")
    refused(mm, lambda: mm.supersede(ids["erased"], "again", scope=ALICE), InvalidInputError, "erased")
    refused(mm, lambda: mm.revalidate(ids["fact"], scope=ALICE), InvalidInputError, "suspect")
    refused(mm, lambda: mm.supersede(ids["fact"], "   ", scope=ALICE), InvalidInputError, "empty")
    refused(mm, lambda: mm.supersede(ids["fact"], "Nice", scope=ALICE, kind="dream"), InvalidInputError, "kind")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"query": None}, ("query",)),
        ({"query": ""}, ("query",)),
        ({"query": " \t"}, ("query",)),
        ({"query": "bad \ud800"}, ("surrogate",)),
        ({"query": 7}, ("query",)),
        ({"k": -1}, ("k",)),
        ({"k": "5"}, ("k",)),
        ({"k": True}, ("k",)),
        ({"k": 2.5}, ("k",)),
        ({"kinds": ["dream"]}, ("kind",)),
        ({"kinds": 5}, ("kind",)),
        ({"tags": [3]}, ("tag",)),
        ({"activity_id": 5}, ("activity_id",)),
    ],
)
def test_bad_recall(
    store: tuple[MemoryManager, dict[str, str]], kwargs: dict[str, Any], words: tuple[str, ...]
) -> None:
    mm, _ = store
    args = {"query": "Paris", "scope": ALICE, **kwargs}
    query = args.pop("query")
    refused(mm, lambda: mm.recall(query, **args), InvalidInputError, *words)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"limit": -1}, ("limit",)),
        ({"limit": "10"}, ("limit",)),
        ({"types": 5}, ("types",)),
        ({"types": [1]}, ("types",)),
    ],
)
def test_bad_audit(store: tuple[MemoryManager, dict[str, str]], kwargs: dict[str, Any], words: tuple[str, ...]) -> None:
    mm, _ = store
    refused(mm, lambda: mm.audit(ALICE, **kwargs), InvalidInputError, *words)


def test_bad_reasons_and_activities(store: tuple[MemoryManager, dict[str, str]]) -> None:
    mm, ids = store
    refused(mm, lambda: mm.retract(ids["fact"], scope=ALICE, reason=5), InvalidInputError, "reason")
    refused(mm, lambda: mm.retract(ids["fact"], scope=ALICE, reason="bad \ud800"), InvalidInputError, "surrogate")
    refused(mm, lambda: mm.forget(ids["fact"], scope=ALICE, reason=None), InvalidInputError, "reason")
    refused(mm, lambda: mm.erase(scope=ALICE, reason=["x"]), InvalidInputError, "reason")
    refused(mm, lambda: mm.record_activity({"id": "a"}), InvalidInputError, "Activity")
    refused(mm, lambda: mm.end_activity("no-such-activity", scope=ALICE), MemoryNotFoundError, "record_activity")
    act = mm.record_activity(Activity(id="run-1", kind="run", scope=ALICE))
    refused(mm, lambda: mm.end_activity(act.id, scope=ALICE, metadata={"x": math.nan}), InvalidInputError, "nan")


# ------------------------------------------------------------------------------------------------ limits
def _self_referencing() -> dict[str, Any]:
    loop: dict[str, Any] = {"a": 1}
    loop["self"] = loop
    return loop


def _deep(levels: int) -> dict[str, Any]:
    out: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        out = {"x": out}
    return out


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        # issue 14 kind 1: 5,500 tags were accepted and then broke Chroma for every user
        ({"tags": [f"t{i}" for i in range(5_500)]}, ("tags", "64")),
        ({"tags": [f"t{i}" for i in range(65)]}, ("tags", "64")),
        ({"tags": ["x" * 257]}, ("tag", "256")),
        ({"tags": ["bad \ud800 tag"]}, ("tag", "surrogate")),
        ({"tags": ["nul\x00tag"]}, ("tag", "NUL")),
        ({"metadata": _self_referencing()}, ("metadata", "deeper")),
        ({"metadata": _deep(9)}, ("metadata", "deeper")),
        ({"metadata": {"blob": "x" * 70_000}}, ("metadata", "bytes")),
        ({"metadata": {"bad \ud800": 1}}, ("metadata key", "surrogate")),
        ({"metadata": {"k": {"nested \x00": 1}}}, ("key", "NUL")),
        ({"slot": "s" * 256}, ("slot", "255")),
        ({"activity_id": "a" * 256}, ("activity_id", "255")),
        ({"source": "tool:" + "n" * 256}, ("source", "255")),
        ({"source": "tool:web\x00"}, ("source", "NUL")),
        ({"derived_from": ["i" * 256]}, ("derived_from", "255")),
    ],
)
def test_limits_at_the_boundary(
    store: tuple[MemoryManager, dict[str, str]], kwargs: dict[str, Any], words: tuple[str, ...]
) -> None:
    """Documented limits (models.MAX_*): refused with a typed error before anything is written."""
    mm, _ = store
    refused(mm, lambda: mm.remember("a perfectly fine sentence", scope=ALICE, **kwargs), InvalidInputError, *words)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("\u200b\u200c\u200d\ufeff", ("invisible",)),  # zero-width only
        (" \u2060 \u00ad ", ("invisible",)),
        ("nul \x00 byte", ("NUL",)),
    ],
)
def test_invisible_or_unstorable_content(
    store: tuple[MemoryManager, dict[str, str]], content: str, words: tuple[str, ...]
) -> None:
    mm, _ = store
    refused(mm, lambda: mm.remember(content, scope=ALICE), InvalidInputError, *words)


@pytest.mark.parametrize("field", ["user_id", "agent_id", "session_id"])
@pytest.mark.parametrize("bad", ["u" * 256, "nul\x00id", "\ud800"])
def test_scope_ids_agree_on_every_backend(store: tuple[MemoryManager, dict[str, str]], field: str, bad: str) -> None:
    """Ids longer than 255 characters or holding NUL are refused up front (PostgreSQL cannot store them)."""
    mm, _ = store
    scope = {"user_id": "alice", field: bad}
    refused(mm, lambda: mm.remember("hello there", scope=scope), InvalidInputError, field.split("_")[0])


def test_limits_at_their_edge_are_accepted(store: tuple[MemoryManager, dict[str, str]]) -> None:
    from memlineage.models import MAX_ID_CHARS, MAX_METADATA_DEPTH, MAX_TAG_CHARS, MAX_TAGS

    mm, _ = store
    m = mm.remember(
        "right at the limits",
        scope={"user_id": "u" * MAX_ID_CHARS},
        tags=[f"{i:03d}" + "x" * (MAX_TAG_CHARS - 3) for i in range(MAX_TAGS)],
        metadata=_deep(MAX_METADATA_DEPTH - 1),
        slot="s" * MAX_ID_CHARS,
    )
    assert len(mm.require(m.id, scope=m.scope).tags) == MAX_TAGS
    assert mm.verify().ok


class _PickyIndex(InMemoryIndex):
    """Refuses to index any entry whose metadata holds the tag ``poison`` (as Chroma refused bad entries)."""

    def _check(self, metadatas: Any) -> None:
        if any("poison" in (m or {}).get("tags", ()) for m in metadatas):
            raise StorageError("Failed to apply logs to the metadata segment")

    def upsert(self, ids: Any, vectors: Any, metadatas: Any) -> None:
        self._check(metadatas)
        super().upsert(ids, vectors, metadatas)

    def add(self, ids: Any, vectors: Any, metadatas: Any) -> None:
        self._check(metadatas)
        super().upsert(ids, vectors, metadatas)


def test_an_entry_the_index_refuses_is_quarantined_not_fatal(tmp_path: Any) -> None:
    """Issue 14 kind 1: repair on open quarantined nothing and raised on every later open."""
    from memlineage.ledger import Ledger

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    mm = make_manager(ledger=Ledger(url), index=_PickyIndex(), exact_max=0)
    bad = mm.remember("poisoned entry", scope=ALICE, tags=["poison"])  # index write fails: logged, left pending
    good = mm.remember("Bob likes tea", scope=BOB)
    mm.close()
    for _ in range(2):  # every later open works
        reopened = make_manager(ledger=Ledger(url), index=_PickyIndex(), exact_max=0)
        assert reopened.verify().quarantined == [bad.id]
        assert not reopened.verify().ok
        assert reopened.recall("tea", scope=BOB).ids == [good.id]
        assert reopened.require(bad.id, scope=ALICE).content == "poisoned entry"  # the ledger keeps it
        reopened.close()
    fixed = make_manager(ledger=Ledger(url), index=InMemoryIndex(), exact_max=0)
    assert fixed.verify(fix=True).fixed >= 1
    assert fixed.verify().ok


# ------------------------------------------------------------------------------------------------ raw → typed
@pytest.mark.parametrize(
    ("call", "words"),
    [
        # issue 14 kind 7, each example that leaked a raw exception
        (lambda mm, ids: mm.recall("Paris", scope=ALICE, budget=-1), ("budget",)),
        (lambda mm, ids: mm.recall("Paris", scope=ALICE, budget=math.nan), ("budget",)),
        (lambda mm, ids: mm.recall("Paris", scope=ALICE, purpose=5), ("purpose",)),
        (lambda mm, ids: mm.recall("Paris", scope=ALICE, k=2**63), ("k", "10000")),
        (lambda mm, ids: mm.retract(ids["fact"], scope=ALICE, activity_id=5), ("activity_id",)),
        (lambda mm, ids: mm.remember("x y", scope=ALICE, colour="red"), ("colour",)),
        (lambda mm, ids: mm.recall("Paris", scope=ALICE, colour="red"), ("colour",)),
        (lambda mm, ids: mm.find(), ("scope",)),
        (lambda mm, ids: mm.slot_value("city", scope=ALICE, as_of="2024"), ("as_of", "datetime")),
        (lambda mm, ids: mm.sweep(now="x"), ("now", "datetime")),
        (lambda mm, ids: mm.find(scope=ALICE, slot="\ud800"), ("slot", "surrogate")),
        (lambda mm, ids: mm.find(scope=ALICE, slot="a\x00"), ("slot", "NUL")),
        (lambda mm, ids: mm.slot_history("s" * 256, scope=ALICE), ("slot", "255")),
        (lambda mm, ids: mm.get("a\x00", scope=ALICE), ("NUL",)),
        (lambda mm, ids: mm.get("i" * 256, scope=ALICE), ("255",)),
        (lambda mm, ids: mm.record_activity(Activity(id="run", kind="k" * 65, scope=ALICE)), ("kind", "64")),
    ],
)
def test_raw_exceptions_became_typed(
    store: tuple[MemoryManager, dict[str, str]], call: Callable[..., Any], words: tuple[str, ...]
) -> None:
    mm, ids = store
    refused(mm, lambda: call(mm, ids), MemLineageError, *words)


def test_one_datetime_rule_naive_means_utc(store: tuple[MemoryManager, dict[str, str]]) -> None:
    """A naive datetime is UTC everywhere: as_of, sweep(now=...), valid_from and a naive clock."""
    mm, ids = store
    aware = datetime.now(tz=timezone.utc) + timedelta(days=1)
    naive = aware.replace(tzinfo=None)
    assert mm.slot_value("city", scope=ALICE, as_of=naive).id == ids["fact"]
    assert mm.slot_value("city", scope=ALICE, as_of=aware).id == ids["fact"]
    assert mm.sweep(now=naive, scope=ALICE).checked == mm.sweep(now=aware, scope=ALICE).checked
    m = mm.remember("met Carol in 2020", scope=ALICE, valid_from=datetime(2020, 1, 1))
    assert m.valid_from == datetime(2020, 1, 1, tzinfo=timezone.utc)
    naive_clock = make_manager(clock=lambda: datetime(2026, 1, 1, 12, 0))  # noqa: DTZ001 - the point of the test
    n = naive_clock.remember("naive clock note", scope=ALICE)
    assert n.recorded_at.tzinfo is not None
    assert naive_clock.recall("naive clock note", scope=ALICE).ids == [n.id]
    naive_clock.close()


def test_kinds_accepts_one_kind_as_a_string(store: tuple[MemoryManager, dict[str, str]]) -> None:
    mm, ids = store
    assert [m.id for m in mm.find(scope=ALICE, kinds="semantic")] == [ids["fact"]]
    assert ids["fact"] in mm.recall("Paris", scope=ALICE, kinds="semantic").ids
    refused(mm, lambda: mm.find(scope=ALICE, kinds="dream"), InvalidInputError, "kind", "semantic")


def test_second_open_in_the_same_process_says_so(tmp_path: Any) -> None:
    from memlineage import StoreLockedError
    from memlineage.testing import FakeEmbedder

    first = MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder(), policy=None)
    with pytest.raises(StoreLockedError, match="already open in this process"):
        MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder(), policy=None)
    first.close()
    MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder(), policy=None).close()  # closed: opens again


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"policies:\n  - id: a\n    effect: deny\n    description: caf\xe9\n", ("UTF-8",)),
        (
            b"policies:\n  - id: a\n    effect: allow\n    operations: [write]\n    obligations: {ttl_seconds: .nan}\n",
            ("ttl_seconds",),
        ),
        (
            b"policies:\n  - id: a\n    effect: allow\n    operations: [write]\n    obligations: {ttl_seconds: .inf}\n",
            ("ttl_seconds",),
        ),
        (b"policies:\n  - id: a\n    effect: require_refresh\n    cost: .nan\n", ("cost",)),
    ],
)
def test_bad_policy_files_are_typed(tmp_path: Any, data: bytes, words: tuple[str, ...]) -> None:
    from memlineage.errors import PolicyLoadError
    from memlineage.policy import PolicyEngine

    path = tmp_path / "p.yaml"
    path.write_bytes(data)
    with pytest.raises(PolicyLoadError) as info:
        PolicyEngine([]).load(path)
    for w in words:
        assert w in str(info.value)


# ------------------------------------------------------------------------------------------------ fuzz
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=8),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=5), st.floats()), max_size=3),
    st.dictionaries(
        st.text(max_size=6), st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=5)), max_size=3
    ),
    st.sampled_from(["user", "tool:web", "semantic", "  ", "\ud800", "_ml_x", "alice"]),
    # issue 14: NUL, overlong ids, invisible text, huge ints, too many tags, naive datetimes
    st.sampled_from(["a\x00b", "x" * 300, "\u200b\u200d", 2**63, [f"t{i}" for i in range(70)], datetime(2020, 1, 1)]),
)
REMEMBER_ARGS = [
    "scope", "source", "kind", "tags", "metadata", "derived_from", "confidence", "activity_id",
    "parent_activity_id", "valid_from", "ttl", "slot", "trust", "context_hash", "embedding",
]  # fmt: skip
#: Examples per fuzz test; ``pytest --hypothesis-show-statistics`` prints how many ran and how they ended.
FUZZ_EXAMPLES = int(os.environ.get("MEMLINEAGE_FUZZ_EXAMPLES", "300"))


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    content=st.one_of(JUNK, st.text(max_size=40)),
    overrides=st.dictionaries(st.sampled_from(REMEMBER_ARGS), JUNK, max_size=3),
)
def test_fuzz_remember_never_leaks_untyped_errors(
    store: tuple[MemoryManager, dict[str, str]], content: Any, overrides: dict[str, Any]
) -> None:
    """Random junk in any argument: either stored, or a MemLineageError with nothing written."""
    mm, _ = store
    kwargs = {"scope": ALICE, **overrides}
    before = snapshot(mm)
    try:
        mem = mm.remember(content, **kwargs)
    except MemLineageError as exc:
        assert str(exc), "errors must carry a message"
        assert snapshot(mm) == before
        return
    assert mm.get(mem.id, scope=mem.scope) is not None
    assert mm.verify().ok


#: Keyword arguments each verb accepts besides the id / query and the scope.
VERB_KWARGS: dict[str, tuple[str, ...]] = {
    "get": (), "require": (), "ancestors": (), "descendants": (), "impact": (), "explain": (),
    "retract": ("reason", "activity_id"), "forget": ("reason",), "revalidate": ("reason",), "erase": ("reason",),
    "supersede": ("source", "metadata", "tags", "kind", "derived_from", "confidence", "slot", "ttl"),
    "recall": ("k", "kinds", "tags", "include_suspect", "session_only", "activity_id", "purpose", "budget"),
    "audit": ("types", "limit"),
}  # fmt: skip
NAMED_IDS = ("fact", "concl", "bob", "retracted", "erased")


@settings(
    max_examples=FUZZ_EXAMPLES + 100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    verb=st.sampled_from(sorted(VERB_KWARGS)),
    first=st.one_of(JUNK, st.sampled_from(NAMED_IDS)),
    scope=st.one_of(JUNK, st.sampled_from([ALICE, BOB, "alice", {"user_id": "alice", "agent_id": "x"}])),
    data=st.data(),
)
def test_fuzz_every_verb(
    store: tuple[MemoryManager, dict[str, str]], verb: str, first: Any, scope: Any, data: st.DataObject
) -> None:
    """Junk ids, scopes and options on every verb: a result or a MemLineageError, never a partial write."""
    mm, ids = store
    names = VERB_KWARGS[verb]
    extra = data.draw(st.dictionaries(st.sampled_from(names), JUNK, max_size=2)) if names else {}
    target = ids.get(first, first) if isinstance(first, str) else first
    if verb == "audit":
        call = lambda: mm.audit(scope, memory_id=target, **extra)  # noqa: E731
    elif verb == "supersede":
        call = lambda: mm.supersede(target, "a corrected sentence", scope=scope, **extra)  # noqa: E731
    else:
        call = lambda: getattr(mm, verb)(target, scope=scope, **extra)  # noqa: E731
    before = snapshot(mm)
    try:
        call()
    except MemLineageError as exc:
        assert str(exc)
        if verb != "recall":  # recall may expire due memories on the way; everything else must be atomic
            assert snapshot(mm) == before
    assert mm.verify().ok


@pytest.mark.parametrize("source", ["tool:", "agent: ", "user:"])
def test_a_source_with_a_colon_but_no_name_is_refused(source):
    with pytest.raises(InvalidInputError, match="names no one"):
        Source.parse(source)


async def test_a_closed_manager_says_so_and_a_reopened_store_still_has_everything(tmp_path):
    mm = MemoryManager.open(tmp_path / "store", embedder=FakeEmbedder())
    kept = mm.remember("I live in Lisbon", scope=ALICE)
    mm.close()
    for call in (
        lambda: mm.recall("Lisbon", scope=ALICE),
        lambda: mm.remember("x", scope=ALICE),
        lambda: mm.find(scope=ALICE),
        lambda: mm.activities(ALICE),
    ):
        with pytest.raises(StorageError, match="closed"):
            call()
    with pytest.raises(StorageError, match="closed"):
        await mm.arecall("Lisbon", scope=ALICE)
    mm.close()  # still idempotent
    with MemoryManager.open(tmp_path / "store", embedder=FakeEmbedder()) as again:
        assert again.require(kept.id, scope=ALICE).content == "I live in Lisbon"


def test_a_store_path_that_cannot_be_a_directory_is_a_storage_error(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a store")
    for path in (afile, afile / "below"):
        with pytest.raises(StorageError, match="cannot use"):
            MemoryManager.open(path, embedder=FakeEmbedder())
    assert afile.read_text() == "not a store"
