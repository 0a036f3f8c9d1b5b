from __future__ import annotations

from datetime import datetime, timezone

import pytest
from memlineage.index._base import IndexFilter
from memlineage.index.lexical import LexicalIndex, date_tokens, tokenize

pytestmark = pytest.mark.usefixtures("socket_disabled")


def where(user: str = "u1", **kw: object) -> IndexFilter:
    return IndexFilter(user_id=user, statuses=kw.pop("statuses", ("active",)), **kw)  # type: ignore[arg-type]


def meta(user: str = "u1", status: str = "active", **kw: object) -> dict[str, object]:
    return {"user_id": user, "status": status, "kind": "episodic", "agent_id": "", "session_id": "", **kw}


def test_tokenize_english_stemming_and_stopwords() -> None:
    assert tokenize("The runners were running quickly") == ["runner", "were", "run", "quick"]


def test_tokenize_nfkc_and_mixed_identifiers() -> None:
    toks = tokenize("Ｔｉｃｋｅｔ ＡＢＣ１２３ and order-77a on gpt-4o")
    assert "abc123" in toks  # full-width folded, kept whole
    assert "order-77a" in toks and "77a" in toks
    assert "gpt-4o" in toks


def test_tokenize_cjk_bigrams() -> None:
    toks = tokenize("量子纠缠")
    assert {"量子", "子纠", "纠缠", "量", "缠"} <= set(toks)
    assert "東京" in tokenize("東京タワー")


def test_chinese_function_characters_are_no_terms() -> None:
    """我, 的, 什么, 自己 ... alone or in a bigram of two of them say nothing a query can match on."""
    toks = set(tokenize("我的狗叫什么名字？我自己也忘了"))
    assert not toks & {"我", "的", "我的", "什", "么", "什么", "自己", "了", "也"}
    assert {"狗", "名字", "忘"} <= toks
    assert "现在" in tokenize("我现在住上海")  # a bigram with one content character stays


def test_a_chinese_statement_that_shares_only_function_words_with_the_query_is_no_match() -> None:
    idx = LexicalIndex()
    docs = {"cat": "我的猫叫什么来着，我自己都忘了", "dog": "狗狗名字旺财", "x": "今天天气不错", "y": "周末去爬山"}
    idx.upsert(list(docs), list(docs.values()), [meta() for _ in docs])
    hits = idx.query("我的狗叫什么名字？", 2, where())
    assert hits[0].id == "dog"  # "我的", "什么" and "叫" made the cat's line the best match


def test_tokenize_dates() -> None:
    for text in ("on 8 May 2023", "May 8th, 2023", "2023-05-08", "2023年5月8日"):
        assert "@2023-05-08" in tokenize(text), text
    assert "@2023-05" in tokenize("in May 2023")
    assert date_tokens(datetime(2023, 5, 8, 23, 0, tzinfo=timezone.utc))[0] == "@2023-05-08"


def test_rare_chinese_term_ranks_first() -> None:
    idx = LexicalIndex()
    docs = {
        "a": "我们今天讨论了天气和晚饭的安排",
        "b": "量子纠缠是一种奇特的物理现象",
        "c": "今天的会议讨论了预算和安排",
        "d": "我喜欢吃北京烤鸭，今天天气很好",
    }
    idx.upsert(list(docs), list(docs.values()), [meta() for _ in docs])
    hits = idx.query("量子纠缠", 3, where())
    assert hits[0].id == "b"
    assert all(h.score > 0 for h in hits)


def test_mixed_identifier_matches_whole() -> None:
    idx = LexicalIndex()
    idx.upsert(
        ["x", "y", "z"],
        ["booking ABC123 confirmed", "booking ABC124 confirmed", "abc is a code and 123 a number"],
        [meta(), meta(), meta()],
    )
    assert [h.id for h in idx.query("abc123", 5, where())] == ["x"]


def test_scope_isolation_inside_query() -> None:
    idx = LexicalIndex()
    idx.upsert(["a1", "b1"], ["secret project Falcon", "secret project Falcon"], [meta("alice"), meta("bob")])
    assert [h.id for h in idx.query("falcon", 5, where("alice"))] == ["a1"]
    assert [h.id for h in idx.query("falcon", 5, where("bob"))] == ["b1"]
    assert idx.query("falcon", 5, where("carol")) == []


def test_status_kind_and_agent_filters_before_cut() -> None:
    idx = LexicalIndex()
    idx.upsert(
        ["old", "new", "other"],
        ["hotel in Paris", "hotel in Paris near the river", "hotel in Paris"],
        [meta(status="superseded"), meta(), meta(agent_id="agent-b")],
    )
    hits = idx.query("paris hotel", 1, where(agent_id="agent-a"))
    assert [h.id for h in hits] == ["new"]  # k=1 still returns the one eligible doc
    idx.update_metadata(["new"], [{"status": "retracted"}])
    assert idx.query("paris hotel", 5, where(agent_id="agent-a")) == []
    assert idx.delete(["new", "missing"]) == 1


