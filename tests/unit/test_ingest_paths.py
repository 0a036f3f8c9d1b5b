"""The bulk write path's shortcuts give the answers of the plain computations they replace.

Combined pattern matchers (:class:`AnyOf`) against one search per pattern, the cheap ``may_revise`` against the
full statement profile, the candidate reads built once against the statements built per draft, the in-batch
comparison by one product against the cosine of every pair, and vectors kept as arrays.
"""

from __future__ import annotations

import re
from datetime import timedelta

import numpy as np
import pytest
from memlineage import Scope, Status
from memlineage._detect import _LIVE, BATCH_SIMILARITY, _Earlier
from memlineage.errors import InvalidInputError
from memlineage.extractors._patterns import AnyOf, tables
from memlineage.extractors._rules import strip_transcript_prefix
from memlineage.ledger._queries_detect import DETECT_COLUMNS as _COLUMNS
from memlineage.ledger._queries_detect import scope_query as _scope_query
from memlineage.ledger._schema import memories
from memlineage.models import Activity, utcnow
from memlineage.reconcile._text import _FIRST_PERSON, _profile, _without_cues, may_revise, withdraws
from memlineage.services._checks import vector
from memlineage.testing import make_manager
from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

# A varied corpus: plain records, first-person statements, cues of every kind, withdrawals, replacements, numbers,
# dates, transcript prefixes, Chinese, odd casing and punctuation.
CORPUS = [
    "memory number 17 about topic 17",
    "The build for service 4 failed on the integration step",
    "Meeting notes: discussed the roadmap and hiring",
    "I live in Boston",
    "my favourite colour is blue",
    "Actually, I moved to Munich",
    "ACTUALLY my favourite colour is green now",
    "Correction: the meeting is on Friday",
    "sorry, I was wrong about the date",
    "I got that wrong, it's Tuesday",
    "not sushi but ramen",
    "I prefer green tea instead of coffee",
    "I switched from Python to Rust",
    "I no longer eat meat",
    "I don't have a dog anymore",
    "we're not going to Paris after all",
    "forget about the trip to Tokyo",
    "Please disregard what I said about my budget",
    "Our dinner on Sunday is cancelled",
    "my flight was called off",
    "We cancelled the hotel booking",
    "That's not true about my sister",
    "I'm 34 years old",
    "My phone number is 555-1234",
    "I have 3 cats and 2 dogs",
    "My appointment is on May 5 at 3pm",
    "The meeting was rescheduled to Monday",
    "We went to Lyon yesterday",
    "I usually take the aisle seat",
    "[8 May, 2023] Caroline: I love painting",
    "[8 May, 2023] Caroline: Actually I moved to Denver last week",
    "user: scratch that, I meant Thursday",
    "oops, I mistyped my email",
    "Update: my new address is 5 Main St",
    "From now on, call me Bob",
    "starting next week I work remotely",
    "These days I drink tea",
    "Nowadays I run every morning",
    "I changed my mind about the car",
    "I'm not allergic to cats anymore",
    "我住在北京",
    "其实我搬到上海了",
    "我最喜欢的颜色是蓝色",
    "会议改到周五了",
    "今天天气很好",
    "我不吃辣了",
    "别再提我去成都的事了",
    "更正：我的生日是3月5日",
    "我的航班取消了",
    "我不再养狗了",
    "",
    "   ",
    "!!!",
    "I",
    "now",
    "Not a, but b.",
]


def pattern_lists() -> list[tuple[str, tuple[re.Pattern[str], ...]]]:
    out = []
    for table in tables():
        for name in ("update_cues", "correction_cues", "exclusive_markers", "event_markers", "replacement"):
            out.append((f"{table.language}.{name}", getattr(table, name)))
        out.append((f"{table.language}.withdrawal+negation", (*table.withdrawal, *table.negation)))
        out.append((f"{table.language}.cues", (*table.correction_cues, *table.update_cues)))
    return out


