"""An MCP server over a MemLineage store: memory tools and lineage resources for any MCP client.

Built on the official ``mcp`` Python SDK (``FastMCP``; ``pip install 'memlineage[mcp]'``) and started by
``memlineage mcp`` over stdio or streamable HTTP. The tools are :class:`memlineage.tools.MemoryTools` (the same
names, descriptions, checks and model-facing text as the LangChain and LlamaIndex tools) plus ``explain_memory``:

- ``search_memory(query, k)``, ``remember(content, origin)``, ``correct_memory(memory_id, new_content, origin)``,
  ``forget_memory(memory_id, reason)``, ``explain_memory(memory_id)``.
- Resource template ``memlineage://memory/{memory_id}/lineage``: the memory, its explanation (text and PROV-JSON),
  ancestors and descendants, as JSON.

Whose memory: the scope is the server's (``--user``/``--agent``/``--session``), never a tool argument: no tool has
a user parameter and a call that passes one (or any argument the tool does not declare) is refused. Over HTTP a
server started with ``allow_user_header=True`` (``--allow-user-header``) takes the user of each request from the
``X-MemLineage-User`` header instead (for a deployment behind a proxy that authenticates the caller and sets it);
without that flag a request carrying the header is refused rather than served as the configured user.

Every tool call is a ``tool_call`` activity of the scope (``metadata``: ``input``, ``client`` = the MCP client's
``clientInfo`` name/version/title from its ``initialize`` request, ``transport``, ``mcp_session`` and, when it
failed, ``error``), ended with outcome ``success`` or ``error``. Failures come back as MCP tool errors
(``isError``) with a short message; the server keeps running. Unknown ids and another user's ids get the same
answer, which reveals nothing about the other user.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ResourceError, ToolError
from mcp.types import ContentBlock, ToolAnnotations
from pydantic import Field, ValidationError

from memlineage.errors import InvalidInputError, MemoryNotFoundError, ScopeViolationError
from memlineage.manager import MemoryManager
from memlineage.models import Activity, Memory, Scope, new_id
from memlineage.tools import (
    ARG_SCHEMAS,
    MAX_K,
    TOOL_SPECS,
    MemoryToolError,
    MemoryTools,
    marker,
    recalled_block,
    recalled_line,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["EXPLAIN_TOOL", "LINEAGE_URI", "USER_HEADER", "MemoryMCP", "build_server", "serve"]

log = logging.getLogger(__name__)

#: The HTTP header that names the user of a request, honoured only with ``allow_user_header=True``.
USER_HEADER = "X-MemLineage-User"
#: The lineage resource template.
LINEAGE_URI = "memlineage://memory/{memory_id}/lineage"
#: Name of the explain tool (the other names come from :data:`memlineage.tools.TOOL_SPECS`).
EXPLAIN_TOOL = "explain_memory"

_ID = re.compile(r"^\[?\s*(?:m:)?\s*([0-9a-fA-F][0-9a-fA-F-]{5,35})\s*\]?$")
_MAX_TOOLKITS = 256


def _described(tool: str, arg: str) -> str:
    return ARG_SCHEMAS[tool].model_fields[arg].description or arg


@dataclass
class _Toolkit:
    tools: MemoryTools
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Options(TypedDict, total=False):
    """The keyword options of :class:`MemoryMCP`, as :func:`build_server` and :func:`serve` pass them on."""

    allow_user_header: bool
    k: int
    allow_user_origin: bool
    name: str
    host: str
    port: int


class MemoryMCP:
    """The MCP server of one store: tools, the lineage resource, scope resolution and activity recording.

    Args:
        manager: The open store (the caller closes it).
        scope: The scope every call works in; with ``allow_user_header`` the default for requests without the
            header (None: such requests are refused).
        allow_user_header: Take the user of an HTTP request from ``X-MemLineage-User`` (agent and session stay the
            configured ones). Only for servers behind something that authenticates the caller and sets the header.
        k: Default number of search results.
        allow_user_origin: See :class:`~memlineage.tools.MemoryTools` (False: every write is the agent's).
        name: Server name announced to clients.
        host: Bind address for HTTP.
        port: Port for HTTP.

    Raises:
        InvalidInputError: no scope and no per-request user, or a bad ``k``.
    """

    def __init__(
        self,
        manager: MemoryManager,
        scope: Scope | None,
        *,
        allow_user_header: bool = False,
        k: int = 5,
        allow_user_origin: bool = True,
        name: str = "memlineage",
        host: str = "127.0.0.1",
        port: int = 8000,
    ) -> None:
        if scope is None and not allow_user_header:
            msg = "the MCP server needs a user (--user); MemLineage never serves a shared pool"
            raise InvalidInputError(msg)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            msg = f"k must be an int in [1, {MAX_K}], got {k!r}"
            raise InvalidInputError(msg)
        self.manager = manager
        self.scope = scope
        self.allow_user_header = allow_user_header
        self.k = k
        self.allow_user_origin = allow_user_origin
        self._toolkits: OrderedDict[Scope, _Toolkit] = OrderedDict()
        self._toolkits_lock = threading.Lock()
        self.server = _Server(self, name=name, host=host, port=port, log_level="WARNING", instructions=_INSTRUCTIONS)
        self._register()

    # ------------------------------------------------------------------ scope and client
    def scope_of(self, ctx: Context) -> Scope:
        """The scope of the request in ``ctx``: the configured one, or the header's user when allowed.

        Raises:
            MemoryToolError: the request names a user this server may not serve, or names none when it must.
        """
        request = ctx.request_context.request
        headers = getattr(request, "headers", None)
        named = headers.get(USER_HEADER) if headers is not None else None
        if named is not None:
            if not self.allow_user_header:
                msg = (
                    f"this server serves its configured user and does not accept the {USER_HEADER} header "
                    "(start it with --allow-user-header behind an authenticating proxy)"
                )
                raise MemoryToolError(msg)
            base = self.scope
            try:
                return Scope(
                    user_id=named.strip(),
                    agent_id=base.agent_id if base else None,
                    session_id=base.session_id if base else None,
                )
            except InvalidInputError:
                raise MemoryToolError(f"the {USER_HEADER} header does not name a valid user") from None
        if self.scope is None:
            raise MemoryToolError(f"no user: this server takes the user from the {USER_HEADER} header")
        return self.scope

    def toolkit(self, scope: Scope) -> _Toolkit:
        """The :class:`~memlineage.tools.MemoryTools` of ``scope`` (kept, so short ids it showed resolve)."""
        with self._toolkits_lock:
            kit = self._toolkits.get(scope)
            if kit is None:
                kit = _Toolkit(MemoryTools(self.manager, scope, k=self.k, allow_user_origin=self.allow_user_origin))
                self._toolkits[scope] = kit
                while len(self._toolkits) > _MAX_TOOLKITS:
                    self._toolkits.popitem(last=False)
            self._toolkits.move_to_end(scope)
            return kit

    @staticmethod
    def client_of(ctx: Context) -> dict[str, Any]:
        """Who is calling: the ``clientInfo`` of the MCP ``initialize`` request, the transport and session."""
        params = getattr(ctx.request_context.session, "client_params", None)
        info = getattr(params, "clientInfo", None)
        client = {"name": getattr(info, "name", None), "version": getattr(info, "version", None)}
        if getattr(info, "title", None):
            client["title"] = info.title  # type: ignore[union-attr]
        request = ctx.request_context.request
        out: dict[str, Any] = {"client": client, "transport": "http" if request is not None else "stdio"}
        headers = getattr(request, "headers", None)
        if headers is not None and headers.get("mcp-session-id"):
            out["mcp_session"] = headers.get("mcp-session-id")
        return out

    # ------------------------------------------------------------------ one tool call
    async def call(
        self, ctx: Context, tool: str, arguments: dict[str, Any], run: Callable[[_Toolkit, str], str]
    ) -> str:
        """Run one tool call as an activity of the request's scope; failures become :class:`ToolError`."""
        return await asyncio.to_thread(self._call_sync, ctx, tool, arguments, run)

    def _call_sync(
        self, ctx: Context, tool: str, arguments: dict[str, Any], run: Callable[[_Toolkit, str], str]
    ) -> str:
        try:
            scope = self.scope_of(ctx)
        except MemoryToolError as exc:
            raise ToolError(str(exc)) from None
        aid = self._record(ctx, scope, tool, arguments)
        try:
            kit = self.toolkit(scope)
            with kit.lock:
                result = run(kit, aid)
        except MemoryToolError as exc:
            self._end(scope, aid, "error", str(exc))
            raise ToolError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a tool call never takes the server down
            log.warning("memlineage MCP tool %s failed", tool, exc_info=True)
            msg = f"the memory store failed ({type(exc).__name__}); try again later"
            self._end(scope, aid, "error", msg)
            raise ToolError(msg) from None
        self._end(scope, aid, "success", None)
        return result

    def refuse(self, ctx: Context, tool: str, arguments: dict[str, Any], message: str) -> None:
        """Record a call refused before it ran (unknown arguments) as a failed activity, when a scope is known."""
        try:
            scope = self.scope_of(ctx)
        except MemoryToolError:
            return
        try:
            aid = self._record(ctx, scope, tool, arguments)
        except ToolError:  # logged; the caller still gets the refusal itself
            return
        self._end(scope, aid, "error", message)

    def _record(self, ctx: Context, scope: Scope, tool: str, arguments: dict[str, Any]) -> str:
        args = {k: (v[:500] if isinstance(v, str) else v) for k, v in arguments.items()}
        try:
            args = json.loads(json.dumps(args, default=str))
            act = self.manager.record_activity(
                Activity(
                    id=new_id(),
                    kind="tool_call",
                    name=tool,
                    scope=scope,
                    metadata={"input": args, "protocol": "mcp", **self.client_of(ctx)},
                )
            )
        except Exception as exc:  # noqa: BLE001 - a tool call never takes the server down
            log.warning("memlineage MCP: cannot record the %s call: %s", tool, exc)
            raise ToolError(f"the memory store failed ({type(exc).__name__}); nothing was done") from None
        return act.id

    def _end(self, scope: Scope, aid: str, outcome: str, error: str | None) -> None:
        try:
            self.manager.end_activity(aid, scope=scope, outcome=outcome, metadata={"error": error} if error else None)
        except Exception as exc:  # noqa: BLE001 - the call's answer matters more than closing its record
            log.warning("memlineage MCP: cannot end activity %s: %s", aid, exc)

    # ------------------------------------------------------------------ explain and lineage
    def resolve_any(self, scope: Scope, memory_id: str) -> Memory:
        """A memory of ``scope`` in any status, by full id, ``m:<short id>`` or ``[m:<short id>]``.

        Raises:
            MemoryToolError: malformed, unknown, another user's, or ambiguous id (one message for unknown and
                another user's).
        """
        return self.toolkit(scope).tools.resolve(memory_id, live=False)

    def explain_text(self, scope: Scope, memory_id: str) -> str:
        """``explain_memory``: where a memory came from, as an indented tree of premises and activities."""
        mem = self.resolve_any(scope, memory_id)
        try:
            ex = self.manager.explain(mem.id, scope=scope)
        except (MemoryNotFoundError, ScopeViolationError):
            raise MemoryToolError(f"no memory {marker(mem.id)} in this user's memory") from None
        # every memory as one quoted line (who said it, when): a tool result's text never poses as another line
        lines = [f"{'  ' * ex.depth.get(m.id, 0)}{recalled_line(m)}" for m in [ex.memory, *ex.ancestors]]
        head = (
            f"{marker(mem.id)} is {mem.status.value}; it and the premises it was derived from (wasDerivedFrom), "
            "nearest first, indented by distance:"
        )
        decided = [f"- decision {d.id}: {d.name} ({d.outcome or 'applied'})" for d in ex.decisions]
        return "\n".join([recalled_block(head, lines), *decided])

    def lineage(self, scope: Scope, memory_id: str) -> dict[str, Any]:
        """The lineage resource: the memory, its explanation, ancestors and descendants (JSON-ready)."""
        mem = self.resolve_any(scope, memory_id)
        ex = self.manager.explain(mem.id, scope=scope)
        return {
            "memory": _brief(mem),
            "explanation": ex.to_text(),
            "ancestors": [_brief(m) for m in self.manager.ancestors(mem.id, scope=scope)],
            "descendants": [_brief(m) for m in self.manager.descendants(mem.id, scope=scope)],
            "revisions": [_brief(m) for m in ex.revisions],
            "prov": ex.to_prov_json(),
        }

    # ------------------------------------------------------------------ registration
    def _register(self) -> None:
        srv = self.server
        spec = TOOL_SPECS

        @srv.tool(
            name=spec["search"].name, description=spec["search"].description, annotations=_READ, structured_output=False
        )
        async def search_memory(
            query: Annotated[str, Field(description=_described("search", "query"))],
            ctx: Context,
            k: Annotated[int | None, Field(description=_described("search", "k"))] = None,
        ) -> str:
            return await self.call(
                ctx,
                spec["search"].name,
                {"query": query, "k": k},
                lambda kit, aid: kit.tools.search(query, k, activity_id=aid),
            )

        @srv.tool(
            name=spec["remember"].name,
            description=spec["remember"].description,
            annotations=_WRITE,
            structured_output=False,
        )
        async def remember(
            content: Annotated[str, Field(description=_described("remember", "content"))],
            ctx: Context,
            origin: Annotated[Literal["user", "agent"], Field(description=_described("remember", "origin"))] = "agent",
        ) -> str:
            return await self.call(
                ctx,
                spec["remember"].name,
                {"content": content, "origin": origin},
                lambda kit, aid: kit.tools.remember(content, origin, activity_id=aid),
            )

        @srv.tool(
            name=spec["correct"].name,
            description=spec["correct"].description,
            annotations=_WRITE,
            structured_output=False,
        )
        async def correct_memory(
            memory_id: Annotated[str, Field(description=_described("correct", "memory_id"))],
            new_content: Annotated[str, Field(description=_described("correct", "new_content"))],
            ctx: Context,
            origin: Annotated[Literal["user", "agent"], Field(description=_described("correct", "origin"))] = "user",
        ) -> str:
            return await self.call(
                ctx,
                spec["correct"].name,
                {"memory_id": memory_id, "new_content": new_content, "origin": origin},
                lambda kit, aid: kit.tools.correct(memory_id, new_content, origin, activity_id=aid),
            )

        @srv.tool(
            name=spec["forget"].name,
            description=spec["forget"].description,
            annotations=_WRITE,
            structured_output=False,
        )
        async def forget_memory(
            memory_id: Annotated[str, Field(description=_described("forget", "memory_id"))],
            reason: Annotated[str, Field(description=_described("forget", "reason"))],
            ctx: Context,
        ) -> str:
            return await self.call(
                ctx,
                spec["forget"].name,
                {"memory_id": memory_id, "reason": reason},
                lambda kit, aid: kit.tools.forget(memory_id, reason, activity_id=aid),
            )

        @srv.tool(name=EXPLAIN_TOOL, description=_EXPLAIN_DESCRIPTION, annotations=_READ, structured_output=False)
        async def explain_memory(
            memory_id: Annotated[str, Field(description="The id of the memory, as shown by search_memory.")],
            ctx: Context,
        ) -> str:
            return await self.call(
                ctx,
                EXPLAIN_TOOL,
                {"memory_id": memory_id},
                lambda kit, aid: self.explain_text(kit.tools.scope, memory_id),
            )

        @srv.resource(
            LINEAGE_URI,
            name="memory_lineage",
            description="A memory's lineage as JSON: the memory, its explanation (text and PROV-JSON), its "
            "ancestors (premises, nearest first), descendants (what was derived from it) and earlier versions.",
            mime_type="application/json",
        )
        async def memory_lineage(memory_id: str, ctx: Context) -> str:
            def read() -> str:
                try:
                    scope = self.scope_of(ctx)
                    return json.dumps(self.lineage(scope, memory_id), ensure_ascii=False, indent=2, default=str)
                except MemoryToolError as exc:
                    raise ResourceError(str(exc)) from None
                except (MemoryNotFoundError, ScopeViolationError):
                    raise ResourceError("no such memory in this user's memory") from None
                except Exception as exc:  # noqa: BLE001 - a read never takes the server down nor shows internals
                    log.warning("memlineage MCP: lineage of %s failed", memory_id, exc_info=True)
                    raise ResourceError(f"the memory store failed ({type(exc).__name__})") from None

            return await asyncio.to_thread(read)


#: Tool hints: searches and explanations only read (they record an activity and usage counts); writes never
#: delete (corrections and withdrawals keep the old version in the history).
_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
_WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
_INSTRUCTIONS = (
    "Long-term memory of one user with lineage. search_memory before answering from memory; remember what is worth "
    "keeping; correct_memory or forget_memory by the [m:<id>] search_memory shows; explain_memory tells where a "
    "memory came from. Memories marked suspect rest on something that changed: verify them."
)
_EXPLAIN_DESCRIPTION = (
    "Explain where a stored memory came from, by its id from search_memory (e.g. m:1a2b3c4d): its status, source, "
    "the memories it was derived from and the activities that produced them. Works on past versions too."
)


def _brief(mem: Memory) -> dict[str, Any]:
    return {
        "id": mem.id,
        "marker": marker(mem.id),
        "status": mem.status.value,
        "content": mem.content,
        "source": str(mem.source),
        "kind": mem.kind.value,
        "derived_from": list(mem.lineage.derived_from),
        "supersedes": mem.supersedes,
        "created_at": mem.created_at.isoformat(),
    }


class _Server(FastMCP[Any]):
    """FastMCP that refuses arguments a tool does not declare (``user_id`` above all) instead of dropping them."""

    def __init__(
        self,
        owner: MemoryMCP,
        *,
        name: str,
        instructions: str,
        host: str,
        port: int,
        log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
    ) -> None:
        super().__init__(name=name, instructions=instructions, host=host, port=port, log_level=log_level)
        self._owner = owner

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Sequence[ContentBlock] | dict[str, Any]:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            arguments = dict(arguments or {})
            declared = set(tool.parameters.get("properties", {}))
            extra = sorted(set(arguments) - declared)
            msg = None
            if extra:
                msg = (
                    f"unknown argument(s) {', '.join(extra)} for {name}; the user and scope come from the server's "
                    "configuration, never from a tool argument"
                )
            else:
                try:
                    tool.fn_metadata.arg_model.model_validate(tool.fn_metadata.pre_parse_json(arguments))
                except ValidationError as exc:
                    msg = f"invalid arguments for {name}: {_problems(exc)}"
            if msg is not None:
                await asyncio.to_thread(self._owner.refuse, self.get_context(), name, arguments, msg)
                raise ToolError(msg)
        return await super().call_tool(name, arguments)


def _problems(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(x) for x in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def build_server(manager: MemoryManager, scope: Scope | None, **options: Unpack[_Options]) -> FastMCP[Any]:
    """The FastMCP server for ``manager`` and ``scope`` (see :class:`MemoryMCP` for ``options``).

    ``server.run("stdio")``, ``server.run("streamable-http")`` or mount ``server.streamable_http_app()``.
    """
    return MemoryMCP(manager, scope, **options).server


def serve(
    manager: MemoryManager,
    scope: Scope | None,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    **options: Unpack[_Options],
) -> None:
    """Serve until the client disconnects (stdio) or the process is stopped (HTTP, at ``/mcp``).

    Raises:
        InvalidInputError: bad transport, or see :class:`MemoryMCP`.
    """
    if transport not in ("stdio", "http"):
        msg = f"transport must be 'stdio' or 'http', got {transport!r}"
        raise InvalidInputError(msg)
    server = build_server(manager, scope, **options)
    server.run("stdio" if transport == "stdio" else "streamable-http")
