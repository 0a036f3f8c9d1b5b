"""Core store behaviour: write path, lineage cascade, duplicates, isolation, erasure, explain."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage import (
    Activity,
    InvalidInputError,
    LineageCycleError,
    MemLineageError,
    MemoryKind,
    MemoryNotFoundError,
    Relation,
    Scope,
    ScopeViolationError,
    Source,
    SourceKind,
    Status,
)
from memlineage.index import InMemoryIndex
from memlineage.models import short_id
from memlineage.testing import FakeEmbedder, make_manager


def test_remember_records_lineage(mm, alice):
    act = mm.record_activity(Activity(id="run-1", kind="tool_call", name="flight_api", scope=alice))
    city = mm.remember("I live in Paris", scope=alice, source="user", kind="semantic")
    price = mm.remember(
        "Flight to Paris: 120 EUR",
        scope=alice,
        source="tool:flight_api",
        derived_from=[city.id],
        activity_id=act.id,
        confidence=0.9,
    )
    assert price.source == Source(kind=SourceKind.TOOL, name="flight_api")
    assert price.derived_from == (city.id,)
    assert price.lineage.activity_id == "run-1"
    assert price.created_at.tzinfo is not None
    stored = mm.require(price.id, scope=alice)
    assert stored == mm.get(price.id, scope=alice)
    assert stored.derived_from == (city.id,)
    ex = mm.explain(price.id, scope=alice)
    assert (price.id, Relation.WAS_DERIVED_FROM.value, city.id) in ex.edges
    assert (price.id, Relation.WAS_GENERATED_BY.value, "run-1") in ex.edges
    assert [a.id for a in ex.activities] == ["run-1"]


def test_source_string_notation():
    assert Source.parse("tool:flight_api").name == "flight_api"
    assert Source.parse("reasoning").kind is SourceKind.REASONING
    assert str(Source.parse(" TOOL : x ")) == "tool:x"
    with pytest.raises(InvalidInputError, match="unknown source kind"):
        Source.parse("oracle")


def test_trust_never_exceeds_premises(mm, alice):
    web = mm.remember("Some forum says Hotel X is great", scope=alice, source="tool:web", confidence=0.5)
    summary = mm.remember("Hotel X is great", scope=alice, source="consolidation", derived_from=[web.id])
    assert summary.trust <= web.trust == pytest.approx(0.4)
    explicit = mm.remember("Hotel X is great, says I", scope=alice, source="user", derived_from=[web.id], trust=1.0)
    assert explicit.trust == pytest.approx(web.trust)


def test_conjunctive_premises_one_retraction_is_enough(mm, alice):
    city = mm.remember("Destination is Paris", scope=alice)
    dates = mm.remember("Travel 3-7 May", scope=alice)
    plan = mm.remember("Book Hotel Lumière 3-7 May", scope=alice, source="reasoning", derived_from=[city.id, dates.id])
    report = mm.retract(dates.id, scope=alice, reason="dates changed")
    assert report.suspect == [plan.id]
    assert mm.require(plan.id, scope=alice).status is Status.SUSPECT
    assert mm.require(city.id, scope=alice).status is Status.ACTIVE
    assert mm.require(dates.id, scope=alice).status is Status.RETRACTED


def test_corroborated_fact_survives_one_source(mm, alice):
    a = mm.remember("User said: I moved to Berlin", scope=alice)
    b = mm.remember("Address change form: Berlin", scope=alice, source="tool:crm")
    fact = mm.remember("User lives in Berlin", scope=alice, source="reasoning", derived_from=[a.id])
    again = mm.remember("user lives in  BERLIN", scope=alice, source="tool:crm", derived_from=[b.id])
    assert again.id == fact.id
    types = [e.type for e in mm.audit(alice, memory_id=fact.id)]
    assert "corroborated" in types
    first = mm.retract(a.id, scope=alice)
    assert first.suspect == []
    assert mm.require(fact.id, scope=alice).status is Status.ACTIVE
    second = mm.retract(b.id, scope=alice)
    assert second.suspect == [fact.id]


def test_a_result_derived_again_from_live_premises_is_active_again(mm, alice):
    # The user goes back to an earlier value and the same tool returns the same text: the result is derived anew
    # from a live premise, so it serves again (the broken derivation is replaced, not extended).
    paris = mm.remember("I want to travel to Paris", scope=alice, source="user")
    fare = mm.remember("Flight to Paris: 120 EUR", scope=alice, source="tool:get_price", derived_from=[paris.id])
    report = mm.supersede(paris.id, "I want to travel to Lyon", scope=alice, source="user")
    assert fare.id in report.suspect
    back = mm.remember("I want to travel to Paris again after all", scope=alice, source="user")
    again = mm.remember("Flight to Paris: 120 EUR", scope=alice, source="tool:get_price", derived_from=[back.id])
    assert again.id == fare.id  # the same memory, now supported by the new derivation
    assert mm.require(fare.id, scope=alice).status is Status.ACTIVE
    assert fare.id in mm.recall("flight price to Paris", scope=alice, k=5).ids
    assert back.id in {m.id for m in mm.ancestors(fare.id, scope=alice)}
    # the new derivation is what holds it up now: withdrawing its premise makes it suspect again
    assert fare.id in mm.retract(back.id, scope=alice).suspect


def test_the_same_source_repeating_with_a_still_broken_premise_stays_suspect(mm, alice):
    paris = mm.remember("I want to travel to Paris", scope=alice, source="user")
    fare = mm.remember("Flight to Paris: 120 EUR", scope=alice, source="tool:get_price", derived_from=[paris.id])
    lyon = mm.supersede(paris.id, "I want to travel to Lyon", scope=alice, source="user")
    assert fare.id in lyon.suspect
    stale = mm.remember("Flight to Paris: 120 EUR", scope=alice, source="tool:get_price", derived_from=[])
    assert stale.id == fare.id and mm.require(fare.id, scope=alice).status is Status.SUSPECT


def test_deep_chain_cascades_transitively(mm, alice):
    prev = mm.remember("root premise", scope=alice)
    chain = []
    for i in range(30):
        prev = mm.remember(f"conclusion level {i}", scope=alice, source="reasoning", derived_from=[prev.id])
        chain.append(prev.id)
    root = mm.ancestors(chain[-1], scope=alice)[-1]
    report = mm.retract(root.id, scope=alice)
    assert report.suspect == chain
    assert all(m.status is Status.SUSPECT for m in mm.descendants(root.id, scope=alice))


def test_impact_is_a_dry_run(mm, alice):
    a = mm.remember("premise", scope=alice)
    b = mm.remember("derived", scope=alice, derived_from=[a.id])
    mm.flush_index()  # Chroma is written behind the ledger commit: settle it before comparing
    before = mm.stats(alice)
    report = mm.impact(a.id, scope=alice)
    assert report.dry_run and report.suspect == [b.id]
    assert mm.stats(alice) == before
    assert mm.require(b.id, scope=alice).status is Status.ACTIVE


def test_suspect_not_served_by_default(mm, alice):
    city = mm.remember("Destination city is Paris", scope=alice)
    hotel = mm.remember("Hotel Lumière Paris recommended", scope=alice, source="reasoning", derived_from=[city.id])
    mm.retract(city.id, scope=alice)
    assert hotel.id not in mm.recall("hotel Paris", scope=alice, k=5).ids
    flagged = mm.recall("hotel Paris", scope=alice, k=5, include_suspect=True)
    hit = next(h for h in flagged if h.id == hotel.id)
    assert hit.flags == ("suspect",)
    assert hotel.id not in mm.recall("hotel Paris", scope=alice, include_suspect=True, purpose="decision").ids


def test_revalidate(mm, alice):
    a = mm.remember("premise", scope=alice)
    b = mm.remember("derived", scope=alice, derived_from=[a.id])
    mm.retract(a.id, scope=alice)
    assert mm.revalidate(b.id, scope=alice).status is Status.ACTIVE
    with pytest.raises(InvalidInputError):
        mm.revalidate(b.id, scope=alice)


def test_cycles_refused(mm, alice):
    a = mm.remember("A holds", scope=alice)
    b = mm.remember("B follows from A", scope=alice, derived_from=[a.id])
    mm.flush_index()  # Chroma is written behind the ledger commit: settle it before comparing
    before = mm.stats(alice)
    with pytest.raises(LineageCycleError):
        mm.supersede(a.id, "A' holds", scope=alice, derived_from=[b.id])
    with pytest.raises(LineageCycleError):
        mm.supersede(a.id, "A' holds", scope=alice, derived_from=[a.id])
    assert mm.stats(alice) == before
    # Repeating A's words derived from B is a new event, never a merge that would close a cycle.
    again = mm.remember("A holds", scope=alice, source="tool:x", derived_from=[b.id])
    assert again.id != a.id
    assert a.id not in {m.id for m in mm.ancestors(a.id, scope=alice)}
    assert [m.id for m in mm.ancestors(again.id, scope=alice)] == [b.id, a.id]


def test_exact_duplicate_is_a_noop(mm, alice):
    m1 = mm.remember("I prefer aisle seats", scope=alice, kind="semantic")
    m2 = mm.remember("  i prefer AISLE seats ", scope=alice, kind="semantic")
    assert m1.id == m2.id
    assert mm.stats(alice)["memories"] == 1
    assert [e.type for e in mm.audit(alice)] == ["created", "seen_again"]
    other_kind = mm.remember("I prefer aisle seats", scope=alice, kind="episodic")
    assert other_kind.id != m1.id
    batch = mm.remember_many([{"content": "x y", "scope": alice}, {"content": "X  Y", "scope": alice}])
    assert batch[0].id == batch[1].id


def test_supersede_keeps_new_value(mm, alice):
    old = mm.remember("Seat preference: window", scope=alice, kind="semantic", slot="user/seat")
    derived = mm.remember("Booked a window seat", scope=alice, derived_from=[old.id])
    report = mm.supersede(old.id, "Seat preference: aisle", scope=alice)
    new = report.memory
    assert new is not None and new.content == "Seat preference: aisle"
    assert new.supersedes == old.id and new.version == 2 and new.slot == "user/seat"
    assert mm.require(old.id, scope=alice).status is Status.SUPERSEDED
    assert report.suspect == [derived.id]
    assert mm.recall("seat preference", scope=alice, k=3).ids[0] == new.id
    assert old.id not in mm.recall("seat preference", scope=alice, k=5).ids
    with pytest.raises(InvalidInputError):
        mm.supersede(old.id, "again", scope=alice)


def test_slot_supersedes_only_same_slot(mm, alice):
    seat = mm.remember("I like window seats", scope=alice, kind="semantic", slot="user/seat")
    food = mm.remember("I don't eat pork", scope=alice, kind="semantic", slot="user/diet")
    newer = mm.remember("I like aisle seats", scope=alice, kind="semantic", slot="user/seat")
    assert newer.supersedes == seat.id
    assert mm.require(seat.id, scope=alice).status is Status.SUPERSEDED
    assert mm.require(food.id, scope=alice).status is Status.ACTIVE


def test_scope_isolation_basic(mm, alice, bob):
    secret = mm.remember("Alice's passport number is X123", scope=alice)
    assert mm.get(secret.id, scope=bob) is None
    with pytest.raises(MemoryNotFoundError):
        mm.require(secret.id, scope=bob)
    with pytest.raises(MemoryNotFoundError):
        mm.explain(secret.id, scope=bob)
    with pytest.raises(MemoryNotFoundError):
        mm.retract(secret.id, scope=bob)
    assert mm.recall("passport number", scope=bob).hits == []
    assert mm.audit(bob) == []
    with pytest.raises(ScopeViolationError):
        mm.remember("derived", scope=bob, derived_from=[secret.id])


def test_agent_scope_narrowing(mm):
    shared = mm.remember("User likes tea", scope=Scope(user_id="u"))
    a1 = mm.remember("Agent one note", scope=Scope(user_id="u", agent_id="one"))
    a2 = mm.remember("Agent two note", scope=Scope(user_id="u", agent_id="two"))
    seen = set(mm.recall("note tea", scope=Scope(user_id="u", agent_id="one"), k=10).ids)
    assert seen == {shared.id, a1.id}
    assert a2.id in mm.recall("note tea", scope=Scope(user_id="u"), k=10).ids


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["u1", "u2", "u3"]),
            st.sampled_from(["write", "recall", "retract", "get"]),
            st.sampled_from(["apple pie", "flight price", "hotel", "苹果", "passport"]),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_no_cross_scope_results_property(ops):
    mm = make_manager()
    owner: dict[str, str] = {}
    for user, op, word in ops:
        scope = Scope(user_id=user)
        if op == "write":
            m = mm.remember(f"{user} note about {word}", scope=scope)
            owner[m.id] = user
        elif op == "recall":
            for hit in mm.recall(word, scope=scope, k=10, include_suspect=True):
                assert owner[hit.id] == user
                assert hit.memory.scope.user_id == user
        elif op == "retract":
            for mid, u in list(owner.items())[:1]:
                if u != user:
                    with pytest.raises(MemoryNotFoundError):
                        mm.retract(mid, scope=scope)
        else:
            for mid, u in owner.items():
                assert (mm.get(mid, scope=scope) is not None) == (u == user)
    mm.close()


def test_empty_delete_is_noop():
    idx = InMemoryIndex()
    assert idx.delete([]) == 0


def test_metadata_round_trips(mm, alice):
    meta = {
        "n": 1,
        "f": 2.5,
        "none": None,
        "list": [1, "a", None],
        "tuple": (1, 2),
        "nested": {"a": {"b": [1, {"c": True}]}},
        "when": datetime(2024, 5, 1, tzinfo=timezone.utc),
    }
    m = mm.remember("metadata carrier", scope=alice, metadata=meta)
    got = mm.require(m.id, scope=alice).metadata
    assert got["nested"] == {"a": {"b": [1, {"c": True}]}}
    assert got["tuple"] == [1, 2] and got["none"] is None and got["list"] == [1, "a", None]
    assert got["when"] == "2024-05-01T00:00:00+00:00"
    assert mm.remember("no metadata", scope=alice, metadata=None).metadata == {}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"content": ""},
        {"content": "   \n"},
        {"content": None},
        {"content": 42},
        {"content": "bad \ud800 surrogate"},
        {"metadata": {"x": float("nan")}},
        {"metadata": {"x": float("inf")}},
        {"metadata": {"_ml_internal": 1}},
        {"metadata": {1: "int key"}},
        {"metadata": {"obj": object()}},
        {"metadata": "not a dict"},
        {"confidence": 1.5},
        {"confidence": "high"},
        {"kind": "dream"},
        {"source": "oracle"},
        {"derived_from": [""]},
        {"ttl": -5},
        {"scope": None},
        {"scope": {"user_id": ""}},
    ],
)
def test_bad_input_is_typed_and_writes_nothing(mm, alice, kwargs):
    mm.remember("existing", scope=alice)
    mm.flush_index()  # Chroma is written behind the ledger commit: settle it before comparing
    before = mm.stats()
    args = {"content": "fine text", "scope": alice, **kwargs}
    with pytest.raises(MemLineageError):
        mm.remember(**args)
    assert mm.stats() == before


def test_unknown_premise(mm, alice):
    with pytest.raises(MemoryNotFoundError, match="does not exist"):
        mm.remember("x", scope=alice, derived_from=["nope"])


def test_unicode_and_cjk(mm, alice):
    zh = mm.remember("我住在上海，喜欢吃饺子 🥟", scope=alice, kind="semantic")
    ja = mm.remember("東京の天気は晴れです", scope=alice)
    assert mm.require(zh.id, scope=alice).content == "我住在上海，喜欢吃饺子 🥟"
    assert mm.recall("上海 饺子", scope=alice, k=1).ids == [zh.id]
    assert ja.id in mm.recall("東京", scope=alice, k=2).ids
    assert "饺子" in mm.explain(zh.id, scope=alice).to_mermaid()


def test_explain_exports(mm, alice):
    user = mm.remember("Going to Rome", scope=alice)
    mm.record_activity(Activity(id="tool-9", kind="tool_call", name="hotels", scope=alice, parent_id="agent-run"))
    mm.record_activity(Activity(id="agent-run", kind="agent_run", name="AgentExecutor", scope=alice))
    res = mm.remember(
        "Hotel Roma: 90 EUR", scope=alice, source="tool:hotels", derived_from=[user.id], activity_id="tool-9"
    )
    rec = mm.remember("Stay at Hotel Roma", scope=alice, source="agent", derived_from=[res.id])
    ex = mm.explain(rec.id, scope=alice)
    assert [m.id for m in ex.ancestors] == [res.id, user.id]
    assert [m.id for m in ex.sources()] == [user.id]
    mer = ex.to_mermaid()
    assert mer.startswith("flowchart BT") and "wasDerivedFrom" in mer and "wasInformedBy" in mer
    prov = ex.to_prov_json()
    assert set(prov["entity"]) == {f"ml:{m}" for m in (rec.id, res.id, user.id)}
    assert "ml:tool-9" in prov["activity"] and "ml:agent-run" in prov["activity"]
    json.loads(ex.to_json())
    assert "digraph" in ex.to_dot()
    assert "Hotel Roma" in ex.to_text()


def test_explain_text_prints_each_memory_once_and_refers_back(mm, alice):
    turn = mm.remember("Plan a trip to Rome with a hotel and a flight", scope=alice)
    tools = [
        mm.remember(f"tool result {i} for Rome", scope=alice, source=f"tool:t{i}", derived_from=[turn.id])
        for i in range(4)
    ]
    notes = [
        mm.remember(f"note {i} about Rome", scope=alice, source="reasoning", derived_from=[t.id for t in tools])
        for i in range(2)
    ]
    answer = mm.remember("Book Hotel Roma", scope=alice, source="agent", derived_from=[n.id for n in notes])
    text = mm.explain(answer.id, scope=alice).to_text()
    lines = text.splitlines()
    full = [line for line in lines if "^ see" not in line]
    assert len(full) == 8  # answer, 2 notes, 4 tool results, the user turn: each once
    assert sum("Plan a trip to Rome" in line for line in lines) == 1
    refs = [line for line in lines if "^ see" in line]
    assert len(refs) == 4 + 3  # the second note's 4 premises, 3 of the 4 tool results' shared user turn
    assert f"^ see {short_id(turn.id)} above (user)" in text
    assert lines[0].startswith(f"- [active] agent: Book Hotel Roma ({short_id(answer.id)})")
    assert lines[1].startswith("  - [active] reasoning: note 0")


def test_forget_archives_but_keeps_ledger(mm, alice):
    m = mm.remember("ephemeral chit chat", scope=alice)
    child = mm.remember("derived from chit chat", scope=alice, derived_from=[m.id])
    archived = mm.forget(m.id, scope=alice)
    assert archived.status is Status.ARCHIVED and archived.content == "ephemeral chit chat"
    assert m.id not in mm.index.ids()
    assert mm.require(child.id, scope=alice).status is Status.ACTIVE


def test_erase_scope_receipt(mm, alice, bob):
    a = mm.remember("Alice secret diary entry", scope=alice, metadata={"k": "Alice secret"})
    b = mm.remember("Alice derived secret", scope=alice, derived_from=[a.id])
    keep = mm.remember("Bob's note", scope=bob)
    receipt = mm.erase(scope=Scope(user_id="alice"))
    assert set(receipt.memory_ids) == {a.id, b.id}
    assert receipt.index_entries_removed == 2
    for mid in (a.id, b.id):
        m = mm.require(mid, scope=alice)
        assert m.status is Status.ERASED and m.content == "" and m.metadata == {}
    assert mm.recall("secret diary", scope=alice).hits == []
    assert mm.require(keep.id, scope=bob).status is Status.ACTIVE
    assert any(e.type == "erasure_receipt" for e in mm.audit(alice))


def test_erase_one_memory_and_revisions(mm, alice):
    v1 = mm.remember("phone 123", scope=alice, slot="user/phone", kind="semantic")
    v2 = mm.remember("phone 456", scope=alice, slot="user/phone", kind="semantic")
    other = mm.remember("unrelated", scope=alice)
    receipt = mm.erase(v2.id, scope=alice)
    assert set(receipt.memory_ids) == {v1.id, v2.id}
    assert mm.require(other.id, scope=alice).status is Status.ACTIVE


def test_ttl_expiry(alice):
    now = [datetime(2025, 1, 1, tzinfo=timezone.utc)]
    mm = make_manager(clock=lambda: now[0])
    price = mm.remember("Flight price 99 EUR", scope=alice, source="tool:flights", ttl=timedelta(hours=1))
    plan = mm.remember("Buy the 99 EUR flight", scope=alice, derived_from=[price.id])
    assert price.id in mm.recall("flight price", scope=alice).ids
    now[0] += timedelta(hours=2)
    assert price.id not in mm.recall("flight price", scope=alice).ids
    assert mm.require(price.id, scope=alice).status is Status.EXPIRED
    assert mm.require(plan.id, scope=alice).status is Status.SUSPECT


def test_a_correction_keeps_the_deadline_as_it_keeps_tags_and_metadata(alice):
    now = [datetime(2025, 1, 1, tzinfo=timezone.utc)]
    mm = make_manager(clock=lambda: now[0])
    code = mm.remember("Gate code is 4411", scope=alice, tags=["door"], metadata={"site": "HQ"}, ttl=3600)
    now[0] += timedelta(minutes=10)
    fixed = mm.supersede(code.id, "Gate code is 4412", scope=alice).memory
    assert fixed is not None and (fixed.tags, fixed.metadata) == (code.tags, code.metadata)
    assert fixed.expires_at == code.expires_at
    revised = mm.revise(fixed.id, "Gate code is 4413", scope=alice)
    assert revised.expires_at == code.expires_at
    longer = mm.supersede(revised.id, "Gate code is 4414", scope=alice, ttl=7200).memory
    assert longer is not None and longer.expires_at == now[0] + timedelta(hours=2)  # an explicit ttl wins
    now[0] += timedelta(hours=3)
    mm.expire_due(scope=alice)
    assert mm.require(longer.id, scope=alice).status is Status.EXPIRED


def test_the_untouched_part_of_a_corrected_statement_keeps_its_deadline(alice):
    now = [datetime(2025, 1, 1, tzinfo=timezone.utc)]
    mm = make_manager(clock=lambda: now[0])
    plan = mm.remember("I'm planning a trip to Paris. I prefer aisle seats.", scope=alice, source="user", ttl=7200)
    now[0] += timedelta(minutes=5)
    mm.remember("Actually, I'm going to Lyon", scope=alice, source="user")
    (kept,) = [m for m in mm.find(scope=alice) if m.metadata.get("carried_over_from") == plan.id]
    assert kept.content == "I prefer aisle seats." and kept.expires_at == plan.expires_at


def test_recall_reinforces_and_records_used(mm, alice):
    m = mm.remember("I like green tea", scope=alice)
    mm.recall("green tea", scope=alice, activity_id="run-7")
    got = mm.require(m.id, scope=alice)
    assert got.use_count == 1 and got.last_used_at is not None
    edges = mm.ledger.edges_touching(["run-7"])
    assert [(e["relation"], e["dst"]) for e in edges] == [("used", m.id)]


def test_recall_returns_k_when_eligible_exist(mm, alice):
    for i in range(30):
        mm.remember(f"travel note number {i}", scope=alice)
    assert len(mm.recall("travel note", scope=alice, k=25)) == 25
    assert mm.recall("travel note", scope=alice, k=0).hits == []
    with pytest.raises(InvalidInputError):
        mm.recall("travel", scope=alice, k=-1)
    with pytest.raises(InvalidInputError):
        mm.recall("  ", scope=alice)


def test_kinds_and_tags_filter(mm, alice):
    sem = mm.remember("Prefers vegetarian food", scope=alice, kind=MemoryKind.SEMANTIC, tags=["diet"])
    mm.remember("Ate vegetarian food yesterday", scope=alice, kind="episodic")
    assert mm.recall("vegetarian food", scope=alice, kinds=["semantic"]).ids == [sem.id]
    assert mm.recall("vegetarian food", scope=alice, tags=["diet"]).ids == [sem.id]


class _FlakyIndex(InMemoryIndex):
    fail = True

    def upsert(self, ids, vectors, metadatas):
        if self.fail:
            from memlineage.errors import StorageError

            raise StorageError("index down")
        super().upsert(ids, vectors, metadatas)


def test_index_failure_never_loses_the_ledger_record(alice):
    from memlineage.ledger import Ledger

    ledger = Ledger("sqlite://")
    idx = _FlakyIndex()
    mm = make_manager(ledger=ledger, index=idx, exact_max=0)
    m = mm.remember("must survive", scope=alice)
    assert mm.require(m.id, scope=alice).content == "must survive"
    assert mm.stats()["index_pending"] == 1
    idx.fail = False
    assert mm.repair() == {"upserted": 1, "updated": 0, "removed": 0, "quarantined": 0}
    assert mm.recall("survive", scope=alice).ids == [m.id]
    assert mm.reindex() == 1


def test_embedder_adapters():
    from memlineage.index import ensure_embedder

    class LC:
        def embed_documents(self, texts):
            return [[1.0, 0.0] for _ in texts]

    class LI:
        def get_text_embedding_batch(self, texts):
            return [[0.0, 1.0] for _ in texts]

    assert ensure_embedder(LC()).embed(["a"]) == [[1.0, 0.0]]
    assert ensure_embedder(LI()).embed(["a"]) == [[0.0, 1.0]]
    assert ensure_embedder(lambda xs: [[2.0] for _ in xs]).embed(["a", "b"]) == [[2.0], [2.0]]
    fake = FakeEmbedder()
    assert ensure_embedder(fake) is fake
    with pytest.raises(InvalidInputError):
        ensure_embedder(42)


async def test_async_twins(mm, alice):
    m = await mm.aremember("async hello world", scope=alice)
    res = await mm.arecall("hello world", scope=alice)
    assert res.ids == [m.id]
    assert (await mm.aget(m.id, scope=alice)) == mm.get(m.id, scope=alice)
    rep = await mm.aretract(m.id, scope=alice, reason="test")
    assert rep.target == m.id
    results = await asyncio.gather(*(mm.aremember(f"parallel {i}", scope=alice) for i in range(5)))
    assert len({r.id for r in results}) == 5


def test_activity_lifecycle(mm, alice):
    mm.record_activity(Activity(id="t1", kind="tool_call", name="search", scope=alice, metadata={"q": "x"}))
    ended = mm.end_activity("t1", scope=alice, outcome="error", metadata={"error": "boom"})
    assert ended.outcome == "error" and ended.metadata == {"q": "x", "error": "boom"}
    assert mm.get_activity("t1", scope=alice).ended_at is not None
    with pytest.raises(MemoryNotFoundError):
        mm.end_activity("missing", scope=alice)


def test_archived_intermediate_still_propagates(mm, alice):
    a = mm.remember("premise A", scope=alice)
    b = mm.remember("middle B", scope=alice, derived_from=[a.id])
    c = mm.remember("leaf C", scope=alice, derived_from=[b.id])
    mm.forget(b.id, scope=alice)
    assert mm.retract(a.id, scope=alice).suspect == [c.id]
    assert mm.require(b.id, scope=alice).status is Status.ARCHIVED


def test_cascade_full_path_matches_shortcut_semantics(mm, alice):
    # One corroborated node forces the full evaluation; everything else behaves as in the shortcut.
    root = mm.remember("root", scope=alice)
    other = mm.remember("independent evidence", scope=alice, source="tool:x")
    solid = mm.remember("solid fact", scope=alice, source="reasoning", derived_from=[root.id])
    mm.remember("solid fact", scope=alice, source="tool:x", derived_from=[other.id])
    weak = mm.remember("weak conclusion", scope=alice, derived_from=[root.id, other.id])
    built_on_solid = mm.remember("built on solid", scope=alice, derived_from=[solid.id])
    built_on_weak = mm.remember("built on weak", scope=alice, derived_from=[weak.id, solid.id])
    report = mm.retract(root.id, scope=alice)
    assert report.suspect == [weak.id, built_on_weak.id]
    assert set(report.unaffected) == {solid.id, built_on_solid.id}


def test_same_source_duplicate_is_not_independent_evidence(mm, alice):
    turn = mm.remember("What hotel?", scope=alice)
    tool = mm.remember("Hotel list: Roma 90 EUR", scope=alice, source="tool:hotels")
    answer = mm.remember("Stay at Hotel Roma", scope=alice, source="agent", derived_from=[turn.id])
    again = mm.remember("Stay at Hotel Roma", scope=alice, source="agent", derived_from=[turn.id, tool.id])
    assert again.id == answer.id
    # One conjunctive support: retracting the tool result is enough to make the answer suspect.
    assert mm.retract(tool.id, scope=alice).suspect == [answer.id]


def test_user_restating_without_premises_keeps_independent_support(mm, alice):
    fact = mm.remember("I live in Rome", scope=alice)
    mm.remember("I live in Rome", scope=alice)
    assert [e.type for e in mm.audit(alice, memory_id=fact.id)] == ["created", "seen_again"]


def test_failing_embedder_writes_nothing_even_for_duplicates(alice):
    from memlineage import StorageError

    class Broken(FakeEmbedder):
        broken = False

        def embed(self, texts):
            if self.broken:
                raise RuntimeError("model crashed")
            return super().embed(texts)

    emb = Broken()
    mm = make_manager(embedder=emb)
    mm.remember("already here", scope=alice)
    mm.flush_index()
    before = (mm.stats(), [e.type for e in mm.audit(alice)])
    emb.broken = True
    with pytest.raises(StorageError, match="model crashed"):
        mm.remember_many([{"content": "already here", "scope": alice}, {"content": "new one", "scope": alice}])
    assert (mm.stats(), [e.type for e in mm.audit(alice)]) == before


def test_concurrent_identical_writes_store_one_memory(alice):
    import threading

    from memlineage.ledger import Ledger

    for _ in range(10):
        mm = make_manager(ledger=Ledger("sqlite://"))
        barrier = threading.Barrier(4)
        out: list[str] = []

        def write(mm: Any, barrier: threading.Barrier, out: list[str]) -> None:
            barrier.wait()
            out.append(mm.remember("Flight to Paris: 120 EUR", scope=alice, source="tool:x").id)

        threads = [threading.Thread(target=write, args=(mm, barrier, out)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(out)) == 1
        assert mm.stats(alice)["memories"] == 1


def test_explain_lists_each_activity_once(mm, alice):
    mm.record_activity(Activity(id="run", kind="agent_run", scope=alice))
    mm.record_activity(Activity(id="llm", kind="llm_call", parent_id="run", scope=alice))
    mm.record_activity(Activity(id="t1", kind="tool_call", parent_id="llm", scope=alice))
    mm.record_activity(Activity(id="t2", kind="tool_call", parent_id="llm", scope=alice))
    a = mm.remember("result one", scope=alice, source="tool:a", activity_id="t1")
    b = mm.remember("result two", scope=alice, source="tool:b", activity_id="t2")
    c = mm.remember("answer", scope=alice, source="agent", derived_from=[a.id, b.id])
    ex = mm.explain(c.id, scope=alice)
    ids = [act.id for act in ex.activities]
    assert sorted(ids) == ["llm", "run", "t1", "t2"]
    assert ex.to_mermaid().count('llm(["') == 1


def test_link_records_an_extra_activity_edge(mm, alice, bob):
    mm.record_activity(Activity(id="run-a", kind="agent_run", scope=alice))
    mm.record_activity(Activity(id="run-b", kind="agent_run", scope=bob))
    turn = mm.remember("Find me a flight", scope=alice, source="user")  # stored before the run linked it
    again = mm.remember("Find me a flight", scope=alice, source="user", activity_id="run-a")
    assert again.id == turn.id and mm.explain(turn.id, scope=alice).activities == []  # seen_again: no edge

    assert mm.link(turn.id, "run-a", Relation.WAS_GENERATED_BY, scope=alice) is True
    assert mm.link(turn.id, "run-a", "wasGeneratedBy", scope=alice) is False  # idempotent
    ex = mm.explain(turn.id, scope=alice)
    assert (turn.id, "wasGeneratedBy", "run-a") in ex.edges and [a.id for a in ex.activities] == ["run-a"]
    assert mm.link(turn.id, "run-a", "used", scope=alice) is True
    used = [(e["src"], e["dst"]) for e in mm.ledger.edges_touching(["run-a"]) if e["relation"] == "used"]
    assert used == [("run-a", turn.id)]
    assert [e.type for e in mm.audit(alice, memory_id=turn.id, types=["linked"])] == ["linked", "linked"]

    with pytest.raises(InvalidInputError, match="wasGeneratedBy"):
        mm.link(turn.id, "run-a", "wasDerivedFrom", scope=alice)
    with pytest.raises(MemoryNotFoundError):
        mm.link(turn.id, "run-a", scope=bob)  # the memory is not in bob's scope
    with pytest.raises(MemoryNotFoundError):
        mm.link(turn.id, "no-such-run", scope=alice)
    with pytest.raises(ScopeViolationError):
        mm.link(turn.id, "run-b", scope=alice)  # bob's activity
    assert asyncio.run(mm.alink(turn.id, "run-a", scope=alice)) is False


def test_status_changes_never_resurrect_or_skip_index_entries(alice):
    idx = _FlakyIndex()
    idx.fail = False
    mm = make_manager(index=idx, exact_max=0)
    a = mm.remember("premise", scope=alice)
    b = mm.remember("derived", scope=alice, derived_from=[a.id])
    mm.forget(b.id, scope=alice)
    mm.retract(a.id, scope=alice)  # b is archived: its status may change, its index entry stays gone
    assert b.id not in idx.ids()
    assert mm.verify().ok
    # A memory whose first index write failed stays pending through a status change, then is fully written.
    idx.fail = True
    c = mm.remember("premise two", scope=alice)
    d = mm.remember("derived two", scope=alice, derived_from=[c.id])
    mm.retract(c.id, scope=alice)
    idx.fail = False
    mm.repair()
    assert {c.id, d.id} <= idx.ids()
    assert idx.get_metadata([d.id])[0]["status"] == "suspect"
    assert mm.verify().ok


def test_slots_across_users_is_an_audited_admin_read(mm, alice, bob):
    mm.remember("I like tea", scope=alice, slot="user/drink")
    mm.remember("I like coffee", scope=bob, slot="user/drink")
    assert mm.slots(scope=alice) == [("alice", "user/drink")]
    with pytest.raises(ScopeViolationError, match="admin"):
        mm.slots()
    assert mm.slots(admin=("ops", "migration")) == [("alice", "user/drink"), ("bob", "user/drink")]
    assert mm.ledger.events(user_id=None, types=["admin_access"])[0]["data"]["actor"] == "ops"


@pytest.mark.parametrize("user", ["*", "%", "_", "None", "null", ".*"])
def test_wildcard_like_user_ids_never_read_cross_user_admin_events(mm, alice, bob, user):
    """Issue 14 kind 6: cross-user admin events belong to no user, so no user id (not even ``*``) reads them."""
    mm.remember("I like tea", scope=alice, slot="user/drink")
    mm.slots(admin=("ops", "migration"))
    mm.admin_recall("tea", scope=alice, actor="ops", reason="support ticket 7")
    wild = Scope(user_id=user)
    mm.remember("my own note", scope=wild)
    assert [e.type for e in mm.audit(wild)] == ["created"]
    assert {e.type for e in mm.audit(bob)} == set()
    assert all(e["user_id"] in ("alice", user, None) for e in mm.ledger.events(user_id=None))


def test_scope_errors_are_typed():
    from memlineage import InvalidInputError

    with pytest.raises(InvalidInputError, match="user_id"):
        Scope(user_id="")
    with pytest.raises(InvalidInputError, match="Field required"):
        Scope()
    with pytest.raises(InvalidInputError, match="pass a non-empty query"):
        make_manager().recall("  ", scope="alice")


def test_activities_lists_a_scopes_runs_and_failed_calls(mm, alice):
    mm.record_activity(Activity(id="r1", kind="agent_run", name="run", scope=alice))
    mm.record_activity(Activity(id="t1", kind="tool_call", name="hotels", parent_id="r1", scope=alice))
    mm.record_activity(Activity(id="t2", kind="tool_call", name="price", parent_id="t1", scope=alice))
    mm.end_activity("t2", scope=alice, outcome="error", metadata={"error": "boom"})
    mm.record_activity(Activity(id="r2", kind="agent_run", name="run", scope=alice))
    mm.record_activity(Activity(id="x1", kind="tool_call", name="other", scope=Scope(user_id="bob")))
    assert [a.id for a in mm.activities(alice)] == ["r1", "t1", "t2", "r2"]
    assert [a.id for a in mm.activities(alice, run_id="r1")] == ["r1", "t1", "t2"]
    failed = mm.activities(alice, outcome="error")
    assert [a.id for a in failed] == ["t2"] and failed[0].metadata["error"] == "boom"
    assert [a.id for a in mm.activities(alice, kinds="agent_run", limit=1)] == ["r2"]
    assert [a.id for a in mm.activities("bob")] == ["x1"]
    with pytest.raises(MemoryNotFoundError):
        mm.activities("bob", run_id="r1")
    with pytest.raises(InvalidInputError):
        mm.activities(alice, limit=-1)
    assert [a.id for a in asyncio.run(mm.aactivities(alice, kinds=["tool_call"]))] == ["t1", "t2"]


def test_get_many_stays_aligned_with_repeated_ids(mm, alice):
    a = mm.remember("first", scope=alice)
    b = mm.remember("second", scope=alice)
    got = mm.get_many([a.id, b.id, a.id, "missing-id"], scope=alice)
    assert [m.id if m else None for m in got] == [a.id, b.id, a.id, None]


def test_reads_are_reads_and_recall_leaves_a_trace_for_what_it_expires():
    """get/find/explain/audit/stats/activities never change the store; recall's expiry (if any) is audited."""
    now = [datetime(2026, 5, 1, 9, 0, tzinfo=timezone.utc)]
    mm = make_manager(clock=lambda: now[0])
    alice = Scope(user_id="alice", session_id="s1")
    quote = mm.remember("Flight to Rome: 140 EUR", scope=alice, source="tool:fares", ttl=60)
    plan = mm.remember("Book the Rome flight", scope=alice, source="agent", derived_from=[quote.id])
    now[0] += timedelta(hours=1)  # the quote is past its TTL; nothing has looked at it yet

    def state() -> tuple[object, ...]:
        rows = mm.ledger.memory_rows([quote.id, plan.id])
        return tuple((r["status"], r["use_count"]) for r in rows), len(mm.audit(alice))

    before = state()
    mm.get(quote.id, scope=alice)
    mm.find(scope=alice)
    mm.explain(plan.id, scope=alice).to_text()
    mm.audit(alice)
    mm.stats(alice)
    mm.activities(alice)
    assert state() == before
    mm.recall("Rome flight", scope=alice, k=5, reinforce=False)
    status = mm.ledger.memory_rows([quote.id])[0]["status"]
    expired_events = [e for e in mm.audit(alice, types=["expired"]) if e["memory_id"] == quote.id]
    assert status == Status.ACTIVE.value or expired_events, "recall changed a status without an audit event"


