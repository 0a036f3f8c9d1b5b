"""Evidence retrieval on LoCoMo dev conversations: BM25, dense, LangChain, LlamaIndex and MemLineage.

Each dialogue turn is one episodic memory ("[session date] speaker: text", plus the image caption if any; the
session date is the event time) in one scope per conversation. For every question with evidence we retrieve
the
top 20 turns and score evidence recall@k (share of evidence turns found) and hit@k (any found) for k = 5, 10,
20,
per category and over categories 1-4. Every system sees the same MiniLM vectors (cached under
benchmarks/results/).

Run:
    MEMLINEAGE_EMBEDDING_MODEL_DIR=/work/shared/models/all-MiniLM-L6-v2/onnx \
        .venv/bin/python benchmarks/bench_locomo.py [--systems bm25,dense,...] [--limit-convs N]

Writes benchmarks/results/locomo.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

#: The LoCoMo dev file: $LOCOMO_PATH, or ../shared/data/locomo/locomo_dev7.json beside the repository.
DATA = Path(
    os.environ.get("LOCOMO_PATH")
    or Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev7.json"
)
RESULTS = Path(__file__).parent / "results"
KS = (5, 10, 20)
CATS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


# ----------------------------------------------------------------------------------------------------- data


@dataclass
class Turn:
    dia_id: str
    session: int
    when: datetime
    date_text: str
    speaker: str
    text: str

    @property
    def doc(self) -> str:
        return f"[{self.date_text}] {self.speaker}: {self.text}"


@dataclass
class Question:
    conv: str
    text: str
    category: int
    evidence: list[str]


def parse_date(s: str) -> datetime:
    return datetime.strptime(s.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def clean_evidence(raw: Sequence[str], known: set[str]) -> list[str]:
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;\s]+", str(item)):
            part = part.strip()
            m = re.fullmatch(r"D:?(\d+):0*(\d+)", part)
            if not m:
                continue
            did = f"D{int(m.group(1))}:{int(m.group(2))}"
            if did in known and did not in out:
                out.append(did)
    return out


def load(limit: int | None = None) -> tuple[dict[str, list[Turn]], list[Question]]:
    samples = json.loads(DATA.read_text())[:limit]
    convs: dict[str, list[Turn]] = {}
    questions: list[Question] = []
    for s in samples:
        c = s["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in c:
            date_text = c[f"session_{n}_date_time"]
            when = parse_date(date_text)
            for t in c[f"session_{n}"]:
                text = t["text"]
                if t.get("blip_caption"):
                    text += f" [image: {t['blip_caption']}]"
                turns.append(Turn(t["dia_id"], n, when, date_text.split(" on ")[-1], t["speaker"], text))
            n += 1
        convs[s["sample_id"]] = turns
        known = {t.dia_id for t in turns}
        for q in s["qa"]:
            ev = clean_evidence(q.get("evidence") or [], known)
            if ev:
                questions.append(Question(s["sample_id"], q["question"], int(q["category"]), ev))
    return convs, questions


# ----------------------------------------------------------------------------------------------- embeddings


class CachedVectors:
    """MiniLM vectors for every text the benchmark needs, cached in one .npz keyed by the text set."""

    def __init__(self, texts: Sequence[str]) -> None:
        from memlineage.index import OnnxMiniLMEmbedder

        uniq = sorted(set(texts))
        key = hashlib.sha256("\n".join(uniq).encode()).hexdigest()[:16]
        path = RESULTS / f"locomo_minilm_{key}.npz"
        t0 = time.perf_counter()
        if path.exists():
            arr = np.load(path)["vectors"]
            self.source = f"cache {path.name}"
        else:
            emb = OnnxMiniLMEmbedder(download=False)
            arr = emb.embed_array(uniq)
            RESULTS.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(path, vectors=arr)
            self.source = f"embedded {len(uniq)} texts"
        self.seconds = time.perf_counter() - t0
        self.index = {t: i for i, t in enumerate(uniq)}
        self.vectors = arr.astype(np.float32)
        self._extra: dict[str, np.ndarray] = {}
        self._model: Any = None

    def get(self, text: str) -> np.ndarray:
        """The cached vector; a text the benchmark did not list (MemLineage writes new ones, e.g. the clauses a
        correction leaves untouched) is embedded by the same model and cached for this run."""
        i = self.index.get(text)
        if i is not None:
            return self.vectors[i]
        extra = self._extra.get(text)
        if extra is None:
            if self._model is None:
                from memlineage.index import OnnxMiniLMEmbedder

                self._model = OnnxMiniLMEmbedder(download=False)
            extra = self._extra[text] = self._model.embed_array([text])[0].astype(np.float32)
        return extra

    def many(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.get(t).tolist() for t in texts]


class VectorLookupEmbedder:
    """A MemLineage ``Embedder`` that serves the cached MiniLM vectors (same vectors for every system)."""

    name = "onnx-all-MiniLM-L6-v2"
    dims = 384

    def __init__(self, vecs: CachedVectors) -> None:
        self.vecs = vecs

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.vecs.many(texts)


# -------------------------------------------------------------------------------------------------- systems

Retriever = Callable[[Question], list[str]]


def chroma_client() -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.EphemeralClient(Settings(anonymized_telemetry=False, allow_reset=True))


def system_bm25(convs: dict[str, list[Turn]], vecs: CachedVectors) -> Retriever:
    """bm25s with its own tokenizer, English stopwords and Snowball stemming (the reference set-up)."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    models = {}
    for cid, turns in convs.items():
        m = bm25s.BM25()
        m.index(
            bm25s.tokenize([t.doc for t in turns], stopwords="en", stemmer=stemmer, show_progress=False),
            show_progress=False,
        )
        models[cid] = (m, turns)

    def run(q: Question) -> list[str]:
        m, turns = models[q.conv]
        toks = bm25s.tokenize([q.text], stopwords="en", stemmer=stemmer, show_progress=False)
        docs, _ = m.retrieve(toks, k=min(20, len(turns)), show_progress=False)
        return [turns[i].dia_id for i in docs[0]]

    return run