def test_event_time_is_indexed() -> None:
    idx = LexicalIndex()
    idx.upsert(
        ["m1", "m2"],
        ["went to the support group", "went to the support group"],
        [meta(), meta()],
        valid_from=[datetime(2023, 5, 8, tzinfo=timezone.utc), datetime(2023, 7, 1, tzinfo=timezone.utc)],
    )
    assert idx.query("support group on 8 May 2023", 2, where())[0].id == "m1"
    assert idx.query("support group in July 2023", 2, where())[0].id == "m2"


def test_lazy_loader_and_invalidation() -> None:
    calls: list[str] = []

    def loader(user: str):  # noqa: ANN202
        calls.append(user)
        return [(f"{user}-1", "the blue notebook", {"status": "active"})]

    idx = LexicalIndex(loader=loader)
    assert [h.id for h in idx.query("notebook", 5, where("alice"))] == ["alice-1"]
    idx.query("notebook", 5, where("alice"))
    assert calls == ["alice"]
    idx.upsert(["alice-2"], ["a red notebook"], [meta("alice")])  # write invalidates the model
    assert {h.id for h in idx.query("notebook", 5, where("alice"))} == {"alice-1", "alice-2"}
    idx.invalidate("alice")
    idx.query("notebook", 5, where("alice"))
    assert calls == ["alice", "alice"]


def test_deterministic_ties_and_empty_queries() -> None:
    idx = LexicalIndex()
    ids = [f"m{i:02d}" for i in range(20)]
    idx.upsert(ids, ["same text about tea"] * 20, [meta() for _ in ids])
    first = [h.id for h in idx.query("tea", 5, where())]
    assert first == ids[:5]
    assert idx.query("the of and", 5, where()) == []
    assert idx.query("", 5, where()) == []
    assert idx.query("tea", 0, where()) == []


def _rebuilt_ranking(docs: dict[str, str], query: str, k: int) -> list[tuple[str, float]]:
    """Reference: a BM25 model built from scratch (bm25s, Lucene variant) over the same documents."""
    import bm25s
    import numpy as np

    order = sorted(docs)
    model = bm25s.BM25(k1=1.2, b=0.75)
    model.index([tokenize(docs[i]) or [""] for i in order], show_progress=False)
    ids = [t for t in dict.fromkeys(tokenize(query)) if t in model.vocab_dict]
    if not ids:
        return []
    scores = model.get_scores(ids)
    ranked = sorted((-float(scores[j]), order[j]) for j in np.flatnonzero(scores > 0))[:k]
    return [(mid, -s) for s, mid in ranked]


def test_incremental_add_and_delete_score_like_a_rebuild() -> None:
    import random

    rng = random.Random(3)
    words = "flight hotel paris lyon price booking dinner vegan meeting error seat aisle train 北京 量子 天气".split()
    idx = LexicalIndex()
    docs: dict[str, str] = {}
    queries = ["paris hotel", "量子 天气", "error seat", "train", "dinner dinner lyon", "北京烤鸭"]
    for step in range(600):
        mid = f"m{step:04d}"
        docs[mid] = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))  # empty documents included
        idx.upsert([mid], [docs[mid]], [meta()])
        if step % 3 == 2:  # delete one in three: the index compacts its slots along the way
            gone = rng.choice(sorted(docs))
            assert idx.delete([gone]) == 1
            del docs[gone]
        if step % 97 == 0 or step == 599:
            for q in queries:
                got = [(h.id, h.score) for h in idx.query(q, 15, where())]
                want = _rebuilt_ranking(docs, q, 15)
                assert [m for m, _ in got] == [m for m, _ in want], (step, q)
                assert all(abs(a - b) <= 1e-6 * max(1.0, b) for (_, a), (_, b) in zip(got, want, strict=True))
    # replacing a document's text re-scores it (an upsert of a known id removes the old postings)
    target = sorted(docs)[0]
    idx.upsert([target], ["zyzzyva quokka"], [meta()])
    docs[target] = "zyzzyva quokka"
    assert [h.id for h in idx.query("quokka", 5, where())] == [target]
    assert [(h.id, round(h.score, 5)) for h in idx.query("paris", 10, where())] == [
        (m, round(s, 5)) for m, s in _rebuilt_ranking(docs, "paris", 10)
    ]


