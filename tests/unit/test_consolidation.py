"""Session consolidation and its citation check (issue 4; seed 002 §3.3)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from memlineage.consolidation import (
    RuleBasedConsolidator,
    SourceMessage,
    check_citations,
    label_messages,
    summarize_session,
)
from memlineage.errors import ConfigurationError, InvalidInputError
from memlineage.models import MemoryKind, Relation, Scope, SourceKind, Status
from memlineage.testing import make_manager
from memlineage.value import ValueModel

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
S1 = Scope(user_id="alice", session_id="s1")

MSGS = label_messages(
    [
        SourceMessage("id-a", "Hi!"),
        SourceMessage("id-b", "I prefer aisle seats on long flights"),
        SourceMessage("id-c", "我住在上海"),
        SourceMessage("id-d", "My budget for the hotel is $200 per night"),
    ]
)


class TestCitationCheck:
    def test_accepts_cited_lines(self):
        answer = "- The user prefers aisle seats [m2]\n* 用户住在上海 [m3]\n1. Hotel budget is $200 per night [m4, m2]."
        ok, bad = check_citations(answer, MSGS)
        assert bad == []
        assert [(c.text, c.cites) for c in ok] == [
            ("The user prefers aisle seats", ("id-b",)),
            ("用户住在上海", ("id-c",)),
            ("Hotel budget is $200 per night", ("id-d", "id-b")),
        ]

    def test_full_ids_and_chained_brackets(self):
        ok, _ = check_citations("Prefers aisle seats [id-b][m4]", MSGS)
        assert ok[0].cites == ("id-b", "id-d")

    def test_rejects_uncited_unknown_and_unsupported(self):
        answer = (
            "The user prefers aisle seats\n"  # uncited
            "The user owns a boat [m9]\n"  # unknown message
            "The user is a vegetarian [m2]\n"  # cites a real message that does not say so
            "[m2] The user prefers aisle seats\n"  # citation not at the end (an echoed prompt line)
        )
        ok, bad = check_citations(answer, MSGS)
        assert ok == []
        reasons = [r.reason for r in bad]
        assert reasons[0].startswith("uncited") and "m9" in reasons[1] and reasons[2].startswith("not supported")
        assert reasons[3].startswith("uncited")

    def test_overlap_check_can_be_disabled_and_duplicates_collapse(self):
        ok, _ = check_citations(
            "The user is a vegetarian [m2]\nthe user is a  vegetarian [m2]", MSGS, require_overlap=False
        )
        assert len(ok) == 1

    def test_partially_unknown_citation_rejects_line(self):
        ok, bad = check_citations("Prefers aisle seats [m2, m7]", MSGS)
        assert ok == [] and "m7" in bad[0].reason


class TestSummarizers:
    def test_rule_based_keeps_durable_messages_newest_slot_value(self):
        msgs = label_messages(
            [
                SourceMessage("1", "hello"),
                SourceMessage("2", "I live in Rome"),
                SourceMessage("3", "thanks!"),
                SourceMessage("4", "Always answer in French"),
                SourceMessage("5", "I live in Milan now"),
            ]
        )
        out = RuleBasedConsolidator().summarize(msgs)
        assert out.splitlines() == ["Always answer in French [m4]", "I live in Milan now [m5]"]
        result = summarize_session(None, msgs)
        assert [c.cites for c in result.accepted] == [("4",), ("5",)] and result.rejected == []

    def test_langchain_fake_model(self):
        from langchain_core.language_models import FakeListChatModel

        model = FakeListChatModel(responses=["Prefers aisle seats [m2]\nLikes opera\nBudget $200 per night [m4]"])
        result = summarize_session(model, MSGS)
        assert [c.text for c in result.accepted] == ["Prefers aisle seats", "Budget $200 per night"]
        assert [r.text for r in result.rejected] == ["Likes opera"]

    def test_llamaindex_mock_llm_echo_is_rejected(self):
        from llama_index.core.llms import MockLLM

        result = summarize_session(MockLLM(), MSGS)  # echoes the prompt: "[m2] I prefer ..." lines
        assert result.accepted == []

    def test_unsupported_summarizer(self):
        with pytest.raises(ConfigurationError):
            summarize_session(object(), MSGS)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def mm():
    manager = make_manager(value_model=ValueModel(), clock=Clock())
    yield manager
    manager.close()


class TestManagerConsolidate:
    def _session(self, mm):
        ids = {}
        for text in (
            "Hi there",
            "I prefer aisle seats on long flights",
            "My hotel budget is $200 per night",
            "ok cool",
            "我住在上海",
        ):
            ids[text] = mm.remember(text, scope=S1)
        return ids

    def test_rule_based_offline(self, mm):
        ids = self._session(mm)
        result = mm.consolidate(S1)
        texts = sorted(m.content for m in result.memories)
        # the budget is a single-valued attribute (slot user.hotel_budget) since the slot tables know budgets
        assert texts == ["I prefer aisle seats on long flights", "My hotel budget is $200 per night", "我住在上海"]
        for mem in result.memories:
            assert mem.kind is MemoryKind.SEMANTIC and mem.lineage.source_kind is SourceKind.CONSOLIDATION
            assert mem.derived_from == (ids[mem.content].id,)
            assert mem.slot is None  # the cited statement holds the slot
            assert [a.id for a in mm.ancestors(mem.id, scope=S1)] == [ids[mem.content].id]
            edges = mm.explain(mem.id, scope=S1).edges
            assert (mem.id, Relation.WAS_DERIVED_FROM.value, ids[mem.content].id) in edges
            assert mm.get_activity(mem.lineage.activity_id, scope=mem.scope).kind == "consolidation"

    def test_llm_summary_with_uncited_lines(self, mm):
        from langchain_core.language_models import FakeListChatModel

        self._session(mm)
        # labels follow the session order of stored messages, then buffered ones
        answer = (
            "The user prefers aisle seats on long flights [m1]\n"
            "The user's hotel budget is $200 per night [m2]\n"
            "The user loves opera\n"
            "The user lives in Shanghai [m42]"
        )
        result = mm.consolidate(S1, summarizer=FakeListChatModel(responses=[answer]))
        assert len(result.memories) == 2 and len(result.rejected) == 2
        assert {r.reason.split(":")[0].split(" ")[0] for r in result.rejected} == {"uncited", "cites"}

    def test_cited_buffered_message_is_persisted(self, mm):
        buffered = mm.remember("ok cool", scope=S1)
        assert buffered.kind is MemoryKind.WORKING
        result = mm.consolidate(S1, summarizer=lambda prompt: "The user said ok cool [m1]")
        (mem,) = result.memories
        (premise,) = mm.ancestors(mem.id, scope=S1)
        assert premise.content == "ok cool" and premise.status is Status.ACTIVE and premise.id != buffered.id

    def test_a_cited_buffered_tool_result_keeps_its_source_and_the_prompt_says_who_said_what(self, mm):
        buffered = mm.remember("ok cool", scope=S1, source="tool:web")
        assert buffered.kind is MemoryKind.WORKING
        prompts: list[str] = []

        def summarizer(prompt: str) -> str:
            prompts.append(prompt)
            return "The web page said ok cool [m1]"

        (mem,) = mm.consolidate(S1, summarizer=summarizer).memories
        (premise,) = mm.ancestors(mem.id, scope=S1)
        assert str(premise.source) == "tool:web" and premise.trust < 1.0
        assert mem.trust <= premise.trust
        assert '[m1] (tool:web) "ok cool"' in prompts[0]

    def test_superseding_a_cited_statement_makes_summary_suspect(self, mm):
        self._session(mm)
        result = mm.consolidate(S1)
        city = next(m for m in result.memories if "上海" in m.content)
        mm.remember("我住在北京", scope=Scope(user_id="alice", session_id="s2"))
        assert mm.require(city.id, scope=S1).status is Status.SUSPECT

    def test_needs_a_session_and_other_sessions_untouched(self, mm):
        with pytest.raises(InvalidInputError):
            mm.consolidate(Scope(user_id="alice"))
        mm.remember("I prefer aisle seats on long flights", scope=Scope(user_id="alice", session_id="s2"))
        assert mm.consolidate(S1).memories == []

    async def test_async_twin(self, mm):
        self._session(mm)
        result = await mm.aconsolidate(S1)
        assert len(result.memories) == 3
