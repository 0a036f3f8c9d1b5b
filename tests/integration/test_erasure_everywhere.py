"""After ``erase(scope=...)`` the words written through every write path are in no file of the store (issue 27).

The words go in through tests/_erasure_probe.py (remember, corrections with their update decisions, chat histories
with list content blocks and tool-call arguments, the run recorder, activities, a summary...). Embedded store: every
file under the store directory (SQLite ledger, WAL, Chroma's SQLite and segment files) is scanned as bytes, while
open (hnswlib's ``*.bin`` left out, see tests/integration/test_erasure_files.py), after closing, and after a
fresh process reopened it. PostgreSQL: every table, TOAST table and index file of the schema after the documented
``vacuum(full=True)``. A second user's data is untouched in both.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from memlineage import MemoryManager, Scope
from memlineage.index import InMemoryIndex
from memlineage.ledger import Ledger
from sqlalchemy import text

pytestmark = pytest.mark.integration

ALICE = Scope(user_id="alice", session_id="s1")
BOB = Scope(user_id="bob", session_id="s1")


def _scan(store: Path, needles: list[str], *, hnsw: bool = True) -> dict[str, list[str]]:
    """Files of ``store`` holding a needle (UTF-8 or UTF-16, any case); ``hnsw=False`` leaves out ``*.bin``."""
    found: dict[str, list[str]] = {}
    for f in sorted(p for p in store.rglob("*") if p.is_file() and (hnsw or p.suffix != ".bin")):
        data = f.read_bytes().lower()
        for n in needles:
            if n.lower().encode("utf-8") in data or n.lower().encode("utf-16-le") in data:
                found.setdefault(n, []).append(str(f.relative_to(store)))
    return found


@pytest.mark.parametrize("exact_max", [None, 0], ids=["exact-plan", "chroma"])
def test_erased_words_are_in_no_file_of_the_embedded_store(
    tmp_path: Path, erasure_probe: ModuleType, exact_max: int | None
) -> None:
    probe = erasure_probe
    mine, theirs = probe.ALICE_WORDS, probe.BOB_WORDS
    stored = [w for i, w in enumerate(mine) if i not in probe.NOT_STORED]
    store = tmp_path / "store"
    mm = MemoryManager.open(store, embedder=probe.QuietEmbedder(), exact_max=exact_max)
    probe.write_everything(mm, ALICE, mine)
    probe.write_everything(mm, BOB, theirs)
    mm.flush_index()
    assert set(_scan(store, stored)) == set(stored), "the test must see every word on disk first"

    mm.erase(scope=Scope(user_id="alice"), reason="GDPR request")

    assert probe.heap_hits(mine, exclude=mine) == []
    assert probe.ledger_hits(mm, mine) == []
    assert _scan(store, mine, hnsw=False) == {}, "erased words left on disk while open"
    assert mm.verify().ok
    kept = [w for i, w in enumerate(theirs) if i not in probe.NOT_STORED]
    assert {w for _, _, w in probe.ledger_hits(mm, kept)} == set(kept)
    mm.close()
    assert _scan(store, mine, hnsw=False) == {}, "erased words left on disk after close"
    assert set(_scan(store, kept)) == set(kept), "the other user's data must stay"
    code = (
        "import sys; from memlineage import MemoryManager, Scope; from memlineage.testing import FakeEmbedder\n"
        "with MemoryManager.open(sys.argv[1], embedder=FakeEmbedder()) as mm:\n"
        "    assert mm.recall(sys.argv[2], scope='alice', k=10).hits == []\n"
        "    assert mm.recall(sys.argv[3], scope='bob', k=10).hits\n"
        "    assert mm.verify().ok, mm.verify().differences()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(store), " ".join(mine), theirs[0]], check=True, timeout=180)  # noqa: S603
    assert _scan(store, mine) == {}, "erased words back on disk after reopening"


def test_erased_words_leave_the_postgresql_files_after_vacuum_full(pg_schema, erasure_probe: ModuleType) -> None:  # noqa: ANN001
    probe = erasure_probe
    mine, theirs = probe.ALICE_WORDS, probe.BOB_WORDS
    ledger = Ledger(pg_schema.admin_url, schema=pg_schema.name)
    mm = MemoryManager(ledger=ledger, index=InMemoryIndex(), embedder=probe.QuietEmbedder())
    probe.write_everything(mm, ALICE, mine)
    probe.write_everything(mm, BOB, theirs)
    mm.flush_index()
    bob_rows = probe.user_rows(mm, "bob")

    def files_holding(needles: list[str]) -> set[str]:
        with ledger.engine.connect() as conn:
            conn.exec_driver_sql("CHECKPOINT")
            rels = conn.execute(
                text(
                    "SELECT pg_relation_filepath(c.oid) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = :s "
                    "UNION SELECT pg_relation_filepath(t.oid) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid "
                    "WHERE n.nspname = :s"
                ),
                {"s": pg_schema.name},
            ).all()
            found: set[str] = set()
            for (path,) in rels:
                if path is not None:
                    data = bytes(conn.execute(text("SELECT pg_read_binary_file(:p)"), {"p": path}).scalar_one())
                    found.update(n for n in needles if n.encode() in data)
            return found

    stored = [w for i, w in enumerate(mine) if i not in probe.NOT_STORED]
    assert files_holding(stored) == set(stored), "the words must be in the files before the erasure"

    mm.erase(scope=Scope(user_id="alice"), reason="GDPR request")

    assert probe.ledger_hits(mm, mine) == []
    assert probe.user_rows(mm, "bob") == bob_rows
    ledger.vacuum(full=True)
    assert files_holding(mine) == set()
    assert mm.verify().ok
    mm.close()
