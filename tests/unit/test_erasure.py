"""Erasure leaves nothing behind in the ledger (issue 14, kind 3); file-level checks: tests/integration.

Each case dumps every row of every ledger table as text and searches it for the secret.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from memlineage import MemoryManager, PolicyViolationError, Scope, Status, StorageError
from memlineage.ledger._schema import embeddings, memories
from memlineage.ledger._schema import metadata as ledger_tables
from memlineage.policy import Policy, PolicyEngine
from memlineage.testing import make_manager
from sqlalchemy import insert, select

ALICE = Scope(user_id="alice", session_id="s1")
SECRET = "Quokka-Secret-4417"


def ledger_text(mm: MemoryManager) -> str:
    with mm.ledger.read() as conn:
        return "\n".join(repr(tuple(r)) for t in ledger_tables.sorted_tables for r in conn.execute(select(t)))


def test_refused_write_text_is_never_stored() -> None:
    """The text of a write a policy refused stayed in its policy_decision event (memory id NULL, never erasable)."""
    engine = PolicyEngine(
        [
            Policy(id="no_quokkas", operations=("write",), condition="memory.content.contains('Quokka')",
                   effect="deny", inputs=("memory.content", "memory.tags", "memory.confidence")),
        ]
    )  # fmt: skip
    mm = make_manager(policy=engine)
    text = f"my code is {SECRET}"
    with pytest.raises(PolicyViolationError):
        mm.remember(text, scope=ALICE, tags=["x"])
    events = [e for e in mm.audit(ALICE) if e.type == "policy_decision"]
    assert events and events[0]["data"]["policy_id"] == "no_quokkas"
    assert events[0]["data"]["inputs"]["memory.content"] == f"<text withheld: {len(text)} characters>"
    assert events[0]["data"]["inputs"]["memory.confidence"] == 1.0
    assert SECRET not in ledger_text(mm)
    mm.close()


def test_admin_recall_keeps_a_digest_of_the_query_not_the_text(mm: MemoryManager) -> None:
    mm.remember("alice's note", scope=ALICE)
    mm.admin_recall(f"look for {SECRET}", scope=ALICE, actor="ops", reason="ticket 12")
    (event,) = [e for e in mm.audit(ALICE) if e.type == "admin_access"]
    assert len(event["data"]["query_sha256"]) == 64
    assert SECRET not in ledger_text(mm)


def test_storage_errors_never_carry_sql_parameters(mm: MemoryManager) -> None:
    """StorageError messages included SQL parameters (content, metadata), and adapters log them."""
    m = mm.remember("first", scope=ALICE)
    row = dict(mm.ledger.memory_rows([m.id])[0])
    row.update(content=f"duplicate id with {SECRET}", meta={"k": SECRET})
    with pytest.raises(StorageError) as info:
        with mm.ledger.transaction() as conn:
            conn.execute(insert(memories), [row])  # primary key clash
    assert SECRET not in str(info.value)
    assert "hidden" in str(info.value).lower()  # SQLAlchemy's placeholder for hidden parameters


def test_erasing_a_premise_redacts_its_consolidated_summary(mm: MemoryManager) -> None:
    """A consolidated summary restates its premises: it is erased with them, not merely made suspect."""
    fact = mm.remember(f"I prefer aisle seats, ticket {SECRET}", scope=ALICE)
    other = mm.remember("I live in Lyon", scope=ALICE)
    summary = mm.consolidate(ALICE, summarizer=lambda prompt: f"The user prefers aisle seats ({SECRET}) [m1]")
    (derived,) = summary.memories
    conclusion = mm.remember("book an aisle seat", scope=ALICE, source="reasoning", derived_from=[fact.id])
    receipt = mm.erase(fact.id, scope=ALICE, reason="user request")
    assert derived.id in receipt.memory_ids
    assert mm.require(derived.id, scope=ALICE).status is Status.ERASED
    assert mm.require(conclusion.id, scope=ALICE).status is Status.SUSPECT  # not a summary: kept, flagged
    assert mm.require(other.id, scope=ALICE).status is Status.ACTIVE
    assert SECRET not in ledger_text(mm)
    assert mm.verify().ok


@pytest.fixture
def mm() -> Any:
    manager = make_manager()
    yield manager
    manager.close()


def test_erasure_deletes_the_stored_vector_and_keeps_the_others(mm: MemoryManager) -> None:
    """The vector restates the text (it can be inverted): erasure removes its row from ml_embeddings (issue 16)."""
    dims = len(mm.services.embedding.embed(["probe"])[0])
    gone = mm.remember(f"my passport is {SECRET}", scope=ALICE, embedding=[0.25] * dims)
    kept = mm.remember("I live in Lyon", scope=ALICE, embedding=[0.5] * dims)
    with mm.ledger.read() as conn:
        before = {r.memory_id for r in conn.execute(select(embeddings.c.memory_id))}
    assert {gone.id, kept.id} <= before
    mm.erase(gone.id, scope=ALICE)
    with mm.ledger.read() as conn:
        after = {r.memory_id: bytes(r.embedding) for r in conn.execute(select(embeddings))}
    assert gone.id not in after
    assert after[kept.id] == np.full(dims, 0.5, dtype="<f4").tobytes()
    [row] = mm.ledger.memory_rows([gone.id])
    assert row is not None and row["embedding"] is None
