"""Unit tests for the policy engine, on Memory objects built directly (no store)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from memlineage.errors import (
    ConfigurationError,
    PolicyLoadError,
    PolicyViolationError,
    ScopeViolationError,
)
from memlineage.models import Lineage, Memory, MemoryKind, Scope, Status
from memlineage.policy import (
    SCOPE_POLICY_ID,
    Decision,
    Effect,
    Operation,
    Policy,
    PolicyEngine,
    PolicyRequest,
    PolicyTarget,
    builtin_policies,
    decision_trust_floor,
    dependency_consistency,
    freshness,
    load_policies,
    load_policy_file,
    source_trust_floor,
    tool_result_ttl,
    ttl_expiry,
    user_write_protection,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
ALICE = Scope(user_id="alice", session_id="s1")
BOB = Scope(user_id="bob")


def mem(
    content: str = "x",
    *,
    source: str = "user",
    confidence: float = 1.0,
    trust: float = 1.0,
    tags: tuple[str, ...] = (),
    kind: str = "episodic",
    status: str = "active",
    age: timedelta = timedelta(0),
    scope: Scope = ALICE,
    derived_from: tuple[str, ...] = (),
    expires_at: datetime | None = None,
) -> Memory:
    return Memory(
        content=content,
        kind=MemoryKind(kind),
        scope=scope,
        lineage=Lineage(source_kind=source, confidence=confidence, trust=trust, derived_from=derived_from),
        tags=tags,
        status=Status(status),
        created_at=NOW - age,
        expires_at=expires_at,
    )


def read(purpose: str | None = None, *, budget: float | None = None, scope: Scope = ALICE) -> PolicyRequest:
    return PolicyRequest(scope=scope, purpose=purpose, budget=budget)


def engine(*policies: Policy, **kwargs) -> PolicyEngine:
    return PolicyEngine(policies, clock=lambda: NOW, **kwargs)


# ---------------------------------------------------------------- model and loading


def test_policy_defaults_and_compiled_cel() -> None:
    p = Policy(id="p", effect="filter", condition="memory.confidence < 0.7 && request.purpose == 'decision'")
    assert p.operations == (Operation.READ,)
    assert p.compiled.kind == "cel"
    assert p.compiled.memory_fields == {"confidence"}
    assert p.compiled.inputs == ("memory.confidence", "request.purpose")


@pytest.mark.parametrize(
    ("kwargs", "field", "text"),
    [
        ({"condition": "memory.confidence <"}, "condition", "invalid CEL"),
        ({"condition": "memory.confidense < 0.7"}, "condition", "unknown field memory.confidense"),
        ({"condition": "mem.confidence < 0.7"}, "condition", "unknown variable"),
        ({"condition": "memory.tags + 1 > 0"}, "condition", "type error"),
        ({"condition": "memory.confidence"}, "condition", "must evaluate to a bool"),
        ({"colour": "red"}, "colour", "unknown field"),
        ({"effect": "explode"}, "effect", ""),
        ({"operations": ["write"], "effect": "filter"}, "<policy>", "reads only"),
        ({"cost": -1}, "cost", ""),
        ({"obligations": {"ttl_seconds": -5}, "operations": ["write"], "effect": "allow"}, "obligations", ""),
    ],
)
def test_python_definition_errors_name_policy_and_field(kwargs: dict, field: str, text: str) -> None:
    data = {"id": "bad_one", "effect": "filter", **kwargs}
    with pytest.raises(PolicyLoadError) as info:
        Policy(**data)
    message = str(info.value)
    assert "<python>" in message and "'bad_one'" in message and f"field {field!r}" in message
    assert text in message


def test_scope_isolation_cannot_be_redefined() -> None:
    with pytest.raises(PolicyLoadError, match="scope isolation is always on"):
        Policy(id="builtin.scope_isolation", effect="allow")
    with pytest.raises(PolicyLoadError, match="scope isolation is always on"):
        load_policies({"scope_isolation": False, "policies": []}, source="f.yaml")
    with pytest.raises(ConfigurationError):
        PolicyEngine().remove(SCOPE_POLICY_ID)


def test_yaml_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        """
version: 1
layer: domain
policies:
  - id: flight_price_freshness
    description: flight prices older than an hour are stale
    target: {tags: [flight_price]}
    condition: "memory.age > 3600.0"
    effect: require_refresh
    refresh: flight_price
    cost: 2
    priority: 60
  - id: no_guesses
    target: {source_kinds: reasoning}
    condition: memory.confidence < 0.7
    effect: filter
