"""Stale-memory benchmark: after the user corrects something in plain conversation, is the old value served?

Every system gets the **same plain conversation** (no slot keys, no update verbs, no labels), the same
embedder and the same question, in this process. Scenarios are knowledge updates said the way people say
them: a relocation, a job change, a changed preference (seat, diet, drink, favourite X), a corrected name,
number or date, a tool price refreshed (same tool, same arguments, new value), a withdrawn premise ("forget
what I said about X", "that's not true anymore") with a recommendation the agent built on it; English and
Chinese; with and without cue words ("actually", "no longer", "switched to", "not X but Y", 搬到, 改成, 现在,
不再, 其实, 更正; and "My favourite restaurant is Haidilao" after "... is Din Tai Fung"). They are generated
from templates with several entities each (fixed seed) and dealt to **several users in one store**, each
user's history interleaving their scenarios with unrelated distractors (some about other people on the same
topics: "My brother moved to Madrid"). Two splits use different templates and wordings: ``main`` and
``heldout``; both are reported, so over-fitting the rules to one wording shows.

Rows (``--systems``):

- ``ml-langchain`` **MemLineage plain (LangChain adapter)**, the headline: ``MemoryManager.open(path)`` with
  defaults (only the shared embedder and the simulated clock are passed), then per turn what
  ``AgentExecutor(memory=LineageMemory(...), return_intermediate_steps=True)`` does:
  ``load_memory_variables`` for the user message, then ``save_context`` with the answer and the turn's tool
  calls as ``intermediate_steps`` (``ToolAgentAction`` with the tool call id and arguments, and the
  observation): the path a classic LangChain agent with ``LineageMemory`` uses for tool results.
- ``ml-llamaindex`` **MemLineage plain (LlamaIndex adapter)**: ``lineage_memory(mm, user_id=...)`` and
  ``aput`` of each message as a ``FunctionAgent`` run writes them (user message; assistant message with
  ``ToolCallBlock``; ``TOOL`` message with the call id; assistant answer). The question is read through the
  block (``aget``), its ``[m:<id>]`` markers mapped back to memories.
- ``ml-reconciler`` **MemLineage plain + LLM reconciler (scripted model)**: the LangChain path on
  ``MemoryManager.open(path, reconciler=LLMReconciler(model))``, ``model`` a deterministic scripted chat
  model (:class:`ScriptedReconcilerModel`, not an LLM); "n/a: not built" while ``memlineage.reconcile`` does
  not exist.
- ``ml-oracle`` **MemLineage oracle (explicit verbs)**: the same turns, but the application calls
  ``supersede`` / ``retract`` with the right ids and derives the agent's recommendation from its premise,
  on a store opened with ``reconciler=None`` (no automatic update detection, so only the verbs act). An upper
  bound for what the lineage does when told; never the headline.
- ``langchain``: classic ``VectorStoreRetrieverMemory`` over ``langchain_chroma.Chroma`` (in-memory
  chromadb), one collection per user (its only isolation), ``save_context`` per turn (tool output as an
  extra output key).
- ``llamaindex``: ``VectorMemoryBlock`` over one ``ChromaVectorStore``, one block per user, one node per
  turn, filtered by ``session_id`` = the user.
- ``mem0`` (``pip install "memlineage[bench]"``): ``Memory.add(messages, user_id=..., infer=False)`` per turn,
  ``search(..., filters={"user_id": ...})``, our embedder through its ``langchain`` provider, local Qdrant;
  "n/a: <reason>" when absent.

Metrics per system, split and language, at k = 3: ``stale@3`` = scenarios whose top 3 holds a stale memory
(the old value, a withdrawn premise, or a recommendation built on one), ``current@3`` = scenarios whose top 3
holds the current statement, ``leaks@3`` = memories of another user in a top 3 (must be 0).

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_stale.py [--fake-embedder] [--systems ...]``;
writes ``benchmarks/results/bench_stale.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "bench_stale.json"
K = 3
BASE_TIME = datetime(2025, 6, 2, 7, 0, tzinfo=timezone.utc)
HOUR = 3600.0
SPLITS = ("main", "heldout", "fresh")
#: Scenarios per user (each user's history interleaves this many scenarios with distractors).
PER_USER = 6
#: Turns before this offset are the user's first session, later ones the second; questions come in a third.
SECOND_SESSION = 7 * HOUR
ASK_AT = 16 * HOUR
ACK = {"en": "Noted.", "zh": "好的，记下了。"}

# ====================================================================================== scenario model


@dataclass(frozen=True)
class ToolCall:
    """A tool call of a turn: name, arguments and the tool's output text."""

    name: str
    args: tuple[tuple[str, str], ...]
    output: str


@dataclass(frozen=True)
class Turn:
    """One conversation turn: the user's message, an optional tool call, the agent's answer.

    ``key`` labels the turn's content for scoring (the user message, or the tool output when there is a
    tool call); ``answer_key`` labels the answer (``None``: a neutral acknowledgement). ``op`` and
    ``target`` are read by the oracle only: ``supersede`` / ``retract`` the turn keyed ``target``;
    ``derived_from`` are the keys the oracle derives the answer from.
    """

    key: str
    at: float
    user: str
    lang: str
    tool: ToolCall | None = None
    answer: str = ""
    answer_key: str | None = None
    op: str = "add"  # add | supersede | retract
    target: str | None = None
    derived_from: tuple[str, ...] = ()

    def contents(self) -> list[tuple[str, str]]:
        """``(text, key)`` of what the turn puts into memory (neutral keys start with ``_``)."""
        out = []
        if self.tool is None:
            out.append((self.user, self.key))
        else:
            out.append((self.user, f"_prompt:{self.key}"))
            out.append((self.tool.output, self.key))
        if self.answer:
            neutral = "_ack" if self.answer in ACK.values() else f"_answer:{self.key}"
            out.append((self.answer, self.answer_key or neutral))
        return out


@dataclass(frozen=True)
class Scenario:
    """A knowledge update in one user's history: which turn keys are stale and which current at the question."""

    id: str
    template: str
    category: str  # relocation | job | preference | correction | tool_price | premise_withdrawn
    lang: str
    split: str
    user: str
    turns: tuple[Turn, ...]
    question: str
    stale: tuple[str, ...]
    current: tuple[str, ...]

    def text_of(self, key: str) -> str:
        return next(t for turn in self.turns for t, k in turn.contents() if k == key)


@dataclass(frozen=True)
class UserHistory:
    """One user's turns in time order (every scenario's turns and distractors) and their scenarios."""

    user: str
    lang: str
    split: str
    turns: tuple[Turn, ...]
    scenarios: tuple[Scenario, ...]

    def texts(self) -> dict[str, str]:
        """Every stored text of this user -> its label key (scenario-qualified, ``sid/key``)."""
        out: dict[str, str] = {}
        for turn in self.turns:
            for text, key in turn.contents():
                out.setdefault(text, key)
        return out


# ====================================================================================== templates

