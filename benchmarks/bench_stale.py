"""Stale-memory benchmark: is a superseded, retracted or expired memory served in the top k?

Scripted knowledge-update scenarios (the user changes a preference, corrects a fact, a tool price outlives
its freshness limit, a premise is retracted or corrected under a derived conclusion), generated from
templates with different entities, in English and Chinese, each padded with unrelated "filler" memories.
Every system gets the same history and the same question, with the same embedder, in this process:

- **MemLineage**: written with its verbs (slot-keyed ``remember``, ``supersede``, ``retract``, ``ttl``,
  ``derived_from``) on the embedded default store (SQLite ledger + Chroma ``PersistentClient`` in a temp
  dir); the clock is simulated, so TTLs elapse between the write and the question. Nothing else (no sweep,
  no ``expire_due``) runs in between: ``recall`` alone must keep stale memories out.
- **LangChain**: classic ``VectorStoreRetrieverMemory`` (``save_context`` per turn) over
  ``langchain_chroma.Chroma`` on an in-memory chromadb ``EphemeralClient``, one collection per scenario.
- **LlamaIndex**: ``VectorMemoryBlock`` (``aput`` per turn) over ``ChromaVectorStore`` on an in-memory
  chromadb client (``SimpleVectorStore`` cannot be used: it does not store text, which
  ``VectorMemoryBlock`` rejects).
- **mem0** (``pip install mem0ai``): ``Memory.add(..., infer=False)`` per turn,
  ``search(..., threshold=0)``, its ``langchain`` embedder provider wrapping the same embedder, a scripted
  fake LangChain chat model as LLM (never called with ``infer=False``) and local in-process Qdrant;
  telemetry off. Reported as "n/a: <reason>" when it is not installed or fails.

The baselines get plain text adds (that is how their users write); a correction is just a newer message.

Metrics per system and k in {3, 5}: ``stale_share`` = share of scenarios whose top k holds at least one
stale (superseded / retracted / expired / derived-from-invalid) memory; ``current_share`` = share whose
top k holds the current correct memory (a sanity check that a system is not trivially empty).
Goal: 0 % stale for MemLineage.

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_stale.py [--fake-embedder] [--systems ...]``;
writes ``benchmarks/results/bench_stale.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "bench_stale.json"
KS = (3, 5)
BASE_TIME = datetime(2025, 6, 1, 8, 0, tzinfo=timezone.utc)
HOUR = 3600.0
PRICE_TTL = HOUR  # freshness limit of tool prices

# ====================================================================================== scenarios


@dataclass(frozen=True)
class Step:
    """One turn of a scenario's history.

    ``op`` says how MemLineage writes it: ``add`` (``remember``, with ``slot`` / ``ttl`` /
    ``derived_from`` when given), ``supersede`` (``supersede(target, text)``) or ``retract``
    (``retract(target)``, then ``remember(text)``: the user's own words). The baselines always store
    ``text`` as a plain turn.
    """

    key: str
    text: str
    at: float  # seconds after the scenario's start
    role: str = "user"  # user | tool | assistant
    op: str = "add"  # add | supersede | retract
    target: str | None = None
    slot: str | None = None
    ttl: float | None = None
    derived_from: tuple[str, ...] = ()
    kind: str = "episodic"
    tool: str | None = None


@dataclass(frozen=True)
class Scenario:
    """A scripted knowledge update: history, question, which keys are stale and which are current."""

    id: str
    category: str  # preference | correction | stale_price | retracted_premise
    lang: str  # en | zh
    steps: tuple[Step, ...]
    question: str
    ask_at: float
    stale: tuple[str, ...]
    current: tuple[str, ...]

    def text_of(self, key: str) -> str:
        return next(s.text for s in self.steps if s.key == key)


FILLERS = {
    "en": [
        "My sister lives in Toronto with her two kids.",
        "I have a golden retriever called Biscuit.",
        "I'm learning to play the cello on weekends.",
        "I work as a data engineer at a logistics company.",
        "I go running by the river on Sunday mornings.",
        "My favourite novel is Middlemarch by George Eliot.",
        "I'm allergic to cats.",
        "I support Arsenal and watch most of their matches.",
        "I started a pottery class last month.",
        "My laptop is a ThinkPad X1 Carbon.",
        "I usually work from home on Fridays.",
        "We are planning to repaint the kitchen green.",
        "My son plays chess in the school club.",
        "I don't enjoy horror films.",
        "I water the balcony plants every Tuesday.",
        "My gym membership renews in September.",
    ],
    "zh": [
        "我姐姐和她的两个孩子住在多伦多。",
        "我养了一只金毛，名字叫饼干。",
        "我周末在学拉大提琴。",
        "我在一家物流公司做数据工程师。",
        "我每个周日早上沿着河边跑步。",
        "我最喜欢的小说是《红楼梦》。",
        "我对猫过敏。",
        "我儿子参加了学校的国际象棋社。",
        "我上个月开始上陶艺课。",
        "我不喜欢看恐怖片。",
        "我每周二给阳台上的花浇水。",
        "我的健身卡九月份到期。",
    ],
}

# (lang, slot, old, new, question)
_PREFERENCES = [
    (
        "en",
        "pref/seat",
        "I prefer aisle seats on flights.",
        "I've changed my mind: I now prefer window seats on flights.",
        "Which seat do I prefer on flights?",
    ),
    (
        "en",
        "pref/diet",
        "I'm vegetarian, so no meat or fish for me.",
        "I eat fish again these days, so I'm pescatarian now.",
        "What is my diet?",
    ),
    (
        "en",
        "pref/coffee",
        "I drink my coffee black, no milk.",
        "These days I take my coffee with oat milk.",
        "How do I take my coffee?",
    ),
    (
        "en",
        "pref/hotel",
        "I like staying in big chain hotels when I travel.",
        "I now prefer small boutique hotels over big chains.",
        "What kind of hotel do I like when I travel?",
    ),
    (
        "en",
        "pref/airline",
        "My favourite airline is Lufthansa.",
        "My favourite airline is KLM now, after the last few trips.",
        "Which airline is my favourite?",
    ),
    (
        "en",
        "pref/meetings",
        "Please schedule my meetings in the morning.",
        "From now on, schedule my meetings in the afternoon instead.",
        "When should my meetings be scheduled?",
    ),
    (
        "zh",
        "pref/seat",
        "坐飞机我喜欢靠过道的座位。",
        "我改主意了，现在坐飞机我更喜欢靠窗的座位。",
        "坐飞机我喜欢什么座位？",
    ),
    ("zh", "pref/tea", "我喝茶只喝绿茶。", "最近我改喝红茶了，不喝绿茶了。", "我喜欢喝什么茶？"),
]

# (lang, old, new, question)
_CORRECTIONS = [
    (
        "en",
        "My daughter Emma's birthday is on March 3.",
        "Correction: Emma's birthday is on March 13, not March 3.",
        "When is Emma's birthday?",
    ),
    (
        "en",
        "My office is on the 4th floor of building B.",
        "Sorry, I got that wrong: my office is on the 7th floor of building B.",
        "Which floor is my office on?",
    ),
    (
        "en",
        "My passport number ends in 4471.",
        "Correction: my passport number ends in 4417.",
        "What does my passport number end in?",
    ),
    (
        "en",
        "I live in Berlin, in the Kreuzberg district.",
        "I moved last week; I live in Munich now.",
        "Which city do I live in?",
    ),
    (
        "en",
        "My manager is called David Chen.",
        "My manager is Sarah Okafor now; David moved to another team.",
        "Who is my manager?",
    ),
    ("zh", "我的车牌号是京A12345。", "更正一下：我的车牌号是京A54321，不是京A12345。", "我的车牌号是多少？"),
    ("zh", "我住在上海浦东。", "我上个月搬家了，现在住在杭州。", "我住在哪个城市？"),
]

# (lang, tool, old, new, question, derived conclusion or None)
_PRICES = [
    (
        "en",
        "flight_search",
        "flight_search: Lufthansa LH1234 Frankfurt to Lisbon on June 12 costs EUR 412.",
        "flight_search: Lufthansa LH1234 Frankfurt to Lisbon on June 12 now costs EUR 468.",
        "How much does the Lufthansa flight to Lisbon cost?",
        "Cheapest option found: book LH1234 to Lisbon at EUR 412.",
    ),
    (
        "en",
        "hotel_search",
        "hotel_search: Hotel Miramar in Nice costs EUR 189 per night for June 12-15.",
        "hotel_search: Hotel Miramar in Nice costs EUR 245 per night for June 12-15.",
        "What is the nightly price of Hotel Miramar in Nice?",
        None,
    ),
    (
        "en",
        "train_search",
        "train_search: Eurostar 9014 London to Paris on July 2 costs GBP 78.",
        "train_search: Eurostar 9014 London to Paris on July 2 costs GBP 121.",
        "How much is the Eurostar ticket to Paris?",
        "Best value: the Eurostar 9014 to Paris at GBP 78, cheaper than flying.",
    ),
    (
        "en",
        "fx_rates",
        "fx_rates: 1 EUR = 1.0842 USD.",
        "fx_rates: 1 EUR = 1.0917 USD.",
        "What is the euro to dollar exchange rate?",
        None,
    ),
    (
        "en",
        "car_rental",
        "car_rental: a compact car in Porto costs EUR 34 per day from Sixt.",
        "car_rental: a compact car in Porto costs EUR 52 per day from Sixt.",
        "How much is a rental car in Porto per day?",
        "Suggestion: rent the Sixt compact in Porto at EUR 34 per day.",
    ),
    (
        "zh",
        "flight_search",
        "机票查询：国航CA1501 北京到上海 6月12日 票价1280元。",
        "机票查询：国航CA1501 北京到上海 6月12日 票价现在1560元。",
        "国航去上海的机票多少钱？",
        "建议：订国航CA1501去上海，票价1280元最便宜。",
    ),
    (
        "zh",
        "hotel_search",
        "酒店查询：成都锦江宾馆 6月12日 每晚680元。",
        "酒店查询：成都锦江宾馆 6月12日 每晚920元。",
        "成都锦江宾馆一晚多少钱？",
        None,
    ),
]

# (lang, premise, derived, retraction-or-correction, mode, new derived or None, question)
_PREMISES = [
    (
        "en",
        "I'm flying to Lisbon for the robotics conference on June 12.",
        "Recommendation: book Hotel Avenida Palace in Lisbon, five minutes from the conference venue.",
        "The robotics conference was cancelled, so I'm not travelling to Lisbon after all.",
        "retract",
        None,
        "Which hotel should I book for my trip?",
    ),
    (
        "en",
        "My budget for the summer holiday is EUR 2,000.",
        "Recommended: the 5-night package at Hotel Azul in Crete for EUR 1,850, within your budget.",
        "Please ignore the holiday budget I gave you; we haven't decided on one yet.",
        "retract",
        None,
        "Which holiday package do you recommend for me?",
    ),
    (
        "en",
        "I'm training for the Berlin marathon in September.",
        "Plan: long runs of 30 km every Saturday until the Berlin marathon.",
        "I withdrew from the Berlin marathon because of a knee injury.",
        "retract",
        None,
        "What should my Saturday training look like?",
    ),
    (
        "en",
        "I'm travelling to Rome in May with my partner.",
        "Suggested restaurant for your trip: Roscioli in Rome, book a table for two.",
        "Sorry, I meant Florence, not Rome: we're travelling to Florence in May.",
        "correct",
        "Suggested restaurant for your trip: Trattoria Mario in Florence, book a table for two.",
        "Which restaurant do you suggest for my trip?",
    ),
    (
        "en",
        "Our team offsite will be in Amsterdam in October.",
        "Venue idea for the offsite: the Zoku loft in Amsterdam for 20 people.",
        "Update: the offsite moved to Barcelona; it will be in Barcelona in October.",
        "correct",
        "Venue idea for the offsite: Casa Seat in Barcelona for 20 people.",
        "Which venue should we use for the team offsite?",
    ),
    (
        "zh",
        "我下周去成都出差。",
        "推荐：出差住成都春熙路附近的锦江宾馆。",
        "成都出差取消了，我下周不去成都了。",
        "retract",
        None,
        "我出差应该住哪家酒店？",
    ),
    (
        "zh",
        "我五月去西安旅游。",
        "推荐餐厅：西安回民街的老孙家泡馍。",
        "说错了，我五月去的是成都，不是西安。",
        "correct",
        "推荐餐厅：成都宽窄巷子附近的陈麻婆豆腐。",
        "你推荐我旅游时去哪家餐厅？",
    ),
]


def _add_fillers(steps: list[Step], lang: str, rng: random.Random, n: int, span: float) -> list[Step]:
    texts = rng.sample(FILLERS[lang], min(n, len(FILLERS[lang])))
    fill = [Step(f"filler-{i}", t, at=rng.uniform(0, span), kind="semantic") for i, t in enumerate(texts)]
    return sorted(steps + fill, key=lambda s: s.at)


def generate_scenarios(seed: int = 7, fillers: int = 8) -> list[Scenario]:
    """All scenarios, deterministic for a seed; ``fillers`` unrelated memories are mixed into each history."""
    rng = random.Random(seed)
    out: list[Scenario] = []
    counters: dict[str, int] = {}

    def sid(cat: str, lang: str) -> str:
        counters[f"{cat}-{lang}"] = counters.get(f"{cat}-{lang}", 0) + 1
        return f"{cat}-{lang}-{counters[f'{cat}-{lang}']:02d}"

    for lang, slot, old, new, q in _PREFERENCES:
        # MemLineage: the same slot key on both; the second write supersedes the first (write gate)
        steps = [
            Step("old", old, at=HOUR, slot=slot, kind="semantic"),
            Step("new", new, at=5 * HOUR, slot=slot, kind="semantic"),
        ]
        out.append(
            Scenario(
                sid("preference", lang),
                "preference",
                lang,
                tuple(_add_fillers(steps, lang, rng, fillers, 6 * HOUR)),
                q,
                6 * HOUR,
                ("old",),
                ("new",),
            )
        )
    for lang, old, new, q in _CORRECTIONS:
        steps = [
            Step("old", old, at=HOUR, kind="semantic"),
            Step("new", new, at=5 * HOUR, op="supersede", target="old", kind="semantic"),
        ]
        out.append(
            Scenario(
                sid("correction", lang),
                "correction",
                lang,
                tuple(_add_fillers(steps, lang, rng, fillers, 6 * HOUR)),
                q,
                6 * HOUR,
                ("old",),
                ("new",),
            )
        )
    for lang, tool, old, new, q, derived in _PRICES:
        # the old price is fetched at 1h with a 1h freshness limit; a fresh fetch at 5h; the question at 5h10
        steps = [Step("old", old, at=HOUR, role="tool", tool=tool, ttl=PRICE_TTL)]
        stale = ["old"]
        if derived:
            steps.append(Step("derived", derived, at=HOUR + 60, role="assistant", derived_from=("old",)))
            stale.append("derived")
        steps.append(Step("new", new, at=5 * HOUR, role="tool", tool=tool, ttl=PRICE_TTL))
        out.append(
            Scenario(
                sid("stale_price", lang),
                "stale_price",
                lang,
                tuple(_add_fillers(steps, lang, rng, fillers, 5 * HOUR)),
                q,
                5 * HOUR + 600,
                tuple(stale),
                ("new",),
            )
        )
    for lang, premise, derived, change, mode, new_derived, q in _PREMISES:
        steps = [
            Step("premise", premise, at=HOUR, kind="semantic"),
            Step("derived", derived, at=HOUR + 60, role="assistant", derived_from=("premise",)),
        ]
        if mode == "retract":
            # MemLineage: retract the premise (its conclusion becomes suspect); keep the user's words
            steps.append(Step("change", change, at=4 * HOUR, op="retract", target="premise"))
            current: tuple[str, ...] = ("change",)
        else:
            # MemLineage: supersede the premise, then the agent derives a new conclusion from the new version
            steps.append(
                Step("change", change, at=4 * HOUR, op="supersede", target="premise", kind="semantic")
            )
            steps.append(
                Step(
                    "new_derived",
                    new_derived or "",
                    at=4 * HOUR + 60,
                    role="assistant",
                    derived_from=("change",),
                )
            )
            current = ("new_derived",)
        out.append(
            Scenario(
                sid("retracted_premise", lang),
                "retracted_premise",
                lang,
                tuple(_add_fillers(steps, lang, rng, fillers, 5 * HOUR)),
                q,
                5 * HOUR,
                ("premise", "derived"),
                current,
            )
        )
    for sc in out:
        texts = [s.text for s in sc.steps]
        assert len(set(texts)) == len(texts) and all(texts), (
            f"{sc.id}: step texts must be unique and non-empty"
        )
    return out


def label(sc: Scenario, content: str) -> str:
    """The key of the step whose text a retrieved document holds (longest match; ``?`` when none)."""
    best = max((s for s in sc.steps if s.text in content), key=lambda s: len(s.text), default=None)
    return best.key if best else "?"


# ====================================================================================== embedders


class CachedEmbedder:
    """Wraps an embedder with a text -> vector cache (the same vectors for every system, computed once)."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.name = getattr(base, "name", type(base).__name__)
        self.dims: int | None = getattr(base, "dims", None)
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


# ====================================================================================== systems


class Clock:
    """A settable clock for MemLineage (timezone-aware UTC)."""

    def __init__(self, now: datetime = BASE_TIME) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class MemLineageRunner:
    """Plays scenarios into a :class:`~memlineage.MemoryManager` with its verbs and asks the question."""

    name = "MemLineage"

    def __init__(
        self, mm: Any, clock: Clock, *, start: datetime = BASE_TIME, spacing: timedelta = timedelta(days=1)
    ):
        self.mm = mm
        self.clock = clock
        self.start = start
        self.spacing = spacing
        self._n = 0
        self._t0: dict[str, datetime] = {}
        self._ids: dict[str, dict[str, str]] = {}

    def _scope(self, sc: Scenario) -> Any:
        from memlineage import Scope

        return Scope(user_id=sc.id, session_id=f"{sc.id}-s1")

    def play(self, sc: Scenario) -> None:
        t0 = self._t0[sc.id] = self.start + self._n * self.spacing  # scenarios do not overlap in time
        self._n += 1
        scope = self._scope(sc)
        ids = self._ids[sc.id] = {}
        for st in sc.steps:
            self.clock.now = t0 + timedelta(seconds=st.at)
            source = {"user": "user", "assistant": "reasoning"}.get(st.role, f"tool:{st.tool or 'api'}")
            if st.op == "supersede":
                assert st.target is not None
                rep = self.mm.supersede(ids[st.target], st.text, scope=scope, source=source)
                ids[st.key] = rep.memory.id
                continue
            if st.op == "retract":
                assert st.target is not None
                self.mm.retract(ids[st.target], scope=scope, reason=st.text)
            mem = self.mm.remember(
                st.text,
                scope=scope,
                source=source,
                kind=st.kind,
                slot=st.slot,
                ttl=st.ttl,
                derived_from=[ids[k] for k in st.derived_from],
            )
            ids[st.key] = mem.id

    def ask(self, sc: Scenario, k: int) -> list[str]:
        self.clock.now = self._t0[sc.id] + timedelta(seconds=sc.ask_at)
        keys = {v: key for key, v in self._ids[sc.id].items()}
        res = self.mm.recall(sc.question, scope=self._scope(sc), k=k)
        return [keys.get(h.memory.id, "?") for h in res]


class LangChainRunner:
    """LangChain classic ``VectorStoreRetrieverMemory`` over ``langchain_chroma.Chroma`` (in memory)."""

    name = "LangChain VectorStoreRetrieverMemory"
    store = "langchain_chroma.Chroma on chromadb.EphemeralClient (in-memory), cosine"

    def __init__(self, embedder: CachedEmbedder, k: int) -> None:
        import chromadb
        from chromadb.config import Settings
        from langchain_chroma import Chroma
        from langchain_classic.memory import VectorStoreRetrieverMemory
        from langchain_core.embeddings import Embeddings

        class _Embeddings(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return embedder.embed(texts)

            def embed_query(self, text: str) -> list[float]:
                return embedder.embed([text])[0]

        self._client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        self._make = lambda name: VectorStoreRetrieverMemory(
            retriever=Chroma(
                client=self._client,
                collection_name=name,
                embedding_function=_Embeddings(),
                collection_metadata={"hnsw:space": "cosine"},
            ).as_retriever(search_kwargs={"k": k}),
            return_docs=True,
            input_key="input",
        )
        self._mem: dict[str, Any] = {}

    def play(self, sc: Scenario) -> None:
        mem = self._mem[sc.id] = self._make(f"lc-{sc.id}-{uuid.uuid4().hex[:8]}")
        for st in sc.steps:
            if st.role == "user":
                mem.save_context({"input": st.text}, {"output": "OK."})
            else:  # a tool result or the assistant's conclusion is the agent's output of that turn
                mem.save_context({"input": ""}, {"output": st.text})

    def ask(self, sc: Scenario, k: int) -> list[str]:
        docs = self._mem[sc.id].load_memory_variables({"input": sc.question})["history"]
        return [label(sc, d.page_content) for d in docs][:k]


class LlamaIndexRunner:
    """LlamaIndex ``VectorMemoryBlock`` over ``ChromaVectorStore`` (in-memory chromadb), one node per turn."""

    name = "LlamaIndex VectorMemoryBlock"
    store = "llama_index ChromaVectorStore on chromadb.EphemeralClient (in-memory), cosine"

    def __init__(self, embedder: CachedEmbedder, k: int) -> None:
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

        client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))

        def make(name: str) -> Any:
            col = client.get_or_create_collection(
                name, metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
            return VectorMemoryBlock(
                vector_store=ChromaVectorStore(chroma_collection=col),
                embed_model=_Embedding(model_name=embedder.name),
                similarity_top_k=k,
                retrieval_context_window=1,
                node_postprocessors=[_Capture()],
            )

        self._make = make
        self._blocks: dict[str, Any] = {}
        self._loop = asyncio.new_event_loop()

    def play(self, sc: Scenario) -> None:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        roles = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT, "tool": MessageRole.TOOL}
        block = self._blocks[sc.id] = self._make(f"li-{sc.id}-{uuid.uuid4().hex[:8]}")
        for st in sc.steps:
            self._loop.run_until_complete(block.aput([ChatMessage(role=roles[st.role], content=st.text)]))

    def ask(self, sc: Scenario, k: int) -> list[str]:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        self._captured.clear()
        msg = ChatMessage(role=MessageRole.USER, content=sc.question)
        self._loop.run_until_complete(self._blocks[sc.id].aget(messages=[msg]))
        return [label(sc, c) for c in self._captured][:k]

    def close(self) -> None:
        self._loop.close()


