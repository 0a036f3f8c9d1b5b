"""Reads never change stored state because a policy condition failed (issue 14, kind 2).

Property: any sequence of recalls under arbitrary read policies (every effect; conditions that hold, do not hold or
raise) leaves the ledger unchanged apart from usage statistics. What counts as usage statistics (and is therefore
left out of the comparison): the ``use_count``, ``last_used_at`` and ``value`` columns of ``memories`` (a recall
reinforces what it served) and ``policy_decision`` events (the audit trail of the reads). Everything else — every
other column of every table, every other event — must be identical.

The one documented exception is a ``mark_expired`` or ``downgrade`` policy whose condition *holds*: expiring or
downgrading is then what its author asked for. So those two effects are generated with conditions that are false or
raise, never with conditions that hold; every other effect gets any condition.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage.ledger._schema import activities, edges, events, memories, supports
from memlineage.models import Scope, Status
from memlineage.policy import Effect, Policy, PolicyEngine, PolicyTarget
from memlineage.testing import make_manager
from sqlalchemy import select

ALICE = Scope(user_id="alice", session_id="s1")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)

#: Usage statistics a read may change (see the module docstring).
USAGE_COLUMNS = frozenset({"use_count", "last_used_at", "value"})
USAGE_EVENTS = frozenset({"policy_decision"})

RAISING = (
    "now - memory.metadata.fetched_at > 3600.0",  # raises on memories without the key
    "memory.metadata.missing == 'x'",
    "memory.tags[3] == 'x'",  # index out of range on every seeded memory
)
NOT_HOLDING = ("false", "memory.age < 0.0")
HOLDING = ("true", "memory.age >= 0.0", "'weather' in memory.tags")


def _raising_callable(memory: Any, ctx: Any) -> bool:
    raise RuntimeError("condition exploded")


def _policy_strategy() -> st.SearchStrategy[tuple[str, Any]]:
    harmless = st.sampled_from([Effect.DENY, Effect.FILTER, Effect.ALLOW, Effect.REQUIRE_REFRESH])
    stateful = st.sampled_from([Effect.MARK_EXPIRED, Effect.DOWNGRADE])
    any_condition = st.sampled_from((*RAISING, *NOT_HOLDING, *HOLDING, _raising_callable))
    safe_condition = st.sampled_from((*RAISING, *NOT_HOLDING, _raising_callable))
    return st.one_of(st.tuples(harmless, any_condition), st.tuples(stateful, safe_condition))


def _snapshot(mm: Any) -> dict[str, list[tuple[Any, ...]]]:
    mm.flush_index()  # Chroma is written behind the ledger commit: its bookkeeping (index_state) settles first
    out: dict[str, list[tuple[Any, ...]]] = {}
    with mm.ledger.read() as conn:
        for table in (memories, edges, supports, activities):
            cols = [c for c in table.c if c.name not in USAGE_COLUMNS]
            out[table.name] = sorted(tuple(map(repr, row)) for row in conn.execute(select(*cols)))
        rows = conn.execute(select(events).where(events.c.type.not_in(USAGE_EVENTS)).order_by(events.c.id))
        out[events.name] = [tuple(map(repr, row)) for row in rows]
    return out


def _manager(minutes: float) -> tuple[Any, PolicyEngine]:
    """A manager whose clock reads ``minutes`` after the seeded memory's ``fetched_at``, with an empty engine."""
    clock = lambda: T0 + timedelta(minutes=minutes)  # noqa: E731
    engine = PolicyEngine([], clock=clock)
    return make_manager(policy=engine, clock=clock), engine