#: Statement updates: (name, split, lang, category, old, new, question, entity sets {a: old value, b: new}).
#: ``{a}`` / ``{b}`` and any other field of the entity set are filled in.
STATEMENTS: list[tuple[str, str, str, str, str, str, str, list[dict[str, str]]]] = [
    # ---------------------------------------------------------------- main, English
    ("reloc-en", "main", "en", "relocation",
     "I live in {a}, in a flat near the old town.", "Actually I moved to {b} last month.",
     "Which city do I live in?",
     [{"a": "Berlin", "b": "Munich"}, {"a": "Leeds", "b": "Bristol"}, {"a": "Austin", "b": "Denver"}]),
    ("job-en", "main", "en", "job",
     "I work as a {ra} at {a}.", "I switched jobs: I'm now a {rb} at {b}.",
     "Where do I work?",
     [{"a": "Siemens", "ra": "test engineer", "b": "Bosch", "rb": "project lead"},
      {"a": "Deloitte", "ra": "consultant", "b": "Spotify", "rb": "data analyst"}]),
    ("seat-en", "main", "en", "preference",
     "I prefer {a} seats on planes.", "I now prefer {b} seats, my knee needs the space.",
     "Which seat do I like on flights?",
     [{"a": "window", "b": "aisle"}, {"a": "aisle", "b": "window"}]),
    ("diet-en", "main", "en", "preference",
     "I'm {a}, so please keep that in mind for restaurants.", "I'm no longer {a}; I eat {b} these days.",
     "What is my diet?",
     [{"a": "vegetarian", "b": "fish and chicken"}, {"a": "vegan", "b": "dairy and eggs again"}]),
    ("drink-en", "main", "en", "preference",
     "My usual morning drink is {a}.", "Not {a} but {b}: that's what I drink in the morning these days.",
     "What do I drink in the morning?",
     [{"a": "black coffee", "b": "green tea"}, {"a": "an espresso", "b": "a matcha latte"}]),
    ("fav-en", "main", "en", "preference",
     "My favourite restaurant is {a}.", "My favourite restaurant is {b}.",
     "What is my favourite restaurant?",
     [{"a": "Din Tai Fung", "b": "Haidilao"}, {"a": "Nando's", "b": "Wagamama"}]),
    ("pet-en", "main", "en", "correction",
     "My dog is called {a}.", "Correction: my dog's name is {b}, not {a}.",
     "What is my dog's name?",
     [{"a": "Rex", "b": "Max"}, {"a": "Bella", "b": "Luna"}]),
    ("phone-en", "main", "en", "correction",
     "My phone number is {a}.", "My number changed, it's {b} now.",
     "What is my phone number?",
     [{"a": "0171 555 0134", "b": "0171 555 0987"}, {"a": "+44 7700 900123", "b": "+44 7700 900456"}]),
    ("date-en", "main", "en", "correction",
     "My daughter's birthday is on {a}.", "Sorry, I got that wrong: her birthday is on {b}.",
     "When is my daughter's birthday?",
     [{"a": "March 3", "b": "March 13"}, {"a": "July 21", "b": "June 21"}]),
    # ---------------------------------------------------------------- main, Chinese
    ("reloc-zh", "main", "zh", "relocation",
     "我住在{a}。", "我上个月搬到{b}了。", "我现在住在哪个城市？",
     [{"a": "上海浦东", "b": "杭州"}, {"a": "北京海淀", "b": "深圳"}]),
    ("job-zh", "main", "zh", "job",
     "我在{a}上班，做产品经理。", "我换工作了，现在在{b}上班。", "我在哪家公司工作？",
     [{"a": "阿里巴巴", "b": "腾讯"}, {"a": "华为", "b": "小米"}]),
    ("drink-zh", "main", "zh", "preference",
     "我每天早上喝{a}。", "我不再喝{a}了，改成喝{b}。", "我早上喝什么？",
     [{"a": "咖啡", "b": "豆浆"}, {"a": "绿茶", "b": "牛奶"}]),
    ("seat-zh", "main", "zh", "preference",
     "坐飞机我喜欢靠{a}的座位。", "其实我现在更喜欢靠{b}的座位。", "坐飞机我喜欢什么座位？",
     [{"a": "窗", "b": "过道"}, {"a": "过道", "b": "窗"}]),
    ("fav-zh", "main", "zh", "preference",
     "我最喜欢的餐厅是{a}。", "我最喜欢的餐厅是{b}。", "我最喜欢哪家餐厅？",
     [{"a": "鼎泰丰", "b": "海底捞"}, {"a": "外婆家", "b": "西贝莜面村"}]),
    ("plate-zh", "main", "zh", "correction",
     "我的车牌号是{a}。", "更正一下：我的车牌号是{b}。", "我的车牌号是多少？",
     [{"a": "京A12345", "b": "京A54321"}, {"a": "沪B66881", "b": "沪B68818"}]),
    ("date-zh", "main", "zh", "correction",
     "我们的婚礼定在{a}。", "婚礼日期改成{b}了。", "我们的婚礼是哪天？",
     [{"a": "五月二十日", "b": "六月八日"}, {"a": "十月一日", "b": "十月十八日"}]),
    # ---------------------------------------------------------------- heldout, English
    ("reloc-en-h", "heldout", "en", "relocation",
     "We've been renting a house in {a} for years.", "These days we live in {b}.",
     "Where do I live?",
     [{"a": "Glasgow", "b": "Edinburgh"}, {"a": "Lyon", "b": "Marseille"}]),
    ("job-en-h", "heldout", "en", "job",
     "My employer is {a}.", "I started at {b} this week, so that's my employer now.",
     "Who is my employer?",
     [{"a": "Unilever", "b": "Nestle"}, {"a": "Accenture", "b": "Shopify"}]),
    ("book-en-h", "heldout", "en", "preference",
     "The best book I've read is {a}.", "The best book I've read is {b}.",
     "What's the best book I've read?",
     [{"a": "Dune", "b": "Middlemarch"}, {"a": "Moby-Dick", "b": "Beloved"}]),
    ("partner-en-h", "heldout", "en", "correction",
     "My partner's name is {a}.", "Oops, my partner is {b}, I mistyped earlier.",
     "What's my partner's name?",
     [{"a": "Jon", "b": "Joan"}, {"a": "Mark", "b": "Marek"}]),
    ("budget-en-h", "heldout", "en", "correction",
     "Our budget for the Japan trip is {a}.", "We raised the Japan trip budget to {b}.",
     "What's our budget for the Japan trip?",
     [{"a": "4,000 dollars", "b": "5,500 dollars"}, {"a": "3,000 euros", "b": "3,800 euros"}]),
    # ---------------------------------------------------------------- heldout, Chinese
    ("reloc-zh-h", "heldout", "zh", "relocation",
     "我家在{a}。", "现在我们家在{b}了。", "我家在哪里？",
     [{"a": "成都", "b": "重庆"}, {"a": "南京", "b": "苏州"}]),
    ("film-zh-h", "heldout", "zh", "preference",
     "我最爱的电影是{a}。", "其实我最爱的电影是{b}。", "我最爱哪部电影？",
     [{"a": "《霸王别姬》", "b": "《活着》"}, {"a": "《大话西游》", "b": "《无间道》"}]),
    ("phone-zh-h", "heldout", "zh", "correction",
     "我的手机号是{a}。", "我的手机号改成{b}了。", "我的手机号是多少？",
     [{"a": "13812345678", "b": "13987654321"}, {"a": "15011112222", "b": "15033334444"}]),
    # ---------------------------------------------------------------- fresh (written after detection was tuned)
    ("reloc-en-f", "fresh", "en", "relocation",
     "Home for me is {a} these days.", "We just relocated to {b}.", "What city is home for me?",
     [{"a": "Oslo", "b": "Bergen"}, {"a": "Porto", "b": "Faro"}]),
    ("job-en-f", "fresh", "en", "job",
     "I'm employed by {a} as an accountant.", "As of Monday I work for {b}.", "Which company employs me?",
     [{"a": "KPMG", "b": "Ernst & Young"}, {"a": "Tesco", "b": "Sainsbury's"}]),
    ("coffee-en-f", "fresh", "en", "preference",
     "My go-to coffee order is a {a}.", "My go-to coffee order is a {b}.", "What's my usual coffee order?",
     [{"a": "flat white", "b": "cortado"}, {"a": "cappuccino", "b": "long black"}]),
    ("train-seat-en-f", "fresh", "en", "preference",
     "On trains I always pick a {a} seat.", "On trains I pick a {b} seat instead now.",
     "Which seat do I pick on trains?",
     [{"a": "forward-facing", "b": "table"}, {"a": "quiet-coach", "b": "window"}]),
    ("son-en-f", "fresh", "en", "correction",
     "My son's name is {a}.", "I misspelled it: my son's name is {b}.", "What is my son's name?",
     [{"a": "Aiden", "b": "Aidan"}, {"a": "Jon", "b": "Johan"}]),
    ("anniv-en-f", "fresh", "en", "correction",
     "Our wedding anniversary is on {a}.", "Our wedding anniversary is actually on {b}.",
     "When is our wedding anniversary?",
     [{"a": "May 4", "b": "May 14"}, {"a": "September 9", "b": "September 19"}]),
    ("reloc-zh-f", "fresh", "zh", "relocation",
     "我一直住在{a}。", "我们已经搬去{b}住了。", "我住在哪里？",
     [{"a": "西安", "b": "成都"}, {"a": "天津", "b": "青岛"}]),
    ("drink-zh-f", "fresh", "zh", "preference",
     "我最常喝的饮料是{a}。", "我最常喝的饮料是{b}。", "我最常喝什么饮料？",
     [{"a": "可乐", "b": "柠檬水"}, {"a": "奶茶", "b": "椰汁"}]),
    ("job-zh-f", "fresh", "zh", "job",
     "我目前在{a}做设计师。", "我已经跳槽到{b}了。", "我现在在哪家公司？",
     [{"a": "百度", "b": "字节跳动"}, {"a": "京东", "b": "美团"}]),
    ("card-zh-f", "fresh", "zh", "correction",
     "我的会员卡号是{a}。", "我说错了，会员卡号应该是{b}。", "我的会员卡号是多少？",
     [{"a": "880123", "b": "880321"}, {"a": "556677", "b": "556767"}]),
]  # fmt: skip

