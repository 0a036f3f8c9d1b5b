"""LineageRetriever: langchain-tests' standard retriever suite (pinned 1.1.9) plus scope and lineage checks."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_tests")
from langchain_tests.integration_tests import RetrieversIntegrationTests
from memlineage import InvalidInputError, MemoryManager, Relation, Scope
from memlineage.testing import make_manager

from memlineage_langchain import LineageCaptureCallback, LineageRetriever


def seeded(n: int = 5, topic: str = "parrots") -> MemoryManager:
    mm = make_manager()
    for i in range(n):
        mm.remember(f"Fact {i} about {topic}: {topic} are clever birds number {i}", scope="tests", source="user")
    mm.remember("Bob's secret about parrots", scope="bob", source="user")
    return mm


class TestLineageRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[LineageRetriever]:
        return LineageRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        # Evaluated on each access: a fresh in-memory manager per test keeps tests independent.
        return {"manager": seeded(), "scope": Scope(user_id="tests")}

    @property
    def retriever_query_example(self) -> str:
        return "parrots"


def test_documents_carry_memory_ids_scores_and_lineage():
    mm = seeded()
    docs = LineageRetriever(manager=mm, scope=Scope(user_id="tests"), k=3).invoke("parrots")
    assert len(docs) == 3
    for d in docs:
        assert d.id == d.metadata["memory_id"]
        assert 0.0 <= d.metadata["score"] <= 1.0
        assert d.metadata["source"] == "user" and d.metadata["user_id"] == "tests"
    assert [d.metadata["score"] for d in docs] == sorted((d.metadata["score"] for d in docs), reverse=True)


def test_two_users_never_see_each_others_memories():
    mm = seeded()
    bob_docs = LineageRetriever(manager=mm, k=10).invoke("parrots", config={"metadata": {"user_id": "bob"}})
    assert [d.page_content for d in bob_docs] == ["Bob's secret about parrots"]
    tests_docs = LineageRetriever(manager=mm, scope=Scope(user_id="tests"), k=10).invoke("parrots")
    assert all("Bob" not in d.page_content for d in tests_docs)


def test_no_scope_is_refused():
    with pytest.raises(InvalidInputError, match="no scope"):
        LineageRetriever(manager=seeded()).invoke("parrots")


def test_retriever_run_records_used_edges_and_activity(monkeypatch):
    mm = seeded()
    handler = LineageCaptureCallback(mm, scope="tests", raise_error=True)
    run_ids: list[str] = []
    real_recall = mm.recall

    def spy(query: str, **kwargs: Any) -> Any:
        run_ids.append(kwargs["activity_id"])
        return real_recall(query, **kwargs)

    monkeypatch.setattr(mm, "recall", spy)
    docs = LineageRetriever(manager=mm, scope=Scope(user_id="tests"), k=2).invoke(
        "parrots", config={"callbacks": [handler]}
    )
    (run_id,) = run_ids
    edges = mm.ledger.edges_touching([run_id])
    assert {e["dst"] for e in edges if e["relation"] == Relation.USED.value} == {d.id for d in docs}
    act = mm.get_activity(run_id, scope="tests")
    assert act is not None and act.kind == "retrieval" and act.outcome == "success"


async def test_ainvoke_scoped():
    docs = await LineageRetriever(manager=seeded(), scope=Scope(user_id="tests"), k=2).ainvoke("parrots")
    assert len(docs) == 2


def test_scope_accepts_a_user_id_string_or_a_mapping():
    mm = seeded()
    by_string = LineageRetriever(manager=mm, scope="tests", k=2)
    by_mapping = LineageRetriever(manager=mm, scope={"user_id": "tests"}, k=2)
    assert by_string.scope == by_mapping.scope == Scope(user_id="tests")
    assert len(by_string.invoke("parrots")) == 2
    with pytest.raises(ValueError, match="user_id must be a non-empty string"):  # pydantic wraps the InvalidInputError
        LineageRetriever(manager=mm, scope="   ")
