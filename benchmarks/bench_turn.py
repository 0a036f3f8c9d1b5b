"""Memory work per agent turn against a raw Chroma call of the same turn, in one process (issue 26).

One scripted agent turn: the user's message (a real LoCoMo dialogue turn), one tool call (``lookup``, ~200
characters of output) and an answer. Each turn is played

- bare: the same agent without memory (the agent's own cost: prompt, model stub, tool, LangChain's machinery);
- with memory, on ``MemoryManager.open(path)`` defaults (ledger, Chroma, update detection, policies, value model,
  the default ONNX embedder): ``create_agent`` + ``LineageMiddleware`` (+ ``LineageStore``), and classic
  ``AgentExecutor`` + ``LineageMemory`` + ``LineageCaptureCallback``;
- peer: a raw Chroma ``PersistentClient`` collection with the same embedding function: ``add`` of the turn's three
  messages (user, tool result, answer, with user/session metadata) and one ``query`` with the user's message,
  filtered by user, ``n_results=5`` (what a "plain Chroma memory" does per turn).

Memory work per turn = with memory − bare (medians over the measured turns, after warm-up turns that fill the
store). The figure is the ratio of that to the raw Chroma turn (goal ≤ 1.5). Chroma's writes of a scope the exact
plan serves run behind the turn on a background thread, gathered over ``LINGER_S``; the *amortized* figure charges
them back: (the measured turns + the final ``flush_index()`` − the bare turns) / turns, against the raw turn's mean.
The load average is printed with it.

Run: ``.venv/bin/python benchmarks/bench_turn.py [--turns 150] [--warmup 50] [--surfaces middleware,executor]``.
Writes ``benchmarks/results/bench_turn.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
DATA = HERE.parent.parent / "shared" / "data" / "locomo"
RESULTS = HERE / "results"
TOOL_OUTPUT = (
    "Found 3 notes: the museum opens at 9:00 and closes at 17:30; tickets cost 14 EUR (students 9 EUR); the "
    "nearest tram stop is Central Square, lines 2 and 5."
)


def user_turns(n: int) -> list[str]:
    """``n`` real user messages: LoCoMo dialogue turns, in order, long enough to say something."""
    out: list[str] = []
    for path in sorted(DATA.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for conv in data if isinstance(data, list) else [data]:
            c = conv.get("conversation", conv)
            for key in sorted(k for k in c if k.startswith("session_") and isinstance(c[k], list)):
                for turn in c[key]:
                    text = str(turn.get("text", "")).strip()
                    if len(text.split()) >= 6:
                        out.append(text)
                        if len(out) == n:
                            return out
    if not out:
        msg = f"no LoCoMo turns under {DATA}"
        raise SystemExit(msg)
    while len(out) < n:  # a short copy of the data: go round again, with a counter so no text repeats
        out.append(f"{out[len(out) % max(1, len(out))]} ({len(out)})")
    return out


def _model_class() -> type:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class TurnModel(BaseChatModel):
        """Calls ``lookup`` once per user message, then answers from its result."""

        @property
        def _llm_type(self) -> str:
            return "bench-turn"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            last_human = max((i for i, m in enumerate(messages) if m.type == "human"), default=-1)
            done = any(isinstance(m, ToolMessage) for m in messages[last_human + 1 :])
            if done:
                message = AIMessage(content="From your notes: the museum opens at 9:00 and tickets cost 14 EUR.")
            else:
                text = str(messages[last_human].content) if last_human >= 0 else ""
                call = {"name": "lookup", "args": {"query": text[:60]}, "id": f"c{time.perf_counter_ns()}"}
                message = AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
            return ChatResult(generations=[ChatGeneration(message=message)])

    return TurnModel


def _tool() -> Any:
    from langchain_core.tools import StructuredTool

    def lookup(query: str) -> str:
        """Look something up in the user's notes."""
        return TOOL_OUTPUT

    return StructuredTool.from_function(lookup)


def middleware_turns(mm: Any, scope: Any) -> Callable[[str], None]:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from memlineage_langchain import LineageMiddleware, LineageStore

    model = _model_class()()
    agent = create_agent(
        model, [_tool()], middleware=[LineageMiddleware(mm, scope=scope)], store=LineageStore(mm)
    ) if mm is not None else create_agent(model, [_tool()])  # fmt: skip

    def turn(text: str) -> None:
        agent.invoke({"messages": [HumanMessage(text)]})

    return turn


def executor_turns(mm: Any, scope: Any) -> Callable[[str], None]:
    from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

    from memlineage_langchain import LineageCaptureCallback, LineageMemory

    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You are a helpful assistant."),
            MessagesPlaceholder("chat_history", optional=True),
            ("human", "{input}"),
            MessagesPlaceholder("agent_scratchpad"),
        ]
    )
    tools = [_tool()]
    agent = create_tool_calling_agent(_model_class()(), tools, prompt)
    if mm is None:
        executor = AgentExecutor(agent=agent, tools=tools)
        return lambda text: executor.invoke({"input": text})
    memory = LineageMemory(manager=mm, scope=scope, memory_key="chat_history", return_messages=True)
    capture = LineageCaptureCallback(mm, scope=scope)
    executor = AgentExecutor(agent=agent, tools=tools, memory=memory)
    return lambda text: executor.invoke({"input": text}, config={"callbacks": [capture]})


