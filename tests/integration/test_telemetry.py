"""OpenTelemetry end to end: a store opened with defaults (ledger, Chroma, MiniLM) used by LangChain and LlamaIndex.

The adapters' hooks each get a span, the store's own spans nest under them, and no span carries a raw scope id or
any text the agents said.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from memlineage import MemoryManager, Scope, telemetry
from memlineage.index import OnnxMiniLMEmbedder, default_model_dir

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("langchain.agents")
pytest.importorskip("llama_index.core")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from memlineage_langchain import LineageCaptureCallback, LineageMiddleware  # noqa: E402
from memlineage_llamaindex import lineage_memory  # noqa: E402

MODEL_DIR = default_model_dir()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (Path(MODEL_DIR) / "model.onnx").is_file(),
        reason=f"all-MiniLM-L6-v2 ONNX files not found in {MODEL_DIR}; set MEMLINEAGE_EMBEDDING_MODEL_DIR",
    ),
]

ALICE = Scope(user_id="alice.martin@example.com", session_id="lc-session-7")
BOB = Scope(user_id="bob.stone@example.com", session_id="cb-session-3")
CAROL = Scope(user_id="carol.white@example.com", session_id="li-session-5")
SAID = [
    "I live in Paris and I fly to Oslo on Friday.",
    "Actually, I live in Lyon now.",
    "Weather in Oslo?",
    "Sunny in Oslo",
    "It is sunny in Oslo.",
    "My passport expires in 2031.",
    "When does my passport expire?",
]


class ScriptedChatModel(FakeMessagesListChatModel):
    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"Sunny in {city}"


def weather_agent(**kwargs: Any) -> Any:
    call = {"name": "get_weather", "args": {"city": "Oslo"}, "id": "call_oslo", "type": "tool_call"}
    model = ScriptedChatModel(responses=[AIMessage(content="", tool_calls=[call]), AIMessage("It is sunny in Oslo.")])
    return create_agent(model, [get_weather], **kwargs)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    saved = telemetry._state, telemetry._salt
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield spans
    telemetry._state, telemetry._salt = saved
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture
def mm(tmp_path: Path) -> Iterator[MemoryManager]:
    manager = MemoryManager.open(tmp_path / "store", embedder=OnnxMiniLMEmbedder())
    yield manager
    manager.close()


def values(span: ReadableSpan) -> list[str]:
    out = [span.name, span.status.description or ""]
    for k, v in [
        *(span.attributes or {}).items(),
        *((k, v) for e in span.events for k, v in (e.attributes or {}).items()),
    ]:
        out += [k, *(str(x) for x in (v if isinstance(v, tuple) else (v,)))]
    return out


async def test_agents_on_a_default_store_are_traced_with_hashed_scopes(
    exporter: InMemorySpanExporter, mm: MemoryManager
) -> None:
    mm.remember(SAID[0], scope=ALICE)
    mm.remember(SAID[1], scope=ALICE)
    agent = weather_agent(middleware=[LineageMiddleware(mm, scope=ALICE)])
    agent.invoke({"messages": [HumanMessage(SAID[2])]})
    handler = LineageCaptureCallback(mm, scope=BOB)
    weather_agent().invoke({"messages": [HumanMessage(SAID[2])]}, config={"callbacks": [handler]})
    memory = lineage_memory(mm, user_id=CAROL.user_id, session_id=CAROL.session_id)
    try:
        await memory.aput(ChatMessage(role="user", content=SAID[5]))
        await memory.aget(input=SAID[6])
    finally:
        await memory.aclose()

    spans = list(exporter.get_finished_spans())
    by_id = {s.context.span_id: s for s in spans}
    names = {s.name for s in spans}
    assert {
        "memlineage.hook LineageMiddleware.before_agent",
        "memlineage.hook LineageMiddleware.wrap_model_call",
        "memlineage.hook LineageMiddleware.wrap_tool_call",
        "memlineage.hook LineageMiddleware.after_agent",
        "memlineage.hook LineageCaptureCallback.on_chain_start",
        "memlineage.hook LineageCaptureCallback.on_tool_end",
        "memlineage.hook LineageMemory.aput",
        "memlineage.hook LineageMemoryBlock.aput",
        "memlineage.hook LineageMemory.aget",
        "memlineage.hook LineageMemoryBlock.aget",
    } <= names
    assert {"memlineage.remember", "memlineage.update_detection", "memlineage.cascade", "memlineage.recall"} <= names

    def hook_of(span: ReadableSpan) -> str | None:
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            if span.name.startswith("memlineage.hook "):
                return span.name
        return None

    recalls = [s for s in spans if s.name == "memlineage.recall"]
    assert "memlineage.hook LineageMiddleware.before_agent" in {hook_of(s) for s in recalls}
    assert all((s.attributes or {}).get("memlineage.recall.plan") in ("exact", "ann") for s in recalls)
    writes = {hook_of(s) for s in spans if s.name == "memlineage.remember"}
    assert {None, "memlineage.hook LineageMemoryBlock.aput"} <= writes  # direct calls have no hook
    assert "memlineage.hook LineageMiddleware.after_agent" in writes or any(
        w and w.startswith("memlineage.hook LineageCaptureCallback") for w in writes
    )

    hashes = {(s.attributes or {}).get("memlineage.user.hash") for s in spans} - {None}
    assert hashes == {telemetry.hash_id(s.user_id) for s in (ALICE, BOB, CAROL)}
    texts = [v for s in spans for v in values(s)]
    for raw in [*(x for s in (ALICE, BOB, CAROL) for x in (s.user_id, s.session_id)), *SAID, "Oslo", "Lyon"]:
        assert not any(raw in t for t in texts), raw