@pytest.mark.parametrize(("name", "patterns"), pattern_lists(), ids=[n for n, _ in pattern_lists()])
def test_any_of_answers_like_one_search_per_pattern(name: str, patterns: tuple[re.Pattern[str], ...]) -> None:
    matcher = AnyOf(patterns)
    # the corpus, plus each pattern's own source text as a sample (it often contains the cue words themselves)
    texts = CORPUS + [p.pattern for p in patterns] + [t.upper() for t in CORPUS]
    for text in texts:
        assert matcher(text) == any(p.search(text) for p in patterns), (name, text)


def test_table_methods_answer_like_one_search_per_pattern() -> None:
    for table in tables():
        for text in CORPUS:
            assert table.is_correction(text) == any(p.search(text) for p in table.correction_cues)
            assert table.is_event(text) == any(p.search(text) for p in table.event_markers)
            exclusive = any(p.search(text) for p in table.exclusive_markers) or table.is_correction(text)
            assert table.is_exclusive(text) == exclusive
            first = next((m.group(0) for p in table.update_cues if (m := p.search(text))), None)
            assert table.cue(text) == first


def test_any_of_keeps_patterns_whose_meaning_depends_on_groups_apart() -> None:
    backref = re.compile(r"(\w)\1", re.I)  # a doubled letter: merged, its group number would shift
    named = re.compile(r"(?P<obj>cat)s?", re.I)
    plain = [re.compile("dog", re.I), re.compile("bird", re.I)]
    matcher = AnyOf([*plain, backref, named])
    for text in ("a dog", "a bird", "too", "cats", "nothing here", "abc"):
        assert matcher(text) == any(p.search(text) for p in [*plain, backref, named])
    # different flags, or an inline global flag, cannot share one alternation: tried one by one
    mixed = AnyOf([re.compile("Dog"), re.compile("cat", re.I), re.compile("(?i)bird")])
    for text in ("dog", "Dog", "CAT", "BIRD", "nothing"):
        assert mixed(text) == any(p.search(text) for p in mixed.patterns)
    assert AnyOf([])("anything") is False


def reference_may_revise(text: str) -> bool:
    """``may_revise`` as it was computed before: from the full statement profile."""
    _, cue, personal, _, numeric, _, _ = _profile(text)
    if cue or (personal and numeric) or withdraws(text):
        return True
    table = next(iter(t for t in tables() if t.language == ("zh" if re.search("[\u4e00-\u9fff]", text) else "en")))
    return any(p.search(strip_transcript_prefix(text)) for p in table.replacement)


def test_may_revise_answers_like_the_full_profile() -> None:
    for text in CORPUS:
        assert may_revise(text) == reference_may_revise(text), text
    assert may_revise("I'm 34 years old") and not may_revise("memory number 17 about topic 17")
    assert _FIRST_PERSON.search("I'm 34 years old")


def test_text_without_cues_is_returned_as_is() -> None:
    for table in tables():
        for text in CORPUS:
            expected = text
            for pattern in (*table.correction_cues, *table.update_cues):
                expected = pattern.sub(" ", expected)
            assert _without_cues(text, table) == expected


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()], ids=["sqlite", "postgresql"])
@pytest.mark.parametrize("agent", [None, "bot"])
def test_candidate_reads_render_the_sql_of_statements_built_per_draft(dialect: object, agent: str | None) -> None:
    def sql(query: object) -> str:
        text = str(query.compile(dialect=dialect))  # type: ignore[attr-defined]
        return re.sub(r"\w+_\d+\b|POSTCOMPILE_\w+|%\(\w+\)s|:\w+", "?", text)

    agent_eq = memories.c.agent_id.is_(None) if agent is None else memories.c.agent_id == agent
    mine = (memories.c.user_id == "u", agent_eq, memories.c.status.in_(_LIVE))
    built = {
        ("slot", None): select(*_COLUMNS).where(*mine, memories.c.slot == "user.residence"),
        ("ids", None): select(*_COLUMNS).where(*mine, memories.c.id.in_(["a", "b"])),
        ("recent", 50): select(*_COLUMNS)
        .where(*mine, memories.c.source_kind == "user")
        .order_by(memories.c.recorded_at.desc())
        .limit(50),
    }
    for (shape, limit), query in built.items():
        assert sql(_scope_query(shape, agent is None, limit)) == sql(query)


