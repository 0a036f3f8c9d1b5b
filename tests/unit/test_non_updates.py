"""Issue 27: questions, requests, conditionals, qualified negations and other people's news are not updates.

Property tests over a small grammar of facts and non-updates (English and Chinese): whatever the filler, a
non-update said after a fact never supersedes, contradicts or retracts it, neither through the public write path
nor when the rule reconciler is handed the fact directly as its only candidate. A control test checks that the same
grammar's real updates are caught, so the properties cannot pass by detecting nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage import MemoryManager, Scope, Status
from memlineage.reconcile import Action, Candidate, RuleReconciler, Statement
from memlineage.testing import make_manager

CITIES = ["Paris", "Berlin", "Lisbon", "Munich", "Rome", "Oslo", "Vienna", "Madrid"]
COMPANIES = ["Google", "Stripe", "Siemens", "Airbus", "Spotify", "Zalando"]
FOODS = ["fish", "meat", "cheese", "eggs", "rice", "pasta"]
NAMES = ["Tom", "Anna", "Lily", "Marco", "Priya"]
ZH_CITIES = ["巴黎", "柏林", "上海", "成都", "杭州", "深圳"]
ZH_COMPANIES = ["腾讯", "阿里", "华为", "字节"]

#: (fact, non-updates by kind, the real update of the same fact); {a}/{b} are two different fillers, {n} a name.
EN = {
    "residence": (
        "I live in {a}.",
        {
            "question": ["Do I live in {b} now?", "Should I live in {b} instead?", "Is {b} nicer than {a}?"],
            "request": ["Please find me flats in {b}.", "Can you check the rent in {b} for me?"],
            "conditional": [
                "If I live in {b} next year, what are the taxes?",
                "What if I moved to {b}?",
                "Suppose I lived in {b}, would it be cheaper?",
                # an asserting tail: the value model's extractor reads the whole message, the supposition included
                "if I moved to {b} would my cost of living go up or down? just curious",
            ],
            "qualified": ["I don't live in {a} during the summer."],
            "others": ["My sister just moved to {b}.", "{n} lives in {b} now.", "My parents moved to {b}."],
        },
        "I moved to {b}.",
    ),
    "employer": (
        "I work at {a}.",
        {
            "question": ["Do I still work at {a}?", "Should I work at {b} instead?"],
            "request": ["Can you look up jobs at {b} for me?", "Please draft an email to {b}."],
            "conditional": [
                "If I worked at {b}, would I earn more?",
                "What if I joined {b} next year?",
                "if I took the offer and joined {b} would I lose my stock? just thinking out loud",
            ],
            "qualified": ["I don't work at {a} on weekends."],
            "others": ["My friend {n} left {a} and joined {b}.", "My brother works at {b} now."],
        },
        "I now work at {b}.",
    ),
    "diet": (
        "I eat {a} and {b}.",
        {
            "question": ["Should I stop eating {a}?", "Is {b} healthy?"],
            "request": ["Find me recipes without {a}, please."],
            "conditional": ["If I don't eat {a}, where do I get protein?"],
            "qualified": ["I don't eat {b} on Fridays.", "I don't eat {a} at dinner."],
            "others": ["{n} doesn't eat {a} anymore.", "My son no longer eats {b}."],
        },
        "I no longer eat {a} and {b}.",
    ),
    "flight": (
        "My flight to {a} is on 3 June.",
        {
            "question": ["Is my flight to {a} on 5 June?", "When is my flight to {a}?"],
            "request": ["Can you check if my flight to {a} was cancelled?", "Please rebook my flight to {a}."],
            "conditional": ["If my flight to {a} is cancelled, book me a train."],
            "qualified": [],
            "others": ["My colleague's flight to {a} is on 5 June."],
        },
        "My flight to {a} moved to 5 June.",
    ),
}
ZH = {
    "residence": (
        "我住在{a}。",
        {
            "question": ["我是不是应该搬到{b}？", "我现在住在{b}吗？"],
            "request": ["帮我查一下{b}的房租。"],
            "conditional": ["如果明年我住在{b}，税是多少？", "要是我搬到{b}会怎么样？"],
            "qualified": [],
            "others": ["我姐姐刚搬到{b}了。", "我的同事搬到{b}了。", "我妈妈住在{b}。"],
        },
        "我搬到{b}了。",
    ),
    "employer": (
        "我在{a}工作。",
        {
            "question": ["我要不要跳槽到{b}？"],
            "request": ["帮我看看{b}的招聘。"],
            "conditional": ["如果我去了{b}，工资会更高吗？"],
            "qualified": [],
            "others": ["我朋友跳槽到{b}了。"],
        },
        "我跳槽到{b}了。",
    ),
}
KINDS = ["question", "request", "conditional", "qualified", "others"]
T0 = datetime(2025, 3, 1, 9, tzinfo=timezone.utc)


def _cases(table: dict[str, tuple[str, dict[str, list[str]], str]]) -> list[tuple[str, str, str]]:
    return [(fact, kind, text) for fact, by_kind, _ in table.values() for kind in KINDS for text in by_kind[kind]]


def _fill(template: str, a: str, b: str, n: str) -> str:
    return template.format(a=a, b=b, n=n)


@st.composite
def non_update(draw: st.DrawFn) -> tuple[str, str, str]:
    """(fact, kind, non-update) with fillers drawn from one language's pools."""
    zh = draw(st.booleans())
    fact, kind, text = draw(st.sampled_from(_cases(ZH if zh else EN)))
    pool = (
        (ZH_COMPANIES if "工作" in fact else ZH_CITIES)
        if zh
        else (COMPANIES if "work" in fact else FOODS if "eat" in fact else CITIES)
    )
    a, b = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=2, unique=True))
    n = draw(st.sampled_from(NAMES))
    return _fill(fact, a, b, n), kind, _fill(text, a, b, n)