def _fill_chroma(client: Any, convs: dict[str, list[Turn]], vecs: CachedVectors) -> None:
    for cid, turns in convs.items():
        col = client.get_or_create_collection(cid, metadata={"hnsw:space": "cosine"}, embedding_function=None)
        if col.count():
            continue
        col.add(
            ids=[t.dia_id for t in turns],
            embeddings=vecs.many([t.doc for t in turns]),
            documents=[t.doc for t in turns],
            metadatas=[{"dia_id": t.dia_id} for t in turns],
        )


def system_dense(convs: dict[str, list[Turn]], vecs: CachedVectors, client: Any) -> Retriever:
    """Raw Chroma query with the question vector."""
    _fill_chroma(client, convs, vecs)

    def run(q: Question) -> list[str]:
        col = client.get_collection(q.conv)
        res = col.query(query_embeddings=[vecs.get(q.text).tolist()], n_results=20)
        return list(res["ids"][0])

    return run


def system_langchain(convs: dict[str, list[Turn]], vecs: CachedVectors, client: Any) -> Retriever:
    """LangChain classic VectorStoreRetrieverMemory over the same Chroma collections (langchain-chroma)."""
    from langchain_chroma import Chroma
    from langchain_classic.memory import VectorStoreRetrieverMemory
    from langchain_core.embeddings import Embeddings

    class LookupEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return vecs.many(texts)

        def embed_query(self, text: str) -> list[float]:
            return vecs.get(text).tolist()

    _fill_chroma(client, convs, vecs)
    memories = {
        cid: VectorStoreRetrieverMemory(
            retriever=Chroma(client=client, collection_name=cid, embedding_function=LookupEmbeddings()).as_retriever(
                search_kwargs={"k": 20}
            ),
            return_docs=True,
            input_key="input",
        )
        for cid in convs
    }

    def run(q: Question) -> list[str]:
        docs = memories[q.conv].load_memory_variables({"input": q.text})["history"]
        return [d.metadata["dia_id"] for d in docs]

    return run


