"""Issue 26: ChromaDB holds every live memory with flat lineage metadata, and Chroma's own tools find them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memlineage import MemoryManager, Scope
from memlineage.manager import collection_for
from memlineage.testing import FakeEmbedder

pytestmark = pytest.mark.integration


class LangChainFake:
    """Our fake embedder as LangChain ``Embeddings`` (the same vectors the store wrote)."""

    def __init__(self) -> None:
        self.base = FakeEmbedder()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.base.embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.base.embed([text])[0]


def test_every_memory_is_in_chroma_with_its_lineage_and_langchain_finds_it(tmp_path: Path) -> None:
    from langchain_chroma import Chroma

    mm = MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder())
    alice = Scope(user_id="alice", session_id="trip")
    city = mm.remember("I am travelling to Lisbon in May", scope=alice)
    fare = mm.remember("Flight to Lisbon: 120 EUR", scope=alice, source="tool:fares", derived_from=[city.id])
    mm.remember("I love jazz", scope=Scope(user_id="bob"))
    mm.retract(city.id, scope=alice)
    mm.flush_index()
    assert mm.stats()["index_entries"] == 3 and mm.verify().ok
    mm.close()

    store = Chroma(
        collection_name="memlineage",
        persist_directory=str(tmp_path / "s" / "chroma"),
        embedding_function=LangChainFake(),
    )
    docs = store.similarity_search("flight fare Lisbon", k=3, filter={"user_id": "alice"})
    by_id: dict[str, Any] = {d.id: d for d in docs}
    assert set(by_id) == {city.id, fare.id}  # bob's memory is not in alice's results
    meta = by_id[fare.id].metadata
    assert meta["source_kind"] == "tool" and meta["source_name"] == "fares" and meta["premises"] == 1
    assert meta["status"] == "suspect" and 0.0 <= meta["trust"] <= 1.0 and meta["activity_id"] == ""
    assert by_id[city.id].metadata["status"] == "retracted"  # status changes reach Chroma
    assert meta["content_hash"] and meta["valid_from"] > 0


def test_stores_on_one_chroma_server_get_their_own_collections() -> None:
    a = collection_for("postgresql+psycopg://app:pw@db/mem", "tenant_a")
    b = collection_for("postgresql+psycopg://app:pw@db/mem", "tenant_b")
    c = collection_for("postgresql+psycopg://app:pw@db/other", "tenant_a")
    assert len({a, b, c}) == 3 and all(x.startswith("memlineage_") for x in (a, b, c))
    assert collection_for("postgresql+psycopg://app:changed@db/mem", "tenant_a") == a  # the password is not part
    assert collection_for(None) == "memlineage"


def test_a_reindex_cut_short_is_finished_by_the_next_open(tmp_path: Path) -> None:
    """The ledger marks every row pending before the collection is dropped: a rebuild interrupted after the drop
    leaves nothing marked indexed that the index lacks, and the repair on the next open finishes it."""
    from memlineage.testing import FakeEmbedder

    store = tmp_path / "store"
    with MemoryManager.open(store, embedder=FakeEmbedder(), exact_max=0) as mm:
        for i in range(5):
            mm.remember(f"note {i} about kayaks", scope="alice")
        mm.flush_index()

        def cut(rows: object) -> None:
            raise KeyboardInterrupt  # Ctrl-C under the CLI's progress bar

        mm.services.index_sync._apply = cut  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            mm.reindex()
    with MemoryManager.open(store, embedder=FakeEmbedder(), exact_max=0) as mm:
        mm.flush_index()
        assert mm.verify().ok
        assert len(mm.recall("kayaks", scope="alice", k=10)) == 5