#: Tool prices refreshed: (name, split, lang, tool, args, prompt old, prompt new, output, question,
#: derived answer or "", entity sets). The output formats with ``{p}`` = the old price, then the new one.
PRICES: list[tuple[str, str, str, str, dict[str, str], str, str, str, str, str, list[dict[str, str]]]] = [
    ("flight-en", "main", "en", "flight_search", {"origin": "{o}", "destination": "{d}", "date": "{date}"},
     "How much is the flight from {o} to {d} on {date}?", "Can you check the {o} to {d} fare again?",
     "{carrier} {o} to {d} on {date}: EUR {p}.",
     "How much does the flight from {o} to {d} cost?",
     "The cheapest option is {carrier} at EUR {p}; shall I book it?",
     [{"o": "Frankfurt", "d": "Lisbon", "date": "June 12", "carrier": "Lufthansa LH1234", "p1": "412", "p2": "468"},
      {"o": "Madrid", "d": "Rome", "date": "July 3", "carrier": "Iberia IB3230", "p1": "138", "p2": "189"}]),
    ("hotel-en", "main", "en", "hotel_search", {"hotel": "{h}", "nights": "{n}"},
     "What does {h} cost for {n}?", "Please refresh the price of {h}.",
     "{h}, {n}: EUR {p} per night.",
     "What is the nightly price of {h}?", "",
     [{"h": "Hotel Miramar Nice", "n": "June 12-15", "p1": "189", "p2": "245"},
      {"h": "Hotel Sacher Vienna", "n": "May 2-4", "p1": "310", "p2": "355"}]),
    ("flight-zh", "main", "zh", "flight_search", {"origin": "{o}", "destination": "{d}", "date": "{date}"},
     "{date}{o}到{d}的机票多少钱？", "再帮我查一下{o}到{d}的票价。",
     "{carrier} {date} {o}到{d}：票价{p}元。",
     "{o}到{d}的机票多少钱？", "建议订{carrier}，票价{p}元。",
     [{"o": "北京", "d": "上海", "date": "6月12日", "carrier": "国航CA1501", "p1": "1280", "p2": "1560"},
      {"o": "广州", "d": "成都", "date": "7月2日", "carrier": "南航CZ3401", "p1": "980", "p2": "1190"}]),
    ("train-en-h", "heldout", "en", "train_search", {"route": "{r}", "date": "{date}"},
     "Find me the {r} train fare for {date}.", "Is the {r} fare for {date} still the same?",
     "{r} on {date}: GBP {p} standard class.",
     "How much is the {r} train?", "Best value: the {r} train at GBP {p}, cheaper than flying.",
     [{"r": "London-Paris Eurostar", "date": "July 2", "p1": "78", "p2": "121"},
      {"r": "London-Edinburgh LNER", "date": "August 9", "p1": "64", "p2": "92"}]),
    ("hotel-zh-h", "heldout", "zh", "hotel_search", {"hotel": "{h}", "date": "{date}"},
     "查一下{h}{date}的房价。", "{h}现在多少钱一晚？",
     "{h}（{date}）：每晚{p}元。",
     "{h}一晚多少钱？", "",
     [{"h": "成都锦江宾馆", "date": "6月12日", "p1": "680", "p2": "920"},
      {"h": "西湖国宾馆", "date": "9月1日", "p1": "1350", "p2": "1620"}]),
    ("rental-en-f", "fresh", "en", "rental_quote", {"car": "{car}", "city": "{c}"},
     "Get me a weekly quote for a {car} in {c}.", "Re-quote the {car} in {c}, please.",
     "Weekly rental, {car} in {c}: EUR {p}.",
     "How much is the {car} in {c} per week?", "",
     [{"car": "VW Golf", "c": "Seville", "p1": "210", "p2": "265"},
      {"car": "Fiat 500", "c": "Naples", "p1": "180", "p2": "142"}]),
]  # fmt: skip

#: Premises withdrawn: (name, split, lang, premise, prompt, derived recommendation, withdrawal, question,
#: entity sets).
PREMISES: list[tuple[str, str, str, str, str, str, str, str, list[dict[str, str]]]] = [
    ("trip-en", "main", "en",
     "I'm flying to {a} for a robotics conference on June 12.", "Which hotel should I book there?",
     "I recommend {h} in {a}, five minutes from the conference venue.",
     "Forget what I said about the {a} trip; the conference was cancelled.",
     "Which hotel should I book for my trip?",
     [{"a": "Lisbon", "h": "Hotel Avenida Palace"}, {"a": "Vienna", "h": "Hotel Topazz"}]),
    ("trip-zh", "main", "zh",
     "我下周去{a}出差。", "出差住哪家酒店好？", "推荐你住{a}的{h}，离客户公司很近。",
     "{a}出差取消了，之前说的出差不算了。", "我出差应该住哪家酒店？",
     [{"a": "成都", "h": "锦江宾馆"}, {"a": "武汉", "h": "江汉饭店"}]),
    ("marathon-en-h", "heldout", "en",
     "I'm training for the {a} marathon in September.", "Plan my Saturday runs, please.",
     "Plan: long runs of 30 km every Saturday until the {a} marathon.",
     "That's not true anymore: I pulled out of the {a} marathon.",
     "What should my Saturday training look like?",
     [{"a": "Berlin", "h": ""}, {"a": "Chicago", "h": ""}]),
    ("allergy-zh-h", "heldout", "zh",
     "我对{a}过敏。", "那晚饭给我推荐个菜吧。", "推荐你点不含{a}的清蒸鱼。",
     "别记我说的{a}过敏的事了，那不是真的。", "我有什么过敏吗？晚饭吃什么？",
     [{"a": "花生", "h": ""}, {"a": "海鲜", "h": ""}]),
    ("dentist-en-f", "fresh", "en",
     "I have a dentist appointment on {a}.", "What should I prepare for it?",
     "Reminder: dentist on {a}, bring your insurance card.",
     "Scratch the dentist appointment, it was called off.",
     "What do I need to prepare for my appointments?",
     [{"a": "Tuesday the 12th", "h": ""}, {"a": "Friday the 22nd", "h": ""}]),
    ("expo-zh-f", "fresh", "zh",
     "我打算下个月去{a}看车展。", "帮我订个酒店吧。", "推荐你住{a}会展中心旁边的{h}。",
     "看车展的事黄了，别再提{a}了。", "我下个月住哪家酒店？",
     [{"a": "广州", "h": "花园酒店"}, {"a": "上海", "h": "虹桥宾馆"}]),
]  # fmt: skip

#: Unrelated statements, and distractors about other people on the scenarios' topics.
FILLERS = {
    "en": [
        "My sister lives in Toronto with her two kids.",
        "My brother moved to Madrid last year.",
        "My colleague Priya always books aisle seats.",
        "I have a golden retriever puppy at my parents' place.",
        "I'm learning to play the cello on weekends.",
        "I go running by the river on Sunday mornings.",
        "My favourite novel as a teenager was Treasure Island.",
        "I'm allergic to cats.",
        "I support Arsenal and watch most of their matches.",
        "I started a pottery class last month.",
        "My laptop is a ThinkPad X1 Carbon.",
        "I usually work from home on Fridays.",
        "We are planning to repaint the kitchen green.",
        "My son plays chess in the school club.",
        "My wife's favourite restaurant is a small Thai place downtown.",
        "I water the balcony plants every Tuesday.",
        "My gym membership renews in September.",
        "My manager prefers short status emails.",
    ],
    "zh": [
        "我姐姐和她的两个孩子住在多伦多。",
        "我哥哥去年搬到了广州。",
        "我同事小王坐飞机总是选靠窗的座位。",
        "我周末在学拉大提琴。",
        "我每个周日早上沿着河边跑步。",
        "我小时候最喜欢的小说是《西游记》。",
        "我对猫过敏。",
        "我儿子参加了学校的国际象棋社。",
        "我上个月开始上陶艺课。",
        "我不喜欢看恐怖片。",
        "我每周二给阳台上的花浇水。",
        "我的健身卡九月份到期。",
        "我老婆最喜欢的餐厅是楼下的兰州拉面。",
        "我爸爸每天早上喝普洱茶。",
    ],
}


