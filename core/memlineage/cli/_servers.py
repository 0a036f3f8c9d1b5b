"""Commands that serve a store: the MCP server (``mcp``) and the web viewer (``serve``).

Registered on the app by :mod:`memlineage.cli`.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from memlineage.cli._app import ChromaOpt, ChromaPortOpt, CreateOpt, LedgerOpt, PathOpt, _Fail, err_console
from memlineage.cli._store import _ensure_exists, _redacted, _settings
from memlineage.errors import MemLineageError, StoreLockedError
from memlineage.ledger import SQLAlchemyError
from memlineage.manager import MemoryManager
from memlineage.models import Scope


def mcp_command(
    user: Annotated[
        str | None,
        typer.Option("--user", envvar="MEMLINEAGE_MCP_USER", help="user_id whose memory the server serves."),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", envvar="MEMLINEAGE_MCP_AGENT", help="agent_id of the scope (optional).")
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", envvar="MEMLINEAGE_MCP_SESSION", help="session_id recorded on writes (optional)."),
    ] = None,
    transport: Annotated[str, typer.Option("--transport", help="stdio (default) or http (streamable HTTP).")] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="HTTP port; the endpoint is /mcp.")] = 8000,
    allow_user_header: Annotated[
        bool,
        typer.Option(
            "--allow-user-header",
            help="HTTP only: take each request's user from the X-MemLineage-User header (set it in an "
            "authenticating proxy; anyone who can reach the port can claim any user). --user is then the default.",
        ),
    ] = False,
    agent_origin_only: Annotated[
        bool,
        typer.Option("--agent-origin-only", help="Every write is the agent's (the tools' origin='user' is ignored)."),
    ] = False,
    k: Annotated[int, typer.Option("--k", min=1, max=20, help="Default number of search results.")] = 5,
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    create: CreateOpt = False,
) -> None:
    r"""Serve a user's memory to MCP clients: search, remember, correct, forget, explain and lineage resources.

    The scope is the server's (--user/--agent/--session), never the model's. An embedded store has one writer
    process: while this server runs, nothing else may open that store for writing (use server mode to share it).
    Needs the mcp extra: pip install 'memlineage\[mcp]'.
    """
    try:
        from memlineage import mcp_server  # deferred: the mcp SDK is an extra, and heavy
    except ImportError as exc:
        hint = escape(f"pip install 'memlineage[mcp]' ({exc})")
        err_console.print(f"[red]error:[/] the MCP server needs the mcp extra: {hint}")
        raise typer.Exit(2) from None
    if transport not in ("stdio", "http"):
        err_console.print(f"[red]error:[/] unknown --transport {transport!r}; use stdio or http")
        raise typer.Exit(2)
    if allow_user_header and transport != "http":
        err_console.print("[red]error:[/] --allow-user-header needs --transport http")
        raise typer.Exit(2)
    if not user and not allow_user_header:
        err_console.print(
            "[red]error:[/] the server needs a user: --user (or MEMLINEAGE_MCP_USER), or --allow-user-header over http"
        )
        raise typer.Exit(2)
    settings = None
    try:
        scope = Scope(user_id=user, agent_id=agent, session_id=session) if user else None
        settings = _settings(path, ledger_url, chroma_host, chroma_port)
        _ensure_exists(settings, create)
        try:
            mm = MemoryManager.from_settings(settings)
        except StoreLockedError as exc:
            msg = (
                f"{exc}\nhint: an embedded store has one writer process; stop the application that holds it, or "
                "use server mode (--ledger-url and --chroma-host) to share the store"
            )
            raise _Fail(msg) from exc
        except (ValueError, ConnectionError) as exc:  # chromadb's HttpClient: an unreachable Chroma server
            if not settings.chroma_host:
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            msg = f"cannot reach the Chroma server at {settings.chroma_host}:{settings.chroma_port} ({first})"
            raise _Fail(msg) from None
    except (_Fail, MemLineageError, SQLAlchemyError) as exc:
        err_console.print(f"[red]error:[/] {escape(_redacted(str(exc), settings))}")
        raise typer.Exit(2) from None
    with mm:
        mcp_server.serve(
            mm,
            scope,
            transport="http" if transport == "http" else "stdio",
            host=host,
            port=port,
            allow_user_header=allow_user_header,
            k=k,
            allow_user_origin=not agent_origin_only,
        )


def serve(
    path: PathOpt = None,
    ledger_url: LedgerOpt = None,
    chroma_host: ChromaOpt = None,
    chroma_port: ChromaPortOpt = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="TCP port on 127.0.0.1 (0: any free one).")
    ] = 8765,
    user: Annotated[str | None, typer.Option("--user", help="The user whose pages open first.")] = None,
    allow_writes: Annotated[
        bool,
        typer.Option(
            "--allow-writes",
            help="Open the live store as its writer and enable undo (default: read a snapshot, never write).",
        ),
    ] = False,
) -> None:
    """Browse a store in a web browser: memories, lineage graphs, impact, audit trail and update decisions.

    Listens on 127.0.0.1 only. Read-only by default (an embedded store is read from a snapshot, as the other
    views do); --allow-writes opens the live store (and its Chroma server, --chroma-host) as a writer for undo.
    Needs the viewer extra (starlette, uvicorn, jinja2).
    """
    try:
        from memlineage.viewer import serve as run_viewer  # lazy: the CLI stays fast to import
    except ImportError as exc:
        hint = escape(f"pip install 'memlineage[viewer]' ({exc})")
        err_console.print(f"[red]error:[/] the viewer needs the viewer extra: {hint}")
        raise typer.Exit(2) from None
    settings = None
    try:
        settings = _settings(path, ledger_url, chroma_host, chroma_port)
        _ensure_exists(settings, False)
        run_viewer(settings, port=port, user=user, allow_writes=allow_writes, echo=lambda line: typer.echo(line))
    except StoreLockedError as exc:
        err_console.print(f"[red]error:[/] {escape(str(exc))}\nhint: drop --allow-writes to view a snapshot")
        raise typer.Exit(2) from None
    except (_Fail, MemLineageError, SQLAlchemyError) as exc:
        err_console.print(f"[red]error:[/] {escape(_redacted(str(exc), settings))}")
        raise typer.Exit(2) from None