def system_llamaindex(convs: dict[str, list[Turn]], vecs: CachedVectors, client: Any) -> Retriever:
    """LlamaIndex VectorMemoryBlock (one node per put turn) on ChromaVectorStore, same vectors, offline."""
    from llama_index.core.base.llms.types import ChatMessage as LIMessage
    from llama_index.core.base.llms.types import MessageRole
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.memory import VectorMemoryBlock
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.vector_stores.chroma import ChromaVectorStore

    wrapper = re.compile(r"^<message role='\w+'>(.*)</message>$", re.S)

    def lookup(text: str) -> list[float]:
        m = wrapper.match(text)
        return vecs.get(m.group(1) if m else text).tolist()

    class LookupEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return lookup(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return lookup(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return lookup(text)

    captured: list[str] = []

    class Capture(BaseNodePostprocessor):
        def _postprocess_nodes(self, nodes: list[Any], query_bundle: Any = None) -> list[Any]:
            captured[:] = [n.node.metadata.get("session_id") for n in nodes]
            return nodes

    blocks = {}
    loop = asyncio.new_event_loop()
    for cid, turns in convs.items():
        col = client.get_or_create_collection(f"li-{cid}", metadata={"hnsw:space": "cosine"}, embedding_function=None)
        block = VectorMemoryBlock(
            vector_store=ChromaVectorStore(chroma_collection=col),
            embed_model=LookupEmbedding(model_name="minilm-lookup"),
            similarity_top_k=20,
            retrieval_context_window=1,
            node_postprocessors=[Capture()],
        )
        if not col.count():
            for t in turns:
                msg = LIMessage(role=MessageRole.USER, content=t.doc, additional_kwargs={"session_id": t.dia_id})
                loop.run_until_complete(block._aput([msg]))
        blocks[cid] = block

    def run(q: Question) -> list[str]:
        captured.clear()
        loop.run_until_complete(blocks[q.conv]._aget([LIMessage(role=MessageRole.USER, content=q.text)]))
        return list(captured)

    return run


def system_memlineage(
    convs: dict[str, list[Turn]], vecs: CachedVectors, config: Any = None, *, defaults: bool = True
) -> Retriever:
    """MemLineage hybrid recall through the public MemoryManager API.

    ``defaults=True`` is what ``MemoryManager.open()`` gives a user (built-in policies, value model, update
    detection) and each turn is a plain ``remember`` (no kind, no force); ``defaults=False`` is the bare core
    (no value model, no policies, update detection still on), every turn forced into episodic memory.
    """
    from memlineage import MemoryManager, Scope
    from memlineage.index import InMemoryIndex
    from memlineage.ledger import Ledger

    kwargs: dict[str, Any] = {"retrieval": config} if config is not None else {}
    if defaults:
        kwargs |= MemoryManager.default_options()
    # in-memory ledger and index: nothing is written to disk, every run starts empty
    mm = MemoryManager(ledger=Ledger("sqlite://"), index=InMemoryIndex(), embedder=VectorLookupEmbedder(vecs), **kwargs)
    id_map: dict[str, str] = {}
    extra: dict[str, Any] = {} if defaults else {"kind": "episodic", "force": True}
    for cid, turns in convs.items():
        for t in turns:
            scope = Scope(user_id=cid, session_id=f"session_{t.session}")
            mem = mm.remember(
                t.doc, scope=scope, source="user", valid_from=t.when, metadata={"dia_id": t.dia_id}, **extra
            )
            id_map[mem.id] = t.dia_id

    def run(q: Question) -> list[str]:
        res = mm.recall(q.text, scope=Scope(user_id=q.conv), k=20)
        return [id_map.get(h.memory.id, "?") for h in res]

    return run


# --------------------------------------------------------------------------------------------------- scoring


def score(questions: Sequence[Question], ranked: Sequence[list[str]]) -> dict[str, Any]:
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for q, ids in zip(questions, ranked, strict=False):
        ev = set(q.evidence)
        groups = [str(q.category)] + (["1-4"] if q.category <= 4 else [])
        for k in KS:
            found = len(ev & set(ids[:k]))
            for g in groups:
                per[g][f"R@{k}"].append(found / len(ev))
                per[g][f"H@{k}"].append(float(found > 0))
    return {
        g: {m: round(100 * float(np.mean(v)), 1) for m, v in ms.items()} | {"n": len(ms["R@5"])}
        for g, ms in per.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--systems", default="bm25,dense,langchain,llamaindex,memlineage,memlineage-core")
    ap.add_argument("--limit-convs", type=int, default=None)
    ap.add_argument("--out", default=str(RESULTS / "locomo.json"))
    args = ap.parse_args()
    os.environ.setdefault("MEMLINEAGE_EMBEDDING_MODEL_DIR", "/work/shared/models/all-MiniLM-L6-v2/onnx")
    convs, questions = load(args.limit_convs)
    texts = [t.doc for ts in convs.values() for t in ts] + [q.text for q in questions]
    vecs = CachedVectors(texts)
    print(
        f"{len(convs)} conversations, {sum(map(len, convs.values()))} turns, {len(questions)} questions "
        f"({sum(q.category <= 4 for q in questions)} in categories 1-4); vectors: {vecs.source} "
        f"in {vecs.seconds:.1f} s",
        flush=True,
    )
    client = None
    results: dict[str, Any] = {}
    for name in args.systems.split(","):
        t0 = time.perf_counter()
        try:
            if name in ("dense", "langchain", "llamaindex") and client is None:
                client = chroma_client()
            if name == "bm25":
                run = system_bm25(convs, vecs)
            elif name == "dense":
                run = system_dense(convs, vecs, client)
            elif name == "langchain":
                run = system_langchain(convs, vecs, client)
            elif name == "llamaindex":
                run = system_llamaindex(convs, vecs, client)
            elif name == "memlineage":
                run = system_memlineage(convs, vecs)
            elif name == "memlineage-core":
                run = system_memlineage(convs, vecs, defaults=False)
            else:
                raise ValueError(f"unknown system {name}")
            t1 = time.perf_counter()
            ranked = [run(q) for q in questions]
            t2 = time.perf_counter()
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot run is reported, not fatal
            print(f"{name}: FAILED ({type(exc).__name__}: {exc})", flush=True)
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        results[name] = score(questions, ranked) | {
            "index_s": round(t1 - t0, 2),
            "query_ms": round(1000 * (t2 - t1) / max(1, len(questions)), 2),
        }
        r = results[name]["1-4"]
        print(
            f"{name:11} R@5 {r['R@5']:5.1f}  R@10 {r['R@10']:5.1f}  R@20 {r['R@20']:5.1f}  "
            f"(index {t1 - t0:.1f} s, {results[name]['query_ms']} ms/query)",
            flush=True,
        )
    print()
    header = f"{'system':11} | {'cat':11} | {'n':>4} | " + " | ".join(
        f"{m:>5}" for m in ("R@5", "R@10", "R@20", "H@5", "H@10", "H@20")
    )
    print(header)
    print("-" * len(header))
    for name, res in results.items():
        if "error" in res:
            print(f"{name:11} | error: {res['error']}")
            continue
        for g in ["1-4", "1", "2", "3", "4", "5"]:
            if g not in res:
                continue
            label = "1-4 overall" if g == "1-4" else f"{g} {CATS[int(g)]}"
            print(
                f"{name:11} | {label:11} | {res[g]['n']:4d} | "
                + " | ".join(f"{res[g][m]:5.1f}" for m in ("R@5", "R@10", "R@20", "H@5", "H@10", "H@20"))
            )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"data": str(DATA), "questions": len(questions), "results": results}, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    sys.exit(main())