def test_incremental_index_keeps_neighbours_in_session_order() -> None:
    idx = LexicalIndex()
    rows = [("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0)]
    idx.upsert(
        [r[0] for r in rows],
        ["one", "two", "three", "four"],
        [meta(session_id="s1", created_at=t) for _, t in rows],
    )
    assert idx.neighbours(["b"]) == {"b": ("a", "c")}
    idx.delete(["c"])
    assert idx.neighbours(["b", "d"]) == {"b": ("a", "d"), "d": ("b",)}
    idx.update_metadata(["d"], [{"status": "suspect"}])  # a status change keeps its place
    assert idx.neighbours(["d"]) == {"d": ("b",)}
    idx.upsert(["e"], ["five"], [meta(session_id="s1", created_at=1.5)])
    assert idx.neighbours(["a", "e"]) == {"a": ("e",), "e": ("a", "b")}


def test_a_stamp_that_differs_reloads_the_user() -> None:
    """Server mode: another process's writes show in the ledger's stamp, never in this object's writes."""
    from memlineage.index._base import STAMP_KEY, ScopeTally

    def doc(mid: str, text: str, key: int, status: str = "active") -> tuple[str, str, dict[str, object]]:
        return mid, text, {"status": status, STAMP_KEY: key}

    ledger = {"u": [doc("a1", "red kayak", 11)]}
    loads = {"n": 0}

    def loader(user: str) -> list[tuple[str, str, dict[str, object]]]:
        loads["n"] += 1
        return list(ledger.get(user, []))

    def stamp(user: str) -> tuple[int, int, int]:
        tally = ScopeTally()
        for _, _, meta in ledger.get(user, []):
            tally.add(ScopeTally.part(meta))
        return tally.stamp()

    idx = LexicalIndex(loader=loader, stamp=stamp)
    w = IndexFilter(user_id="u", statuses=("active",))
    assert [h.id for h in idx.query("kayak", 5, w)] == ["a1"]
    assert [h.id for h in idx.query("kayak", 5, w)] == ["a1"] and loads["n"] == 1  # unchanged: no reload
    ledger["u"] = [doc("a0", "blue tent", 7)]  # one removed, one added elsewhere: the same count
    assert [h.id for h in idx.query("tent", 5, w)] == ["a0"] and loads["n"] == 2
    assert idx.query("kayak", 5, w) == []
    idx.upsert(["a3"], ["green canoe"], [{"user_id": "u", "status": "active", STAMP_KEY: 5}])  # written here: held,
    ledger["u"].append(doc("a3", "green canoe", 5))  # and the ledger agrees, so no reload follows
    assert [h.id for h in idx.query("canoe", 5, w)] == ["a3"] and loads["n"] == 2
    idx.update_metadata(["a3"], [{"status": "retracted"}])  # a status change made here
    ledger["u"][-1] = doc("a3", "green canoe", 5, "retracted")
    assert idx.query("canoe", 5, w) == [] and loads["n"] == 2
    ledger["u"][0] = doc("a0", "blue tent", 7, "suspect")  # a status change made elsewhere
    assert idx.query("tent", 5, w) == [] and loads["n"] == 3


def test_users_queried_least_recently_are_evicted_beyond_max_docs_and_reload() -> None:
    """Issue 27: the keyword index holds at most ``max_docs`` documents; an evicted user reads back on query."""
    from memlineage import ConfigurationError

    ledger = {
        u: [(f"{u}{i}", f"{u} note number {i} about kayaks", {"status": "active"}) for i in range(6)] for u in "abc"
    }
    loads: list[str] = []

    def loader(user: str) -> list[tuple[str, str, dict[str, object]]]:
        loads.append(user)
        return list(ledger.get(user, []))

    idx = LexicalIndex(loader=loader, max_docs=10)
    for u in "abc":
        hits = idx.query("kayaks", 10, IndexFilter(user_id=u, statuses=("active",)))
        assert {h.id for h in hits} == {f"{u}{i}" for i in range(6)}
        assert idx.count() <= 10  # never more than one user's 6 plus what fits
    assert loads == ["a", "b", "c"] and "a0" not in idx.ids()  # "a" was the least recently queried
    hits = idx.query("kayaks", 10, IndexFilter(user_id="a", statuses=("active",)))
    assert len(hits) == 6 and loads[-1] == "a"  # read back through the loader, same answer
    idx.upsert(["c9"], ["c late kayaks"], [{"user_id": "c", "status": "active"}])  # a write for an evicted user is
    assert "c9" not in idx.ids()  # left to the loader, which the ledger backs
    with pytest.raises(ConfigurationError):
        LexicalIndex(max_docs=0)
    unbounded = LexicalIndex(max_docs=1)  # without a loader nothing is evicted: nothing could bring it back
    unbounded.upsert(["x", "y"], ["one", "two"], [{"user_id": "u"}, {"user_id": "v"}])
    assert unbounded.count() == 2


def test_a_scored_document_without_metadata_is_skipped_not_raised() -> None:
    """A removed document's slot left alive by an interleaving writer has no metadata: recall must not fail on it."""
    idx = LexicalIndex()
    idx.upsert(["a", "b"], ["bees on the roof", "bees in the garden"], [meta(), meta()])
    user = next(iter(idx._users.values()))
    user.meta.pop("a")  # the state a concurrent removal left behind in the field
    assert [h.id for h in idx.query("bees", 5, where())] == ["b"]