_users = itertools.count()


@pytest.fixture(scope="module")
def store() -> Iterator[MemoryManager]:
    m = make_manager()
    yield m
    m.close()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=non_update())
def test_non_update_never_withdraws_through_the_write_path(store: MemoryManager, case: tuple[str, str, str]) -> None:
    fact, kind, text = case
    scope = Scope(user_id=f"u{next(_users)}")
    old = store.remember(fact, scope=scope, valid_from=T0)
    new = store.remember(text, scope=scope, valid_from=T0 + timedelta(days=3))
    assert store.require(old.id, scope=scope).status is Status.ACTIVE, (kind, fact, text)
    assert new.id != old.id and store.require(new.id, scope=scope).status is Status.ACTIVE, (kind, fact, text)


@settings(max_examples=200, deadline=None)
@given(case=non_update())
def test_rules_given_the_fact_decide_nothing(case: tuple[str, str, str]) -> None:
    fact, kind, text = case
    statement = Statement(content=text, source="user", valid_from=T0 + timedelta(days=3), scope_key="u")
    fact_candidate = Candidate(id="m-old", content=fact, source="user", valid_from=T0, similarity=0.9)
    [decision] = RuleReconciler().decide([(statement, [fact_candidate])])
    assert decision.action not in (Action.UPDATE, Action.CONTRADICT), (kind, fact, text, decision.reason)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_control_the_same_grammar_real_updates_are_caught(language: str) -> None:
    """The real update of each fact withdraws it, so the properties above are not vacuous."""
    table, pool_of = (EN, None) if language == "en" else (ZH, None)
    del pool_of
    m = make_manager()
    try:
        caught = []
        for i, (name, (fact, _, update)) in enumerate(table.items()):
            if language == "en":
                a, b = {"employer": ("Google", "Stripe"), "diet": ("fish", "meat")}.get(name, ("Paris", "Berlin"))
            else:
                a, b = ("腾讯", "华为") if name == "employer" else ("巴黎", "柏林")
            scope = Scope(user_id=f"control-{language}-{i}")
            old = m.remember(_fill(fact, a, b, "Tom"), scope=scope, valid_from=T0)
            m.remember(_fill(update, a, b, "Tom"), scope=scope, valid_from=T0 + timedelta(days=3))
            caught.append(m.require(old.id, scope=scope).status is not Status.ACTIVE)
        assert all(caught), dict(zip(table, caught))
    finally:
        m.close()


@pytest.mark.parametrize(
    ("fact", "text"),
    [
        ("I live in Columbus, Ohio and rent keeps going up. budgeting tips?", EN["residence"][1]["conditional"][-1]),
        ("I'm a data engineer at Orrin Labs.", EN["employer"][1]["conditional"][-1]),
    ],
)
def test_a_supposition_with_an_asserting_tail_withdraws_nothing_with_the_value_model_on(fact: str, text: str) -> None:
    """The value model's extractor reads the whole message; its slot counts only for what the message asserts."""
    from memlineage import ValueModel

    with make_manager(value_model=ValueModel()) as m:
        old = m.remember(fact, scope="alice", valid_from=T0)
        m.remember(_fill(text, "Columbus", "Raleigh", "Tom"), scope="alice", valid_from=T0 + timedelta(days=3))
        assert m.require(old.id, scope="alice").status is Status.ACTIVE
