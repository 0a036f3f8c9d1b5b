"""Erasure is physical: after ``erase(scope)`` the erased text is in no file of the embedded store.

Every file under the store directory (SQLite database, WAL and shared memory, Chroma's SQLite and HNSW segment
files) is scanned as bytes, in UTF-8 and UTF-16, while the store is still open and again after closing it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memlineage import Activity, MemoryManager, Scope, Status
from memlineage.testing import FakeEmbedder

pytestmark = pytest.mark.integration

ALICE = Scope(user_id="alice", session_id="trip")
BOB = Scope(user_id="bob")
SECRETS = ["Xylophone-Passport-778812", "Quetzal-Diagnosis-5521", "Marigold-Address-9 Rue Obscure", "秘密的日记条目"]


def _scan(store: Path, needles: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in sorted(p for p in store.rglob("*") if p.is_file()):
        data = f.read_bytes()
        for n in needles:
            if n.encode("utf-8") in data or n.encode("utf-16-le") in data:
                found.setdefault(n, []).append(str(f.relative_to(store)))
    return found


def test_erased_text_is_in_no_file(tmp_path: Path) -> None:
    store = tmp_path / "store"
    mm = MemoryManager.open(store, embedder=FakeEmbedder())
    mm.record_activity(Activity(id="run-a", kind="run", scope=ALICE, metadata={"prompt": SECRETS[3]}))
    a = mm.remember(f"passport {SECRETS[0]}", scope=ALICE, metadata={"doc": SECRETS[0]}, tags=["id"],
                    activity_id="run-a", slot="passport", kind="semantic")  # fmt: skip
    b = mm.remember(f"diagnosis {SECRETS[1]}", scope=ALICE, source="tool:clinic")
    c = mm.remember(f"plan based on {SECRETS[1]}", scope=ALICE, source="reasoning", derived_from=[b.id])
    revised = mm.supersede(a.id, f"passport renewed {SECRETS[0]}-B", scope=ALICE).memory
    assert revised is not None
    d = mm.remember(f"home {SECRETS[2]}", scope=ALICE)
    mm.forget(d.id, scope=ALICE)  # archived: out of the index, still in the ledger until erased
    e = mm.remember(SECRETS[3], scope=ALICE)
    mm.retract(e.id, scope=ALICE)
    for start in (0, 100):  # enough to make Chroma write segment files and SQLite reuse pages
        mm.remember_many(
            [{"content": f"alice filler {i} {SECRETS[1]}", "scope": ALICE} for i in range(start, start + 100)]
        )
        mm.remember_many([{"content": f"bob filler {i}", "scope": BOB} for i in range(start, start + 100)])
    bob_note = mm.remember("bob keeps Kiwi-Note-123", scope=BOB)
    alice_ids = set(mm.ledger.ids_in_scope(Scope(user_id="alice")))
    in_index = len(alice_ids & mm.index.ids())
    assert _scan(store, SECRETS), "the secrets must be on disk before the erasure (or the test proves nothing)"

    receipt = mm.erase(scope=Scope(user_id="alice"), reason="GDPR request")

    assert set(receipt.memory_ids) == alice_ids
    assert {a.id, b.id, c.id, revised.id, d.id, e.id} <= alice_ids and len(alice_ids) == 206
    assert receipt.index_entries_removed == in_index
    assert receipt.activities_redacted >= 1 and receipt.events_redacted >= len(alice_ids)
    assert all(m.status is Status.ERASED and m.content == "" for m in mm.get_many(list(alice_ids), scope="alice"))
    assert mm.verify().ok
    assert _scan(store, SECRETS) == {}, "erased text left on disk while the store is open"
    assert mm.get(bob_note.id, scope=BOB).content == "bob keeps Kiwi-Note-123"
    mm.close()
    assert _scan(store, SECRETS) == {}, "erased text left on disk after close"
    assert _scan(store, ["Kiwi-Note-123"]) != {}, "other users' data must stay"
    with MemoryManager.open(store, embedder=FakeEmbedder()) as again:
        assert again.recall("passport diagnosis plan home", scope="alice", k=10).hits == []
        assert again.get(bob_note.id, scope=BOB) is not None
