from __future__ import annotations

import random
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from memlineage import Scope
from memlineage.errors import ConfigurationError
from memlineage.index import InMemoryIndex
from memlineage.index._base import IndexFilter
from memlineage.index.lexical import LexicalIndex
from memlineage.retrieval import RecallLegs, RecallQuery, RetrievalConfig, Trace, fuse, hybrid_recall
from memlineage.services.index_sync import ledger_loader
from memlineage.testing import FakeEmbedder, make_manager

pytestmark = pytest.mark.usefixtures("socket_disabled")

ALICE = Scope(user_id="alice", session_id="s1")
BOB = Scope(user_id="bob", session_id="s1")


def _recall_one_leg(mm, query: str, scope: Scope, *, vector: bool, lexical: bool) -> list[str]:  # noqa: ANN001
    tr = Trace(query=query, k=5)
    hits = hybrid_recall(
        RecallQuery(
            text=query,
            k=5,
            where=IndexFilter(user_id=scope.user_id, statuses=("active",)),
            scope=scope,
            now=datetime.now(timezone.utc),
        ),
        RecallLegs(
            query_vector=lambda: mm.embedder.embed([query])[0],
            vector_index=mm.index if vector else InMemoryIndex(),
            lexical_index=mm.lexical if lexical else None,
            load=mm.ledger.memories,
        ),
        tr,
    )
    return [h.memory.scope.user_id for h in hits]


def test_vector_leg_is_isolated_by_scope() -> None:
    mm = make_manager()
    mm.remember("my locker code is 4711", scope=ALICE, source="user")
    mm.remember("my locker code is 4711", scope=BOB, source="user")
    assert _recall_one_leg(mm, "locker code", ALICE, vector=True, lexical=False) == ["alice"]
    assert _recall_one_leg(mm, "locker code", BOB, vector=True, lexical=False) == ["bob"]


def test_lexical_leg_is_isolated_by_scope() -> None:
    mm = make_manager()
    mm.remember("project Falcon launches in May", scope=ALICE, source="user")
    mm.remember("project Falcon launches in May", scope=BOB, source="user")
    assert _recall_one_leg(mm, "falcon", ALICE, vector=False, lexical=True) == ["alice"]
    assert _recall_one_leg(mm, "falcon", Scope(user_id="carol"), vector=False, lexical=True) == []


def test_rare_chinese_term_ranks_first() -> None:
    mm = make_manager()
    for text in (
        "今天天气很好，我们去公园散步",
        "明天开会讨论预算安排",
        "我最近在读一本关于量子纠缠的书",
        "晚饭吃了饺子",
    ):
        mm.remember(text, scope=ALICE, source="user")
    res = mm.recall("量子纠缠", scope=ALICE, k=3)
    assert "量子纠缠" in res[0].content
    assert res[0].scores["lexical_rank"] == 1.0


def test_mixed_identifier_found_whole() -> None:
    mm = make_manager()
    mm.remember("booking reference ABC123 for the Lisbon flight", scope=ALICE, source="tool:booking")
    mm.remember("booking reference ABC124 for the Porto flight", scope=ALICE, source="tool:booking")
    mm.remember("abc and 123 are unrelated tokens", scope=ALICE, source="user")
    assert "ABC123" in mm.recall("what is ABC123?", scope=ALICE, k=1)[0].content


def test_fusion_is_deterministic() -> None:
    v = [SimpleNamespace(id=f"m{i}", similarity=0.5) for i in range(10)]
    lex = [SimpleNamespace(id=f"m{i}", score=2.0) for i in range(5, 15)]
    for cfg in (RetrievalConfig(), RetrievalConfig(fusion="rrf")):
        base = [(f.id, f.relevance) for f in fuse(v, lex, cfg)]
        assert base == [(f.id, f.relevance) for f in fuse(v, lex, cfg)]
        assert all(0.0 <= r <= 1.0 for _, r in base)
    mm = make_manager()
    for i in range(30):
        mm.remember(f"note {i} about the garden and tomatoes", scope=ALICE, source="user")
    first = mm.recall("garden tomatoes", scope=ALICE, k=10, reinforce=False).ids
    assert all(mm.recall("garden tomatoes", scope=ALICE, k=10, reinforce=False).ids == first for _ in range(3))