SURFACES: dict[str, Callable[[Any, Any], Callable[[str], None]]] = {
    "middleware": middleware_turns,
    "executor": executor_turns,
}


def _timed(run: Callable[[str], None], texts: Sequence[str]) -> list[float]:
    out = []
    for text in texts:
        t0 = time.perf_counter()
        run(text)
        out.append(time.perf_counter() - t0)
    return out


def chroma_turns(path: Path, embedder: Any, warm: Sequence[str], texts: Sequence[str]) -> list[float]:
    """The raw Chroma turn: add the turn's three messages, query once with the user's message."""
    import chromadb
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.config import Settings

    class Same(EmbeddingFunction[Documents]):
        def __init__(self) -> None:
            pass

        def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - chromadb's protocol
            return [list(map(float, v)) for v in embedder.embed(list(input))]

        @staticmethod
        def name() -> str:
            return "bench-same"

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    col = client.get_or_create_collection("turns", embedding_function=Same(), metadata={"hnsw:space": "cosine"})
    n = [0]

    def turn(text: str) -> None:
        docs = [text, f"lookup(query={text[:60]!r}) -> {TOOL_OUTPUT}", "From your notes: the museum opens at 9:00."]
        ids = [f"m{n[0] + i}" for i in range(3)]
        n[0] += 3
        meta = {"user_id": "alice", "session_id": "s1"}
        col.add(ids=ids, documents=docs, metadatas=[dict(meta, role=r) for r in ("user", "tool", "agent")])
        col.query(query_texts=[text], n_results=5, where={"user_id": "alice"})

    _timed(turn, warm)
    return _timed(turn, texts)


def measure(surface: str, warm: Sequence[str], texts: Sequence[str]) -> dict[str, Any]:
    from memlineage import MemoryManager, Scope

    scope = Scope(user_id="alice", session_id="s1")
    bare = SURFACES[surface](None, scope)
    _timed(bare, warm[:10])
    bare_s = _timed(bare, texts)
    with tempfile.TemporaryDirectory(prefix="memlineage-turn-") as tmp:
        mm = MemoryManager.open(Path(tmp) / "ml")
        try:
            run = SURFACES[surface](mm, scope)
            _timed(run, warm)
            mem_s = _timed(run, texts)
            t0 = time.perf_counter()
            mm.flush_index()  # the Chroma writes still queued behind the last turns: counted in the amortized figure
            flush_s = time.perf_counter() - t0
            embedder = mm.services.embedding.embedder
            chroma_s = chroma_turns(Path(tmp) / "raw", embedder, warm, texts)
        finally:
            mm.close()
    bare_ms, mem_ms, chroma_ms = (statistics.median(x) * 1000 for x in (bare_s, mem_s, chroma_s))
    work = mem_ms - bare_ms
    # every turn's cost with the background index writes included: total time of the measured turns plus the
    # final flush, per turn (means, not medians: a turn that waits for a batch of Chroma writes counts in full)
    amortized = (sum(mem_s) + flush_s - sum(bare_s)) / len(texts) * 1000
    chroma_mean = statistics.mean(chroma_s) * 1000
    return {
        "surface": surface,
        "turns": len(texts),
        "bare_ms": round(bare_ms, 2),
        "with_memory_ms": round(mem_ms, 2),
        "with_memory_p95_ms": round(sorted(mem_s)[int(0.95 * (len(mem_s) - 1))] * 1000, 2),
        "memory_work_ms": round(work, 2),
        "raw_chroma_turn_ms": round(chroma_ms, 2),
        "ratio": round(work / chroma_ms, 2),
        "final_flush_ms": round(flush_s * 1000, 2),
        "amortized_work_ms": round(amortized, 2),
        "raw_chroma_turn_mean_ms": round(chroma_mean, 2),
        "amortized_ratio": round(amortized / chroma_mean, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--surfaces", default=",".join(SURFACES))
    ap.add_argument("--json", type=Path, default=RESULTS / "bench_turn.json")
    args = ap.parse_args(argv)
    texts = user_turns(args.warmup + args.turns)
    warm, measured = texts[: args.warmup], texts[args.warmup :]
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    rows = [measure(s, warm, measured) for s in args.surfaces.split(",") if s]
    load = os.getloadavg()
    print(f"memory work per agent turn ({args.turns} turns after {args.warmup} warm-up; load average {load[0]:.2f})")
    print(
        f"{'surface':12} {'bare':>8} {'memory':>8} {'p95':>8} {'work':>8} {'chroma':>8} {'ratio':>6}"
        f" {'amortized':>10} {'chroma mean':>12} {'ratio':>6}"
    )
    for r in rows:
        print(
            f"{r['surface']:12} {r['bare_ms']:>8.1f} {r['with_memory_ms']:>8.1f} {r['with_memory_p95_ms']:>8.1f} "
            f"{r['memory_work_ms']:>8.1f} {r['raw_chroma_turn_ms']:>8.1f} {r['ratio']:>6.2f}"
            f" {r['amortized_work_ms']:>10.1f} {r['raw_chroma_turn_mean_ms']:>12.1f} {r['amortized_ratio']:>6.2f}"
        )
    print("ms per turn (medians); work = memory - bare; ratio = work / raw Chroma turn (add + one query; goal <= 1.5)")
    print("amortized = (all measured turns + the final flush of queued Chroma writes - bare turns) / turns, means")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"load_average": load, "rows": rows}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
