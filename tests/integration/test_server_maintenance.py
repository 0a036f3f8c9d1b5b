"""Issue 27: two server-mode stores (PostgreSQL ledger + Chroma server) survive maintenance by the other.

Each manager has its own ledger engine and Chroma client, as two processes would. After one of them rebuilds the
index (``reindex``), repairs it (``verify(fix=True)``) or migrates the ledger, the other keeps recalling, writing and
verifying without a restart and without an error, and neither loses the other's memories.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from memlineage import MemoryManager, Scope
from memlineage.ledger import migrate
from memlineage.testing import FakeEmbedder

from .conftest import ChromaServer, PgSchema, unique_collection

pytestmark = pytest.mark.integration

ALICE, BOB = Scope(user_id="alice"), Scope(user_id="bob")


@pytest.fixture(params=[0, None], ids=["chroma-plan", "default-plan"])
def pair(
    request: pytest.FixtureRequest, pg_schema: PgSchema, chroma_server: ChromaServer
) -> Iterator[tuple[MemoryManager, MemoryManager]]:
    collection = unique_collection("maint")
    plan = {} if request.param is None else {"exact_max": request.param}  # 0: every query goes to Chroma

    def open_one() -> MemoryManager:
        return MemoryManager.open(
            ledger_url=pg_schema.url,
            chroma_client=chroma_server.client(),
            collection=collection,
            embedder=FakeEmbedder(),
            **plan,
        )

    a, b = open_one(), open_one()
    yield a, b
    a.close()
    b.close()


def _texts(mm: MemoryManager, query: str, scope: Scope) -> set[str]:
    return {h.memory.content for h in mm.recall(query, scope=scope, k=10)}


MAINTENANCE: dict[str, Callable[[MemoryManager, PgSchema], object]] = {
    "reindex": lambda mm, _: mm.reindex(),
    "verify_fix": lambda mm, _: mm.verify(fix=True),
    "migrate": lambda _, schema: migrate(schema.url),
}


@pytest.mark.parametrize("call", sorted(MAINTENANCE))
def test_the_other_store_survives_maintenance(
    call: str, pair: tuple[MemoryManager, MemoryManager], pg_schema: PgSchema
) -> None:
    a, b = pair
    a.remember("Alice keeps a red kayak in Oslo.", scope=ALICE)
    b.remember("Bob keeps a green canoe in Lyon.", scope=BOB)
    a.flush_index()
    b.flush_index()
    assert _texts(b, "kayak", ALICE) == {"Alice keeps a red kayak in Oslo."}  # b reads what a wrote, before

    MAINTENANCE[call](a, pg_schema)
    a.flush_index()

    # b carries on without a restart: reads, writes and checks
    assert "Alice keeps a red kayak in Oslo." in _texts(b, "kayak", ALICE)
    b.remember("Bob also owns a paddle board.", scope=BOB)
    b.flush_index()
    assert "Bob also owns a paddle board." in _texts(b, "paddle board", BOB)
    assert b.verify().ok
    # and a sees b's writes, old and new
    assert {"Bob keeps a green canoe in Lyon.", "Bob also owns a paddle board."} <= _texts(a, "canoe paddle", BOB)


_OTHER_PROCESS = """
import sys
import chromadb
from chromadb.config import Settings
from memlineage import MemoryManager
from memlineage.ledger import migrate
from memlineage.testing import FakeEmbedder

url, host, port, collection, call = sys.argv[1:6]
if call == "migrate":
    migrate(url)
else:
    client = chromadb.HttpClient(host=host, port=int(port), settings=Settings(anonymized_telemetry=False))
    with MemoryManager.open(ledger_url=url, chroma_client=client, collection=collection, embedder=FakeEmbedder(),
                            exact_max=0) as mm:
        mm.remember("Carol keeps a blue raft in Bergen.", scope="carol")
        mm.reindex() if call == "reindex" else mm.verify(fix=True)
        mm.flush_index()
"""


@pytest.mark.parametrize("call", sorted(MAINTENANCE))
def test_a_store_survives_maintenance_run_by_another_os_process(
    call: str, pg_schema: PgSchema, chroma_server: ChromaServer
) -> None:
    """The same, with the maintenance in a separate OS process (its own interpreter, engine and Chroma client)."""
    import subprocess
    import sys

    collection = unique_collection("maintp")
    mm = MemoryManager.open(
        ledger_url=pg_schema.url, chroma_client=chroma_server.client(), collection=collection,
        embedder=FakeEmbedder(), exact_max=0,
    )  # fmt: skip
    try:
        mm.remember("Alice keeps a red kayak in Oslo.", scope=ALICE)
        mm.flush_index()
        args = [pg_schema.url, chroma_server.host, str(chroma_server.port), collection, call]
        subprocess.run([sys.executable, "-c", _OTHER_PROCESS, *args], check=True, timeout=240)  # noqa: S603
        assert "Alice keeps a red kayak in Oslo." in _texts(mm, "kayak", ALICE)  # no restart, no error
        mm.remember("Alice also owns a paddle board.", scope=ALICE)
        mm.flush_index()
        assert "Alice also owns a paddle board." in _texts(mm, "paddle board", ALICE)
        assert mm.verify().ok
    finally:
        mm.close()
