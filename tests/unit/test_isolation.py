"""Scope isolation and erasure, checked by a hypothesis state machine over random users, agents and sessions.

Random writes (with premises, shared activity ids and slots), corrections, retractions, archiving and erasures
(one memory, a session, an agent or a whole user) interleave with reads through every public read path. After
every step: no read returned anything outside the reader's scope, and no erased text is left in any ledger row,
index entry or read result. Every memory carries a unique marker in its content, metadata and tags so that erased
text can be looked for everywhere.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, multiple, precondition, rule
from memlineage import (
    InvalidInputError,
    LineageCycleError,
    Memory,
    MemoryNotFoundError,
    Scope,
    ScopeViolationError,
    Status,
)
from memlineage.ledger._schema import metadata as ledger_tables
from memlineage.testing import make_manager
from sqlalchemy import select

USERS = ("u0", "u1", "*")  # "*" once read cross-user admin events (issue 14)
AGENTS = (None, "planner", "booker")
SESSIONS = (None, "s1", "s2")
WORDS = ("paris", "hotel", "flight", "aisle", "window", "tea", "coffee", "rome", "price", "museum")
ACTIVITIES = (None, "run-shared-1", "run-shared-2")  # the same run ids for every user on purpose

#: Figures for the closing note (printed with MEMLINEAGE_REPORT=1).
STATS = {"runs": 0, "steps": 0, "reads": 0, "writes": 0, "erasures": 0, "violations": 0}

scopes = st.builds(Scope, user_id=st.sampled_from(USERS), agent_id=st.sampled_from(AGENTS),
                   session_id=st.sampled_from(SESSIONS))  # fmt: skip
readers = st.builds(Scope, user_id=st.sampled_from(USERS), agent_id=st.sampled_from(AGENTS))


def visible(reader: Scope, owner: Scope) -> bool:
    """The isolation rule, written independently of ``Scope.contains``."""
    if reader.user_id != owner.user_id:
        return False
    return reader.agent_id is None or owner.agent_id in (None, reader.agent_id)


class IsolationMachine(RuleBasedStateMachine):
    """Model: every memory id → (owner scope, marker); the set of erased markers."""

    mems = Bundle("mems")

    def __init__(self) -> None:
        super().__init__()
        self.mm = make_manager()
        self.owner: dict[str, Scope] = {}
        self.marker: dict[str, str] = {}
        self.erased: set[str] = set()  # markers whose memory was erased
        self.activity_owner: dict[str, str] = {}  # activity id -> the user whose write created it
        self.n = 0
        STATS["runs"] += 1

    def teardown(self) -> None:
        self.mm.close()

    # ------------------------------------------------------------------ helpers
    def _new_marker(self) -> str:
        self.n += 1
        return f"zq{self.n}mark{STATS['runs']}"

    def _check_read(self, reader: Scope, mems: list[Memory | None] | list[Memory], where: str) -> None:
        STATS["reads"] += 1
        for m in mems:
            if m is None:
                continue
            if not visible(reader, self.owner.get(m.id, m.scope)) or not visible(reader, m.scope):
                STATS["violations"] += 1
                pytest.fail(f"{where}: {reader} saw {m.id} owned by {self.owner.get(m.id)}")
            self._check_text(f"{m.content} {m.metadata} {m.tags}", where)

    def _check_text(self, text: str, where: str) -> None:
        leaked = [mk for mk in self.erased if mk in text]
        if leaked:
            STATS["violations"] += 1
            pytest.fail(f"{where}: erased text {leaked} is still readable")

    # ------------------------------------------------------------------ writes
    @rule(target=mems, scope=scopes, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
          activity=st.sampled_from(ACTIVITIES), slot=st.sampled_from([None, None, "city", "seat"]),
          premises=st.lists(mems, max_size=2, unique=True))  # fmt: skip
    def write(self, scope: Scope, words: list[str], activity: str | None, slot: str | None, premises: list[str]) -> Any:
        STATS["steps"] += 1
        mk = self._new_marker()
        foreign = [p for p in premises if self.owner[p].user_id != scope.user_id or not scope.contains(self.owner[p])]
        if activity is not None and self.activity_owner.get(activity, scope.user_id) != scope.user_id:
            foreign.append(activity)  # another user's activity: activities are scoped like memories
        erased = [p for p in premises if self.marker[p] in self.erased]
        try:
            mem = self.mm.remember(
                f"{' '.join(words)} {mk}", scope=scope, metadata={"note": mk}, tags=[mk], derived_from=premises,
                activity_id=activity, slot=slot, source="reasoning" if premises else "user",
                kind="semantic" if slot else "episodic",
            )  # fmt: skip
        except ScopeViolationError:
            assert foreign, "a same-scope premise was refused"
            return multiple()
        except InvalidInputError:
            assert erased, "an unexpected InvalidInputError"
            return multiple()
        assert not foreign, f"a premise from another scope was accepted: {foreign}"
        if activity is not None:
            self.activity_owner.setdefault(activity, scope.user_id)
        STATS["writes"] += 1
        self.owner[mem.id] = mem.scope
        self.marker[mem.id] = mk
        assert mem.scope.user_id == scope.user_id
        return mem.id

    @rule(target=mems, mid=mems, reader=scopes, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=2))
    def correct(self, mid: str, reader: Scope, words: list[str]) -> Any:
        STATS["steps"] += 1
        mk = self._new_marker()
        try:
            rep = self.mm.supersede(mid, f"{' '.join(words)} {mk}", scope=reader, metadata={"note": mk}, tags=[mk])
        except MemoryNotFoundError:
            assert not visible(reader, self.owner[mid]), "a visible memory was reported missing"
            return multiple()
        except InvalidInputError:  # not live any more
            assert self.mm.get(mid, scope=self.owner[mid]).status.value not in ("active", "suspect")
            return multiple()
        assert visible(reader, self.owner[mid]), "supersede reached into another scope"
        new = rep.memory
        assert new is not None and new.scope.user_id == self.owner[mid].user_id
        self.owner[new.id] = new.scope
        self.marker[new.id] = mk
        STATS["writes"] += 1
        return new.id

    @rule(mid=mems, reader=scopes)
    def retract(self, mid: str, reader: Scope) -> None:
        STATS["steps"] += 1
        try:
            report = self.mm.retract(mid, scope=reader)
        except MemoryNotFoundError:
            assert not visible(reader, self.owner[mid])
            return
        assert visible(reader, self.owner[mid]), "retract reached into another scope"
        for s in report.suspect:
            assert self.owner[s].user_id == self.owner[mid].user_id, "a cascade crossed users"

    @rule(mid=mems, reader=scopes)
    def forget(self, mid: str, reader: Scope) -> None:
        STATS["steps"] += 1
        try:
            self.mm.forget(mid, scope=reader)
        except MemoryNotFoundError:
            assert not visible(reader, self.owner[mid])

    @rule(mid=consumes(mems), reader=scopes)
    def erase_one(self, mid: str, reader: Scope) -> None:
        STATS["steps"] += 1
        try:
            receipt = self.mm.erase(mid, scope=reader)
        except MemoryNotFoundError:
            assert not visible(reader, self.owner[mid])
            return
        STATS["erasures"] += 1
        assert mid in receipt.memory_ids
        for e in receipt.memory_ids:
            assert self.owner[e].user_id == self.owner[mid].user_id, "erase reached into another user"
            self.erased.add(self.marker[e])

    @precondition(lambda self: len(self.owner) >= 4)
    @rule(user=st.sampled_from(USERS), agent=st.sampled_from(AGENTS), session=st.sampled_from(SESSIONS))
    def erase_scope(self, user: str, agent: str | None, session: str | None) -> None:
        STATS["steps"] += 1
        scope = Scope(user_id=user, agent_id=agent, session_id=session)
        expected = {
            i for i, o in self.owner.items()
            if o.user_id == user and (agent is None or o.agent_id == agent)
            and (session is None or o.session_id == session)
        }  # fmt: skip
        receipt = self.mm.erase(scope=scope)
        STATS["erasures"] += 1
        assert set(receipt.memory_ids) == expected, "the receipt must list exactly the records of the scope"
        self.erased.update(self.marker[i] for i in expected)

    # ------------------------------------------------------------------ reads
    @rule(mid=mems, reader=readers)
    def read_by_id(self, mid: str, reader: Scope) -> None:
        STATS["steps"] += 1
        mine = visible(reader, self.owner[mid])
        got = self.mm.get(mid, scope=reader)
        assert (got is not None) == mine
        self._check_read(reader, [got], "get")
        self._check_read(reader, self.mm.get_many([mid, *list(self.owner)[:5]], scope=reader), "get_many")
        for name in ("explain", "ancestors", "descendants", "impact"):
            try:
                out = getattr(self.mm, name)(mid, scope=reader)
            except MemoryNotFoundError:
                assert not mine, f"{name}: a visible memory was reported missing"
                continue
            assert mine, f"{name}: read another scope's memory"
            if name == "explain":
                self._check_read(reader, [out.memory, *out.ancestors], name)
                for act in out.activities:
                    assert act.scope is None or act.scope.user_id == reader.user_id, "explain showed a foreign run"
                self._check_text(out.to_text() + out.to_mermaid() + str(out.to_prov_json()), name)
            elif name == "impact":
                assert all(self.owner[s].user_id == reader.user_id for s in out.suspect + out.unaffected)
            else:
                self._check_read(reader, out, name)

    @rule(reader=readers, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), mid=mems,
          include_suspect=st.booleans(), k=st.integers(0, 12))  # fmt: skip
    def search(self, reader: Scope, words: list[str], mid: str, include_suspect: bool, k: int) -> None:
        STATS["steps"] += 1
        query = " ".join(words) + " " + self.marker[mid]  # sometimes another user's or an erased marker
        hits = self.mm.recall(query, scope=reader, k=k, include_suspect=include_suspect)
        self._check_read(reader, hits.memories, "recall")
        assert len(hits.hits) <= k
        for h in hits.hits:
            assert h.memory.status in (Status.ACTIVE, Status.SUSPECT)
        self._check_read(reader, self.mm.find(scope=reader), "find")
        for user, _slot in self.mm.slots(scope=reader):
            assert user == reader.user_id, "slots listed another user's keys"
        for slot in ("city", "seat"):
            self._check_read(reader, self.mm.slot_history(slot, scope=reader), "slot_history")
            self._check_read(reader, [self.mm.slot_value(slot, scope=reader)], "slot_value")

    @rule()
    def admin_listing(self) -> None:
        """A cross-user admin read: its event belongs to no user, whatever a user calls themselves."""
        STATS["steps"] += 1
        listed = self.mm.slots(admin=("ops", "nightly audit"))
        assert {u for u, _ in listed} <= set(USERS)

    @rule(reader=readers, mid=mems)
    def audit(self, reader: Scope, mid: str) -> None:
        STATS["steps"] += 1
        events = self.mm.audit(reader)
        STATS["reads"] += 1
        assert all(e["user_id"] == reader.user_id for e in events), "audit showed another user's events"
        assert not any(e.type == "admin_access" and e["data"].get("operation") == "slots" for e in events), (
            "a user read a cross-user admin event"
        )
        self._check_text(str(events), "audit")
        mine = {i for i, o in self.owner.items() if o.user_id == reader.user_id}
        assert {e["memory_id"] for e in events if e["memory_id"]} <= mine
        try:
            self.mm.audit(reader, memory_id=mid)
        except MemoryNotFoundError:
            assert not visible(reader, self.owner[mid])
        stats = self.mm.stats(reader)
        assert stats["memories"] == len(mine)

    # ------------------------------------------------------------------ invariants
    @invariant()
    def erased_text_is_gone_everywhere(self) -> None:
        if not self.erased:
            return
        with self.mm.ledger.read() as conn:
            for table in ledger_tables.sorted_tables:
                for row in conn.execute(select(table)):
                    self._check_text(repr(tuple(row)), f"ledger table {table.name}")
        ids = sorted(self.mm.index.ids())
        self._check_text(repr(self.mm.index.get_metadata(ids)), "index metadata")
        erased_ids = {i for i, mk in self.marker.items() if mk in self.erased}
        assert not erased_ids & set(ids), "an erased memory is still in the index"

    @invariant()
    def index_agrees_with_ledger(self) -> None:
        report = self.mm.verify()
        assert report.ok, report.differences()


MAX = int(os.environ.get("MEMLINEAGE_ISOLATION_EXAMPLES", "60"))
STEPS = int(os.environ.get("MEMLINEAGE_ISOLATION_STEPS", "30"))

TestIsolation = IsolationMachine.TestCase
TestIsolation.settings = settings(
    max_examples=MAX, stateful_step_count=STEPS, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip


def test_report_isolation_figures() -> None:
    """Runs last in this module: prints the figures when MEMLINEAGE_REPORT=1."""
    if os.environ.get("MEMLINEAGE_REPORT"):
        print(f"\nisolation: {STATS}")  # noqa: T201
    assert STATS["violations"] == 0


def test_cycles_between_users_are_not_possible() -> None:
    mm = make_manager()
    a = mm.remember("alice's fact", scope="alice")
    with pytest.raises(ScopeViolationError):
        mm.remember("bob derives from alice", scope="bob", derived_from=[a.id])
    b = mm.remember("alice's conclusion", scope="alice", source="reasoning", derived_from=[a.id])
    with pytest.raises(LineageCycleError):
        mm.supersede(a.id, "alice's new fact", scope="alice", derived_from=[b.id])
    mm.close()