def test_trace_contents_and_policy_hook_before_cut() -> None:
    mm = make_manager()
    for i in range(8):
        mm.remember(f"hotel option {i} in Paris", scope=ALICE, source="user" if i % 2 else "reasoning")
    mm.read_filter = lambda m: (
        ("trust floor: reasoning", "trust-floor") if m.lineage.source_kind == "reasoning" else None
    )
    res = mm.recall("hotel in Paris", scope=ALICE, k=4, trace=True)
    assert len(res) == 4  # k eligible memories exist, so k come back although 4 candidates were withheld
    assert all(h.memory.lineage.source_kind == "user" for h in res)
    for h in res:
        assert {"vector", "lexical", "relevance", "recency", "final"} <= set(h.scores)
        assert 0.0 <= h.score <= 1.0 and h.lineage
    assert [h.score for h in res] == sorted((h.score for h in res), reverse=True)
    assert res.trace.legs["vector"] > 0 and res.trace.legs["lexical"] > 0
    withheld = [e for e in res.trace.excluded if e.policy_id == "trust-floor"]
    assert len(withheld) == 4 and withheld[0].reason.startswith("trust floor")
    assert {"embed", "vector", "lexical", "fuse_rerank_filter"} <= set(res.trace.timings_ms)
    plain = mm.recall("hotel in Paris", scope=ALICE, k=4)  # without trace=True: counts only, no details
    assert [h.id for h in plain] == [h.id for h in res]
    assert plain.trace.excluded == [] and plain.trace.timings_ms == {} and plain.trace.legs["vector"] > 0
    assert plain.trace.withheld == res.trace.withheld == {"policy": 4}  # counted either way


def test_write_paths_keep_lexical_leg_in_step() -> None:
    mm = make_manager()
    keep = mm.remember("the wifi password is zebra42", scope=ALICE, source="user")
    gone = mm.remember("the old wifi password was lion77", scope=ALICE, source="user")
    assert mm.lexical.query("lion77", 5, IndexFilter(user_id="alice", statuses=("active",)))
    mm.forget(gone.id, scope=ALICE)
    assert mm.recall("lion77", scope=ALICE, k=5).ids in ([], [keep.id])
    assert not mm.lexical.query("lion77", 5, IndexFilter(user_id="alice", statuses=("active",)))
    new = mm.supersede(keep.id, "the wifi password is panda99", scope=ALICE, source="user").memory
    assert mm.recall("wifi password", scope=ALICE, k=5).ids == [new.id]  # the ledger guard, before the sync
    mm.flush_index()  # the old version's status reaches the lexical leg in the background
    ids = [h.id for h in mm.lexical.query("wifi password", 5, IndexFilter(user_id="alice", statuses=("active",)))]
    assert ids == [new.id]
    mm.erase(new.id, scope=ALICE)
    assert not mm.lexical.query("panda99", 5, IndexFilter(user_id="alice", statuses=("active", "erased")))


def test_lexical_leg_rebuilds_from_ledger_after_restart() -> None:
    mm = make_manager()
    mm.remember("the spare key is under the blue pot", scope=ALICE, source="user")
    mm.lexical = LexicalIndex(loader=ledger_loader(mm.ledger))  # a fresh process: nothing in memory
    assert mm.lexical.query("blue pot", 5, IndexFilter(user_id="alice", statuses=("active",)))