def _seed(mm: Any) -> list[str]:
    fresh = mm.remember(
        "flight price to Lisbon is 120 euros",
        scope=ALICE,
        source="tool:flight_api",
        tags=["flight_price"],
        metadata={"fetched_at": T0.timestamp()},
    )
    weather = mm.remember("the weather in Lisbon is sunny", scope=ALICE, source="tool:weather", tags=["weather"])
    user = mm.remember("I prefer window seats on flights", scope=ALICE, source="user")
    derived = mm.remember(
        "book the Lisbon flight with a window seat",
        scope=ALICE,
        source="reasoning",
        derived_from=[fresh.id, user.id],
    )
    return [fresh.id, weather.id, user.id, derived.id]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policies=st.lists(_policy_strategy(), min_size=1, max_size=4),
    queries=st.lists(st.sampled_from(["Lisbon flight", "weather", "window seat", "price"]), min_size=1, max_size=4),
    purpose=st.sampled_from([None, "decision", "chat"]),
    budget=st.sampled_from([None, 0.0, 5.0]),
)
def test_reads_leave_the_ledger_unchanged_apart_from_usage(
    policies: list[tuple[Effect, Any]], queries: list[str], purpose: str | None, budget: float | None
) -> None:
    mm, engine = _manager(10)  # fetched_at is fresh: RAISING[0] is false or raises
    try:
        ids = _seed(mm)
        engine.add(
            [
                Policy(
                    id=f"p{i}",
                    operations=("read",),
                    condition=condition,
                    effect=effect,
                    refresh="no_such_hook" if effect is Effect.REQUIRE_REFRESH else None,
                    cost=1.0,
                )
                for i, (effect, condition) in enumerate(policies)
            ]
        )
        before = _snapshot(mm)
        for q in queries:
            result = mm.recall(q, scope=ALICE, purpose=purpose, budget=budget)
            for hit in result.hits:
                assert hit.memory.id in ids
        assert _snapshot(mm) == before
        assert {m.status for m in mm.ledger.memories(ids) if m is not None} == {Status.ACTIVE}
    finally:
        mm.close()


def _stale_fetch(effect: Effect, *, tags: tuple[str, ...] = (), refresh: str | None = None) -> Policy:
    """The issue's policy: stale after an hour, by a metadata key that most memories lack."""
    target = PolicyTarget(tags=tags)
    return Policy(id="stale_fetch", operations=("read",), target=target, condition=RAISING[0], effect=effect,
                  refresh=refresh)  # fmt: skip


@pytest.mark.parametrize("effect", [Effect.MARK_EXPIRED, Effect.DOWNGRADE, Effect.REQUIRE_REFRESH, Effect.DENY])
def test_failing_condition_fails_closed_for_the_read_only(effect: Effect) -> None:
    """The issue's case: a condition on a missing metadata key withholds (or flags) for this read, stores nothing."""
    mm, engine = _manager(10)  # RAISING[0]: false on the fetched memory, raises on the others
    refreshed: list[str] = []
    engine.register_refresh_hook("refetch", lambda m, d: refreshed.append(m.id))
    try:
        ids = _seed(mm)
        engine.add(_stale_fetch(effect, refresh="refetch" if effect is Effect.REQUIRE_REFRESH else None))
        before = _snapshot(mm)
        result = mm.recall("Lisbon weather window seat flight", scope=ALICE, k=10)
        assert _snapshot(mm) == before
        assert all(m.status is Status.ACTIVE for m in mm.ledger.memories(ids) if m is not None)
        assert refreshed == []  # a failed condition never calls the refresh hook
        failed = [d for d in result.trace.decisions if getattr(d, "failed", False)]
        assert failed and all("nothing stored was changed" in d.reason for d in failed)
        if effect is Effect.DOWNGRADE:
            # served for this read, flagged suspect, not stored as suspect
            flagged = {h.memory.id for h in result.hits if "suspect" in h.flags}
            assert set(ids) - {ids[0]} <= flagged
        else:
            assert set(result.ids) <= {ids[0]}  # only the memory whose condition evaluated can be served
        # removing the policy brings everything back: nothing was stored
        engine.remove("stale_fetch")
        assert set(mm.recall("Lisbon weather window seat flight", scope=ALICE, k=10).ids) == set(ids)
    finally:
        mm.close()


def test_holding_mark_expired_still_expires() -> None:
    """The documented exception: a mark_expired whose condition holds still expires (the policy's purpose)."""
    mm, engine = _manager(120)  # RAISING[0] holds on the fetched memory
    try:
        ids = _seed(mm)
        engine.add(_stale_fetch(Effect.MARK_EXPIRED, tags=("flight_price",)))
        mm.recall("Lisbon flight price", scope=ALICE, k=10)
        assert mm.ledger.memories([ids[0]])[0].status is Status.EXPIRED
    finally:
        mm.close()