class Mem0Runner:
    """mem0 OSS ``Memory`` with inference off, our embedder via its ``langchain`` provider, local Qdrant."""

    name = "mem0"
    store = "mem0 Memory, infer=False, local in-process Qdrant (path mode), threshold=0"

    def __init__(self, embedder: CachedEmbedder, k: int, tmp: Path) -> None:
        # mem0 reads these at import: keep its files in the temp dir and its telemetry (PostHog) off
        os.environ.setdefault("MEM0_DIR", str(tmp / "mem0home"))
        os.environ["MEM0_TELEMETRY"] = "False"
        from langchain_core.embeddings import Embeddings
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from mem0 import Memory

        class _Embeddings(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return embedder.embed(texts)

            def embed_query(self, text: str) -> list[float]:
                return embedder.embed([text])[0]

        dims = len(embedder.embed(["probe"])[0])
        config = {
            "embedder": {"provider": "langchain", "config": {"model": _Embeddings(), "embedding_dims": dims}},
            # never called with infer=False; a scripted fake so that nothing reaches for an API key
            "llm": {
                "provider": "langchain",
                "config": {"model": GenericFakeChatModel(messages=iter(["{}"] * 10))},
            },
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "stale",
                    "path": str(tmp / "mem0-qdrant"),
                    "embedding_model_dims": dims,
                },
            },
            "history_db_path": str(tmp / "mem0-history.db"),
        }
        self.k = k
        self.m = Memory.from_config(config)

    def play(self, sc: Scenario) -> None:
        for st in sc.steps:
            role = "user" if st.role == "user" else "assistant"
            self.m.add([{"role": role, "content": st.text}], user_id=sc.id, infer=False)

    def ask(self, sc: Scenario, k: int) -> list[str]:
        res = self.m.search(sc.question, filters={"user_id": sc.id}, top_k=k, threshold=0.0)
        return [label(sc, r["memory"]) for r in res["results"]][:k]

    def close(self) -> None:
        client = getattr(getattr(self.m, "vector_store", None), "client", None)
        if client is not None:
            client.close()


