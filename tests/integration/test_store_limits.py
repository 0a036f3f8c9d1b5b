"""One user's write cannot brick the shared embedded store (issue 14, kind 1), on the real Chroma index.

The issue's cases: 5,500 tags on one memory, a LineageStore namespace thousands of labels deep and a tag holding a
lone surrogate were accepted, and afterwards Chroma failed on every use and ``open()`` failed for good. Each is now
refused at the boundary before anything is written; the store keeps serving other users and reopens cleanly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memlineage import InvalidInputError, InvalidNamespaceError, MemoryManager, Scope
from memlineage.testing import FakeEmbedder

from memlineage_langchain import LineageStore

pytestmark = pytest.mark.integration

ALICE = Scope(user_id="alice")
BOB = Scope(user_id="bob")


def test_the_issue_cases_are_refused_and_the_store_stays_usable(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryManager.open(store, embedder=FakeEmbedder()) as mm:
        tea = mm.remember("Bob drinks green tea", scope=BOB, tags=["drink"])
        mm.flush_index()  # Chroma is written behind the ledger commit: settle it before comparing
        before = mm.stats()
        with pytest.raises(InvalidInputError, match="tags"):
            mm.remember("tagged to death", scope=ALICE, tags=[f"t{i}" for i in range(5_500)])
        with pytest.raises(InvalidInputError, match="surrogate"):
            mm.remember("bad tag", scope=ALICE, tags=["ok", "bad \ud800"])
        with pytest.raises(InvalidNamespaceError, match="labels"):
            LineageStore(mm).put(("alice",) + tuple(f"n{i}" for i in range(5_000)), "k", {"text": "deep"})
        assert mm.stats() == before
        assert mm.recall("green tea", scope=BOB).ids == [tea.id]
        assert mm.verify().ok
    with MemoryManager.open(store, embedder=FakeEmbedder()) as again:  # reopens: nothing poisoned the index
        assert again.recall("green tea", scope=BOB).ids == [tea.id]
        assert again.verify().ok