def _fill(fmt: str, ent: dict[str, str], **extra: str) -> str:
    return fmt.format(**ent, **extra)


def _scenarios_of_templates(split: str) -> list[Scenario]:
    """Every scenario of a split (user not yet assigned; turn times relative: 0 = old, 1 = new)."""
    out: list[Scenario] = []
    for name, sp, lang, cat, old, new, q, ents in STATEMENTS:
        if sp != split:
            continue
        for i, ent in enumerate(ents):
            sid = f"{name}-{i + 1}"
            turns = (
                Turn(f"{sid}/old", 0, _fill(old, ent), lang, answer=ACK[lang]),
                Turn(f"{sid}/new", 1, _fill(new, ent), lang, answer=ACK[lang], op="supersede", target=f"{sid}/old"),
            )
            out.append(
                Scenario(sid, name, cat, lang, split, "", turns, q.format(**ent), (f"{sid}/old",), (f"{sid}/new",))
            )
    for name, sp, lang, tool, args, p_old, p_new, output, q, derived, ents in PRICES:
        if sp != split:
            continue
        for i, ent in enumerate(ents):
            sid = f"{name}-{i + 1}"
            targs = tuple((k, _fill(v, ent)) for k, v in args.items())
            old_out, new_out = _fill(output, ent, p=ent["p1"]), _fill(output, ent, p=ent["p2"])
            answer_old = _fill(derived, ent, p=ent["p1"]) if derived else ACK[lang]
            answer_new = _fill(derived, ent, p=ent["p2"]) if derived else ACK[lang]
            turns = (
                Turn(f"{sid}/old", 0, _fill(p_old, ent), lang, ToolCall(tool, targs, old_out), answer_old,
                     f"{sid}/derived" if derived else None, derived_from=(f"{sid}/old",)),
                Turn(f"{sid}/new", 1, _fill(p_new, ent), lang, ToolCall(tool, targs, new_out), answer_new,
                     f"{sid}/new_derived" if derived else None, op="supersede", target=f"{sid}/old",
                     derived_from=(f"{sid}/new",)),
            )  # fmt: skip
            stale = (f"{sid}/old", f"{sid}/derived") if derived else (f"{sid}/old",)
            cur = (f"{sid}/new", f"{sid}/new_derived") if derived else (f"{sid}/new",)
            out.append(Scenario(sid, name, "tool_price", lang, split, "", turns, _fill(q, ent), stale, cur))
    for name, sp, lang, premise, prompt, derived, withdraw, q, ents in PREMISES:
        if sp != split:
            continue
        for i, ent in enumerate(ents):
            sid = f"{name}-{i + 1}"
            turns = (
                Turn(f"{sid}/premise", 0, _fill(premise, ent), lang, answer=ACK[lang]),
                Turn(f"_prompt:{sid}", 0.02, _fill(prompt, ent), lang, answer=_fill(derived, ent),
                     answer_key=f"{sid}/derived", derived_from=(f"{sid}/premise",)),
                Turn(f"{sid}/withdrawn", 1, _fill(withdraw, ent), lang, answer=ACK[lang], op="retract",
                     target=f"{sid}/premise"),
            )  # fmt: skip
            out.append(
                Scenario(sid, name, "premise_withdrawn", lang, split, "", turns, q.format(**ent),
                         (f"{sid}/premise", f"{sid}/derived"), (f"{sid}/withdrawn",))
            )  # fmt: skip
    return out