# ====================================================================================== scoring


@dataclass
class SystemResult:
    name: str
    status: str = "ok"
    store: str = ""
    seconds: float = 0.0
    top: dict[str, list[str]] = field(
        default_factory=dict
    )  # scenario id -> keys of the top max(KS), rank order

    def shares(self, scenarios: Sequence[Scenario]) -> dict[str, Any]:
        """Stale and current shares per k, overall and per category."""
        out: dict[str, Any] = {"stale_share": {}, "current_share": {}, "by_category": {}}
        cats = sorted({s.category for s in scenarios})
        for k in KS:
            for group, scs in [("all", list(scenarios))] + [
                (c, [s for s in scenarios if s.category == c]) for c in cats
            ]:
                stale = sum(any(x in sc.stale for x in self.top[sc.id][:k]) for sc in scs) / len(scs)
                cur = sum(any(x in sc.current for x in self.top[sc.id][:k]) for sc in scs) / len(scs)
                if group == "all":
                    out["stale_share"][str(k)], out["current_share"][str(k)] = stale, cur
                else:
                    d = out["by_category"].setdefault(
                        group, {"n": len(scs), "stale_share": {}, "current_share": {}}
                    )
                    d["stale_share"][str(k)], d["current_share"][str(k)] = stale, cur
        return out