def test_the_same_text_is_embedded_once_and_a_failure_is_not_kept() -> None:
    from memlineage.errors import StorageError
    from memlineage.services.embedding import CACHED_VECTORS, Embedding
    from memlineage.testing import FakeEmbedder

    calls: list[list[str]] = []
    fail = [False]

    class Counting(FakeEmbedder):
        def embed(self, texts):  # type: ignore[no-untyped-def]
            calls.append(list(texts))
            if fail[0]:
                raise RuntimeError("model down")
            return super().embed(texts)

    emb = Embedding(Counting())
    first = emb.embed(["Find me a flight to Lyon.", "Find me a flight to Lyon."])
    again = emb.embed(["Find me a flight to Lyon.", "I live in Paris."])
    assert first[0] == first[1] == again[0]
    assert calls == [["Find me a flight to Lyon."], ["I live in Paris."]]  # duplicates and repeats embedded once
    fail[0] = True
    with pytest.raises(StorageError):
        emb.embed(["a new text"])
    fail[0] = False
    assert emb.embed(["a new text"]) and calls[-1] == ["a new text"]  # the failure was not cached
    emb.embed([f"text {i}" for i in range(CACHED_VECTORS + 5)])
    assert len(emb._cache) == CACHED_VECTORS


def test_find_newest_lists_only_the_last_matches_oldest_first() -> None:
    from memlineage import InvalidInputError, Scope
    from memlineage.testing import make_manager

    mm = make_manager()
    s = Scope(user_id="alice", session_id="s1")
    texts = [
        "I like jazz.",
        "My dog is called Rex.",
        "I work at a bakery.",
        "Lisbon is lovely.",
        "Tea, no sugar.",
        "I run.",
    ]
    ids = [mm.remember(t, scope=s, force=True).id for t in texts]
    assert [m.id for m in mm.find(scope=s, session_only=True, newest=2)] == ids[-2:]
    assert [m.id for m in mm.find(scope=s, newest=10)] == ids
    assert mm.find(scope=s, newest=0) == []
    # read newest first with a limit, or (with a tag filter, an offset or a limit) from the whole list: the same order
    tagged = mm.remember("I swim on Fridays.", scope=s, tags=["sport"], force=True).id
    assert [m.id for m in mm.find(scope=s, newest=3)] == [*ids[-2:], tagged]
    assert [m.id for m in mm.find(scope=s, newest=1, tags=["sport"])] == [tagged]
    assert [m.id for m in mm.find(scope=s, limit=3, newest=2)] == ids[1:3]
    with pytest.raises(InvalidInputError):
        mm.find(scope=s, newest=-1)


def test_missing_model_files_are_fetched_through_chromadbs_public_embedding_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: a missing default model is fetched by calling chromadb's default embedding function (its public
    API, which downloads into ``~/.cache/chroma``), not through a private method."""
    import shutil

    from chromadb.utils import embedding_functions
    from memlineage.index import OnnxMiniLMEmbedder, default_model_dir

    shipped = default_model_dir()
    if not (shipped / "model.onnx").is_file():
        pytest.skip("embedding model files not available offline")
    monkeypatch.setenv("HOME", str(tmp_path))
    target = tmp_path / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
    calls: list[list[str]] = []

    def fake_download(self: object, texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        shutil.copytree(shipped, target)  # what chromadb's downloader leaves there
        return [[0.0] * 384 for _ in texts]

    monkeypatch.setattr(embedding_functions.DefaultEmbeddingFunction, "__call__", fake_download)
    emb = OnnxMiniLMEmbedder(target)
    assert len(emb.embed(["hello world"])[0]) == 384 and len(calls) == 1