def generate(seed: int = 7, fillers: int = 8, splits: Sequence[str] = SPLITS) -> list[UserHistory]:
    """Every user's history, deterministic for a seed.

    Scenarios of one split and language are dealt round-robin (sorted by template, so two entity sets of one
    template go to different users) to ``ceil(n / PER_USER)`` users. Each user's old statements fall in the
    first session (0.5-6 h), the updates in the second (8-14 h), ``fillers`` distractors anywhere (0-15 h);
    questions are asked at 16 h in a third session.
    """
    rng = random.Random(seed)
    users: list[UserHistory] = []
    for split in splits:
        pool = _scenarios_of_templates(split)
        for lang in ("en", "zh"):
            scs = sorted((s for s in pool if s.lang == lang), key=lambda s: s.id)
            n_users = max(1, -(-len(scs) // PER_USER))
            for u in range(n_users):
                user = f"{split}-{lang}-u{u + 1}"
                mine = [s for i, s in enumerate(scs) if i % n_users == u]
                turns: list[Turn] = []
                placed: list[Scenario] = []
                for sc in mine:
                    t_old, t_new = rng.uniform(0.5, 6) * HOUR, rng.uniform(8, 14) * HOUR
                    moved = tuple(
                        Turn(**{**asdict_shallow(t), "at": t_old + t.at * HOUR if t.at < 1 else t_new})
                        for t in sc.turns
                    )
                    turns.extend(moved)
                    placed.append(Scenario(**{**asdict_shallow(sc), "user": user, "turns": moved}))
                texts = rng.sample(FILLERS[lang], min(fillers, len(FILLERS[lang])))
                turns.extend(
                    Turn(f"_filler:{user}:{i}", rng.uniform(0, 15) * HOUR, t, lang, answer=ACK[lang])
                    for i, t in enumerate(texts)
                )
                turns.sort(key=lambda t: t.at)
                users.append(UserHistory(user, lang, split, tuple(turns), tuple(placed)))
    _check(users)
    return users


def asdict_shallow(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as a dict without recursing into nested dataclasses."""
    return {f: getattr(obj, f) for f in obj.__dataclass_fields__}


def _check(users: Sequence[UserHistory]) -> None:
    """Labels must be unambiguous: within a user, no scored text contains another."""
    for uh in users:
        texts = uh.texts()
        scored = [t for t, k in texts.items() if not k.startswith("_")]
        for t in scored:
            others = [o for o in texts if o != t and t in o]
            assert not others, f"{uh.user}: {t!r} is contained in {others!r}"


def all_scenarios(users: Iterable[UserHistory]) -> list[Scenario]:
    return [sc for uh in users for sc in uh.scenarios]


# ====================================================================================== labelling


@dataclass(frozen=True)
class Served:
    """One retrieved item: the label keys its text holds and its owner (``None`` = unknown)."""

    keys: frozenset[str]
    owner: str | None


class Labeller:
    """Maps retrieved text to label keys and, for systems that cannot say, to the user who wrote it."""

    def __init__(self, users: Sequence[UserHistory]) -> None:
        self.texts = {uh.user: uh.texts() for uh in users}
        owners: dict[str, set[str]] = {}
        for uh in users:
            for t in self.texts[uh.user]:
                owners.setdefault(t, set()).add(uh.user)
        self.owners = owners

    def keys(self, user: str, content: str) -> frozenset[str]:
        return frozenset(k for t, k in self.texts[user].items() if t in content)

    def served(self, user: str, content: str, owner: str | None = None) -> Served:
        """Label ``content`` for ``user``; the owner is given, or found from text only this user or others wrote."""
        if owner is None:
            mine = any(t in content for t in self.texts[user])
            foreign = {u for t, us in self.owners.items() if t in content for u in us if u != user}
            owner = user if mine or not foreign else sorted(foreign)[0]
        keys = self.keys(user, content) if owner == user else frozenset()
        return Served(keys, owner)


# ====================================================================================== embedders


class CachedEmbedder:
    """Wraps an embedder with a text -> vector cache (the same vectors for every system, computed once)."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.name = getattr(base, "name", type(base).__name__)
        self.dims: int | None = getattr(base, "dims", None)
        self.english_only: bool = getattr(base, "english_only", False)
        self._cache: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            self._cache.update(zip(todo, self.base.embed(todo), strict=True))
        return [self._cache[t] for t in texts]


def load_embedder(fake: bool = False) -> tuple[CachedEmbedder, str]:
    """The real ONNX MiniLM embedder, or ``FakeEmbedder`` (with a printed warning) when it is absent."""
    from memlineage.index import OnnxMiniLMEmbedder, default_model_dir
    from memlineage.testing import FakeEmbedder

    shared = Path(__file__).resolve().parents[2] / "shared" / "models" / "all-MiniLM-L6-v2" / "onnx"
    if "MEMLINEAGE_EMBEDDING_MODEL_DIR" not in os.environ and (shared / "model.onnx").is_file():
        os.environ["MEMLINEAGE_EMBEDDING_MODEL_DIR"] = str(shared)
    if not fake:
        try:
            emb = OnnxMiniLMEmbedder(download=False)
            emb.embed(["probe"])
            return CachedEmbedder(emb), f"{emb.name} ({default_model_dir()})"
        except Exception as exc:  # noqa: BLE001 - any failure means: fall back and say so
            print(f"WARNING: ONNX MiniLM unavailable ({exc}); falling back to FakeEmbedder", file=sys.stderr)
    fe = FakeEmbedder(dims=384)
    return CachedEmbedder(fe), f"{fe.name} (fallback: hashing bag of words, not a semantic model)"


# ====================================================================================== MemLineage runners


class Clock:
    """A settable clock for MemLineage (timezone-aware UTC): the simulated time of the conversation."""

    def __init__(self, now: datetime = BASE_TIME) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class _MemLineageBase:
    """Shared by the MemLineage rows: the simulated clock, users one day apart, scopes, reading hits."""

    def __init__(self, mm: Any, clock: Clock, labeller: Labeller) -> None:
        self.mm, self.clock, self.labeller = mm, clock, labeller
        self._t0: dict[str, datetime] = {}
        self.errors: list[dict[str, str]] = []  # turns the adapter refused with a MemLineageError

    def _failed(self, uh: UserHistory, turn: Turn, exc: Exception) -> None:
        """Record a turn the adapter failed to write (a real agent would have crashed there) and go on."""
        self.errors.append({"user": uh.user, "turn": turn.user, "error": f"{type(exc).__name__}: {exc}"[:300]})

    def _at(self, uh: UserHistory, seconds: float) -> None:
        t0 = self._t0.setdefault(uh.user, BASE_TIME + timedelta(days=len(self._t0)))
        self.clock.now = t0 + timedelta(seconds=seconds)

    @staticmethod
    def session(uh: UserHistory, seconds: float) -> str:
        return f"{uh.user}-s{1 if seconds < SECOND_SESSION else 2 if seconds < ASK_AT else 3}"

    def scope(self, uh: UserHistory, seconds: float) -> Any:
        from memlineage import Scope

        return Scope(user_id=uh.user, session_id=self.session(uh, seconds))

    def served(self, uh: UserHistory, memories: Iterable[Any]) -> list[Served]:
        return [self.labeller.served(uh.user, m.content, m.scope.user_id) for m in memories]

    def close(self) -> None:
        self.mm.close()


class PlainLangChainRunner(_MemLineageBase):
    """MemLineage through ``LineageMemory`` as a classic ``AgentExecutor`` drives it, plain text only."""

    def __init__(self, mm: Any, clock: Clock, labeller: Labeller) -> None:
        super().__init__(mm, clock, labeller)
        self._memories: dict[str, Any] = {}

    def _memory(self, uh: UserHistory, seconds: float) -> Any:
        from memlineage_langchain import LineageMemory

        scope = self.scope(uh, seconds)
        key = str(scope.session_id)
        if key not in self._memories:
            self._memories[key] = LineageMemory(manager=self.mm, scope=scope, k=5)
        return self._memories[key]

    def play(self, uh: UserHistory) -> None:
        from langchain_classic.agents.output_parsers.tools import ToolAgentAction
        from memlineage import MemLineageError

        for n, turn in enumerate(uh.turns):
            self._at(uh, turn.at)
            memory = self._memory(uh, turn.at)
            inputs = {"input": turn.user}
            memory.load_memory_variables(inputs)  # AgentExecutor loads memory before the model runs
            outputs: dict[str, Any] = {"output": turn.answer}
            if turn.tool is not None:
                call_id = f"call_{uh.user}_{n}"
                action = ToolAgentAction(
                    tool=turn.tool.name, tool_input=dict(turn.tool.args), log="", message_log=[],
                    tool_call_id=call_id,
                )  # fmt: skip
                outputs["intermediate_steps"] = [(action, turn.tool.output)]
            try:
                memory.save_context(inputs, outputs)
            except MemLineageError as exc:
                self._failed(uh, turn, exc)

    def ask(self, uh: UserHistory, question: str, k: int) -> list[Served]:
        self._at(uh, ASK_AT)
        memory = self._memory(uh, ASK_AT)
        ids = memory.load_memory_variables({"input": question})["memlineage_recalled"][:k]
        scope = self.scope(uh, ASK_AT)
        return self.served(uh, [m for m in self.mm.get_many(ids, scope=scope) if m is not None])


class PlainLlamaIndexRunner(_MemLineageBase):
    """MemLineage through ``lineage_memory(...).aput`` as a ``FunctionAgent`` run writes messages, plain text."""

    _MARKER = re.compile(r"\[m:([0-9a-f]{8})")

    def __init__(self, mm: Any, clock: Clock, labeller: Labeller) -> None:
        super().__init__(mm, clock, labeller)
        self._memories: dict[str, Any] = {}

    def close(self) -> None:
        for memory in self._memories.values():
            memory.close()  # each holds an in-memory chat store connection
        self._memories.clear()
        super().close()

    def _memory(self, uh: UserHistory, seconds: float) -> Any:
        from memlineage_llamaindex import lineage_memory

        session = self.session(uh, seconds)
        if session not in self._memories:
            self._memories[session] = lineage_memory(self.mm, user_id=uh.user, session_id=session, k=5)
        return self._memories[session]

    async def _play(self, uh: UserHistory) -> None:
        from memlineage import MemLineageError

        for n, turn in enumerate(uh.turns):
            self._at(uh, turn.at)
            memory = self._memory(uh, turn.at)
            try:
                await self._turn(memory, uh, n, turn)
            except MemLineageError as exc:
                self._failed(uh, turn, exc)

    async def _turn(self, memory: Any, uh: UserHistory, n: int, turn: Turn) -> None:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock

        user = ChatMessage(role=MessageRole.USER, content=turn.user)
        await memory.aput(user)
        await memory.aget(input=user)  # the agent reads memory for the turn (records the recalled premises)
        if turn.tool is not None:
            call_id = f"call_{uh.user}_{n}"
            block = ToolCallBlock(tool_call_id=call_id, tool_name=turn.tool.name, tool_kwargs=dict(turn.tool.args))
            await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, blocks=[block]))
            await memory.aput(
                ChatMessage(
                    role=MessageRole.TOOL,
                    content=turn.tool.output,
                    additional_kwargs={"tool_call_id": call_id, "name": turn.tool.name},
                )
            )
        if turn.answer:
            await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, content=turn.answer))

    def play(self, uh: UserHistory) -> None:
        asyncio.run(self._play(uh))

    def ask(self, uh: UserHistory, question: str, k: int) -> list[Served]:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        self._at(uh, ASK_AT)
        memory = self._memory(uh, ASK_AT)
        msg = ChatMessage(role=MessageRole.USER, content=question)
        text = asyncio.run(memory.lineage_block.aget(messages=[msg], session_id=memory.session_id))
        from memlineage.models import short_id

        shown = self._MARKER.findall(text)[:k]
        scope = self.scope(uh, ASK_AT)
        by_short_id = {short_id(m.id): m for m in self.mm.find(scope=scope)}
        return self.served(uh, [by_short_id[s] for s in shown if s in by_short_id])