def run_system(name: str, factory: Callable[[], Any], scenarios: Sequence[Scenario]) -> SystemResult:
    """Build one system, play every scenario into it, ask every question at max(KS); errors become n/a."""
    res = SystemResult(name)
    t0 = time.perf_counter()
    runner = None
    try:
        runner = factory()
        res.store = getattr(runner, "store", "")
        for sc in scenarios:
            runner.play(sc)
            res.top[sc.id] = runner.ask(sc, max(KS))
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


def stale_failures(res: SystemResult, scenarios: Sequence[Scenario], k: int) -> list[dict[str, Any]]:
    """Scenarios whose top k holds a stale memory, with what was served (for a reproduction)."""
    out = []
    for sc in scenarios:
        top = res.top.get(sc.id, [])[:k]
        bad = [x for x in top if x in sc.stale]
        if bad:
            out.append(
                {
                    "scenario": sc.id,
                    "question": sc.question,
                    "served_stale": [sc.text_of(x) for x in bad],
                    "top": top,
                }
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fillers", type=int, default=8, help="unrelated memories mixed into each history")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fake-embedder", action="store_true", help="use FakeEmbedder instead of ONNX MiniLM")
    ap.add_argument(
        "--systems", default="memlineage,langchain,llamaindex,mem0", help="comma-separated subset"
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

    from rich.console import Console
    from rich.table import Table

    console = Console()
    scenarios = generate_scenarios(seed=args.seed, fillers=args.fillers)
    embedder, embedder_desc = load_embedder(fake=args.fake_embedder)
    kmax = max(KS)
    wanted = {s.strip().lower() for s in args.systems.split(",") if s.strip()}
    results: list[SystemResult] = []
    with tempfile.TemporaryDirectory(prefix="bench_stale_") as tmpdir:
        tmp = Path(tmpdir)

        def memlineage() -> MemLineageRunner:
            from memlineage import MemoryManager

            clock = Clock()
            mm = MemoryManager.open(tmp / "memlineage", embedder=embedder, clock=clock)
            runner = MemLineageRunner(mm, clock)
            runner.store = (
                "MemoryManager.open(): SQLite ledger + Chroma PersistentClient (temp dir), hybrid recall"  # type: ignore[attr-defined]
            )
            runner.close = mm.close  # type: ignore[attr-defined]
            return runner

        factories: list[tuple[str, str, Callable[[], Any]]] = [
            ("memlineage", MemLineageRunner.name, memlineage),
            ("langchain", LangChainRunner.name, lambda: LangChainRunner(embedder, kmax)),
            ("llamaindex", LlamaIndexRunner.name, lambda: LlamaIndexRunner(embedder, kmax)),
            ("mem0", Mem0Runner.name, lambda: Mem0Runner(embedder, kmax, tmp)),
        ]
        with console.status("running stale-memory scenarios...") as status:
            for key, name, factory in factories:
                if key in wanted:
                    status.update(f"{name}: {len(scenarios)} scenarios...")
                    results.append(run_system(name, factory, scenarios))

    table = Table(title=f"Stale-memory suite: {len(scenarios)} scenarios, embedder {embedder.name}")
    table.add_column("system")
    for k in KS:
        table.add_column(f"stale@{k}", justify="right")
    for k in KS:
        table.add_column(f"current@{k}", justify="right")
    table.add_column("s", justify="right")
    summary: dict[str, Any] = {}
    for r in results:
        entry: dict[str, Any] = {"status": r.status, "store": r.store, "seconds": round(r.seconds, 2)}
        if r.status == "ok":
            entry.update(r.shares(scenarios))
            entry["stale_served"] = {str(k): stale_failures(r, scenarios, k) for k in KS}
            entry["top"] = r.top
            table.add_row(
                r.name,
                *[f"{entry['stale_share'][str(k)]:.0%}" for k in KS],
                *[f"{entry['current_share'][str(k)]:.0%}" for k in KS],
                f"{r.seconds:.1f}",
            )
        else:
            table.add_row(r.name, *[r.status] + [""] * (2 * len(KS) - 1), f"{r.seconds:.1f}")
        summary[r.name] = entry
    console.print(table)

    cats = sorted({s.category for s in scenarios})
    by_cat = Table(title=f"stale@{kmax} by category")
    by_cat.add_column("system")
    for c in cats:
        by_cat.add_column(f"{c} (n={sum(s.category == c for s in scenarios)})", justify="right")
    for r in results:
        if r.status == "ok":
            bc = summary[r.name]["by_category"]
            by_cat.add_row(r.name, *[f"{bc[c]['stale_share'][str(kmax)]:.0%}" for c in cats])
    console.print(by_cat)

    ml = summary.get(MemLineageRunner.name)
    if ml and ml["status"] == "ok":
        bad = ml["stale_served"][str(kmax)]
        if bad:
            console.print(f"[red]MemLineage served a stale memory in {len(bad)} scenario(s):[/red]")
            for b in bad:
                console.print(f"  {b['scenario']}: {b['question']!r} -> {b['served_stale']}")
        else:
            console.print("[green]MemLineage served no stale memory (goal: 0 %).[/green]")

    payload = {
        "benchmark": "stale",
        "embedder": embedder_desc,
        "scenarios": len(scenarios),
        "fillers_per_scenario": args.fillers,
        "seed": args.seed,
        "ks": list(KS),
        "categories": {c: sum(s.category == c for s in scenarios) for c in cats},
        "languages": {lg: sum(s.lang == lg for s in scenarios) for lg in sorted({s.lang for s in scenarios})},
        "systems": summary,
        "scenario_list": [asdict(s) for s in scenarios],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
