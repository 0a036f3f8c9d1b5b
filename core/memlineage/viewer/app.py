"""The viewer's Starlette application: server-rendered pages plus JSON endpoints over one store.

Every page and endpoint reads in one user's scope (``?user=``, default the ``--user`` the viewer was started
with): a memory id of another user is "not found", as in the library. The only write is undoing an automatic
update decision, refused (403) unless the viewer was started with ``allow_writes``; it needs the page's CSRF
token and a same-origin request. Responses carry a Content-Security-Policy that allows nothing outside the viewer.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as AsgiScope

from memlineage.errors import InvalidInputError, MemLineageError, MemoryNotFoundError, ScopeViolationError
from memlineage.manager import MemoryManager
from memlineage.models import Activity, Memory, Scope, Status, short_id
from memlineage.viewer._graph import layout
from memlineage.viewer._store import ViewerStore

__all__ = ["LOCAL_HOSTS", "create_app"]

#: Host headers the viewer answers to (it listens on 127.0.0.1 only; this also stops DNS rebinding).
LOCAL_HOSTS = ("127.0.0.1", "localhost")
#: Update decisions :meth:`MemoryManager.undo` can reverse.
UNDOABLE = ("update", "contradict")
STATUSES = [s.value for s in Status]
_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _SecurityHeaders:
    """Adds the CSP and the other hardening headers to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", _CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),  # no-referrer would make browsers send "Origin: null"
                    (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _when(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds").replace("+00:00", "Z") if value is not None else ""


def _short(text: object, n: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("memlineage.viewer", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["short"] = _short
    env.filters["sid"] = short_id
    env.filters["tojson_compact"] = lambda v: json.dumps(v, ensure_ascii=False, default=str, sort_keys=True)
    return env


def _memory_json(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "content": m.content,
        "status": m.status.value,
        "source": str(m.source),
        "kind": m.kind.value,
        "value": m.value,
        "trust": m.trust,
        "slot": m.slot,
        "version": m.version,
        "supersedes": m.supersedes,
        "derived_from": list(m.derived_from),
        "created_at": _when(m.created_at),
        "recorded_at": _when(m.recorded_at),
        "valid_from": _when(m.valid_from),
        "expires_at": _when(m.expires_at),
        "invalidated_at": _when(m.invalidated_at),
    }


def _decision_json(a: Activity) -> dict[str, Any]:
    meta = a.metadata
    return {
        "id": a.id,
        "decision": a.name,
        "outcome": a.outcome,
        "at": _when(a.started_at),
        "reason": meta.get("reason"),
        "evidence": meta.get("evidence"),
        "decided_by": meta.get("decided_by"),
        "confidence": meta.get("confidence"),
        "target": meta.get("target"),
        "statement": meta.get("statement"),
        "undoable": a.name in UNDOABLE and a.outcome == "applied",
    }


def create_app(
    store: ViewerStore,
    *,
    default_user: str | None = None,
    allowed_hosts: Sequence[str] = LOCAL_HOSTS,
    on_shutdown: Callable[[], None] | None = None,
) -> Starlette:
    """Build the viewer's ASGI application over ``store``.

    Args:
        store: The :class:`~memlineage.viewer.ViewerStore` to read (and, with ``allow_writes``, to undo in).
        default_user: The user whose pages open without ``?user=``.
        allowed_hosts: ``Host`` header values answered (others get 400).
        on_shutdown: Called when the server stops (e.g. ``store.close``).

    Returns:
        A Starlette application; run it with uvicorn or test it with ``starlette.testclient.TestClient``.
    """
    env = _env()
    csrf = secrets.token_urlsafe(32)
    writes = store.allow_writes

    def user_of(request: Request) -> Scope:
        user = request.query_params.get("user") or default_user
        if not user:
            raise _HttpError(400, "no user given: add ?user=<user_id> (or start the viewer with --user)")
        try:
            return Scope(user_id=user)
        except InvalidInputError as exc:
            raise _HttpError(400, str(exc)) from None

    @contextmanager
    def reading() -> Iterator[MemoryManager]:
        try:
            with store.manager() as mm:
                yield mm
        except MemoryNotFoundError as exc:
            raise _HttpError(404, str(exc)) from None
        except (InvalidInputError, ScopeViolationError) as exc:
            raise _HttpError(400, str(exc)) from None
        except MemLineageError as exc:
            raise _HttpError(500, str(exc)) from None

    def page(request: Request, name: str, *, http_status: int = 200, **context: object) -> HTMLResponse:
        user = request.query_params.get("user") or default_user or ""
        html = env.get_template(name).render(
            user=user, writes=writes, csrf=csrf, nav=name, q=urlencode({"user": user}), **context
        )
        return HTMLResponse(html, status_code=http_status)

    def handled(view: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def run(request: Request) -> Response:
            try:
                return view(request)
            except _HttpError as exc:
                if request.url.path.startswith("/api/"):
                    return JSONResponse({"error": exc.message}, status_code=exc.status)
                return page(request, "error.html", http_status=exc.status, message=exc.message, code=exc.status)

        run.__name__ = view.__name__
        return run

    # ------------------------------------------------------------------ data
    def memories_data(mm: MemoryManager, scope: Scope, status: str | None, limit: int) -> list[Memory]:
        if status and status not in STATUSES:
            raise _HttpError(400, f"unknown status {status!r}; use one of: {', '.join(STATUSES)}")
        ids = mm.ledger.ids_in_scope(scope, statuses=[status] if status else None)
        ids = list(reversed(ids))[:limit]  # newest first
        return [m for m in mm.get_many(ids, scope=scope) if m is not None] if ids else []

    def lineage_data(mm: MemoryManager, scope: Scope, memory_id: str) -> dict[str, Any]:
        ex = mm.explain(memory_id, scope=scope)
        dependents = mm.descendants(memory_id, scope=scope)
        return {"explanation": ex, "dependents": dependents, "graph": layout(ex.memory, ex.ancestors, dependents)}

    def impact_data(mm: MemoryManager, scope: Scope, memory_id: str) -> dict[str, Any]:
        report = mm.impact(memory_id, scope=scope)
        ids = [*report.suspect, *report.unaffected]
        mems = {m.id: m for m in mm.get_many(ids, scope=scope) if m is not None} if ids else {}
        return {
            "memory": mm.require(memory_id, scope=scope),
            "report": report,
            "suspect": [mems[i] for i in report.suspect if i in mems],
            "unaffected": [mems[i] for i in report.unaffected if i in mems],
        }

    def decisions_data(mm: MemoryManager, scope: Scope) -> tuple[list[Activity], dict[str, Memory]]:
        acts = list(reversed(mm.activities(scope, kinds=["update_detection"])))
        ids = list(
            dict.fromkeys(str(a.metadata[k]) for a in acts for k in ("target", "statement") if a.metadata.get(k))
        )
        mems = {m.id: m for m in mm.get_many(ids, scope=scope) if m is not None} if ids else {}
        return acts, mems

    def limit_of(request: Request, default: int) -> int:
        raw = request.query_params.get("limit")
        try:
            value = int(raw) if raw else default
        except ValueError:
            raise _HttpError(400, f"limit must be an integer, not {raw!r}") from None
        if value < 1:
            raise _HttpError(400, "limit must be >= 1")
        return value

    # ------------------------------------------------------------------ pages
    def index(request: Request) -> Response:
        user = request.query_params.get("user") or default_user
        if user:
            return RedirectResponse(f"/memories?{urlencode({'user': user})}", status_code=303)
        return page(request, "index.html")

    def memories(request: Request) -> Response:
        scope = user_of(request)
        status = request.query_params.get("status") or None
        limit = limit_of(request, 500)
        with reading() as mm:
            rows = memories_data(mm, scope, status, limit)
            counts = mm.stats(scope)["by_status"]
        return page(request, "memories.html", memories=rows, status=status, statuses=STATUSES, counts=counts)

    def memory(request: Request) -> Response:
        scope = user_of(request)
        with reading() as mm:
            data = lineage_data(mm, scope, request.path_params["memory_id"])
            ex = data["explanation"]
            ids = [str(a.metadata.get(k)) for a in ex.decisions for k in ("target", "statement") if a.metadata.get(k)]
            mems = {m.id: m for m in mm.get_many(ids, scope=scope) if m is not None} if ids else {}
        return page(request, "memory.html", ex=ex, m=ex.memory, decision_memories=mems, **data)

    def impact(request: Request) -> Response:
        scope = user_of(request)
        with reading() as mm:
            data = impact_data(mm, scope, request.path_params["memory_id"])
        return page(request, "impact.html", m=data["memory"], **data)

    def audit(request: Request) -> Response:
        scope = user_of(request)
        types = request.query_params.getlist("type") or None
        limit = limit_of(request, 200)
        with reading() as mm:
            events = list(reversed(mm.audit(scope, types=types, limit=limit)))
            ids = list(dict.fromkeys(e["memory_id"] for e in events if e["memory_id"]))
            mems = {m.id: m for m in mm.get_many(ids, scope=scope) if m is not None} if ids else {}
        return page(request, "audit.html", events=events, mems=mems, types=types or [])

    def decisions_page(request: Request) -> Response:
        return decisions(request)

    def decisions(request: Request, *, status: int = 200, error: str | None = None) -> Response:
        scope = user_of(request)
        with reading() as mm:
            acts, mems = decisions_data(mm, scope)
        undone = request.query_params.get("undone")
        restored = request.query_params.get("restored")
        return page(
            request,
            "decisions.html",
            http_status=status,
            decisions=acts,
            mems=mems,
            undoable=UNDOABLE,
            error=error,
            undone=undone,
            restored=mems.get(restored or ""),
        )

    async def undo(request: Request) -> Response:
        if not writes:
            return _refuse(request, "read-only viewer: start it with --allow-writes to undo decisions")
        if not _same_origin(request):
            return _refuse(request, "cross-origin request refused")
        body = parse_qs((await request.body()).decode("utf-8", "replace"))
        token = (body.get("csrf") or [""])[0]
        if not hmac.compare_digest(token.encode(), csrf.encode()):
            return _refuse(request, "missing or wrong CSRF token; reload the page and try again")
        decision_id = request.path_params["decision_id"]
        return await _run_sync(lambda: _undo_sync(request, decision_id))

    def _undo_sync(request: Request, decision_id: str) -> Response:
        try:
            scope = user_of(request)
            try:
                with store.manager() as mm:
                    restored = mm.undo(decision_id, scope=scope, reason="undone in the viewer")
            except MemoryNotFoundError as exc:
                raise _HttpError(404, str(exc)) from None
            except InvalidInputError as exc:
                return decisions(request, status=409, error=str(exc))
        except _HttpError as exc:
            return page(request, "error.html", http_status=exc.status, message=exc.message, code=exc.status)
        q = urlencode({"user": scope.user_id, "undone": decision_id, "restored": restored.id})
        return RedirectResponse(f"/decisions?{q}", status_code=303)

    def _refuse(request: Request, message: str) -> Response:
        return page(request, "error.html", http_status=403, message=message, code=403)

    # ------------------------------------------------------------------ JSON
    def api_memories(request: Request) -> Response:
        scope = user_of(request)
        with reading() as mm:
            rows = memories_data(mm, scope, request.query_params.get("status") or None, limit_of(request, 500))
        return JSONResponse({"user": scope.user_id, "memories": [_memory_json(m) for m in rows]})

    def api_lineage(request: Request) -> Response:
        scope = user_of(request)
        with reading() as mm:
            data = lineage_data(mm, scope, request.path_params["memory_id"])
        ex, g = data["explanation"], data["graph"]
        return JSONResponse(
            {
                "memory": _memory_json(ex.memory),
                "ancestors": [_memory_json(m) for m in ex.ancestors],
                "dependents": [_memory_json(m) for m in data["dependents"]],
                "edges": [{"derived": e.derived.memory.id, "premise": e.premise.memory.id} for e in g.edges],
                "revisions": [_memory_json(m) for m in ex.revisions],
                "decisions": [_decision_json(a) for a in ex.decisions],
                "prov": ex.to_prov_json(),
            }
        )

    def api_impact(request: Request) -> Response:
        scope = user_of(request)
        with reading() as mm:
            data = impact_data(mm, scope, request.path_params["memory_id"])
        report = data["report"]
        return JSONResponse(
            {
                "memory": _memory_json(data["memory"]),
                "suspect": [_memory_json(m) for m in data["suspect"]],
                "unaffected": [_memory_json(m) for m in data["unaffected"]],
                "attribution": report.attribution,
            }
        )

    def api_audit(request: Request) -> Response:
        scope = user_of(request)
        types = request.query_params.getlist("type") or None
        with reading() as mm:
            events = mm.audit(scope, types=types, limit=limit_of(request, 200))
        out = [{**{k: v for k, v in e.items() if k != "at"}, "at": _when(e["at"])} for e in events]
        return JSONResponse(json.loads(json.dumps({"user": scope.user_id, "events": out}, default=str)))

    def api_decisions(request: Request) -> Response:
        scope = user_of(request)
        with reading() as mm:
            acts, _ = decisions_data(mm, scope)
        return JSONResponse({"user": scope.user_id, "decisions": [_decision_json(a) for a in acts]})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if on_shutdown is not None:
            on_shutdown()

    static = StaticFiles(directory=str(Path(__file__).parent / "static"))
    routes = [
        Route("/", handled(index)),
        Route("/memories", handled(memories)),
        Route("/memory/{memory_id}", handled(memory)),
        Route("/impact/{memory_id}", handled(impact)),
        Route("/audit", handled(audit)),
        Route("/decisions", handled(decisions_page)),
        Route("/decisions/{decision_id}/undo", undo, methods=["POST"]),
        Route("/api/memories", handled(api_memories)),
        Route("/api/memory/{memory_id}", handled(api_lineage)),
        Route("/api/impact/{memory_id}", handled(api_impact)),
        Route("/api/audit", handled(api_audit)),
        Route("/api/decisions", handled(api_decisions)),
        Mount("/static", app=static, name="static"),
    ]
    middleware = [Middleware(_SecurityHeaders), Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def _same_origin(request: Request) -> bool:
    """False when the browser says the request came from another site (``Sec-Fetch-Site``, ``Origin``).

    A request without either header (not a browser, or an old one) still needs the CSRF token.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    parts = urlsplit(origin)
    return parts.netloc == request.headers.get("host") and parts.scheme == request.url.scheme


async def _run_sync(fn: Callable[[], Response]) -> Response:
    return await run_in_threadpool(fn)