class OracleRunner(_MemLineageBase):
    """The same turns, written with the verbs an application that knows the update would call."""

    def __init__(self, mm: Any, clock: Clock, labeller: Labeller) -> None:
        super().__init__(mm, clock, labeller)
        self.ids: dict[str, dict[str, str]] = {}  # user -> label key -> memory id

    def play(self, uh: UserHistory) -> None:
        ids: dict[str, str] = {}
        self.ids[uh.user] = ids
        for turn in uh.turns:
            self._at(uh, turn.at)
            scope = self.scope(uh, turn.at)
            mm = self.mm
            if turn.tool is None:
                if turn.op == "supersede" and turn.target in ids:
                    ids[turn.key] = mm.supersede(ids[turn.target], turn.user, scope=scope, source="user").memory.id
                else:
                    if turn.op == "retract" and turn.target in ids:
                        mm.retract(ids[turn.target], scope=scope, reason=turn.user)
                    ids[turn.key] = mm.remember(turn.user, scope=scope, source="user").id
            else:
                mm.remember(turn.user, scope=scope, source="user")
                src = f"tool:{turn.tool.name}"
                if turn.op == "supersede" and turn.target in ids:
                    ids[turn.key] = mm.supersede(ids[turn.target], turn.tool.output, scope=scope, source=src).memory.id
                else:
                    ids[turn.key] = mm.remember(turn.tool.output, scope=scope, source=src).id
            if turn.answer:
                premises = [ids[k] for k in turn.derived_from if k in ids]
                mem = mm.remember(turn.answer, scope=scope, source="agent", derived_from=premises)
                if turn.answer_key:
                    ids[turn.answer_key] = mem.id

    def ask(self, uh: UserHistory, question: str, k: int) -> list[Served]:
        self._at(uh, ASK_AT)
        res = self.mm.recall(question, scope=self.scope(uh, ASK_AT), k=k)
        return self.served(uh, [h.memory for h in res])


def reconciler_factory() -> Callable[[], Any] | None:
    """A factory of the LLM reconciler on the scripted model, or ``None`` while ``memlineage.reconcile`` is absent."""
    try:
        from memlineage.reconcile import LLMReconciler  # type: ignore[import-not-found]
    except ImportError:
        return None
    return lambda: LLMReconciler(ScriptedReconcilerModel())


# ====================================================================================== peers


def _lc_embeddings(embedder: CachedEmbedder) -> Any:
    from langchain_core.embeddings import Embeddings

    class _Embeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedder.embed(texts)

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed([text])[0]

    return _Embeddings()


class LangChainRunner:
    """LangChain classic ``VectorStoreRetrieverMemory`` over ``langchain_chroma.Chroma``, one collection per user."""

    store = "langchain_chroma.Chroma on chromadb.EphemeralClient (in-memory), cosine, a collection per user"

    def __init__(self, embedder: CachedEmbedder, labeller: Labeller, k: int) -> None:
        import chromadb
        from chromadb.config import Settings
        from langchain_chroma import Chroma
        from langchain_classic.memory import VectorStoreRetrieverMemory

        self.labeller = labeller
        client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        emb = _lc_embeddings(embedder)

        def make(name: str) -> Any:
            retriever = Chroma(
                client=client,
                collection_name=name,
                embedding_function=emb,
                collection_metadata={"hnsw:space": "cosine"},
            ).as_retriever(search_kwargs={"k": k})
            # The deprecated class is the point: it is the classic LangChain memory this benchmark compares against.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "The class `VectorStoreRetrieverMemory` was deprecated")
                return VectorStoreRetrieverMemory(retriever=retriever, return_docs=True, input_key="input")

        self._make = make
        self._mem: dict[str, Any] = {}

    def play(self, uh: UserHistory) -> None:
        mem = self._mem[uh.user] = self._make(f"lc-{uh.user}-{uuid.uuid4().hex[:8]}")
        for turn in uh.turns:
            outputs = {"output": turn.answer}
            if turn.tool is not None:
                outputs["tool_result"] = turn.tool.output
            mem.save_context({"input": turn.user}, outputs)

    def ask(self, uh: UserHistory, question: str, k: int) -> list[Served]:
        docs = self._mem[uh.user].load_memory_variables({"input": question})["history"]
        return [self.labeller.served(uh.user, d.page_content) for d in docs][:k]


class LlamaIndexRunner:
    """LlamaIndex ``VectorMemoryBlock`` over one ``ChromaVectorStore``, a block per user, filtered by session."""

    store = "llama_index ChromaVectorStore on chromadb.EphemeralClient (in-memory), cosine, session_id = user"

    def __init__(self, embedder: CachedEmbedder, labeller: Labeller, k: int) -> None:
        import chromadb
        from chromadb.config import Settings
        from llama_index.core.embeddings import BaseEmbedding
        from llama_index.core.memory import VectorMemoryBlock
        from llama_index.core.postprocessor.types import BaseNodePostprocessor
        from llama_index.vector_stores.chroma import ChromaVectorStore

        class _Embedding(BaseEmbedding):
            def _get_query_embedding(self, query: str) -> list[float]:
                return embedder.embed([query])[0]

            async def _aget_query_embedding(self, query: str) -> list[float]:
                return embedder.embed([query])[0]

            def _get_text_embedding(self, text: str) -> list[float]:
                return embedder.embed([text])[0]

        captured: list[str] = []
        self._captured = captured

        class _Capture(BaseNodePostprocessor):
            """Records the retrieved nodes' text in rank order (the block returns one joined string)."""

            def _postprocess_nodes(self, nodes: list[Any], query_bundle: Any = None) -> list[Any]:
                captured[:] = [n.node.get_content() for n in nodes]
                return nodes

        self.labeller = labeller
        client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        col = client.get_or_create_collection(
            f"li-{uuid.uuid4().hex[:8]}", metadata={"hnsw:space": "cosine"}, embedding_function=None
        )
        store = ChromaVectorStore(chroma_collection=col)
        self._make = lambda: VectorMemoryBlock(
            vector_store=store,
            embed_model=_Embedding(model_name=embedder.name),
            similarity_top_k=k,
            retrieval_context_window=1,
            node_postprocessors=[_Capture()],
        )
        self._blocks: dict[str, Any] = {}

    def play(self, uh: UserHistory) -> None:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        block = self._blocks[uh.user] = self._make()

        async def run() -> None:
            for turn in uh.turns:
                msgs = [ChatMessage(role=MessageRole.USER, content=turn.user)]
                if turn.tool is not None:
                    msgs.append(ChatMessage(role=MessageRole.TOOL, content=turn.tool.output))
                if turn.answer:
                    msgs.append(ChatMessage(role=MessageRole.ASSISTANT, content=turn.answer))
                for m in msgs:
                    m.additional_kwargs["session_id"] = uh.user
                await block.aput(msgs)

        asyncio.run(run())

    def ask(self, uh: UserHistory, question: str, k: int) -> list[Served]:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        self._captured.clear()
        msg = ChatMessage(role=MessageRole.USER, content=question)
        asyncio.run(self._blocks[uh.user].aget(messages=[msg], session_id=uh.user))
        return [self.labeller.served(uh.user, c) for c in self._captured][:k]


class Mem0Runner:
    """mem0 OSS ``Memory`` with inference off, our embedder via its ``langchain`` provider, local Qdrant."""

    store = "mem0 Memory, infer=False, local in-process Qdrant (path mode), user_id filter, threshold=0"

    def __init__(self, embedder: CachedEmbedder, labeller: Labeller, tmp: Path) -> None:
        # mem0 reads these at import: keep its files in the temp dir and its telemetry (PostHog) off
        os.environ.setdefault("MEM0_DIR", str(tmp / "mem0home"))
        os.environ["MEM0_TELEMETRY"] = "False"
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from mem0 import Memory

        dims = len(embedder.embed(["probe"])[0])
        sub = tmp / f"mem0-{uuid.uuid4().hex[:8]}"
        config = {
            "embedder": {
                "provider": "langchain",
                "config": {"model": _lc_embeddings(embedder), "embedding_dims": dims},
            },
            # never called with infer=False; a scripted fake so that nothing reaches for an API key
            "llm": {
                "provider": "langchain",
                "config": {"model": GenericFakeChatModel(messages=iter(["{}"] * 10))},
            },
            "vector_store": {
                "provider": "qdrant",
                "config": {"collection_name": "stale", "path": str(sub / "qdrant"), "embedding_model_dims": dims},
            },
            "history_db_path": str(sub / "history.db"),
        }
        self.labeller = labeller
        self.m = Memory.from_config(config)

    def play(self, uh: UserHistory) -> None:
        for turn in uh.turns:
            msgs = [{"role": "user", "content": turn.user}]
            if turn.tool is not None:
                msgs.append({"role": "assistant", "content": turn.tool.output})
            if turn.answer:
                msgs.append({"role": "assistant", "content": turn.answer})
            self.m.add(msgs, user_id=uh.user, infer=False)

    def ask(self, uh: UserHistory, question: str, k: int) -> list[Served]:
        res = self.m.search(question, filters={"user_id": uh.user}, top_k=k, threshold=0.0)
        return [self.labeller.served(uh.user, r["memory"], r.get("user_id")) for r in res["results"]][:k]

    def close(self) -> None:
        client = getattr(getattr(self.m, "vector_store", None), "client", None)
        if client is not None:
            client.close()


