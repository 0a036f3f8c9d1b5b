"""Erasure is physical: after ``erase(scope)`` the erased text is in no file of the embedded store.

Every file under the store directory (SQLite database, WAL and shared memory, Chroma's SQLite and HNSW segment
files) is scanned as bytes, in UTF-8 and UTF-16, while the store is still open and again after closing it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from memlineage import Activity, MemoryManager, Scope, Status
from memlineage.testing import FakeEmbedder

pytestmark = pytest.mark.integration

ALICE = Scope(user_id="alice", session_id="Trip-Session-4471")
#: Issue 14 kind 3: tags, session ids and content hashes of erased memories stayed in Chroma's log and free pages.
ERASED_TAG = "Zebra-Tag-991"
BOB = Scope(user_id="bob")
SECRETS = ["Xylophone-Passport-778812", "Quetzal-Diagnosis-5521", "Marigold-Address-9 Rue Obscure", "秘密的日记条目"]


def _scan(store: Path, needles: list[str], *, hnsw: bool = True) -> dict[str, list[str]]:
    """Files of ``store`` holding a needle; ``hnsw=False`` leaves out hnswlib's binary segment files (see below)."""
    found: dict[str, list[str]] = {}
    for f in sorted(p for p in store.rglob("*") if p.is_file() and (hnsw or p.suffix != ".bin")):
        data = f.read_bytes()
        for n in needles:
            if n.encode("utf-8") in data or n.encode("utf-16-le") in data:
                found.setdefault(n, []).append(str(f.relative_to(store)))
    return found


@pytest.mark.parametrize("exact_max", [None, 0], ids=["exact-plan", "chroma"])
def test_erased_text_is_in_no_file(tmp_path: Path, exact_max: int | None) -> None:
    """Chroma holds every memory (its text as the document); ``exact-plan`` reads small scopes from memory too.

    hnswlib writes uninitialised memory into its binary segment files (``*.bin``): in the process that held the
    erased strings, freed buffers of the documents it passed to Chroma can end up there. While open and after close
    the scan leaves those files out; after a reopen in a fresh process (which rewrites the segment) it scans all.
    """
    store = tmp_path / "store"
    mm = MemoryManager.open(store, embedder=FakeEmbedder(), exact_max=exact_max)
    mm.record_activity(Activity(id="run-a", kind="run", scope=ALICE, metadata={"prompt": SECRETS[3]}))
    a = mm.remember(f"passport {SECRETS[0]}", scope=ALICE, metadata={"doc": SECRETS[0]}, tags=["id", ERASED_TAG],
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
            [
                {"content": f"alice filler {i} {SECRETS[1]}", "scope": ALICE, "tags": [ERASED_TAG]}
                for i in range(start, start + 100)
            ]
        )
        mm.remember_many([{"content": f"bob filler {i}", "scope": BOB} for i in range(start, start + 100)])
    bob_note = mm.remember("bob keeps Kiwi-Note-123", scope=BOB)
    alice_ids = set(mm.ledger.ids_in_scope(Scope(user_id="alice")))
    mm.flush_index()  # the embedded store gathers its Chroma writes in the background: count them once written
    in_index = len(alice_ids & mm.index.ids()) + mm.stats("alice")["index_exact"]  # Chroma, or the exact plan
    hashes = [r["content_hash"] for r in mm.ledger.memory_rows(sorted(alice_ids), embedding=False) if r]
    erased = [*SECRETS, ERASED_TAG, *hashes[:20]]
    session = ALICE.session_id or ""  # the ledger's tombstones keep their scope (receipts list them); the index not
    before = _scan(store, [*erased, session])
    assert set(before) >= {SECRETS[0], ERASED_TAG, session}, "the test must see them on disk first"
    if exact_max == 0:
        assert any(f.startswith("chroma") for f in before[ERASED_TAG]), "Chroma must hold the tag before the erasure"

    receipt = mm.erase(scope=Scope(user_id="alice"), reason="GDPR request")

    assert set(receipt.memory_ids) == alice_ids
    assert {a.id, b.id, c.id, revised.id, d.id, e.id} <= alice_ids and len(alice_ids) == 206
    assert receipt.index_entries_removed == in_index
    assert receipt.activities_redacted >= 1 and receipt.events_redacted >= len(alice_ids)
    assert all(m.status is Status.ERASED and m.content == "" for m in mm.get_many(list(alice_ids), scope="alice"))
    assert mm.verify().ok
    assert _scan(store, erased, hnsw=False) == {}, "erased text, tags or hashes left on disk while open"
    assert _scan(store, [session], hnsw=False) == {session: ["ledger.db"]}, "the index kept an erased session id"
    assert mm.get(bob_note.id, scope=BOB).content == "bob keeps Kiwi-Note-123"
    mm.close()
    assert _scan(store, erased, hnsw=False) == {}, "erased data left on disk after close"
    assert _scan(store, ["Kiwi-Note-123"]) != {}, "other users' data must stay"
    # Reopen in a fresh process (Chroma replays its log there and persists its vector segment), then scan again.
    # A fresh process matters: hnswlib writes uninitialised memory into its files, so a process that once held
    # the erased strings in its heap could leak fragments of them into a later index file.
    code = (
        "import sys; from memlineage import MemoryManager, Scope; from memlineage.testing import FakeEmbedder\n"
        "with MemoryManager.open(sys.argv[1], embedder=FakeEmbedder()) as mm:\n"
        "    assert mm.recall('passport diagnosis plan home', scope='alice', k=10).hits == []\n"
        "    assert mm.get(sys.argv[2], scope=Scope(user_id='bob')) is not None\n"
        "    assert mm.verify().ok, mm.verify().differences()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(store), bob_note.id], check=True, timeout=120)  # noqa: S603
    assert _scan(store, erased) == {}, "erased data back on disk after reopening"