def test_event_time_matches_dates_in_queries() -> None:
    mm = make_manager(embedder=FakeEmbedder())
    may = mm.remember(
        "went to the support group",
        scope=ALICE,
        source="user",
        valid_from=datetime(2023, 5, 8, tzinfo=timezone.utc),
    )
    mm.remember(
        "went to the support group",
        scope=ALICE,
        source="user",
        valid_from=datetime(2023, 7, 1, tzinfo=timezone.utc),
    )
    assert mm.recall("support group on 8 May 2023", scope=ALICE, k=1)[0].id == may.id


def test_contiguity_boosts_the_answer_next_to_the_match() -> None:
    mm = make_manager(retrieval=RetrievalConfig(contiguity=0.5))
    rng = random.Random(0)
    for i in range(10):
        mm.remember(f"filler chat number {i} {rng.random()}", scope=ALICE, source="user")
    mm.remember("Which city did you move to for the new telescope job?", scope=ALICE, source="user")
    answer = mm.remember("Tucson, last spring.", scope=ALICE, source="user")
    res = mm.recall("telescope job city", scope=ALICE, k=3, trace=True)
    hit = next(h for h in res if h.id == answer.id)
    assert hit.scores["contiguity"] > 0


class _ScriptedEmbedder:
    """Vectors by text: the query's vector is the one of an unrelated memory (a loose reading of a script)."""

    name = "scripted"

    def __init__(self, vectors: dict[str, list[float]], *, english_only: bool) -> None:
        self.vectors = vectors
        self.english_only = english_only

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors.get(t, [0.0, 0.0, 1.0]) for t in texts]


@pytest.mark.parametrize("english_only", [False, True])
def test_english_only_embedder_weighs_less_for_a_chinese_query(english_only: bool) -> None:
    # the vector leg says "字节" answers "住在哪", the lexical leg says "杭州" (住): with an English-only embedder
    # the lexical leg decides for a Chinese query, and an English query ranks as before
    # (the English statements sit apart from the Chinese ones, so no two candidates tie on the vector leg)
    near, far = [1.0, 0.0, 0.0], [0.6, 0.8, 0.0]
    vectors = {
        "我在字节上班": far, "我住杭州": [0.0, 1.0, 0.0], "我住在哪？": near,
        "I work at ByteDance": [0.5, 0.0, 0.866], "I reside in Hangzhou": [0.0, 1.0, 0.0], "where do I reside?": near,
    }  # fmt: skip
    mm = make_manager(
        embedder=_ScriptedEmbedder(vectors, english_only=english_only), retrieval=RetrievalConfig(vector_weight=3.0)
    )
    for text in ("我在字节上班", "我住杭州", "I work at ByteDance", "I reside in Hangzhou"):
        mm.remember(text, scope=ALICE, source="user")
    zh = [h.content for h in mm.recall("我住在哪？", scope=ALICE, k=2)]
    en = [h.content for h in mm.recall("where do I reside?", scope=ALICE, k=4)]
    assert zh[0] == ("我住杭州" if english_only else "我在字节上班")
    assert en.index("I work at ByteDance") < en.index("I reside in Hangzhou")


def test_cjk_vector_weight_resolution() -> None:
    cfg = RetrievalConfig(vector_weight=2.0)
    assert cfg.for_embedder(False) is cfg
    assert cfg.for_embedder(True).cjk_vector_weight == pytest.approx(0.5)
    set_weight = RetrievalConfig(cjk_vector_weight=0.8)
    assert set_weight.for_embedder(True).cjk_vector_weight == 0.8  # a weight the user set is kept
    resolved = cfg.for_embedder(True)
    assert resolved.for_query("where do I live?").vector_weight == 2.0
    assert resolved.for_query("我住在哪？").vector_weight == pytest.approx(0.5)
    assert resolved.for_query("東京に住んでいます").vector_weight == pytest.approx(0.5)
    with pytest.raises(ConfigurationError):
        RetrievalConfig(cjk_vector_weight=-0.1)
    with pytest.raises(ConfigurationError):
        RetrievalConfig(lexical_weight=0.0, cjk_vector_weight=0.0)