# ====================================================================================== the scripted reconciler model


class ScriptedReconcilerModel:
    """Builds a deterministic *scripted* LangChain chat model that answers the LLM reconciler's prompt by rules.

    Not an LLM, and labelled "scripted" in every result. It reads each ``NEW statement n (source s): "..."`` and
    the ``[id] (source) "..."`` candidates under it (the prompt of ``memlineage.reconcile.LLMReconciler``) and
    decides as a careful model would: a withdrawal ("forget", "not true", "cancelled", "pulled out", 取消, 不算,
    不是真的, 别记) ``contradict``s the candidate of the same source it names (a shared content word); the same
    words are a ``duplicate``; a candidate of the same source about the same attribute of the same subject (a
    topic word list: where one lives, works, seats, drinks, favourites, names, numbers, dates, budgets, prices;
    and not about another person such as "my sister") is ``update``d; anything else is ``new``. The answer is the
    JSON the reconciler asks for, one decision per statement.
    """

    def __new__(cls) -> Any:  # returns the LangChain model, built lazily so the module imports without it
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        class _Scripted(GenericFakeChatModel):
            def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
                from langchain_core.outputs import ChatGeneration, ChatResult

                prompt = "\n".join(str(m.content) for m in messages)
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content=decide(prompt)))])

        return _Scripted(messages=iter(()))


_WITHDRAW = ("forget", "not true", "cancel", "pulled out", "ignore", "取消", "不算", "不是真的", "别记")
_FUNCTION_WORDS = {"what", "said", "about", "that", "this", "forget", "true", "anymore", "with", "from", "have"}
#: Attribute -> words that name it (what a model knows: "moved to" is about where one lives).
_TOPICS = {
    "residence": ("live", "moved", "living", "house", "flat", "住", "搬", "家在"),
    "job": ("work", "job", "employer", "started at", "上班", "工作"),
    "seat": ("seat", "座位"),
    "diet": ("vegetarian", "vegan", "diet", "eat "),
    "drink": ("drink", "coffee", "tea", "喝"),
    "favourite": ("favourite", "best book", "最喜欢", "最爱"),
    "pet": ("dog", "cat"),
    "partner": ("partner",),
    "phone": ("phone", "number", "手机号"),
    "plate": ("车牌",),
    "birthday": ("birthday",),
    "wedding": ("婚礼",),
    "budget": ("budget",),
}
_OTHERS = (
    "sister",
    "brother",
    "colleague",
    "wife",
    "husband",
    "son",
    "manager",
    "姐姐",
    "哥哥",
    "同事",
    "老婆",
    "爸爸",
)
_NEW = re.compile(r'^NEW statement (\d+) \(source ([^)]*)\): "(.*)"\s*$', re.M)
_CAND = re.compile(r'^\s+\[([^\]]+)\] \(([^)]*)\) "(.*)"\s*$', re.M)


def _tokens(text: str) -> set[str]:
    words = set(re.findall(r"[a-z0-9']+", text.lower()))
    cjk = re.findall(r"[\u4e00-\u9fff]", text)
    return words | {a + b for a, b in zip(cjk, cjk[1:], strict=False)}


def _topics(text: str) -> set[str]:
    low = text.lower()
    return {t for t, words in _TOPICS.items() if any(w in low for w in words)}


def _about_other(text: str) -> bool:
    low = text.lower()
    return any(o in low for o in _OTHERS)


def _decide_one(source: str, new: str, cands: list[tuple[str, str, str]]) -> dict[str, Any]:
    kind = source.split(":", 1)[0]
    nt = _tokens(new)
    same_source = [(cid, text) for cid, src, text in cands if src == source or src.split(":", 1)[0] == kind == "user"]
    for cid, text in same_source:
        if " ".join(text.lower().split()) == " ".join(new.lower().split()):
            return {"action": "duplicate", "target": cid, "reason": "same statement"}
    if any(w in new.lower() for w in _WITHDRAW):
        best = max(
            (
                (len({w for w in nt & _tokens(t) if len(w) >= 4 and w not in _FUNCTION_WORDS}), cid)
                for cid, t in same_source
            ),
            default=(0, None),
        )
        if best[0]:
            return {"action": "contradict", "target": best[1], "reason": "the user withdraws it"}
        return {"action": "new", "target": None, "reason": "withdraws nothing listed"}
    if kind == "tool":  # a fresh result of the same tool for the same thing replaces the old one
        for cid, text in same_source:
            shared = len(nt & _tokens(text)) / max(1, len(nt | _tokens(text)))
            if shared >= 0.5:
                return {"action": "update", "target": cid, "reason": f"same tool and arguments ({shared:.2f})"}
        return {"action": "new", "target": None, "reason": "a different query"}
    topics = _topics(new)
    for cid, text in same_source:
        if topics & _topics(text) and not _about_other(text) and not _about_other(new):
            return {"action": "update", "target": cid, "reason": f"new value of {sorted(topics & _topics(text))}"}
    return {"action": "new", "target": None, "reason": "about something else"}


def decide(prompt: str) -> str:
    """The scripted reconciler's JSON answer to an ``LLMReconciler`` prompt (see :class:`ScriptedReconcilerModel`)."""
    heads = list(_NEW.finditer(prompt))
    decisions = []
    for i, head in enumerate(heads):
        block = prompt[head.end() : heads[i + 1].start() if i + 1 < len(heads) else len(prompt)]
        cands = _CAND.findall(block)
        d = _decide_one(head.group(2), head.group(3), cands)
        decisions.append({"statement": int(head.group(1)), **d})
    return json.dumps({"decisions": decisions}, ensure_ascii=False)


# ====================================================================================== scoring


@dataclass
class SystemResult:
    name: str
    key: str
    status: str = "ok"
    store: str = ""
    seconds: float = 0.0
    top: dict[str, list[Served]] = field(default_factory=dict)  # scenario id -> served, rank order
    turn_errors: list[dict[str, str]] = field(default_factory=list)  # turns the system failed to write

    def metrics(self, scenarios: Sequence[Scenario], k: int = K) -> dict[str, Any]:
        """``stale``, ``current`` (scenario counts), ``n`` and ``leaks`` (foreign memories) at ``k``."""
        stale = cur = leaks = 0
        for sc in scenarios:
            top = self.top.get(sc.id, [])[:k]
            stale += any(s.keys & set(sc.stale) for s in top)
            cur += any(s.keys & set(sc.current) for s in top)
            leaks += sum(s.owner is not None and s.owner != sc.user for s in top)
        return {"n": len(scenarios), "stale": stale, "current": cur, "leaks": leaks}


def run_system(
    name: str, key: str, factory: Callable[[], Any], users: Sequence[UserHistory], k: int = K
) -> SystemResult:
    """Build one system, play every user's history into it, then ask every question; errors become n/a."""
    res = SystemResult(name, key)
    t0 = time.perf_counter()
    runner = None
    try:
        runner = factory()
        if runner is None:
            res.status = "n/a: not built (memlineage.reconcile is absent)"
            return res
        res.store = getattr(runner, "store", "")
        for uh in users:
            runner.play(uh)
        res.turn_errors = list(getattr(runner, "errors", []))
        for uh in users:
            for sc in uh.scenarios:
                res.top[sc.id] = runner.ask(uh, sc.question, k)
    except ImportError as exc:
        res.status = f"n/a: not installed ({exc.name or exc}); pip install it to include this row"
    except Exception as exc:  # noqa: BLE001 - a peer failing is a result to report, not a crash
        res.status = f"n/a: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001
                pass
        res.seconds = time.perf_counter() - t0
    return res


