"""Real ONNX embedder and a persistent embedded store reopened from disk."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from memlineage import MemoryManager, Scope, Status, StoreLockedError
from memlineage.index import OnnxMiniLMEmbedder, default_model_dir

pytestmark = pytest.mark.integration

MODEL_DIR = default_model_dir()
needs_model = pytest.mark.skipif(
    not (MODEL_DIR / "model.onnx").is_file(),
    reason=f"all-MiniLM-L6-v2 ONNX files not found in {MODEL_DIR}; set MEMLINEAGE_EMBEDDING_MODEL_DIR",
)


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder()


@needs_model
def test_vectors_match_chromadb_default_function(embedder, tmp_path, monkeypatch):
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    # Point chromadb's own function at the same six files (it reads them from DOWNLOAD_PATH/onnx).
    root = tmp_path / "all-MiniLM-L6-v2"
    root.mkdir()
    (root / "onnx").symlink_to(Path(MODEL_DIR).resolve(), target_is_directory=True)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "DOWNLOAD_PATH", root)
    ref = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
    texts = [
        "hi",
        "I prefer aisle seats on long flights",
        "我住在上海，喜欢吃饺子",
        "Error E1234 happened at 3pm; price 120 EUR " * 5,
        "x " * 400,  # longer than 256 tokens: both truncate
    ]
    ours = np.array(embedder.embed(texts))
    theirs = np.array(ref(texts))
    assert ours.shape == (5, 384)
    assert float(np.abs(ours - theirs).max()) < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


@needs_model
def test_persistent_store_survives_reopen(tmp_path, embedder):
    alice = Scope(user_id="alice")
    with MemoryManager.open(tmp_path / "store", embedder=embedder) as mm:
        city = mm.remember("I live in Paris", scope=alice, kind="semantic")
        rec = mm.remember("Try the bakery on Rue Cler", scope=alice, source="reasoning", derived_from=[city.id])
        mm.retract(city.id, scope=alice)
    with MemoryManager.open(tmp_path / "store", embedder=embedder) as mm:
        assert mm.require(rec.id, scope=alice).status is Status.SUSPECT
        assert mm.recall("where do I live", scope=alice, include_suspect=True, k=2).ids == [rec.id]
        assert (mm.index.count(), mm.stats()["index_exact"]) == (2, 0)  # Chroma holds them; the block is a cache
        assert mm.index.plan("alice") == "exact"
        assert mm.explain(rec.id, scope=alice).ancestors[0].id == city.id


@needs_model
def test_pending_index_writes_are_repaired_on_open(tmp_path, embedder):
    alice = Scope(user_id="alice")
    with MemoryManager.open(tmp_path / "s", embedder=embedder) as mm:
        m = mm.remember("remember the milk", scope=alice)
        # Simulate a crash between the ledger commit and the index write.
        mm.index.delete([m.id])
        with mm.ledger.transaction() as conn:
            mm.ledger.update_memories(conn, [m.id], {"index_state": "pending"})
    with MemoryManager.open(tmp_path / "s", embedder=embedder) as mm:
        assert mm.recall("milk", scope=alice).ids == [m.id]
        assert mm.stats()["index_pending"] == 0


def test_second_writer_is_refused(tmp_path):
    from memlineage.testing import FakeEmbedder

    with MemoryManager.open(tmp_path / "locked", embedder=FakeEmbedder()):
        # the same process is told so (issue 14: it used to say "another process")
        with pytest.raises(StoreLockedError, match="already open in this process"):
            MemoryManager.open(tmp_path / "locked", embedder=FakeEmbedder())
        child = (
            "import sys; from memlineage import MemoryManager, StoreLockedError\n"
            "from memlineage.testing import FakeEmbedder\n"
            "try:\n    MemoryManager.open(sys.argv[1], embedder=FakeEmbedder())\n"
            "except StoreLockedError as e:\n    assert 'another process' in str(e), e\n    sys.exit(0)\n"
            "sys.exit(3)\n"
        )
        done = subprocess.run([sys.executable, "-c", child, str(tmp_path / "locked")], timeout=120, check=False)  # noqa: S603
        assert done.returncode == 0
    # Released on close: opening again works.
    MemoryManager.open(tmp_path / "locked", embedder=FakeEmbedder()).close()


def test_default_path_is_documented(monkeypatch, tmp_path):
    from memlineage.testing import FakeEmbedder

    monkeypatch.setenv("MEMLINEAGE_HOME", str(tmp_path / "home"))
    with MemoryManager.open(embedder=FakeEmbedder()) as mm:
        assert mm.path == tmp_path / "home"
        assert (tmp_path / "home" / "ledger.db").exists()
    assert os.environ["MEMLINEAGE_HOME"].endswith("home")


def test_reindex_puts_small_scopes_back_into_chroma(tmp_path):
    """Chroma holds every memory whatever the read plan; a rebuild must not count a scope's memories twice."""
    from memlineage.testing import FakeEmbedder

    with MemoryManager.open(tmp_path / "s", embedder=FakeEmbedder(), exact_max=10) as mm:
        alice = Scope(user_id="alice")
        for i in range(6):
            mm.remember(f"note {i} about kiwis", scope=alice)
        mm.flush_index()
        assert (mm.stats("alice")["index_exact"], mm.stats()["index_entries"]) == (0, 6)
        assert mm.reindex() == 6
        mm.flush_index()
        assert (mm.stats("alice")["index_exact"], mm.stats()["index_entries"]) == (0, 6)
        assert mm.index.plan("alice") == "exact" and mm.recall("note 4 about kiwis", scope=alice, k=1)
        assert mm.verify().ok
