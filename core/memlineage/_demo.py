"""The core travel-planning story behind ``memlineage demo --core`` (no framework needed)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from memlineage.capture import RunRecorder, ToolCallSpec
from memlineage.manager import MemoryManager
from memlineage.models import Scope, short_id
from memlineage.render import explanation_tree


def run_core_demo(path: Path, console: Console) -> None:
    """Run the story on a fresh embedded store in ``path`` and print each step."""
    console.print(Panel.fit("MemLineage core demo: a trip plan whose premise gets corrected", style="bold cyan"))
    with console.status("opening the embedded store and loading the embedding model..."):
        mm = MemoryManager.open(path)
        mm.recall("warm-up", scope=Scope(user_id="demo-warmup"))
    with mm:
        alice = Scope(user_id="alice", session_id="trip-1")
        city = mm.remember("I want to travel to Paris", scope=alice, source="user", kind="semantic", slot="trip/city")
        dates = mm.remember("My trip is from 3 to 7 May", scope=alice, source="user", kind="semantic")
        # An agent run, recorded the way every framework adapter records one (memlineage.capture).
        recorder = RunRecorder(mm)
        run = recorder.start_run(alice, "run-1", "Find me a flight and a hotel", recalled=[city, dates])
        recorder.model_step(run, tool_calls=[ToolCallSpec("call_1", "flight_api", {"city": "Paris", "date": "3 May"})])
        flight = recorder.tool_end(run, "call_1", "Flight to Paris on 3 May costs 120 EUR", tags=["flight_price"])
        plan = recorder.answer(run, "Recommend Hotel Lumière near the Louvre, fly on the 120 EUR flight")
        recorder.end_run(run)
        assert flight is not None and plan is not None
        _table(console, "1. Stored with lineage", mm, alice, [city.id, dates.id, flight.id, plan.id])
        console.print("\n[bold]2. The user corrects the destination:[/] 'Actually, I'm going to Lyon, not Paris.'")
        report = mm.supersede(city.id, "I want to travel to Lyon", scope=alice, source="user")
        assert report.memory is not None  # supersede always returns the new version
        console.print(f"   cascade marked {len(report.suspect)} derived memories suspect")
        for sid in report.suspect:
            console.print(
                f"   {short_id(sid)} rested on the destination via [bold]{report.attribution.get(sid, 'given')}[/]"
            )
        _table(console, "   after the correction", mm, alice, [city.id, report.memory.id, flight.id, plan.id])
        res = mm.recall("which hotel should I book?", scope=alice, k=3)
        console.print("\n[bold]3. Recall for 'which hotel should I book?'[/] (suspect memories are not served):")
        for h in res:
            console.print(f"   {h.score:.2f}  {h.content}  [dim]{h.lineage}[/]")
        console.print("\n[bold]4. explain(recommendation)[/]: the provenance chain")
        console.print(explanation_tree(mm.explain(plan.id, scope=alice)))
        console.print("\n[bold]Mermaid[/] (paste into any Mermaid viewer):")
        console.print(mm.explain(plan.id, scope=alice).to_mermaid(), soft_wrap=True, markup=False)


def _table(console: Console, title: str, mm: MemoryManager, scope: Scope, ids: list[str]) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("id", "status", "source", "trust", "premises (attribution)", "content"):
        table.add_column(col)
    for m in mm.get_many(ids, scope=scope):
        if m is not None:
            how = mm.explain(m.id, scope=scope).attribution
            premises = ", ".join(f"{short_id(p)} ({how.get((m.id, p), 'given')})" for p in m.derived_from) or "-"
            table.add_row(short_id(m.id), m.status.value, str(m.source), f"{m.trust:.2f}", premises, m.content)
    console.print(table)
