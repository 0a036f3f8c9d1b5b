"""Core additions made for the LangChain adapters: MemoryManager.find / slots, thread-safe in-memory ledger."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from memlineage import InvalidInputError, Scope, Status
from memlineage.testing import make_manager


def test_find_by_slot_tags_kind_session_and_paging():
    mm = make_manager()
    s1, s2 = Scope(user_id="a", session_id="s1"), Scope(user_id="a", session_id="s2")
    v1 = mm.remember("seat aisle", scope=s1, slot="seat", tags=["pref"])
    v2 = mm.remember("seat window", scope=s2, slot="seat", tags=["pref", "travel"], kind="semantic")
    other = mm.remember("bob seat", scope="b", slot="seat")
    assert [m.id for m in mm.find(scope=s1, slot="seat")] == [v2.id]  # superseded versions are not live
    assert [m.id for m in mm.find(scope="a", tags=["travel"])] == [v2.id]
    assert [m.id for m in mm.find(scope="a", kinds=["semantic"])] == [v2.id]
    assert mm.find(scope=s1, session_only=True) == []
    mm.retract(v2.id, scope="a")
    assert mm.find(scope="a", slot="seat") == []
    assert [m.id for m in mm.find(scope="b")] == [other.id]
    for i in range(4):
        mm.remember(f"n{i}", scope="c")
    assert [m.content for m in mm.find(scope="c", limit=2, offset=1)] == ["n1", "n2"]
    with pytest.raises(InvalidInputError):
        mm.find(scope="c", limit=-1)
    assert mm.require(v1.id, scope="a").status is Status.SUPERSEDED
    mm.close()


def test_find_include_suspect():
    mm = make_manager()
    base = mm.remember("base", scope="a")
    child = mm.remember("child", scope="a", source="reasoning", derived_from=[base.id])
    mm.retract(base.id, scope="a")
    assert [m.id for m in mm.find(scope="a")] == [child.id]
    assert mm.find(scope="a", include_suspect=False) == []
    mm.close()


def test_slots_lists_live_keys_per_user_with_prefix():
    mm = make_manager()
    mm.remember("x", scope="a", slot="ns:1")
    mm.remember("y", scope="b", slot="ns:2")
    gone = mm.remember("z", scope="b", slot="other")
    mm.retract(gone.id, scope="b")
    admin = ("ops", "test")
    assert mm.slots(admin=admin) == [("a", "ns:1"), ("b", "ns:2")]
    assert mm.slots(scope="b") == [("b", "ns:2")]
    assert mm.slots(prefix="ns:1", admin=admin) == [("a", "ns:1")]
    assert mm.slots(prefix="n_", admin=admin) == []  # LIKE wildcards are escaped
    mm.close()


async def test_async_twins():
    mm = make_manager()
    mm.remember("x", scope="a", slot="k")
    assert [m.content for m in await mm.afind(scope="a", slot="k")] == ["x"]
    assert await mm.aslots(scope="a") == [("a", "k")]
    mm.close()


def test_in_memory_ledger_is_safe_under_concurrent_writers():
    mm = make_manager()
    base = mm.remember("base", scope="a")

    def work(i: int) -> str:
        return mm.remember(f"item {i}", scope="a", derived_from=[base.id]).id

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(work, range(100)))
    assert all(m is not None for m in mm.get_many(ids, scope="a"))
    mm.close()
