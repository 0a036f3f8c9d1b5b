"""The ``memlineage demo`` story: a LangChain ``AgentExecutor`` travel agent whose memory has lineage.

Runs offline with a scripted chat model; set ``MEMLINEAGE_DEMO_MODEL`` (or ``memlineage demo --model``) to any
``init_chat_model`` spec such as ``"openai:gpt-4o-mini"`` to drive it with a real model instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from langchain.chat_models import init_chat_model
from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import tool
from memlineage.capture import tool_result_text
from memlineage.errors import ConfigurationError, InvalidInputError, MissingDependencyError
from memlineage.manager import MemoryManager
from memlineage.models import Memory, Scope, Status, short_id
from memlineage.policy import PolicyEngine, builtin_policies
from memlineage.render import explanation_tree
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from memlineage_langchain._callback import LineageCaptureCallback
from memlineage_langchain._memory import LineageMemory

__all__ = ["TravelWorld", "run_agent_demo"]

warnings.filterwarnings("ignore", category=DeprecationWarning, module="langchain_classic.*")

# The story spans about 2.5 simulated hours; the world's clock starts this long before the real time, so the story
# ends just before "now" and the store it leaves reads the same afterwards (no TTL or freshness limit passes merely
# because the simulated clock ran behind the real one).
STORY_SPAN = timedelta(hours=3)
BASE_FARES = {"paris": 120, "lyon": 85, "rome": 140}
HOTELS = {
    "paris": [("Hotel Lumière", 95), ("Le Petit Louvre", 140)],
    "lyon": [("Hôtel des Canuts", 78), ("Presqu'île Suites", 120)],
    "rome": [("Albergo Roma", 110)],
}


class TravelWorld:
    """A local, deterministic world: a simulated clock and fares that rise 7 EUR per simulated hour."""

    def __init__(self, start: datetime | None = None) -> None:
        """Start the simulated clock at ``start`` (timezone-aware); default ``STORY_SPAN`` before the real time.

        Raises:
            InvalidInputError: ``start`` is naive.
        """
        if start is None:
            start = datetime.now(timezone.utc).replace(second=0, microsecond=0) - STORY_SPAN
        elif start.tzinfo is None:
            raise InvalidInputError("TravelWorld(start=...) needs a timezone-aware datetime")
        self.start = start
        self.now = start
        self.lookups = 0

    def clock(self) -> datetime:
        """The simulated time (timezone-aware UTC)."""
        return self.now

    def advance(self, hours: float) -> None:
        """Move the simulated time forward."""
        self.now += timedelta(hours=hours)

    def fare(self, city: str, date: str) -> str:
        """The current fare, in EUR, from the local fare table."""
        self.lookups += 1
        base = BASE_FARES.get(city.strip().lower())
        if base is None:
            return f"No flights to {city} on {date}."
        hours = (self.now - self.start).total_seconds() / 3600
        price = base + round(7 * hours)
        return f"Flight to {city.title()} on {date}: {price} EUR (aisle seats available), quoted {self.now:%H:%M} UTC"

    def hotels(self, city: str) -> str:
        """Hotels from the local table."""
        found = HOTELS.get(city.strip().lower(), [])
        if not found:
            return f"No hotels found in {city}."
        return f"Hotels in {city.title()}: " + "; ".join(f"{n} {p} EUR/night" for n, p in found)


def make_tools(world: TravelWorld) -> list[Any]:
    """The two real tools of the story, bound to ``world``."""

    @tool
    def get_flight_price(city: str, date: str) -> str:
        """Look up the current flight price to a city on a date (YYYY-MM-DD)."""
        return world.fare(city, date)

    @tool
    def search_hotels(city: str) -> str:
        """Search hotels in a city."""
        return world.hotels(city)

    return [get_flight_price, search_hotels]


class ScriptedTravelModel(BaseChatModel):
    """An offline stand-in for a tool-calling chat model, reacting to what it is given.

    A planning request ("find ... flight ... hotel") gets parallel tool calls for the city it finds in the
    request or in the recalled memories; tool results get a recommendation built from them; anything else gets
    an acknowledgement.
    """

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-travel-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedTravelModel:  # type: ignore[override]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
        results = [m for m in messages[last_human + 1 :] if isinstance(m, ToolMessage)]  # this turn's tool results
        if results:
            flight = next((str(m.content) for m in results if "Flight" in str(m.content)), "")
            hotels = next((str(m.content) for m in results if "Hotels" in str(m.content)), "")
            first_hotel = hotels.split(": ", 1)[-1].split(";")[0] if hotels else "a central hotel"
            return AIMessage(content=f"Recommendation: {flight.split(' (')[0]}; stay at {first_hotel}.")
        human = [m for m in messages if isinstance(m, HumanMessage)]
        request = str(human[-1].content) if human else ""
        if "find" in request.lower():
            context = " ".join(str(m.content) for m in messages[:-1]) + " " + request
            city = _city_in(request) or _city_in(context) or "Paris"
            tag = f"{city.lower()}_{self.calls}"
            flight_args = {"city": city, "date": "2026-05-03"}
            return AIMessage(
                content="",
                tool_calls=[
                    {"name": "get_flight_price", "args": flight_args, "id": f"call_flight_{tag}", "type": "tool_call"},
                    {"name": "search_hotels", "args": {"city": city}, "id": f"call_hotels_{tag}", "type": "tool_call"},
                ],
            )
        return AIMessage(content="Noted. I'll remember that.")


def _city_in(text: str) -> str | None:
    lowered = text.lower()
    hits = [(lowered.rfind(c), c) for c in BASE_FARES if c in lowered]
    return max(hits)[1].title() if hits else None


def chat_model(spec: str | None) -> BaseChatModel:
    """The scripted model, or any ``init_chat_model`` spec (e.g. ``"openai:gpt-4o-mini"``).

    Raises:
        MissingDependencyError: The provider's integration package is not installed (the message names it).
        ConfigurationError: ``init_chat_model`` refuses the spec (unknown provider, missing API key, ...).
    """
    if not spec:
        return ScriptedTravelModel()
    try:
        return init_chat_model(spec)
    except ImportError as exc:
        msg = f"--model {spec!r} needs its LangChain integration package: {exc}"
        raise MissingDependencyError(msg) from exc
    except (ValueError, TypeError) as exc:
        msg = f"--model {spec!r} is not a model init_chat_model can build: {exc}"
        raise ConfigurationError(msg) from exc
    except Exception as exc:  # a provider's client refusing its settings (e.g. no API key) raises its own types
        msg = f"--model {spec!r} could not be built: {type(exc).__name__}: {exc}"
        raise ConfigurationError(msg) from exc


PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "You are a travel agent. Use the tools for prices and hotels. Memories from earlier turns:"),
        MessagesPlaceholder("chat_history", optional=True),
        ("human", "{input}"),
        MessagesPlaceholder("agent_scratchpad"),
    ]
)


def run_agent_demo(path: Path | None, console: Console, model: str | None = None) -> dict[str, Any]:
    """Run the story and print it; returns a summary (used by tests).

    Args:
        path: Store directory; default a new temporary directory that is kept (its path is printed).
        console: Where to print.
        model: ``init_chat_model`` spec; default ``$MEMLINEAGE_DEMO_MODEL`` or the scripted model.
    """
    llm = chat_model(model or os.environ.get("MEMLINEAGE_DEMO_MODEL"))  # before the store: a bad spec leaves nothing
    store = Path(path) if path else Path(tempfile.mkdtemp(prefix="memlineage-demo-"))
    world = TravelWorld()
    tools = make_tools(world)
    alice = Scope(user_id="alice", session_id="trip-planning")
    console.print(Panel.fit("MemLineage demo: a LangChain AgentExecutor travel agent with lineage", style="bold cyan"))
    with console.status("Opening the embedded store (SQLite ledger + Chroma) and loading the embedding model..."):
        engine = PolicyEngine(
            builtin_policies(freshness_by_tag={"flight_price": timedelta(hours=1)}), clock=world.clock
        )
        mm = MemoryManager.open(store, clock=world.clock, policy=engine)
        mm.recall("warm-up", scope=Scope(user_id="demo-warmup"))
    summary: dict[str, Any] = {"store": str(store)}
    with mm:
        memory = LineageMemory(manager=mm, scope=alice, memory_key="chat_history", return_messages=True, k=6)
        # Tool-calling agents log "Invoking: `tool` with {...}" as their action; that is not reasoning worth keeping.
        capture = LineageCaptureCallback(
            mm, scope=alice, capture_reasoning=False, tool_tags={"get_flight_price": ["flight_price"]}
        )
        agent = AgentExecutor(agent=create_tool_calling_agent(llm, tools, PROMPT), tools=tools, memory=memory)

        def turn(n: int, text: str) -> str:
            console.rule(f"[bold]Turn {n}")
            console.print(f"[bold green]user:[/] {text}")
            with console.status("agent is thinking..."):
                out = agent.invoke({"input": text}, config={"callbacks": [capture]})
            console.print(f"[bold blue]agent:[/] {out['output']}")
            world.advance(0.1)  # six simulated minutes per turn
            return str(out["output"])

        turn(1, "I'm planning a trip to Paris from 3 to 7 May. I prefer aisle seats.")
        turn(2, "Find me a flight and a hotel for the trip.")
        first_plan = _latest(mm, alice, "agent", "Recommendation")
        paris_price = _latest(mm, alice, "tool:get_flight_price")
        _ledger_table(console, mm, alice, "What the ledger captured (sources, lineage, trust)")

        # Turn 3: the user corrects the destination in passing. Nobody calls supersede: update detection reads the
        # turn as a new value of user.trip.destination and supersedes the Paris premise by itself.
        turn(3, "Actually, I'm going to Lyon, not Paris.")
        premise = mm.slot_history("user.trip.destination", scope=alice)[0]  # the Paris plan, now a past version
        decision = next(a for a in mm.explain(premise.id, scope=alice).decisions if a.name == "update")
        suspect = [
            str(e["memory_id"]) for e in mm.audit(alice) if e.type == "suspect" and e["activity_id"] == decision.id
        ]
        console.print(
            f"[yellow]update detected ({decision.metadata['decided_by']}):[/] {decision.metadata['reason']} — "
            f"the Paris premise is now [bold]{mm.require(premise.id, scope=alice).status.value}[/]; the cascade "
            f"marked [bold]{len(suspect)}[/] derived memories suspect, only what rested on the destination "
            f"(undo: mm.undo({short_id(decision.id)}…)):"
        )
        chain = {premise.id, *suspect}
        for m in mm.get_many(suspect, scope=alice):
            if m is not None:
                how = mm.explain(m.id, scope=alice).attribution
                via = ", ".join(sorted({how.get((m.id, p), "given") for p in m.derived_from if p in chain}))
                console.print(f"  [yellow]suspect[/] {short_id(m.id)} {m.source} [dim]via {via}[/]: {m.content[:80]}")
        res = mm.recall("flight and hotel recommendation for my trip", scope=alice, k=5, purpose="decision")
        served = set(res.ids)
        assert first_plan is not None and paris_price is not None
        console.print(
            f"recall now serves the old Paris recommendation: [bold]{first_plan.id in served}[/]; "
            f"the old Paris price: [bold]{paris_price.id in served}[/]"
        )
        summary.update(
            suspect=suspect,
            suspect_sources=sorted(str(m.source) for m in mm.get_many(suspect, scope=alice) if m is not None),
            stale_served=bool({first_plan.id, paris_price.id} & served),
        )

        turn(4, "Find me a flight and a hotel in Lyon.")
        lyon_price = _latest(mm, alice, "tool:get_flight_price")
        assert lyon_price is not None

        # Two hours later the fare quote is older than its 1 h freshness limit: the policy re-runs the tool.
        world.advance(2)

        def refresh_flight(stale: Memory, decision: Any) -> Memory | None:
            # Re-run the tool with the arguments its call received (stored as JSON on the tool-call activity).
            call = mm.get_activity(stale.lineage.activity_id or "", scope=stale.scope)
            arguments = call.metadata.get("arguments") if call is not None else None
            if not isinstance(arguments, dict):
                return None  # nothing to re-run: the stale quote is withheld
            fresh = tool_result_text(tools[0].name, arguments, str(tools[0].invoke(arguments)))
            return mm.remember(
                fresh, scope=alice, source="tool:get_flight_price", tags=["flight_price"],
                derived_from=list(stale.derived_from), metadata={"refreshed_from": stale.id},
            )  # fmt: skip

        engine.register_refresh_hook("flight_price", refresh_flight)
        console.rule("[bold]Two hours later")
        with console.status("recall for a booking decision (freshness policy may re-run the tool)..."):
            res = mm.recall("flight price to Lyon", scope=alice, k=3, purpose="decision", trace=True)
        quote = next((h for h in res if "flight_price" in h.memory.tags), None)
        console.print(
            f"stale quote ({mm.require(lyon_price.id, scope=alice).status.value} now): [dim]{lyon_price.content}[/]"
        )
        if quote is not None:
            origin = short_id(str(quote.memory.metadata.get("refreshed_from", "-")))
            console.print(f"served instead: [bold]{quote.content}[/]  (refreshed from {origin})")
        refreshed = [d for d in res.trace.decisions if "refresh" in str(getattr(d, "effect", ""))]
        for d in refreshed:
            console.print(f"policy decision: [magenta]{d.policy_id}[/]: {d.reason}")
        summary.update(
            refreshed=bool(quote and quote.id != lyon_price.id and "Lyon" in quote.content), lookups=world.lookups
        )

        # The Lyon recommendation was derived from the stale quote, so it is now suspect too: explain shows why.
        plan = _latest(mm, alice, "agent", "Recommendation", active_only=False)
        assert plan is not None
        console.rule("[bold]explain(latest recommendation)")
        ex = mm.explain(plan.id, scope=alice)
        console.print(explanation_tree(ex))
        console.print("[bold]premises and how each was attributed[/]")
        shown = {m.id: m for m in ex.memories}
        for node in ex.memories:
            for pid in node.derived_from:
                attributed, held = ex.attribution.get((node.id, pid), "given"), shown.get(pid)
                line = f"{held.source} {short_id(pid)}: {held.content[:48]}" if held is not None else short_id(pid)
                console.print(f"  {node.source} {short_id(node.id)} [dim]<-{attributed}-[/] {line}")
        why = [e["data"].get("reason") for e in mm.audit(alice, memory_id=plan.id, types=["suspect"])]
        if why:
            console.print(f"why suspect: [yellow]{why[-1]}[/] (the fare it quoted was older than its 1 h limit)")
        pictures = _write_pictures(ex, store)
        for picture in pictures:
            console.print(f"picture written: [bold]{picture}[/]")
        console.print(f"\nstore kept at [bold]{store}[/]; try: memlineage audit --user alice --path {store}")
        summary.update(pictures=[str(p) for p in pictures], stats=mm.stats(alice))
    return summary


def _latest(
    mm: MemoryManager, scope: Scope, source: str, startswith: str = "", *, active_only: bool = True
) -> Memory | None:
    statuses = (Status.ACTIVE,) if active_only else (Status.ACTIVE, Status.SUSPECT)
    found = [
        m for m in mm.find(scope=scope, include_suspect=not active_only)
        if str(m.source) == source and m.content.startswith(startswith) and m.status in statuses
    ]  # fmt: skip
    return max(found, key=lambda m: m.recorded_at) if found else None


def _ledger_table(console: Console, mm: MemoryManager, scope: Scope, title: str) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("id", "status", "source", "trust", "premises (attribution)", "content"):
        table.add_column(col)
    for m in sorted(mm.find(scope=scope), key=lambda m: m.recorded_at):
        how = mm.explain(m.id, scope=scope).attribution
        premises = ", ".join(f"{short_id(p)} ({how.get((m.id, p), 'given')})" for p in m.derived_from) or "-"
        table.add_row(short_id(m.id), m.status.value, str(m.source), f"{m.trust:.2f}", premises, m.content[:60])
    console.print(table)


def _write_pictures(ex: Any, store: Path) -> list[Path]:
    out = [store / "lineage.mmd", store / "lineage.prov.json", store / "lineage.dot"]
    out[0].write_text(ex.to_mermaid(), encoding="utf-8")
    out[1].write_text(json.dumps(ex.to_prov_json(), ensure_ascii=False, indent=2), encoding="utf-8")
    out[2].write_text(ex.to_dot(), encoding="utf-8")
    dot = shutil.which("dot")
    if dot:
        for fmt in ("svg", "png"):
            target = store / f"lineage.{fmt}"
            subprocess.run([dot, f"-T{fmt}", str(out[2]), "-o", str(target)], check=False, capture_output=True)
            if target.exists():
                out.append(target)
    return out