def failures(res: SystemResult, scenarios: Sequence[Scenario], k: int = K) -> list[dict[str, Any]]:
    """Scenarios whose top k holds a stale memory or misses the current one, with what was served."""
    out = []
    for sc in scenarios:
        top = res.top.get(sc.id, [])[:k]
        stale = sorted({key for s in top for key in s.keys & set(sc.stale)})
        found = any(s.keys & set(sc.current) for s in top)
        if stale or not found:
            out.append(
                {
                    "scenario": sc.id,
                    "question": sc.question,
                    "served_stale": [sc.text_of(x) for x in stale],
                    "current_found": found,
                    "top": [sorted(s.keys) or ["(other)"] for s in top],
                }
            )
    return out


#: (key, row name) in table order; the first is the headline.
SYSTEMS = [
    ("ml-langchain", "MemLineage plain (LangChain adapter)"),
    ("ml-llamaindex", "MemLineage plain (LlamaIndex adapter)"),
    ("ml-reconciler", "MemLineage plain + LLM reconciler (scripted model)"),
    ("ml-oracle", "MemLineage oracle (explicit verbs)"),
    ("langchain", "LangChain VectorStoreRetrieverMemory"),
    ("llamaindex", "LlamaIndex VectorMemoryBlock"),
    ("mem0", "mem0 (infer=False)"),
]


def factories(
    embedder: CachedEmbedder, labeller: Labeller, tmp: Path, open_manager: Callable[..., Any] | None = None
) -> dict[str, Callable[[], Any]]:
    """A factory per system key; ``open_manager(clock, **options)`` opens a fresh MemLineage store."""

    def default_open(clock: Clock, **options: Any) -> Any:
        from memlineage import MemoryManager

        return MemoryManager.open(tmp / f"ml-{uuid.uuid4().hex[:8]}", embedder=embedder, clock=clock, **options)

    opener = open_manager or default_open

    def memlineage(runner_cls: type, **options: Any) -> Callable[[], Any]:
        def build() -> Any:
            clock = Clock()
            runner = runner_cls(opener(clock, **options), clock, labeller)
            runner.store = "MemoryManager.open(path) defaults" + (f" + {options}" if options else "")
            return runner

        return build

    def reconciled() -> Any:
        make = reconciler_factory()
        return memlineage(PlainLangChainRunner, reconciler=make())() if make is not None else None

    return {
        "ml-langchain": memlineage(PlainLangChainRunner),
        "ml-llamaindex": memlineage(PlainLlamaIndexRunner),
        "ml-reconciler": reconciled,
        "ml-oracle": memlineage(OracleRunner, reconciler=None),  # the verbs alone, no automatic detection
        "langchain": lambda: LangChainRunner(embedder, labeller, 5),
        "llamaindex": lambda: LlamaIndexRunner(embedder, labeller, 5),
        "mem0": lambda: Mem0Runner(embedder, labeller, tmp),
    }


def _fmt(m: dict[str, Any]) -> tuple[str, str, str]:
    return f"{m['stale']}/{m['n']}", f"{m['current']}/{m['n']}", str(m["leaks"])


def _reproducible(seed: int, argv: Sequence[str] | None) -> None:
    """Same figures on every run: string hashing fixed (re-exec with ``PYTHONHASHSEED=0``), ids from a seeded RNG.

    Retrieval breaks ties between equal scores by set order and by memory id (random uuid4), which moved the
    plain-mode figures by a few scenarios from run to run.
    """
    if os.environ.get("PYTHONHASHSEED") != "0" and argv is None:
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    rng = random.Random(seed)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)  # type: ignore[assignment]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fillers", type=int, default=8, help="distractors per user")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fake-embedder", action="store_true", help="use FakeEmbedder instead of ONNX MiniLM")
    ap.add_argument("--systems", default=",".join(k for k, _ in SYSTEMS), help="comma-separated subset")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-repro", action="store_true", help="keep random ids and hash order (see _reproducible)")
    args = ap.parse_args(argv)
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    if not args.no_repro:
        _reproducible(args.seed, argv)

    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 200)
    users = generate(seed=args.seed, fillers=args.fillers)
    scenarios = all_scenarios(users)
    labeller = Labeller(users)
    embedder, embedder_desc = load_embedder(fake=args.fake_embedder)
    wanted = {s.strip().lower() for s in args.systems.split(",") if s.strip()}
    results: list[SystemResult] = []
    with tempfile.TemporaryDirectory(prefix="bench_stale_") as tmpdir:
        built = factories(embedder, labeller, Path(tmpdir))
        with console.status("running stale-memory scenarios...") as status:
            for key, name in SYSTEMS:
                if key in wanted:
                    status.update(f"{name}: {len(scenarios)} scenarios, {len(users)} users...")
                    results.append(run_system(name, key, built[key], users))

    groups: list[tuple[str, list[Scenario]]] = []
    for split in SPLITS:
        for lang in ("all", "en", "zh"):
            scs = [s for s in scenarios if s.split == split and lang in ("all", s.lang)]
            if scs:
                groups.append((f"{split}/{lang}", scs))
    table = Table(title=f"Stale-memory suite, k={K}: stale served / current found / cross-user leaks "
                  f"({len(scenarios)} scenarios, {len(users)} users, embedder {embedder.name})")  # fmt: skip
    table.add_column("system")
    for split in SPLITS:
        n = sum(s.split == split for s in scenarios)
        table.add_column(f"{split} stale@{K}", justify="right")
        table.add_column(f"{split} current@{K}", justify="right")
        table.add_column(f"{split} leaks (n={n})", justify="right")
    table.add_column("turn errors", justify="right")
    table.add_column("s", justify="right")
    summary: dict[str, Any] = {}
    for r in results:
        entry: dict[str, Any] = {"key": r.key, "status": r.status, "store": r.store, "seconds": round(r.seconds, 2)}
        if r.status == "ok":
            entry["metrics"] = {g: r.metrics(scs) for g, scs in groups}
            entry["by_category"] = {
                f"{split}/{c}": r.metrics([s for s in scenarios if s.split == split and s.category == c])
                for split in SPLITS
                for c in sorted({s.category for s in scenarios if s.split == split})
            }
            entry["failures"] = failures(r, scenarios)
            entry["turn_errors"] = r.turn_errors
            cells = [c for split in SPLITS for c in _fmt(entry["metrics"][f"{split}/all"])]
            table.add_row(r.name, *cells, str(len(r.turn_errors)), f"{r.seconds:.1f}")
        else:
            table.add_row(r.name, r.status, *[""] * (3 * len(SPLITS)), f"{r.seconds:.1f}")
        summary[r.name] = entry
    console.print(table)
    for r in results:
        if r.turn_errors:
            e = r.turn_errors[0]
            console.print(
                f"[red]{r.name}: {len(r.turn_errors)} turn(s) failed to write (a real agent would have crashed); "
                f"first: {e['user']} {e['turn']!r} -> {e['error']}[/red]"
            )

    by_lang = Table(title=f"stale@{K} / current@{K} by split and language")
    by_lang.add_column("system")
    for g, scs in groups:
        if not g.endswith("/all"):
            by_lang.add_column(f"{g} (n={len(scs)})", justify="right")
    for r in results:
        if r.status == "ok":
            m = summary[r.name]["metrics"]
            by_lang.add_row(
                r.name, *[f"{m[g]['stale']} / {m[g]['current']}" for g, _ in groups if not g.endswith("/all")]
            )
    console.print(by_lang)

    payload = {
        "benchmark": "stale",
        "mode": "plain conversation for every row except the oracle (explicit verbs)",
        "embedder": embedder_desc,
        "k": K,
        "scenarios": len(scenarios),
        "users": len(users),
        "fillers_per_user": args.fillers,
        "seed": args.seed,
        "splits": {sp: sum(s.split == sp for s in scenarios) for sp in SPLITS},
        "categories": {c: sum(s.category == c for s in scenarios) for c in sorted({s.category for s in scenarios})},
        "languages": {lg: sum(s.lang == lg for s in scenarios) for lg in ("en", "zh")},
        "headline": SYSTEMS[0][1],
        "systems": summary,
        "scenario_list": [
            {"id": s.id, "user": s.user, "split": s.split, "lang": s.lang, "category": s.category,
             "question": s.question, "stale": [s.text_of(x) for x in s.stale],
             "current": [s.text_of(x) for x in s.current]}
            for s in scenarios
        ],
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