def test_in_batch_comparison_keeps_every_close_draft() -> None:
    rng = np.random.default_rng(3)
    base = rng.standard_normal(32)

    class D:
        def __init__(self, embedding: object, slot: str | None = None) -> None:
            self.embedding, self.slot, self.source = embedding, slot, "user"

    earlier = _Earlier()
    drafts = []
    for i in range(300):
        # vectors around one direction, so that cosines fall on both sides of the threshold; some without a vector
        vec = None if i % 37 == 0 else (base + rng.standard_normal(32) * rng.uniform(0.2, 2.0)).tolist()
        drafts.append(D(vec))
        earlier.append(drafts[-1])
        if i % 25 == 24:
            mine_vec = np.asarray(base + rng.standard_normal(32) * 0.5, dtype=np.float32)
            mine = (mine_vec, np.linalg.norm(mine_vec))
            near = earlier.close_to(mine, BATCH_SIMILARITY)
            assert near is not None
            for j, d in enumerate(drafts):
                if d.embedding is None:
                    continue
                theirs = np.asarray(d.embedding, dtype=np.float32)
                sim = float(mine_vec @ theirs) / (float(mine[1] * np.linalg.norm(theirs)) or 1.0)
                if sim >= BATCH_SIMILARITY:
                    assert j in near
            assert 0 < len(near) < len(drafts)  # it does narrow the comparison down
    odd = D([1.0, 2.0])
    earlier.append(odd)
    assert earlier.close_to(mine, BATCH_SIMILARITY) is None  # vectors of two sizes: every draft is compared


def test_precomputed_vectors_are_read_only_float64_copies() -> None:
    given = np.arange(4, dtype=np.float64)
    vec = vector(given)
    assert vec.dtype == np.float64 and not vec.flags.writeable
    given[0] = 9.0
    assert vec[0] == 0.0  # the caller's array is not shared
    assert vector([1, 2, 3]).tolist() == [1.0, 2.0, 3.0]
    floats = np.random.default_rng(1).standard_normal(384).tolist()  # an embedder's output: the fast path
    fast = vector(floats)
    assert fast.tolist() == np.asarray(floats).tolist() and not fast.flags.writeable
    assert vector([0.5, 1, True]).tolist() == [0.5, 1.0, 1.0]  # mixed numbers: numpy's own conversion, as before
    for bad in ([0.5, float("inf")], [0.5, "1.0"], [[0.5], [1.0]], [], [True, False]):
        with pytest.raises(InvalidInputError):
            vector(bad)
    with pytest.raises(InvalidInputError):
        vector([1.0, float("nan")])
    mm = make_manager()
    dims = len(mm.embedder.embed(["probe"])[0])
    given = np.full(dims, 0.5)
    mem = mm.remember("plain record", scope=Scope(user_id="u"), embedding=given.tolist())
    assert mem.status is Status.ACTIVE
    hit = mm.recall("plain record", scope=Scope(user_id="u"), k=1)
    assert [m.id for m in hit] == [mem.id]


def test_new_activity_is_inserted_and_an_existing_one_updated() -> None:
    mm = make_manager()
    now = utcnow()
    act = Activity(id="a1", kind="run", scope=Scope(user_id="u"), started_at=now)
    with mm.ledger.transaction() as conn:
        mm.ledger.upsert_activity(conn, act, new=True)
        mm.ledger.upsert_activity(conn, act.model_copy(update={"ended_at": now + timedelta(seconds=1)}))
    (row,) = mm.ledger.activity_rows(["a1"])
    assert row is not None and row["ended_at"] is not None and row["kind"] == "run" and row["meta"] == {}
