"""The read-only views: ``recall``, ``explain``, ``audit``, ``activities`` and ``stats``.

Registered on the app by :mod:`memlineage.cli`.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from memlineage.cli._app import (
    ChromaOpt,
    ChromaPortOpt,
    CreateOpt,
    JsonOpt,
    LedgerOpt,
    LiveOpt,
    PathOpt,
    UserOpt,
    _short,
    console,
    err_console,
)
from memlineage.cli._store import _open, _resolve_activity, _resolve_id
from memlineage.ledger import Event
from memlineage.models import SHORT_ID_CHARS, Memory, Scope, short_id
from memlineage.render import explanation_tree


def recall(
    query: str,
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    k: Annotated[int, typer.Option(help="Number of results.")] = 5,
    include_suspect: Annotated[bool, typer.Option(help="Also show suspect memories.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Recall memories for QUERY in a user's scope."""
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        # Read-only views never record usage; --live recall is an ordinary reader and records it.
        res = mm.recall(query, scope=Scope(user_id=user), k=k, include_suspect=include_suspect, reinforce=live)
        if as_json:
            rows = [{"score": h.score, **h.memory.model_dump(mode="json")} for h in res]
            typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
            return
        table = Table("score", "id", "status", "source", "content")
        for h in res:
            table.add_row(f"{h.score:.3f}", short_id(h.id), h.memory.status.value, str(h.memory.source), h.content)
        console.print(table)
        if not res and k > 0:
            err_console.print(f"no memory of user {user!r} matches; `memlineage stats --user {user}` shows counts")


#: What ``memlineage explain --format`` accepts.
EXPLAIN_FORMATS = ("tree", "text", "mermaid", "dot", "prov-json")


def explain(
    memory_id: str,
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    fmt: Annotated[str, typer.Option("--format", help="tree, text, mermaid, dot or prov-json.")] = "tree",
) -> None:
    """Print the provenance chain of a memory (MEMORY_ID may be the 8-character short id `recall` prints)."""
    if fmt not in EXPLAIN_FORMATS:
        err_console.print(f"[red]error:[/] unknown --format {fmt!r}; use one of: {', '.join(EXPLAIN_FORMATS)}")
        raise typer.Exit(2)
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        scope = Scope(user_id=user)
        ex = mm.explain(_resolve_id(mm, memory_id, scope), scope=scope)
        if fmt == "mermaid":
            typer.echo(ex.to_mermaid())
        elif fmt == "dot":
            typer.echo(ex.to_dot())
        elif fmt == "prov-json":
            typer.echo(ex.to_json())
        elif fmt == "text":
            typer.echo(ex.to_text())
        else:
            console.print(explanation_tree(ex))


def audit(
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    limit: Annotated[int, typer.Option(help="Last N events.")] = 50,
    event_type: Annotated[
        list[str] | None, typer.Option("--type", help="Only this event type (repeatable), e.g. --type suspect.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a user's event log, one readable row per event (--json: the full events)."""
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        scope = Scope(user_id=user)
        events = mm.audit(scope, limit=limit, types=event_type or None)
        if as_json:
            out = [{**e, "at": e["at"].isoformat()} for e in events]
            typer.echo(json.dumps(out, ensure_ascii=False, indent=2, default=str))
            return
        ids = list(dict.fromkeys(e["memory_id"] for e in events if e["memory_id"]))
        mems = {m.id: m for m in mm.get_many(ids, scope=scope) if m is not None} if ids else {}
        for e in events:
            typer.echo(audit_row(e, mems.get(e["memory_id"] or "")))
        if not events and event_type:
            known = sorted({e.type for e in mm.audit(scope)})
            err_console.print(
                f"no events of type {', '.join(event_type)} for user {user!r}; types in this log: "
                f"{', '.join(known) or 'none'}"
            )
        elif not events:
            err_console.print(f"no events for user {user!r}")


def audit_row(event: Event, memory: Memory | None = None) -> str:
    """One line for an audit event: time, type, short memory id, and what happened in words."""
    data = event["data"] or {}
    if event.type == "policy_decision":
        what = f"{data.get('policy_id')} -> {data.get('effect')} on {data.get('operation')}: {data.get('reason', '')}"
    else:
        parts = []
        if memory is not None:
            parts.append(f"{memory.source}: {_short(memory.content, 60)}")
        if data.get("reason"):
            parts.append(str(data["reason"]))
        elif not parts:
            parts.append(", ".join(f"{k}={v}" for k, v in data.items() if v not in (None, [], {}, "")))
        what = " | ".join(parts)
    mid = short_id(event["memory_id"] or "") or "-"
    return f"{event['at'].isoformat(timespec='seconds')}  {event.type:<15} {mid:<8}  {what}"


def activities(
    user: UserOpt,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    run: Annotated[
        str | None, typer.Option(help="One run (id or its short id, as `activities` prints it) and the calls it made.")
    ] = None,
    kind: Annotated[
        list[str] | None, typer.Option(help="Only this kind (repeatable): agent_run, llm_call, tool_call...")
    ] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only calls that failed (outcome error).")] = False,
    limit: Annotated[int | None, typer.Option(help="Last N activities.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List a user's runs, tool calls and LLM calls with their outcome, input and error."""
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        scope = Scope(user_id=user)
        run_id = _resolve_activity(mm, run, scope) if run else None
        acts = mm.activities(scope, run_id=run_id, kinds=kind, outcome="error" if failed else None, limit=limit)
        if as_json:
            typer.echo(json.dumps([a.model_dump(mode="json") for a in acts], ensure_ascii=False, indent=2))
            return
        # Ids are often time-ordered (UUIDv7: the head is the time): show the shortest tail that tells them apart.
        n = _unique_suffix([a.id for a in acts] + [a.parent_id for a in acts if a.parent_id])
        for a in acts:
            detail = a.metadata.get("error") or a.metadata.get("input") or a.metadata.get("reason") or ""
            parent = f"<- {a.parent_id[-n:]}" if a.parent_id else ""
            typer.echo(
                f"{a.started_at.isoformat(timespec='seconds')}  {a.id[-n:]}  {a.kind:<12} {a.name or '-':<18} "
                f"{a.outcome or '-':<8} {parent:<{n + 3}} {_short(str(detail), 70)}".rstrip()
            )
        if not acts:
            known = sorted({a.kind for a in mm.activities(scope)})
            hint = f"; kinds in this log: {', '.join(known) or 'none'}" if kind else ""
            err_console.print(f"no activities for user {user!r} with these filters{hint}")


def stats(
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
    live: LiveOpt = False,
    user: Annotated[str | None, typer.Option("--user")] = None,
) -> None:
    """Counts per status, kind and source."""
    with _open(path, ledger_url, chroma_host, create=create, live=live, chroma_port=chroma_port) as mm:
        console.print_json(json.dumps(mm.stats(Scope(user_id=user) if user else None)))


def _unique_suffix(ids: list[str], shortest: int = SHORT_ID_CHARS) -> int:
    """Length of the shortest tail (>= ``shortest``) that keeps the distinct ``ids`` distinct."""
    distinct = set(ids)
    n = shortest
    while n < max((len(i) for i in distinct), default=0) and len({i[-n:] for i in distinct}) < len(distinct):
        n += 1
    return n
