"""The ``memlineage`` command: a demo plus read-only views (recall, explain, audit, stats) of a store."""

from __future__ import annotations

import importlib
import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from memlineage.errors import MemLineageError
from memlineage.manager import MemoryManager
from memlineage.models import Scope

app = typer.Typer(help="MemLineage: agent memory with lineage, policies and value.", no_args_is_help=True)
console = Console()

PathOpt = Annotated[
    Path | None, typer.Option("--path", help="Store directory (default $MEMLINEAGE_HOME or ./.memlineage).")
]
UserOpt = Annotated[str, typer.Option("--user", help="user_id of the scope to read.")]


def _open(path: Path | None) -> MemoryManager:
    try:
        return MemoryManager.open(path)
    except MemLineageError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc


@app.command()
def demo(
    path: Annotated[Path | None, typer.Option(help="Store directory; default a fresh temporary one.")] = None,
    agent: Annotated[
        bool, typer.Option("--agent/--core", help="Run the LangChain AgentExecutor story (needs the langchain extra).")
    ] = True,
    model: Annotated[
        str | None,
        typer.Option(help="Any LangChain init_chat_model spec, e.g. openai:gpt-4o-mini; default: scripted, offline."),
    ] = None,
) -> None:
    """Run the travel-planning story on a fresh embedded store, offline."""
    if agent:
        # The agent story lives in the LangChain adapter package; the core never imports it statically.
        try:
            module = importlib.import_module("memlineage_langchain._demo")
        except ImportError:
            module = None
        if module is not None:
            module.run_agent_demo(path, console, model=model)
            return
        console.print("[yellow]langchain extra not installed; running the core story instead[/]")
    from memlineage._demo import run_core_demo

    with tempfile.TemporaryDirectory(prefix="memlineage-demo-") as tmp:
        run_core_demo(path or Path(tmp), console)


@app.command()
def recall(
    query: str,
    user: UserOpt,
    path: PathOpt = None,
    k: Annotated[int, typer.Option(help="Number of results.")] = 5,
    include_suspect: Annotated[bool, typer.Option(help="Also show suspect memories.")] = False,
) -> None:
    """Recall memories for QUERY in a user's scope."""
    with _open(path) as mm:
        try:
            res = mm.recall(query, scope=Scope(user_id=user), k=k, include_suspect=include_suspect)
        except MemLineageError as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2) from exc
        table = Table("score", "id", "status", "source", "content")
        for h in res:
            table.add_row(f"{h.score:.3f}", h.id[:8], h.memory.status.value, str(h.memory.source), h.content)
        console.print(table)


@app.command()
def explain(
    memory_id: str,
    user: UserOpt,
    path: PathOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="tree, mermaid, dot or prov-json.")] = "tree",
) -> None:
    """Print the provenance chain of a memory."""
    with _open(path) as mm:
        try:
            scope = Scope(user_id=user)
            ex = mm.explain(_resolve_id(mm, memory_id, scope), scope=scope)
        except MemLineageError as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2) from exc
        if fmt == "mermaid":
            typer.echo(ex.to_mermaid())
        elif fmt == "dot":
            typer.echo(ex.to_dot())
        elif fmt == "prov-json":
            typer.echo(ex.to_json())
        else:
            console.print(explanation_tree(ex))


@app.command()
def audit(user: UserOpt, path: PathOpt = None, limit: Annotated[int, typer.Option(help="Last N events.")] = 50) -> None:
    """Show a user's event log."""
    with _open(path) as mm:
        table = Table("at", "event", "memory", "data")
        for e in mm.audit(Scope(user_id=user), limit=limit):
            table.add_row(
                e["at"].isoformat(timespec="seconds"), e.type, (e["memory_id"] or "")[:8], json.dumps(e["data"])
            )
        console.print(table)


@app.command()
def stats(path: PathOpt = None, user: Annotated[str | None, typer.Option("--user")] = None) -> None:
    """Counts per status, kind and source."""
    with _open(path) as mm:
        console.print_json(json.dumps(mm.stats(Scope(user_id=user) if user else None)))


def _resolve_id(mm: MemoryManager, memory_id: str, scope: Scope) -> str:
    """Accept the short ids ``recall`` prints: a unique prefix of an id in the scope."""
    if mm.get(memory_id, scope=scope) is not None or len(memory_id) >= 36:
        return memory_id
    matches = [i for i in mm.ledger.ids_in_scope(scope) if i.startswith(memory_id)]
    return matches[0] if len(matches) == 1 else memory_id


def explanation_tree(ex: Any) -> Tree:
    """A rich tree of an :class:`~memlineage.lineage.Explanation` (premises as children)."""
    by_id = {m.id: m for m in ex.memories}
    kids: dict[str, list[str]] = {}
    for src, rel, dst in ex.edges:
        if rel == "wasDerivedFrom" and dst in by_id:
            kids.setdefault(src, []).append(dst)
    colour = {"active": "green", "suspect": "yellow"}

    def label(mid: str) -> str:
        m = by_id[mid]
        c = colour.get(m.status.value, "red")
        return f"[{c}]{m.status.value}[/] [bold]{m.source}[/] {m.content}  [dim](trust {m.trust:.2f})[/]"

    root = Tree(label(ex.memory.id))

    def add(node: Tree, mid: str, seen: frozenset[str]) -> None:
        for child in kids.get(mid, []):
            if child not in seen:
                add(node.add(label(child)), child, seen | {child})

    add(root, ex.memory.id, frozenset({ex.memory.id}))
    return root


if __name__ == "__main__":  # pragma: no cover
    app()
