"""Builds the notebooks from plain Python cell lists (keeps them reviewable); run: python notebooks/_build.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent


def build(name: str, cells: list[tuple[str, str]], out: Path | None = None) -> None:
    """Write notebook ``name`` from ``cells`` into ``out`` (default: this folder), linted and formatted."""
    target = (out or HERE) / name
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells]
    nbformat.write(nb, target)
    # The committed notebooks are ruff-clean (`make lint` checks them): fix and format here with the project's own
    # settings, so a rebuild matches them wherever it is written.
    config = ["--config", str(HERE.parent / "pyproject.toml")]
    ruff = [sys.executable, "-m", "ruff"]
    subprocess.run([*ruff, "check", *config, "--fix", "--quiet", str(target)], check=False)
    subprocess.run([*ruff, "format", *config, "--quiet", str(target)], check=True)


def md(text: str) -> tuple[str, str]:
    """A markdown cell (dedented, stripped)."""
    return ("md", textwrap.dedent(text).strip())


def code(text: str) -> tuple[str, str]:
    """A code cell (dedented, stripped)."""
    return ("code", textwrap.dedent(text).strip())


QUICKSTART = [
    (
        "md",
        "# MemLineage core quickstart\n\nremember → recall → correct → explain, on an embedded store in a "
        "temporary directory. Offline: the default embedder reads all-MiniLM-L6-v2's ONNX files from "
        "`MEMLINEAGE_EMBEDDING_MODEL_DIR` (or chromadb's cache).",
    ),
    (
        "code",
        "import tempfile\nfrom pathlib import Path\n\nfrom memlineage import MemoryManager, Scope, Status\n\n"
        'workdir = tempfile.TemporaryDirectory(prefix="memlineage-nb01-")  # removed in the last cell\n'
        'store = Path(workdir.name) / "store"\nmm = MemoryManager.open(store)\n'
        'alice = Scope(user_id="alice", session_id="trip-1")',
    ),
    (
        "md",
        "## remember, with lineage\nEach memory records its source (`user`, `tool:<name>`, `reasoning`...) and "
        "the memories it was derived from.",
    ),
    (
        "code",
        'city = mm.remember("I want to travel to Paris", scope=alice, source="user", kind="semantic")\n'
        'dates = mm.remember("My trip is from 3 to 7 May", scope=alice, source="user")\n'
        'flight = mm.remember("Flight to Paris on 3 May costs 120 EUR", scope=alice,\n'
        '                     source="tool:flight_api", derived_from=[city.id, dates.id], tags=["flight_price"])\n'
        'plan = mm.remember("Book Hotel Lumière near the Louvre", scope=alice, source="reasoning",\n'
        "                   derived_from=[flight.id], confidence=0.8)\n"
        "print(plan.summary())\nassert plan.trust <= flight.trust",
    ),
    ("md", "## recall\nScope-filtered inside the query; every hit carries its score parts and a lineage summary."),
    (
        "code",
        'for hit in mm.recall("where am I staying?", scope=alice, k=3):\n'
        '    print(f"{hit.score:.2f}  {hit.content}  [{hit.lineage}]")\n'
        'assert mm.recall("Paris", scope=Scope(user_id="bob")).hits == []  # tenant isolation',
    ),
    (
        "md",
        "## correct a premise\nSuperseding the city marks everything derived from it `suspect`; recall stops "
        "serving it.",
    ),
    (
        "code",
        'report = mm.supersede(city.id, "I want to travel to Lyon", scope=alice, source="user")\n'
        'print("suspect:", report.suspect)\n'
        "assert set(report.suspect) == {flight.id, plan.id}\n"
        'assert plan.id not in mm.recall("hotel", scope=alice, k=5).ids\n'
        "assert mm.require(plan.id, scope=alice).status is Status.SUSPECT",
    ),
    ("md", "## explain\nThe provenance chain, as text and as a Mermaid picture rendered inline."),
    ("code", "ex = mm.explain(plan.id, scope=alice)\nprint(ex.to_text())"),
    ("code", 'from IPython.display import Markdown\nMarkdown("```mermaid\\n" + ex.to_mermaid() + "\\n```")'),
    md("""
        ## The lineage graph as a picture

        Mermaid needs a renderer; this picture needs only matplotlib. Each box is a memory (source, content,
        status), the explained memory on top and its premises below; arrows are `wasDerivedFrom`. The corrected
        premise is `superseded` (red), what was derived from it `suspect` (yellow).
    """),
    code("""
        import textwrap
        from collections import defaultdict

        import matplotlib.pyplot as plt

        COLOURS = {"active": "#cfe8c6", "suspect": "#ffe39a"}  # anything else (superseded, retracted...): red


        def draw_lineage(ex):
            \"\"\"Memories of an Explanation laid out by depth, wasDerivedFrom edges as arrows.\"\"\"
            levels = defaultdict(list)
            for m in ex.memories:
                levels[ex.depth.get(m.id, 0)].append(m)
            pos = {m.id: ((i + 0.5) / len(row), -depth) for depth, row in levels.items() for i, m in enumerate(row)}
            fig, ax = plt.subplots(figsize=(10, 1.9 * len(levels)))
            for src, rel, dst in ex.edges:
                if rel == "wasDerivedFrom" and src in pos and dst in pos:
                    arrow = {"arrowstyle": "-|>", "color": "#555", "shrinkA": 24, "shrinkB": 24}
                    ax.annotate("", xy=pos[dst], xytext=pos[src], arrowprops=arrow, zorder=3)
            for m in ex.memories:
                label = f"{m.source}\\n{textwrap.shorten(m.content, 34)}\\n[{m.status.value}]"
                ax.text(*pos[m.id], label, ha="center", va="center", fontsize=9,
                        bbox={"boxstyle": "round,pad=0.5", "fc": COLOURS.get(m.status.value, "#f6b8b8"), "ec": "#444"},
                        zorder=2)
            ax.set_xlim(0, 1)
            ax.set_ylim(-len(levels) + 0.4, 0.6)
            ax.axis("off")
            ax.set_title("why does the agent believe this? (arrows: wasDerivedFrom)")
            plt.show()


        draw_lineage(ex)
    """),
    ("code", "mm.close()\nworkdir.cleanup()"),
]

LANGCHAIN_AGENT = [
    md("""
        # A LangChain travel agent whose memory has lineage

        First langchain 1.x `create_agent` with `LineageMiddleware` (recall before each model call, tool calls
        and results captured with their call ids, the answer derived from them) and the LangGraph store
        `LineageStore`. Then the `make demo` story step by step on the classic `AgentExecutor`, with `LineageMemory`
        and `LineageCaptureCallback`, and at the end the older `RunnableWithMessageHistory` path.

        Offline: `ScriptedTravelModel` stands in for a tool-calling chat model (it asks for a flight and a hotel
        when you say "find", for the city it reads in the request or in the recalled memories, and turns tool
        results into a recommendation). The tools are real Python functions over local tables; a simulated clock
        makes fares rise 7 EUR per hour. Swap in any LangChain chat model and nothing else changes.
    """),
    code("""
        import tempfile
        import warnings
        from datetime import timedelta
        from pathlib import Path

        from IPython.display import Markdown
        from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
        from rich.console import Console
        from rich.table import Table

        from memlineage import MemoryManager, PolicyEngine, Scope, Status, builtin_policies
        from memlineage.models import short_id
        from memlineage_langchain import LineageCaptureCallback, LineageMemory

        # The demo's local world, tools, scripted model and prompt (what `make demo` runs).
        from memlineage_langchain.demo import PROMPT, ScriptedTravelModel, TravelWorld, make_tools

        warnings.filterwarnings("ignore", category=DeprecationWarning)  # langchain_classic's deprecation notices
        warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets
        console = Console(width=150)

        world = TravelWorld()      # simulated clock, starts 2026-04-20 09:00 UTC; fares rise 7 EUR per hour
        tools = make_tools(world)  # get_flight_price(city, date), search_hotels(city)
        # Built-in policies, with flight prices fresh for one hour (a stale price is re-fetched, see below).
        fares_fresh = builtin_policies(freshness_by_tag={"flight_price": timedelta(hours=1)})
        engine = PolicyEngine(fares_fresh, clock=world.clock)
        workdir = tempfile.TemporaryDirectory(prefix="memlineage-nb02-")  # removed in the last cell
        mm = MemoryManager.open(Path(workdir.name) / "store", clock=world.clock, policy=engine)
        alice = Scope(user_id="alice", session_id="trip-planning")
        print("tools:", [t.name for t in tools])


        def all_versions(scope: Scope) -> list:
            \"\"\"Every memory version of the scope, including superseded and expired ones (via the audit log).\"\"\"
            ids = list(dict.fromkeys(e["memory_id"] for e in mm.audit(scope, types=["created"]) if e["memory_id"]))
            return sorted((m for m in mm.get_many(ids, scope=scope) if m is not None), key=lambda m: m.recorded_at)


        def ledger(scope: Scope, title: str) -> None:
            \"\"\"The ledger as a table: status, source, trust, premises, tool call id, content.\"\"\"
            short = {m.id: short_id(m.id) for m in all_versions(scope)}
            table = Table(title=title, title_justify="left")
            for col in ("id", "status", "source", "trust", "derived from", "tool call id"):
                table.add_column(col, overflow="fold", no_wrap=col in ("id", "session", "status", "source"))
            table.add_column("content", no_wrap=True, overflow="ellipsis", max_width=60)
            colour = {"active": "green", "suspect": "yellow"}
            for m in all_versions(scope):
                status = f"[{colour.get(m.status.value, 'red')}]{m.status.value}[/]"
                premises = " ".join(short.get(p, short_id(p)) for p in m.derived_from)
                table.add_row(short[m.id], status, str(m.source), f"{m.trust:.2f}", premises,
                              str(m.metadata.get("tool_call_id") or ""), m.content)
            console.print(table)
    """),
    md("""
        ## `create_agent` with `LineageMiddleware` and `LineageStore`

        The middleware gives a `create_agent` agent its memory: it recalls memories
        into the system message before the model call, records each tool call (with its `tool_call_id`) and its
        result, and stores the final answer derived from the turn and the results. The scope comes from the run
        config (`metadata.user_id`, `thread_id` as the session). `LineageStore` is a LangGraph `BaseStore`:
        `namespace[0]` is the user, each `(namespace, key)` is a slot, so a new `put` supersedes the old value.

        The fake model replays scripted messages (`FakeMessagesListChatModel`, as in the unit tests) and keeps the
        system prompt of each call so that we can see what the middleware injected.
    """),
    code("""
        from langchain.agents import create_agent
        from langchain.tools import ToolRuntime
        from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_core.tools import tool
        from pydantic import Field

        from memlineage_langchain import LineageMiddleware, LineageStore


        class ScriptedChatModel(FakeMessagesListChatModel):
            \"\"\"Replays `responses` in order; remembers the system prompt of every call.\"\"\"

            system_prompts: list = Field(default_factory=list)

            def bind_tools(self, tools, **kwargs):
                return self

            def _generate(self, messages, stop=None, run_manager=None, **kwargs):
                self.system_prompts.append(next((str(m.content) for m in messages if m.type == "system"), ""))
                return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


        def calls(*specs):
            calls = [{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in specs]
            return AIMessage(content="", tool_calls=calls)


        @tool
        def save_preference(key: str, text: str, runtime: ToolRuntime) -> str:
            \"\"\"Save a travel preference of the current user in the long-term store.\"\"\"
            runtime.store.put((runtime.config["metadata"]["user_id"], "prefs"), key, {"text": text})
            return f"saved {key}: {text}"


        store = LineageStore(mm)
        middleware = LineageMiddleware(mm, k=5)
        bob = Scope(user_id="bob", session_id="bob-1")
        model = ScriptedChatModel(responses=[
            calls(("save_preference", {"key": "seat", "text": "window seat"}, "call_pref_1"),
                  ("get_flight_price", {"city": "Rome", "date": "2026-05-03"}, "call_flight_rome"),
                  ("search_hotels", {"city": "Rome"}, "call_hotels_rome")),
            AIMessage(content="Here are your Rome options for 3 May: the flight and Albergo Roma. Window seat saved."),
            AIMessage(content="You prefer a window seat."),
        ])
        bob_agent = create_agent(model, [save_preference, *tools], system_prompt="You are a travel agent.",
                                 middleware=[middleware], store=store)
        out = bob_agent.invoke(
            {"messages": [HumanMessage(
                "I always take a window seat. Find me a flight and a hotel in Rome for 3 May."
            )]},
            config={"metadata": {"user_id": "bob", "session_id": "bob-1"}},
        )
        print("agent:", out["messages"][-1].content)
        ledger(Scope(user_id="bob"), "bob's ledger after one create_agent turn")
        print("store:", store.get(("bob", "prefs"), "seat").value)
    """),
    md("""
        In a later session the middleware recalls bob's memories into the system message (the message history
        itself is untouched), each with its source:
    """),
    code("""
        out = bob_agent.invoke({"messages": [HumanMessage("Which seat do I like?")]},
                               config={"metadata": {"user_id": "bob", "session_id": "bob-2"}})
        print("agent:", out["messages"][-1].content)
        print("\\nsystem prompt the model saw:\\n" + model.system_prompts[-1])
        assert "window seat" in model.system_prompts[-1]
    """),
    md("""
        ## The store keeps versions; corrections cascade here too

        Putting a new value under the same key supersedes the old item (`get` returns the new one, the ledger
        keeps both, linked). Correcting bob's request makes the Rome results and the answer derived from it
        suspect (the classic agent below does the same).
    """),
    code("""
        store.put(("bob", "prefs"), "seat", {"text": "aisle seat"})
        print("store now:", store.get(("bob", "prefs"), "seat").value)
        print("search:", [(i.key, i.value) for i in store.search(("bob", "prefs"), query="seat preference")])

        request = next(m for m in mm.find(scope="bob") if m.content.startswith("I always take a window seat"))
        report = mm.supersede(
            request.id, "I always take a window seat. Find me a flight and a hotel in Lyon for 3 May.",
            scope=bob, source="user",
        )
        print(f"\\n{len(report.suspect)} memories derived from the Rome request are suspect now")
        ledger(Scope(user_id="bob"), "bob's ledger after the store update and the correction")
    """),
    md("""
        ## The classic `AgentExecutor`: one memory, one callback

        `LineageMemory` is a classic `BaseMemory`: before each turn it recalls the memories relevant to the input
        (scope-filtered, suspect and expired memories excluded), after it stores the user turn and the answer,
        the answer derived from the turn and from what was recalled. `LineageCaptureCallback` records each tool
        call as an activity (with LangChain's `run_id` and the model's `tool_call_id`) and its output as a
        `tool:<name>` memory; `tool_tags` labels fare quotes for the freshness policy.
    """),
    code("""
        memory = LineageMemory(manager=mm, scope=alice, memory_key="chat_history", return_messages=True, k=6)
        capture = LineageCaptureCallback(
            mm, scope=alice, capture_reasoning=False, tool_tags={"get_flight_price": ["flight_price"]}
        )
        agent = AgentExecutor(
            agent=create_tool_calling_agent(ScriptedTravelModel(), tools, PROMPT), tools=tools, memory=memory
        )


        def ask(text: str) -> str:
            out = agent.invoke({"input": text}, config={"callbacks": [capture]})
            console.print(f"[bold green]user:[/] {text}\\n[bold blue]agent:[/] {out['output']}")
            world.advance(0.1)  # six simulated minutes per turn
            return out["output"]
    """),
    md("## Turn 1: the user states the trip and a preference"),
    code("""
        ask("I'm planning a trip to Paris from 3 to 7 May. I prefer aisle seats.")
        ledger(alice, "after turn 1")
    """),
    md("""
        ## Turn 2: tool calls, captured automatically

        The model asks for both tools in parallel (for Paris, which it read in the recalled memories). Each result
        is stored as a `tool:<name>` memory joined to its call by the `tool_call_id` and derived from the memory that
        supplied its arguments (the Paris plan, attribution `arguments`); the recommendation is an `agent` memory
        derived from both tool results (attribution `results`).
    """),
    code("""
        ask("Find me a flight and a hotel for the trip.")
        ledger(alice, "after turn 2")
        recommendation = next(
            m for m in mm.find(scope=alice) if m.content.startswith("Recommendation: Flight to Paris")
        )
        paris_quote = next(m for m in mm.find(scope=alice) if str(m.source) == "tool:get_flight_price")
        call = mm.get_activity(paris_quote.lineage.activity_id, scope=alice)
        print(f"the quote was generated by a {call.kind} activity {call.name!r}, tool_call_id={call.tool_call_id}, "
              f"arguments={call.metadata['arguments']}, outcome={call.outcome}")
        print("premises:", mm.explain(paris_quote.id, scope=alice).attribution)
    """),
    md("""
        ## Turn 3: the user corrects the destination, and nobody calls `supersede`

        Update detection reads the turn as a new value of the slot `user.trip.destination` and supersedes the
        Paris premise by itself (a new version; the old one is kept and linked). The cascade makes everything
        derived from the Paris statement (the fare quote, the hotel list, the recommendation) `suspect`. The
        decision is an activity with its reason, and `mm.undo(decision.id)` would revert it. (`impact` gives the
        same cascade as a dry run, and `supersede` does it by hand when you want to.)
    """),
    code("""
        ask("Actually, I'm going to Lyon, not Paris.")
        premise = mm.slot_history("user.trip.destination", scope=alice)[0]  # the Paris plan, now a past version
        decision = next(a for a in mm.explain(premise.id, scope=alice).decisions if a.name == "update")
        suspect = [e["memory_id"] for e in mm.audit(alice) if e.type == "suspect" and e["activity_id"] == decision.id]
        print(f"update detected ({decision.metadata['decided_by']}): {decision.metadata['reason']}")
        print(f"the Paris premise is {mm.require(premise.id, scope=alice).status.value}; "
              f"{len(suspect)} derived memories are suspect (undo: mm.undo({short_id(decision.id)!r}...))")
        assert recommendation.id in suspect and paris_quote.id in suspect
        ledger(alice, "after the correction")
    """),
    md("""
        ## Recall no longer serves what was derived from the old premise

        Suspect memories are filtered out inside the index query (by status, like the scope), so a booking
        decision never sees the Paris fare or the Paris recommendation. `include_suspect=True` shows them,
        flagged, for a UI that wants to ask the user.
    """),
    code("""
        res = mm.recall("flight and hotel recommendation for my trip", scope=alice, k=5, purpose="decision", trace=True)
        for hit in res:
            print(f"{hit.score:.2f}  [{hit.memory.status.value}] {hit.memory.source}: {hit.content[:80]}")
        served = set(res.ids)
        print("\\nold Paris recommendation served:", recommendation.id in served,
              "| old Paris fare served:", paris_quote.id in served)
        assert not {recommendation.id, paris_quote.id} & served
        flagged = mm.recall("flight and hotel recommendation for my trip", scope=alice, k=5, include_suspect=True)
        print("with include_suspect=True:", [(short_id(h.id), h.flags) for h in flagged if h.flags])
    """),
    md("## Turn 4: a new plan for Lyon"),
    code("""
        ask("Find me a flight and a hotel in Lyon.")
        fares = [m for m in mm.find(scope=alice, include_suspect=False) if str(m.source) == "tool:get_flight_price"]
        lyon_quote = max(fares, key=lambda m: m.recorded_at)
        print("Lyon fare:", lyon_quote.content, "| tags:", lyon_quote.tags)
    """),
    md("""
        ## Two hours later: a stale price is refreshed, not served

        The freshness policy allows `flight_price` memories one hour. A refresh hook re-runs the tool with the
        arguments recorded on the original call's activity; recall for a decision serves the fresh quote, and the
        stale one is `expired` (kept in the ledger).
    """),
    code("""
        world.advance(2)


        def refresh_flight(stale, decision):
            call = mm.get_activity(stale.lineage.activity_id or "", scope=stale.scope)
            args = call.metadata.get("arguments") if call else None
            if not isinstance(args, dict):
                return None  # nothing to re-run with: withhold the stale quote
            fresh = tools[0].invoke(args)  # the arguments the original call received (JSON on its activity)
            return mm.remember(fresh, scope=alice, source="tool:get_flight_price", tags=["flight_price"],
                               derived_from=list(stale.derived_from), metadata={"refreshed_from": stale.id})


        engine.register_refresh_hook("flight_price", refresh_flight)
        lookups = world.lookups
        res = mm.recall("flight price to Lyon", scope=alice, k=3, purpose="decision", trace=True)
        quote = next(h for h in res if "flight_price" in h.memory.tags)
        print("stale:  ", mm.require(lyon_quote.id, scope=alice).status.value, "|", lyon_quote.content)
        print("served: ", quote.memory.status.value, "|", quote.content)
        print("tool re-run:", world.lookups - lookups, "time(s)")
        for d in res.trace.decisions:
            if "refresh" in str(getattr(d, "effect", "")):
                print("policy:", d.policy_id, "-", d.reason)
        assert quote.id != lyon_quote.id and quote.memory.metadata["refreshed_from"] == lyon_quote.id
    """),
    md("""
        ## explain: why does the agent believe this?

        The Lyon recommendation was derived from the quote that just expired, so it is `suspect` too. `explain`
        walks its provenance down to the user turns, the tool calls and the agent run; the picture is Mermaid
        (rendered by JupyterLab 4.1+, VS Code and GitHub; `to_dot()` gives Graphviz, `to_prov_json()` W3C PROV).
    """),
    code("""
        plan = max((m for m in mm.find(scope=alice) if m.content.startswith("Recommendation: Flight to Lyon")),
                   key=lambda m: m.recorded_at)
        ex = mm.explain(plan.id, scope=alice)
        print(ex.to_text())
        print("activities:", sorted({f"{a.kind}:{a.name}" for a in ex.activities}))
    """),
    code("""
        Markdown("```mermaid\\n" + ex.to_mermaid() + "\\n```")
    """),
    code("""
        ledger(alice, "the whole story in the ledger")
        print(mm.stats(alice))
    """),
    md("""
        ## A chat history with lineage: `RunnableWithMessageHistory`

        `LineageChatMessageHistory` is a `BaseChatMessageHistory`: the session's messages come back in order (a
        repeated "yes" stays two messages), and each one is a memory with lineage, so the answer derives from the
        question it answered. `clear()` retracts the session's messages (kept in the ledger, never deleted).
    """),
    code("""
        from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
        from langchain_core.runnables.history import RunnableWithMessageHistory

        from memlineage_langchain import LineageChatMessageHistory

        warnings.filterwarnings("ignore", message="RunnableWithMessageHistory is deprecated")
        replies = ["Hello Carol! Where to?", "Porto, noted.", "Booked."]
        chat_model = FakeMessagesListChatModel(responses=[AIMessage(r) for r in replies])
        chat_prompt = ChatPromptTemplate.from_messages(
            [("system", "You are a travel agent."), MessagesPlaceholder("history"), ("human", "{input}")]
        )
        chat = RunnableWithMessageHistory(
            chat_prompt | chat_model,
            lambda session_id: LineageChatMessageHistory(mm, scope="carol", session_id=session_id),
            input_messages_key="input",
            history_messages_key="history",
        )
        for text in ("Hi, I am Carol.", "Porto in June.", "yes"):
            chat.invoke({"input": text}, config={"configurable": {"session_id": "carol-1"}})
        history = LineageChatMessageHistory(mm, scope="carol", session_id="carol-1")
        for m in history.messages:
            print(f"{m.type:>5}: {m.content}")
        answer = next(m for m in mm.find(scope="carol") if m.content == "Porto, noted.")
        print("\\n" + mm.explain(answer.id, scope="carol").to_text())
        history.clear()
        status = mm.get(answer.id, scope="carol").status.value
        print("\\nafter clear():", history.messages, "| still in the ledger:", status)
    """),
    code("""
        mm.close()
        workdir.cleanup()
    """),
]

LLAMAINDEX_AGENT = [
    md("""
        # A LlamaIndex FunctionAgent whose memory has lineage

        `lineage_memory(...)` gives a `FunctionAgent` (or `ReActAgent`) a LlamaIndex `Memory` whose long-term tier
        is MemLineage: every message is stored with its source and recalled in later turns and sessions with a
        citable `[m:<id>]` marker. `capture_run(agent.run(...), manager, scope=...)` reads the run's stream events
        and records the agent run, each LLM step and each tool call (LlamaIndex's `tool_id`) as activities, the
        tool results as `tool:<name>` memories and the answer as an `agent` memory derived from them.

        Offline: a `MockFunctionCallingLLM` with a small scripted policy stands in for the model. It reads the
        messages LlamaIndex sends it (including the memories recalled into the system message), asks for the
        flight and hotel tools when the user says "find", and answers from the tool results.
    """),
    code("""
        import re
        import tempfile
        import warnings
        from pathlib import Path

        from IPython.display import Markdown
        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
        from llama_index.core.llms.mock import MockFunctionCallingLLM
        from llama_index.core.tools import FunctionTool
        from rich.console import Console
        from rich.table import Table

        from memlineage import MemoryManager, Scope
        from memlineage.models import short_id
        from memlineage_llamaindex import capture_run, lineage_memory

        warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets
        console = Console(width=150)
        workdir = tempfile.TemporaryDirectory(prefix="memlineage-nb03-")  # removed in the last cell
        mm = MemoryManager.open(Path(workdir.name) / "store")

        FARES = {"paris": 120, "lyon": 85}
        HOTELS = {"paris": "Hotel Lumière 95 EUR/night", "lyon": "Hôtel des Canuts 78 EUR/night"}


        def get_flight_price(city: str, date: str) -> str:
            \"\"\"Look up the flight price to a city on a date (YYYY-MM-DD).\"\"\"
            return f"Flight to {city.title()} on {date}: {FARES[city.lower()]} EUR"


        def search_hotels(city: str) -> str:
            \"\"\"Search hotels in a city.\"\"\"
            return f"Hotels in {city.title()}: {HOTELS[city.lower()]}"


        def book_hotel(city: str) -> str:
            \"\"\"Book the recommended hotel in a city.\"\"\"
            raise RuntimeError(f"no rooms left in {city}")


        tools = [FunctionTool.from_defaults(fn) for fn in (get_flight_price, search_hotels, book_hotel)]
    """),
    md("""
        ## The scripted model

        `MockFunctionCallingLLM(response_generator=...)` returns whatever the generator builds from the messages.
        Tool calls are `ToolCallBlock`s with unique ids, as a provider would send them. `seen` keeps the system
        message of each call (where `Memory` puts the recalled long-term memories).
    """),
    code("""
        seen: list[str] = []       # the system message of each model call
        requested: list[str] = []  # the tool call ids the model asked for


        def scripted(messages, **kwargs) -> ChatMessage:
            seen.append("\\n".join(m.content or "" for m in messages if m.role == "system"))
            last = messages[-1]
            if last.role == "tool":  # answer from this turn's tool results
                results = []
                for m in reversed(messages):
                    if m.role != "tool":
                        break
                    results.insert(0, m.content or "")
                if any("no rooms" in r for r in results):
                    booked = "Sorry, the hotel is fully booked; shall I look for another?"
                    return ChatMessage(role="assistant", content=booked)
                return ChatMessage(role="assistant", content="Recommendation: " + "; ".join(results) + ".")
            request = re.sub(r"not \\w+", "", (last.content or "").lower())  # "Lyon, not Paris" means Lyon
            context = re.sub(r"not \\w+", "", " ".join(m.content or "" for m in messages).lower())
            city = next((c for c in FARES if c in request), None) or max(FARES, key=context.rfind)
            if "book" in request:
                wanted = [("book_hotel", {"city": city})]
            elif "find" in request:
                wanted = [("get_flight_price", {"city": city, "date": "2026-05-03"}), ("search_hotels", {"city": city})]
            else:
                return ChatMessage(role="assistant", content="Noted, I'll remember that.")
            blocks = [ToolCallBlock(tool_call_id=f"call_{name}_{city}_{len(seen)}", tool_name=name, tool_kwargs=kwargs)
                      for name, kwargs in wanted]
            requested.extend(b.tool_call_id for b in blocks)
            return ChatMessage(role="assistant", blocks=blocks)


        agent = FunctionAgent(tools=tools, llm=MockFunctionCallingLLM(response_generator=scripted),
                              system_prompt="You are a travel agent.")
    """),
    md("""
        ## Session 1: a user turn, tool results with call ids, an answer derived from them

        One `Memory` per session (`lineage_memory(manager, user_id=..., session_id=...)`); each run is wrapped in
        `capture_run` with the same scope. Both write through the core, which stores a repeated message once.
    """),
    code("""
        def all_versions(scope: Scope) -> list:
            \"\"\"Every memory version of the scope, including superseded ones (via the audit log).\"\"\"
            ids = list(dict.fromkeys(e["memory_id"] for e in mm.audit(scope, types=["created"]) if e["memory_id"]))
            return sorted((m for m in mm.get_many(ids, scope=scope) if m is not None), key=lambda m: m.recorded_at)


        def ledger(scope: Scope, title: str) -> None:
            short = {m.id: short_id(m.id) for m in all_versions(scope)}
            table = Table(title=title, title_justify="left")
            for col in ("id", "session", "status", "source", "derived from", "tool call id"):
                table.add_column(col, overflow="fold", no_wrap=col in ("id", "session", "status", "source"))
            table.add_column("content", no_wrap=True, overflow="ellipsis", max_width=64)
            colour = {"active": "green", "suspect": "yellow"}
            for m in all_versions(scope):
                status = f"[{colour.get(m.status.value, 'red')}]{m.status.value}[/]"
                premises = " ".join(short.get(p, short_id(p)) for p in m.derived_from)
                table.add_row(short[m.id], m.scope.session_id or "", status, str(m.source), premises,
                              str(m.metadata.get("tool_call_id") or ""), m.content)
            console.print(table)


        async def ask(text: str, memory, scope: Scope) -> str:
            result = await capture_run(agent.run(user_msg=text, memory=memory), mm, scope=scope)
            console.print(f"[bold green]user:[/] {text}\\n[bold blue]agent:[/] {result}")
            return str(result)


        alice = Scope(user_id="alice")
        s1 = Scope(user_id="alice", session_id="trip-1")
        memory1 = lineage_memory(mm, user_id="alice", session_id="trip-1")
        await ask("I prefer aisle seats and hotels in the city centre.", memory1, s1)
        await ask("I'm going to Paris from 3 to 7 May: find me a flight and a hotel.", memory1, s1)
        ledger(alice, "alice's ledger after session 1")
    """),
    md("""
        The answer is derived from both tool results; each tool result is derived from the request that supplied its
        argument (`Paris`), and joined to its call: its `activity_id` is the tool call's activity (the model's
        `tool_call_id` is an attribute of it), which hangs under the LLM step that requested it, under the agent run.
    """),
    code("""
        answer = next(m for m in mm.find(scope=alice) if m.content.startswith("Recommendation"))
        request = next(m for m in mm.find(scope=alice) if m.content.startswith("I'm going to Paris"))
        results = mm.get_many(list(answer.derived_from), scope=alice)
        assert results and all(p.source.kind.value == "tool" and request.id in p.derived_from for p in results)
        for premise in results:
            act, chain = mm.get_activity(premise.lineage.activity_id, scope=alice), []
            while act is not None:
                chain.append(f"{act.kind}({act.name}, {act.outcome})")
                act = mm.get_activity(act.parent_id, scope=alice) if act.parent_id else None
            print(f"{premise.content[:72]}\\n    tool_call_id={premise.metadata['tool_call_id']};",
                  f"generated by {' <- '.join(chain)}")
    """),
    md("""
        ## Session 2: a correction marks the derived memories suspect

        A new session, a new `Memory`, the same user. The user corrects the destination; nobody calls
        `supersede`: update detection reads the turn as a new value of `user.trip.destination` and supersedes the
        Paris request by itself (the old version is kept and linked; the decision is an activity that
        `mm.undo(...)` reverts). The cascade marks everything derived from it suspect: both tool results and the
        recommendation. In the next run the memory block recalls the preferences and the corrected request, never
        the suspect Paris results, so the model asks the tools for Lyon.
    """),
    code("""
        s2 = Scope(user_id="alice", session_id="trip-2")
        memory2 = lineage_memory(mm, user_id="alice", session_id="trip-2")
        await ask("Correction: I'm going to Lyon, not Paris.", memory2, s2)
        decision = next(a for a in mm.explain(request.id, scope=alice).decisions if a.name == "update")
        print(f"update detected ({decision.metadata['decided_by']}): {decision.metadata['reason']}; "
              f"the Paris request is {mm.require(request.id, scope=alice).status.value}")
        suspect = [e["memory_id"] for e in mm.audit(alice) if e.type == "suspect" and e["activity_id"] == decision.id]
        print(f"{len(suspect)} memories derived from the Paris request are suspect:")
        for m in mm.get_many(suspect, scope=alice):
            print(f"  [{m.status.value}] {m.source}: {m.content[:80]}")
        assert answer.id in suspect
    """),
    code("""
        await ask("Find me a flight and a hotel.", memory2, s2)
        print("\\nlong-term memories in the system message of that model call:\\n" + seen[-2])
        assert "Hotel Lumière" not in seen[-2] and "Flight to Paris" not in seen[-2]
        ledger(alice, "alice's ledger after session 2")
    """),
    md("""
        ## A failed tool call is kept on its activity, never stored as a result
    """),
    code("""
        await ask("Book the hotel.", memory2, s2)
        (act,) = [a for a in mm.find_activities(alice, tool_call_id=requested[-1]) if a.outcome == "error"]
        print(f"activity {act.id}: {act.kind} {act.name} outcome={act.outcome} error={act.metadata.get('error')!r}")
        assert act.outcome == "error"
        assert not [m for m in mm.find(scope=alice) if str(m.source) == "tool:book_hotel"]
    """),
    md("## explain: the provenance of the Lyon recommendation"),
    code("""
        lyon = max((m for m in mm.find(scope=alice) if m.content.startswith("Recommendation") and "Lyon" in m.content),
                   key=lambda m: m.recorded_at)
        ex = mm.explain(lyon.id, scope=alice)
        print(ex.to_text())
        Markdown("```mermaid\\n" + ex.to_mermaid() + "\\n```")
    """),
    code("""
        mm.close()
        workdir.cleanup()
    """),
]

LOCOMO = [
    md("""
        # Real conversations: a LoCoMo dev conversation through the write gate

        [LoCoMo](https://snap-research.github.io/locomo/) conversations are long, multi-session chats between two
        people, with questions whose answers are in specific turns (the *evidence*). This notebook takes one
        conversation and:

        1. ingests every turn through MemLineage's write gate (`MemoryManager.remember_many`, one batch per
           session, `valid_from` = the session date) with the multi-factor value model: every turn with content is
           stored (the episodic log) with its value, and only content-free small talk stays in the session's
           short-term buffer;
        2. recalls evidence for the conversation's questions and compares evidence recall@k per question
           category with BM25 and dense (Chroma) baselines, reusing `benchmarks/bench_locomo.py`;
        3. plots the value scores over time: V at write time, and the decayed value at the end of the
           conversation.

        Data: `$MEMLINEAGE_LOCOMO_PATH`, else `../shared/data/locomo/locomo_dev7.json` next to the checkout
        (found from `$MEMLINEAGE_REPO_ROOT` or from where `memlineage` is installed); pick the conversation with
        `$MEMLINEAGE_LOCOMO_CONV` (default: the first). Without the data file every cell below prints why it
        skips. Offline: MiniLM vectors from `MEMLINEAGE_EMBEDDING_MODEL_DIR`; everything is kept in memory.
    """),
    code("""
        import importlib.util
        import json
        import os
        import sys
        import time
        from collections import defaultdict
        from pathlib import Path

        import warnings

        import memlineage

        warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets
        started = time.perf_counter()


        def find_repo():
            \"\"\"The MemLineage checkout: $MEMLINEAGE_REPO_ROOT, else walk up from the installed package.\"\"\"
            if os.environ.get("MEMLINEAGE_REPO_ROOT"):
                return Path(os.environ["MEMLINEAGE_REPO_ROOT"]).expanduser().resolve()
            for parent in Path(memlineage.__file__).resolve().parents:
                if (parent / "benchmarks" / "bench_locomo.py").is_file():
                    return parent
            return None


        REPO = find_repo()
        if os.environ.get("MEMLINEAGE_LOCOMO_PATH"):
            candidates = [Path(os.environ["MEMLINEAGE_LOCOMO_PATH"]).expanduser()]
        else:
            # LOCOMO_PATH: the benchmarks' variable
            candidates = [Path(p).expanduser() for p in (os.environ.get("LOCOMO_PATH"),) if p]
            if REPO is not None:
                candidates.append(REPO.parent / "shared" / "data" / "locomo" / "locomo_dev7.json")
        DATA_PATH = next((p for p in candidates if p.is_file()), None)
        BENCH = REPO / "benchmarks" / "bench_locomo.py" if REPO is not None else None

        DATA = False  # every cell below runs only when the data and the benchmark helpers are here
        if DATA_PATH is None:
            print("LoCoMo data not found (looked at: " + (", ".join(map(str, candidates)) or "nothing") + ").\\n"
                  "Set MEMLINEAGE_LOCOMO_PATH to locomo_dev7.json (or locomo10.json) to run this notebook; "
                  "the rest of it is skipped.")
        elif BENCH is None or not BENCH.is_file():
            print("benchmarks/bench_locomo.py not found; set MEMLINEAGE_REPO_ROOT to a MemLineage checkout. "
                  "The rest of this notebook is skipped.")
        else:
            DATA = True
            print("data:", DATA_PATH)
    """),
    md("""
        ## One conversation, its sessions and questions

        `bench_locomo.load` turns each dialogue turn into one document `"[session date] speaker: text"` (plus the
        image caption, if any) and cleans the evidence ids of every question.
    """),
    code("""
        if DATA:
            # Import the benchmark module from the checkout (without writing __pycache__ there).
            spec = importlib.util.spec_from_file_location("bench_locomo", BENCH)
            bench = importlib.util.module_from_spec(spec)
            sys.modules["bench_locomo"] = bench
            dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True
            try:
                spec.loader.exec_module(bench)
            finally:
                sys.dont_write_bytecode = dont_write
            bench.DATA = DATA_PATH
            samples = [s["sample_id"] for s in json.loads(DATA_PATH.read_text())]
            CONV = os.environ.get("MEMLINEAGE_LOCOMO_CONV", samples[0])
            if CONV not in samples:
                print(f"conversation {CONV!r} is not in {DATA_PATH.name} (it has {samples}); skipping the rest")
                DATA = False
        if DATA:
            all_convs, all_questions = bench.load(samples.index(CONV) + 1)
            turns = all_convs[CONV]
            convs = {CONV: turns}
            questions = [q for q in all_questions if q.conv == CONV]
            sessions = defaultdict(list)
            for t in turns:
                sessions[t.session].append(t)
            per_cat = defaultdict(int)
            for q in questions:
                per_cat[q.category] += 1
            print(f"{CONV}: {len(turns)} turns in {len(sessions)} sessions, "
                  f"{turns[0].when:%d %b %Y} to {turns[-1].when:%d %b %Y};",
                  f"speakers {sorted({t.speaker for t in turns})}")
            print(f"{len(questions)} questions with evidence:",
                  ", ".join(f"{bench.CATS[c]} {n}" for c, n in sorted(per_cat.items())))
            for t in turns[:3]:
                print("  ", t.dia_id, t.doc[:110])
    """),
    md("""
        ## Vectors, once

        Every system below sees the same MiniLM vectors (as in the benchmark), computed once here and kept in
        memory (the benchmark's `CachedVectors` writes a cache file; this notebook writes nothing).
    """),
    code("""
        if DATA:
            import numpy as np

            from memlineage.index import OnnxMiniLMEmbedder


            class Vectors:
                \"\"\"MiniLM vectors of a fixed text set; the get / many interface bench_locomo's systems use.\"\"\"

                def __init__(self, texts):
                    uniq = sorted(set(texts))
                    self.index = {t: i for i, t in enumerate(uniq)}
                    self.vectors = np.asarray(OnnxMiniLMEmbedder().embed_array(uniq), dtype=np.float32)

                def get(self, text):
                    return self.vectors[self.index[text]]

                def many(self, texts):
                    return [self.get(t).tolist() for t in texts]


            t0 = time.perf_counter()
            vecs = Vectors([t.doc for t in turns] + [q.text for q in questions])
            print(f"{len(vecs.index)} texts embedded in {time.perf_counter() - t0:.1f} s")
    """),
    md("""
        ## Ingest through the write gate

        A `ValueModel` with the defaults scores each candidate: V = goal relevance, salience, utility and novelty
        (weights 0.4 / 0.25 / 0.2 / 0.15) times trust. V decides promotion, decay and forgetting, not whether a
        statement exists: every turn with content is stored (a memory whose kind is left open becomes `semantic`
        at V ≥ 0.6), and only content-free small talk ("ok thanks") stays in its session's short-term buffer
        (FIFO, 10 items), for which `remember_many` returns an unsaved `working` memory. (The seed's gate, which
        buffered every candidate below 0.6, lost half of LoCoMo's evidence turns: `ValueProfile(keep_all=False)`
        and `benchmarks/bench_value_gate.py` compare the two.) One batch per session; the manager's clock is set
        to the session date so that decay is measured in conversation time.
    """),
    code("""
        if DATA:
            from memlineage import InMemoryIndex, MemoryKind, MemoryManager, Scope, ValueModel
            from memlineage.ledger import Ledger

            value_model = ValueModel()
            profile = value_model.profile
            clock = {"now": turns[0].when}
            mm = MemoryManager(ledger=Ledger("sqlite://"), index=InMemoryIndex(),
                               embedder=bench.VectorLookupEmbedder(vecs), value_model=value_model,
                               clock=lambda: clock["now"])
            outcome = {}  # dia_id -> the stored memory, or the unsaved working memory of a buffered turn
            t0 = time.perf_counter()
            for n, session_turns in sessions.items():
                clock["now"] = session_turns[0].when
                scope = Scope(user_id=CONV, session_id=f"session_{n}")
                mems = mm.remember_many([
                    {"content": t.doc, "scope": scope, "source": "user", "valid_from": t.when,
                     "metadata": {"dia_id": t.dia_id}}
                    for t in session_turns
                ])
                outcome.update({t.dia_id: m for t, m in zip(session_turns, mems, strict=True)})
            ingest_s = time.perf_counter() - t0
            stored = {d for d, m in outcome.items() if m.kind is not MemoryKind.WORKING}
            buffered = set(outcome) - stored
            evidence = {d for q in questions for d in q.evidence}
            print(f"ingested {len(turns)} turns in {ingest_s:.1f} s (store threshold {profile.store_threshold})")
            print(f"  stored long-term:            {len(stored):4d}  ({100 * len(stored) / len(turns):.0f} %)")
            print(f"  buffered (short-term only):  {len(buffered):4d}")
            print(f"  evidence turns kept:         {len(evidence & stored):4d} of {len(evidence)}")
            print(f"  in the last session's buffer now: {len(mm.buffered(scope))} (capacity {profile.buffer_size})")
            print("  ledger:", mm.stats(CONV)["by_status"])
            for m in mm.get_many([outcome[d].id for d in sorted(stored)], scope=CONV):
                if m.status.value == "superseded":  # the extractor gave it a slot that a later turn took over
                    print(f"  superseded (slot {m.slot!r}): {m.content[:90]}")
    """),
    md("What the value model saw in the highest- and lowest-valued turns:"),
    code("""
        if DATA:
            ranked = sorted(turns, key=lambda t: outcome[t.dia_id].value)
            print(f"{'V':>5} {'goal':>5} {'sal':>5} {'util':>5} {'nov':>5}  {'type':11} turn")
            for t in ranked[-4:][::-1] + ranked[:4]:
                a = outcome[t.dia_id].assessment
                print(f"{a.score:5.2f} {a.goal_relevance:5.2f} {a.salience:5.2f} {a.utility:5.2f} {a.novelty:5.2f}  "
                      f"{a.info_type or '-':11} {t.doc[:80]}")
    """),
    md("""
        ## Recall evidence for a question

        Hybrid recall (dense + BM25, fused, value re-ranked) within the conversation's scope; each hit carries its
        score parts and the `dia_id` of the turn it came from.
    """),
    code("""
        if DATA:
            clock["now"] = turns[-1].when  # questions are asked at the end of the conversation
            single = [q for q in questions if q.category == 4 and set(q.evidence) <= stored] or questions
            q = single[0]
            print("Q:", q.text, "| evidence:", q.evidence)
            for hit in mm.recall(q.text, scope=Scope(user_id=CONV), k=5, reinforce=False):
                mark = "*" if hit.memory.metadata["dia_id"] in q.evidence else " "
                legs = ("vector", "lexical", "relevance", "value", "final")
                parts = ", ".join(f"{k} {hit.scores[k]:.2f}" for k in legs if k in hit.scores)
                print(f" {mark} {hit.memory.metadata['dia_id']:7} {hit.content[:70]:70}  ({parts})")
    """),
    md("""
        ## Evidence recall@k per category: MemLineage vs baselines

        Same conversation, same vectors, top 20 per question; recall@k = share of a question's evidence turns in
        the top k. Systems: BM25 (`bm25s`, English stop words and stemming), dense (raw Chroma query), MemLineage
        with every turn stored by force (as `bench_locomo.py` runs it) and MemLineage behind its default write gate
        (only the stored turns can be found: small talk stays in the short-term buffer).
    """),
    code("""
        if DATA:
            def memlineage_gated(question):
                res = mm.recall(question.text, scope=Scope(user_id=CONV), k=20, reinforce=False)
                return [h.memory.metadata["dia_id"] for h in res]


            systems = {
                "BM25": lambda: bench.system_bm25(convs, vecs),
                "dense (Chroma)": lambda: bench.system_dense(convs, vecs, bench.chroma_client()),
                "MemLineage, every turn": lambda: bench.system_memlineage(convs, vecs),
                "MemLineage, write gate": lambda: memlineage_gated,
            }
            results = {}
            for name, make in systems.items():
                t0 = time.perf_counter()
                run = make()
                results[name] = bench.score(questions, [run(q) for q in questions])
                print(f"{name:24} R@5 {results[name]['1-4']['R@5']:5.1f}  R@10 {results[name]['1-4']['R@10']:5.1f}  "
                      f"R@20 {results[name]['1-4']['R@20']:5.1f}   ({time.perf_counter() - t0:.1f} s)")
            answerable = [q for q in questions if q.category <= 4]
            ceiling = 100 * sum(len(set(q.evidence) & stored) / len(q.evidence) for q in answerable) / len(answerable)
            print(f"\\nthe write gate kept {ceiling:.1f} % of the evidence of categories 1-4:",
                  "the most it can recall at any k")
    """),
    code("""
        if DATA:
            import matplotlib.pyplot as plt

            groups = [g for g in ("1", "2", "3", "4", "1-4") if all(g in r for r in results.values())]
            first = next(iter(results.values()))
            labels = [
                ("categories 1-4" if g == "1-4" else bench.CATS[int(g)]) + f"\\n(n={first[g]['n']})" for g in groups
            ]
            fig, axes = plt.subplots(1, len(bench.KS), figsize=(15, 4.3), sharey=True)
            width = 0.8 / len(results)
            for ax, k in zip(axes, bench.KS):
                for i, (name, res) in enumerate(results.items()):
                    xs = [j + (i - (len(results) - 1) / 2) * width for j in range(len(groups))]
                    ax.bar(xs, [res[g][f"R@{k}"] for g in groups], width, label=name)
                ax.set_xticks(range(len(groups)), labels, fontsize=8)
                ax.set_title(f"evidence recall@{k}")
                ax.set_ylim(0, 100)
                ax.grid(axis="y", alpha=0.3)
            axes[0].set_ylabel("% of evidence turns retrieved")
            fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(results), fontsize=9)
            fig.suptitle(f"LoCoMo {CONV}: {len(questions)} questions (one conversation; development figures)")
            fig.tight_layout(rect=(0, 0.07, 1, 1))
            plt.show()
    """),
    md("""
        ## Value over time

        Each turn's V at write time against its session date (buffered turns as crosses, the store threshold as a
        line), and, for the stored ones, the effective value at the end of the conversation:
        `V_eff = V · 2^(−Δt / 90 days)` since the memory was written (or last used). A forget sweep archives
        memories whose V_eff falls below 0.2, unless live memories derive from them.
    """),
    code("""
        if DATA:
            from datetime import timedelta

            end = turns[-1].when
            in_ledger = dict(zip(sorted(stored), mm.get_many([outcome[d].id for d in sorted(stored)], scope=CONV)))
            x = {}  # spread each session's turns over a day so that they do not overlap
            for session_turns in sessions.values():
                for i, t in enumerate(session_turns):
                    x[t.dia_id] = t.when + timedelta(days=i / len(session_turns))
            fig, ax = plt.subplots(figsize=(14, 4.8))
            keep = [t for t in turns if t.dia_id in stored]
            drop = [t for t in turns if t.dia_id in buffered]
            ax.scatter([x[t.dia_id] for t in keep], [outcome[t.dia_id].value for t in keep], s=14,
                       label="stored: V at write")
            ax.scatter([x[t.dia_id] for t in drop], [outcome[t.dia_id].value for t in drop], s=14, marker="x",
                       color="grey", alpha=0.6, label="buffered: V at write")
            v_eff = [value_model.memory_effective_value(in_ledger[t.dia_id], end) for t in keep]
            ax.scatter([x[t.dia_id] for t in keep], v_eff,
                       s=8, color="tab:orange", label=f"stored: V_eff on {end:%d %b %Y}")
            ev = [t for t in turns if t.dia_id in evidence]
            ax.scatter([x[t.dia_id] for t in ev], [outcome[t.dia_id].value for t in ev], s=60, facecolors="none",
                       edgecolors="tab:red", linewidths=0.8, label="evidence for a question")
            ax.axhline(profile.store_threshold, color="tab:blue", ls="--", lw=1,
                       label=f"store threshold {profile.store_threshold}")
            ax.axhline(profile.forget_threshold, color="tab:orange", ls=":", lw=1,
                       label=f"forget threshold {profile.forget_threshold}")
            ax.set_ylabel("value")
            ax.set_ylim(0, 1)
            ax.set_title(f"LoCoMo {CONV}: value of each turn over the conversation")
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=6)
            fig.tight_layout()
            plt.show()
            report = mm.sweep(now=end)
            print(f"forget sweep on {end:%d %b %Y}: {report.checked} checked, {len(report.archived)} archived, "
                  f"{len(report.protected)} kept because live memories derive from them")
    """),
    code("""
        if DATA:
            mm.close()
        print(f"notebook ran in {time.perf_counter() - started:.0f} s")
    """),
]


NOTEBOOKS = {
    "01": ("01_core_quickstart.ipynb", QUICKSTART),
    "02": ("02_langchain_travel_agent.ipynb", LANGCHAIN_AGENT),
    "03": ("03_llamaindex_function_agent.ipynb", LLAMAINDEX_AGENT),
    "04": ("04_locomo_real_conversations.ipynb", LOCOMO),
}


def execute(name: str) -> None:
    """Run a notebook top to bottom (nbclient, offline) in a scratch directory and save it with its outputs."""
    import os
    import tempfile

    from nbclient import NotebookClient

    nb = nbformat.read(HERE / name, as_version=4)
    with tempfile.TemporaryDirectory(prefix="memlineage-nb-") as tmp:
        os.environ["IPYTHONDIR"] = str(Path(tmp) / ".ipython")  # no profile written to the user's home
        os.environ["MPLCONFIGDIR"] = str(Path(tmp) / ".matplotlib")
        NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": tmp}}).execute()
    nbformat.write(nb, HERE / name)


if __name__ == "__main__":
    # python notebooks/_build.py [--execute] [01 02 ...]: rebuild (and with --execute, run and keep the outputs:
    # the committed notebooks are executed, so they read as documentation without a kernel).
    args = sys.argv[1:]
    run = "--execute" in args
    which = [a for a in args if a != "--execute"] or ["all"]
    for key, (name, cells) in NOTEBOOKS.items():
        if "all" in which or key in which:
            build(name, cells)
            if run:
                execute(name)