""",
        encoding="utf-8",
    )
    policies = load_policy_file(path)
    assert [p.id for p in policies] == ["flight_price_freshness", "no_guesses"]
    assert policies[0].layer.value == "domain" and policies[0].cost == 2.0
    assert policies[1].target.source_kinds == ("reasoning",)
    eng = PolicyEngine.from_files(path)
    assert len(eng) == 2


def test_json_file_and_roundtrip(tmp_path: Path) -> None:
    policies = builtin_policies(freshness_by_tag={"flight_price": 3600})
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"policies": [p.to_dict() for p in policies]}), encoding="utf-8")
    loaded = load_policy_file(path)
    assert [p.id for p in loaded] == [p.id for p in policies]
    assert [p.condition for p in loaded] == [p.condition for p in policies]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "policies:\n  - id: a\n    effect: deny\n    colour: red\n",
            "policy 'a' (entry #0): field 'colour': unknown",
        ),
        (
            "policies:\n  - id: a\n    effect: deny\n  - id: b\n    effect: filter\n    condition: memory.nope\n",
            "policy 'b' (entry #1): field 'condition': unknown field memory.nope",
        ),
        ("policies:\n  - id: a\n    effect: deny\n  - id: a\n    effect: deny\n", "field 'id': duplicate"),
        ("policies: [\n", "invalid YAML at line"),
        ("rules: []\n", "unknown top-level"),
        ("policies:\n  - id: a\n    effect: deny\n    condition: {operator: '>'}\n", "field 'condition'"),
    ],
)
def test_yaml_load_errors_name_file_policy_field(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyLoadError) as info:
        load_policy_file(path)
    assert str(info.value).startswith(str(path))
    assert expected in str(info.value)


def test_python_callable_conditions() -> None:
    single = Policy(id="long", effect="filter", condition=lambda m, ctx: len(m.content) > 5, inputs=("memory.content",))
    batched = Policy(
        id="batched",
        effect="downgrade",
        condition=lambda ms, ctx: [m.content.startswith("a") for m in ms],
        batch=True,
    )
    eng = engine(single, batched)
    out = eng.filter_read([mem("abc"), mem("abcdefgh"), mem("zz")], read())
    assert [m.content for m in out.memories] == ["abc", "zz"]
    assert out.withheld[0][1].inputs == {"memory.content": "abcdefgh"}
    assert len(out.flagged) == 1


def test_failing_condition_fails_closed_for_restrictions_only() -> None:
    def boom(m: Memory, ctx: object) -> bool:
        raise RuntimeError("nope")

    eng = engine(Policy(id="broken_filter", effect="filter", condition=boom))
    out = eng.filter_read([mem()], read())
    assert out.memories == [] and "condition failed" in out.withheld[0][1].reason
    eng = engine(
        Policy(id="broken_allow", effect="allow", condition=boom, priority=5),
        Policy(id="deny_all", effect="deny"),
    )
    assert eng.filter_read([mem()], read()).withheld[0][1].policy_id == "deny_all"


def test_cel_null_fields_are_safe() -> None:
    p = Policy(id="ttl", effect="mark_expired", condition="memory.expires_at != null && memory.expires_at < now")
    eng = engine(p)
    fresh, old = mem(), mem(expires_at=NOW - timedelta(seconds=1))
    out = eng.filter_read([fresh, old], read())
    assert out.memories == [fresh] and out.expire == [old.id]


# ---------------------------------------------------------------- combination


def test_priority_then_deny_overrides() -> None:
    allow_hi = Policy(id="allow_hi", effect="allow", priority=10)
    deny_lo = Policy(id="deny_lo", effect="deny", priority=1)
    assert engine(allow_hi, deny_lo).check("read", mem(), read()).policy_id == "allow_hi"
    allow_eq = Policy(id="allow_eq", effect="allow", priority=1)
    decision = engine(allow_eq, deny_lo).check("read", mem(), read())
    assert decision.policy_id == "deny_lo" and decision.withheld


def test_layers_session_over_domain_over_global_unless_final() -> None:
    g = Policy(id="g_deny", effect="deny", priority=100)
    d = Policy(id="d_allow", effect="allow", layer="domain")
    s = Policy(id="s_deny", effect="deny", layer="session")
    assert engine(g, d).check("read", mem(), read()).policy_id == "d_allow"
    assert engine(g, d, s).check("read", mem(), read()).policy_id == "s_deny"
    g_final = Policy(id="g_final_allow", effect="allow", final=True)
    assert engine(g_final, d, s).check("read", mem(), read()).policy_id == "g_final_allow"
    order = [p.id for p in engine(g, d, s, g_final).policies]
    assert order == ["g_final_allow", "s_deny", "d_allow", "g_deny"]


def test_order_is_independent_of_insertion() -> None:
    ps = [Policy(id=f"p{i}", effect=e, priority=i % 2) for i, e in enumerate(["deny", "allow", "filter", "allow"])]
    assert [p.id for p in engine(*ps).policies] == [p.id for p in engine(*reversed(ps)).policies]


def test_downgrade_flags_and_continues() -> None:
    flag = Policy(id="flag", effect="downgrade", priority=10)
    deny = Policy(id="deny", effect="filter", condition="memory.confidence < 0.5")
    eng = engine(flag, deny)
    ok, low = mem(confidence=0.9), mem(confidence=0.1)
    out = eng.filter_read([ok, low], read())
    assert out.memories == [ok] and out.flagged == {ok.id} and out.mark_suspect == [ok.id]
    assert [d.policy_id for d in out.decisions[low.id]] == ["flag", "deny"]


def test_target_matching() -> None:
    p = Policy(
        id="t",
        effect="filter",
        target=PolicyTarget(kinds=("semantic",), tags=("a", "b"), source_kinds=("tool",), user_ids=("alice",)),
    )
    eng = engine(p)
    hit = mem(kind="semantic", tags=("b",), source="tool")
    misses = [
        mem(kind="episodic", tags=("b",), source="tool"),
        mem(kind="semantic", tags=("c",), source="tool"),
        mem(kind="semantic", tags=("a",), source="user"),
    ]
    out = eng.filter_read([hit, *misses], read())
    assert [m.id for m, _ in out.withheld] == [hit.id]


def test_check_conflicts_reports_overlap_and_winner() -> None:
    eng = engine(
        Policy(id="allow_tools", effect="allow", target=PolicyTarget(source_kinds=("tool",)), layer="session"),
        Policy(id="deny_prices", effect="deny", target=PolicyTarget(tags=("price",)), priority=5),
        Policy(id="deny_users", effect="deny", target=PolicyTarget(source_kinds=("user",))),
        Policy(id="write_only", effect="allow", operations=("write",)),
    )
    conflicts = eng.check_conflicts()
    assert [(c.first_id, c.second_id) for c in conflicts] == [("allow_tools", "deny_prices")]
    assert "session layer overrides global" in conflicts[0].explanation


def test_disabled_policy_is_ignored() -> None:
    eng = engine(Policy(id="off", effect="deny", enabled=False))
    assert eng.filter_read([mem()], read()).withheld == []


# ---------------------------------------------------------------- scope isolation


def test_scope_isolation_always_on() -> None:
    eng = engine(Policy(id="allow_everything", effect="allow", final=True, priority=1000))
    bobs = mem(scope=BOB)
    out = eng.filter_read([bobs, mem()], read())
    assert len(out.memories) == 1 and out.withheld[0][1].policy_id == SCOPE_POLICY_ID
    with pytest.raises(ScopeViolationError):
        eng.enforce("update", bobs, PolicyRequest(scope=ALICE, source="user"))


def test_admin_grant_is_audited_and_required() -> None:
    granted: list = []
    eng = engine(on_admin_grant=granted.append)
    bobs = mem(scope=BOB)
    forged = PolicyRequest(scope=ALICE, admin={"actor": "mallory", "reason": "x"})
    assert eng.filter_read([bobs], forged).memories == []
    grant = eng.admin_grant(actor="ops", reason="GDPR export")
    out = eng.filter_read([bobs], PolicyRequest(scope=ALICE, admin=grant))
    assert out.memories == [bobs]
    decision = out.decisions[bobs.id][0]
    assert decision.admin_grant_id == grant.id and "GDPR export" in decision.reason
    assert granted == [grant]


# ---------------------------------------------------------------- built-ins: each bites, each allows


def test_builtin_source_trust_floor() -> None:
    eng = engine(source_trust_floor())
    guess, sure, tool = (
        mem(source="reasoning", confidence=0.6),
        mem(source="reasoning", confidence=0.8),
        mem(source="tool", confidence=0.1),
    )
    out = eng.filter_read([guess, sure, tool], read())
    assert out.memories == [sure, tool]
    decision = out.withheld[0][1]
    assert decision.policy_id == "builtin.source_trust_floor" and decision.inputs == {"memory.confidence": 0.6}


def test_builtin_freshness_refreshes_with_hook() -> None:
    eng = engine(freshness("flight_price", timedelta(hours=1)))
    stale = mem("NYC-PAR 300 EUR", source="tool", tags=("flight_price",), age=timedelta(hours=2))
    fresh_ok = mem("NYC-PAR 310 EUR", source="tool", tags=("flight_price",), age=timedelta(minutes=5))
    calls: list[tuple[Memory, Decision]] = []

    def rerun(memory: Memory, decision: Decision) -> Memory:
        calls.append((memory, decision))
        return mem("NYC-PAR 320 EUR", source="tool", tags=("flight_price",))

    eng.register_refresh_hook("flight_price", rerun)
    out = eng.filter_read([stale, fresh_ok], read())
    assert [m.content for m in out.memories] == ["NYC-PAR 320 EUR", "NYC-PAR 310 EUR"]
    assert out.expire == [stale.id] and out.refreshed[stale.id].content == "NYC-PAR 320 EUR"
    assert len(calls) == 1 and calls[0][0] is stale
    decision = out.decisions[stale.id][-1]
    assert decision.effect is Effect.REQUIRE_REFRESH and decision.replacement_id == out.memories[0].id


def test_builtin_freshness_missing_or_failing_hook_withholds() -> None:
    eng = engine(freshness("flight_price", 3600))
    stale = mem(tags=("flight_price",), source="tool", age=timedelta(hours=2))
    out = eng.filter_read([stale], read())
    assert out.memories == [] and "no refresh hook named 'flight_price'" in out.withheld[0][1].reason

    def broken(memory: Memory, decision: Decision) -> Memory:
        raise TimeoutError("flight api down")

    eng.register_refresh_hook("flight_price", broken)
    out = eng.filter_read([stale], read())
    assert out.memories == [] and "flight api down" in out.withheld[0][1].reason


def test_freshness_budget_accepts_stale_with_warning() -> None:
    eng = engine(freshness("flight_price", 3600, cost=5.0))
    calls: list[str] = []
    eng.register_refresh_hook("flight_price", lambda m, d: calls.append(m.id) or mem(tags=("flight_price",)))
    stale = mem("old price", tags=("flight_price",), age=timedelta(hours=2))
    out = eng.filter_read([stale], read(budget=1.0))
    assert out.memories == [stale] and calls == []
    assert "costs 5" in out.warnings[0] and out.decisions[stale.id][-1].warning
    out = eng.filter_read([stale], read(budget=10.0))
    assert out.memories[0].id != stale.id and calls == [stale.id] and out.cost == 5.0
    # the budget is spent across the batch: the second stale memory is served stale
    stale2 = mem("older price", tags=("flight_price",), age=timedelta(hours=3))
    out = eng.filter_read([stale, stale2], read(budget=6.0))
    assert out.memories[1] is stale2 and len(out.warnings) == 1


def test_builtin_freshness_expire_mode() -> None:
    eng = engine(freshness("stock_price", 300, on_stale="expire"))
    stale = mem(tags=("stock_price",), age=timedelta(minutes=6))
    out = eng.filter_read([stale, mem(tags=("stock_price",))], read())
    assert len(out.memories) == 1 and out.expire == [stale.id]


def test_builtin_dependency_consistency() -> None:
    eng = engine(*dependency_consistency())
    hotel = mem("Hotel near the Louvre", source="tool", status="suspect")
    ok = mem("user likes quiet rooms")
    decide = eng.filter_read([hotel, ok], read("decision"))
    assert decide.memories == [ok] and decide.withheld[0][1].policy_id == "builtin.dependency_consistency"
    browse = eng.filter_read([hotel, ok], read())
    assert browse.memories == [hotel, ok] and browse.flagged == {hotel.id}
    assert browse.mark_suspect == []  # already suspect


def test_dependency_consistency_uses_premise_lookup() -> None:
    eng = engine(*dependency_consistency())
    city = mem("going to Paris", status="superseded")
    hotel = mem("Hotel in Paris", source="tool", derived_from=(city.id,))
    lookup_calls: list[list[str]] = []

    def lookup(ids: list[str]) -> dict[str, Status]:
        lookup_calls.append(list(ids))
        return {city.id: Status.SUPERSEDED}

    out = eng.filter_read([hotel], read("decision"), premise_status=lookup)
    assert out.memories == [] and out.withheld[0][1].inputs["memory.invalid_premises"] == [city.id]
    out = eng.filter_read([hotel], read(), premise_status=lookup)
    assert out.memories == [hotel] and out.mark_suspect == [hotel.id]
    assert all(call == [city.id] for call in lookup_calls)


def test_builtin_user_write_protection() -> None:
    eng = engine(user_write_protection())
    pref = mem("prefers aisle seats", kind="semantic")
    tool_req = PolicyRequest(scope=ALICE, source="tool:crm")
    with pytest.raises(PolicyViolationError) as info:
        eng.enforce("update", pref, tool_req)
    assert info.value.decision.policy_id == "builtin.user_write_protection"
    assert info.value.decision.inputs["request.source"] == "tool:crm"
    with pytest.raises(PolicyViolationError):
        eng.enforce("delete", pref, PolicyRequest(scope=ALICE, source="reasoning"))
    assert not eng.enforce("update", pref, PolicyRequest(scope=ALICE, source="user")).withheld
    tool_mem = mem("weather", source="tool")
    assert not eng.enforce("update", tool_mem, tool_req).withheld


def test_write_protection_is_final_against_session_allow() -> None:
    eng = engine(
        user_write_protection(),
        Policy(id="sess_allow", effect="allow", operations=("update",), layer="session"),
    )
    decision = eng.check("update", mem(), PolicyRequest(scope=ALICE, source="tool"))
    assert decision.withheld and decision.policy_id == "builtin.user_write_protection"


def test_builtin_tool_result_ttl() -> None:
    eng = engine(tool_result_ttl(timedelta(hours=2)))
    fact = mem("EUR/USD 1.08", source="tool", kind="semantic")
    decision = eng.check("write", fact, PolicyRequest(scope=ALICE, source="tool"))
    assert not decision.withheld
    assert decision.obligations == {"ttl_seconds": 7200.0, "demote_kind": "episodic"}
    promoted = eng.check("write", fact, PolicyRequest(scope=ALICE, source="tool", promote=True))
    assert promoted.obligations == {} and promoted.policy_id is None
    by_user = eng.check("write", mem(kind="semantic"), PolicyRequest(scope=ALICE, source="user"))
    assert by_user.obligations == {}


def test_policy_can_promote_a_tool() -> None:
    promote = Policy(
        id="calendar_is_long_term",
        effect="allow",
        operations=("write",),
        target=PolicyTarget(source_names=("calendar",)),
        priority=20,
    )
    eng = engine(tool_result_ttl(), promote)
    cal = Memory(content="x", scope=ALICE, lineage=Lineage(source_kind="tool", source_name="calendar"))
    decision = eng.check("write", cal, PolicyRequest(scope=ALICE, source="tool:calendar"))
    assert decision.policy_id == "calendar_is_long_term" and decision.obligations == {}


def test_builtin_ttl_expiry() -> None:
    eng = engine(ttl_expiry())
    old = mem(expires_at=NOW - timedelta(minutes=1))
    live = mem(expires_at=NOW + timedelta(minutes=1))
    out = eng.filter_read([old, live, mem()], read())
    assert len(out.memories) == 2 and out.expire == [old.id]


def test_builtin_decision_trust_floor() -> None:
    eng = engine(decision_trust_floor(0.5))
    poisoned = mem("user prefers X (from web page)", source="consolidation", trust=0.3)
    trusted = mem("user prefers Y", trust=1.0)
    assert eng.filter_read([poisoned, trusted], read("decision")).memories == [trusted]
    assert eng.filter_read([poisoned, trusted], read()).memories == [poisoned, trusted]


def test_builtin_set_and_describe() -> None:
    eng = engine(*builtin_policies(freshness_by_tag={"flight_price": timedelta(hours=1)}))
    assert eng.check_conflicts() == [] or all(c.winner_id for c in eng.check_conflicts())
    rows = eng.describe()
    assert rows[0]["id"] == "builtin.user_write_protection"  # final
    assert {r["id"] for r in rows} >= {"builtin.freshness.flight_price", "builtin.tool_result_ttl"}


def test_evaluate_is_pure_and_aligned() -> None:
    eng = engine(source_trust_floor())
    ms = [mem(source="reasoning", confidence=0.1), mem(), mem(scope=BOB)]
    decisions = eng.evaluate("read", ms, read())
    assert [len(d) for d in decisions] == [1, 0, 1]
    assert decisions[2][0].policy_id == SCOPE_POLICY_ID


def test_decision_serialises_for_event_log() -> None:
    eng = engine(source_trust_floor())
    out = eng.filter_read([mem(source="reasoning", confidence=0.1)], read())
    payload = out.all_decisions()[0].to_event()
    assert json.loads(json.dumps(payload))["policy_id"] == "builtin.source_trust_floor"
    assert Decision.model_validate(payload).effect is Effect.FILTER


def test_duplicate_ids_rejected_and_replace() -> None:
    eng = engine(Policy(id="a", effect="deny"))
    with pytest.raises(ConfigurationError):
        eng.add(Policy(id="a", effect="allow"))
    eng.add(Policy(id="a", effect="allow"), replace=True)
    assert eng.get("a").effect is Effect.ALLOW


def test_flat_and_map_cel_forms_agree() -> None:
    flat = Policy(
        id="pricey",
        effect="filter",
        condition=("has(memory.metadata.price) && memory.metadata.price > 100.0 && 'memory.x' != request.purpose"),
    )
    assert flat.compiled.flat_program is not None
    whole = Policy(id="slotted", effect="downgrade", condition="has(memory.slot)")
    assert whole.compiled.flat_program is None  # has() needs a field selection: the map form is kept
    cheap = Memory(content="a", scope=ALICE, lineage=Lineage(source_kind="tool"), metadata={"price": 50.0})
    dear = Memory(content="b", scope=ALICE, lineage=Lineage(source_kind="tool"), metadata={"price": 500.0})
    bare = mem("c")
    for policies in ((flat,), (flat, whole)):
        out = engine(*policies).filter_read([cheap, dear, bare], read())
        assert [m.content for m in out.memories] == ["a", "c"]
    assert engine(flat, whole)._plan(Operation.READ).flat is False
    assert engine(flat)._plan(Operation.READ).flat is True


def test_string_literals_are_not_rewritten() -> None:
    p = Policy(id="lit", effect="filter", condition='memory.content == "memory.content"')
    eng = engine(p)
    out = eng.filter_read([mem("memory.content"), mem("other")], read())
    assert [m.content for m in out.memories] == ["other"]


FAST_CASES = [
    "memory.confidence < 0.7",
    "memory.suspect && request.purpose == 'decision'",
    "!request.promote",
    "request.source_kind in ['tool', 'reasoning']",
    "now - memory.created_at > 3600.0",
    "memory.suspect == 1",
    "request.agent_id != null",
    "memory.trust * 2.0 >= 1 || memory.tags == []",
    "memory.confidence + 1 > 1.0",
    "memory.suspect < true",
    "'a' in memory.tags && !(memory.confidence > 0.9)",
    "-memory.confidence < -0.5",
]


def _outcome(fn: object) -> object:
    try:
        value = fn()  # type: ignore[operator]
    except Exception:
        return "error"
    return value if isinstance(value, bool) else ("non-bool", value)


@pytest.mark.parametrize("source", FAST_CASES)
def test_python_fast_path_matches_cel(source: str) -> None:
    import cel
    from memlineage.policy._condition import compile_python

    compiled = compile_python(source)
    assert compiled is not None
    single, batch = compiled
    rows = [
        {"confidence": 0.5, "suspect": True, "created_at": 0.0, "trust": 0.2, "tags": ["a"]},
        {"confidence": 0.95, "suspect": False, "created_at": 9000.0, "trust": 0.9, "tags": []},
        {"confidence": 1, "suspect": 1, "created_at": 1.0, "trust": 1.0, "tags": ["b"]},
    ]
    agreed = 0
    for req in ({"purpose": "decision", "promote": False, "source_kind": "tool", "agent_id": None},
                {"purpose": None, "promote": True, "source_kind": "user", "agent_id": "bot"}):  # fmt: skip
        for r in rows:
            expected = _outcome(lambda r=r, q=req: cel.evaluate(source, {"memory": r, "request": q, "now": 7200.0}))
            got = _outcome(lambda r=r, q=req: single(r, q, None, 7200.0))
            # the Python form may decline (raise / non-bool: the engine then asks CEL) but never disagree
            assert got == expected or not isinstance(got, bool), (r, req, got, expected)
            agreed += isinstance(got, bool)
        try:
            batched = batch(rows, req, None, 7200.0)
        except TypeError:
            continue  # one item raised: the engine re-evaluates item by item
        assert batched == [single(r, req, None, 7200.0) for r in rows]
    assert agreed >= 2  # the fast path does decide most items


@pytest.mark.parametrize("source", ["has(memory.slot)", "size(memory.tags) > 1", "memory.tags.exists(t, t == 'a')"])
def test_python_fast_path_declines_what_it_cannot_mirror(source: str) -> None:
    from memlineage.policy._condition import compile_python

    assert compile_python(source) is None
    assert Policy(id="p", effect="filter", condition=source).compiled.python is None


def test_fast_path_errors_fall_back_to_cel_semantics() -> None:
    # null < 1.0 raises in both; the policy fails closed (restrictive) with the CEL error in the reason
    p = Policy(id="cmp_null", effect="filter", condition="memory.expires_at < 1.0")
    assert p.compiled.python is not None
    out = engine(p).filter_read([mem()], read())
    assert out.memories == [] and "condition failed" in out.withheld[0][1].reason
    # CEL absorbs an error with && false; Python would raise: the CEL fallback decides
    q = Policy(id="absorb", effect="filter", condition="memory.expires_at < 1.0 && false")
    assert engine(q).filter_read([mem()], read()).withheld == []


_BIG_LIST = "[" + ",".join(["1"] * 200) + "]"


@pytest.mark.parametrize(
    ("condition", "rule"),
    [
        (f"{_BIG_LIST}.map(x, {_BIG_LIST}.map(y, x + y)).size() > 0", "map"),  # the million-step shape
        ("memory.tags.filter(t, t == 'a').size() > 0", "quadratic"),
        ("memory.tags.exists(t, memory.tags.exists(u, t == u))", "nested"),
        ("(" * 30 + "true" + ")" * 30, "nests brackets"),
        (" || ".join(["memory.confidence > 0.5"] * 60), "characters long"),
    ],
)
def test_unbounded_cel_cost_is_refused_at_load(condition: str, rule: str) -> None:
    """Issue 14 kind 6: the CEL binding has no cost limit, so conditions are bounded when they are loaded."""
    import time

    start = time.perf_counter()
    with pytest.raises(PolicyLoadError, match=rule):
        Policy(id="costly", operations=("read",), condition=condition, effect="filter")
    assert time.perf_counter() - start < 5.0  # refused before any evaluation (the old load took 7 s)


def test_bounded_cel_conditions_still_load() -> None:
    ok = "memory.tags.exists(t, t == 'a') && memory.tags.all(t, size(t) < 50) || 'x' in memory.tags"
    policy = Policy(id="fine", operations=("read",), condition=ok, effect="filter")
    assert policy.compiled.kind == "cel"
    # brackets and comprehension names inside string literals do not count
    Policy(id="quoted", operations=("read",), condition="memory.content == '((((x.map(y, z)))))'", effect="filter")
