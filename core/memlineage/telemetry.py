"""OpenTelemetry instrumentation, optional: spans and metrics of the write path, recall, cascades and adapter hooks.

Install ``memlineage[otel]`` (``opentelemetry-api``) and configure an SDK in the application as usual; MemLineage
then reports to the global tracer and meter providers (tracer and meter name ``"memlineage"``), or to those given
to :func:`configure`. Without the API everything here is a no-op: nothing is imported when ``memlineage`` is
imported, and the first span tries ``import opentelemetry`` once (a failed import is remembered).

Spans (attributes ``memlineage.<span>.<key>`` unless noted): ``memlineage.remember`` (items, memories returned),
``memlineage.update_detection`` (statements, candidates, actions, confidences, decided_by),
``memlineage.policy`` (operation, decisions, ``effects.<effect>`` counts, withheld; only with a policy engine),
``memlineage.value_gate`` (drafts, stored, buffered; only with a value model), ``memlineage.cascade`` (status,
suspect, unaffected, dry_run), ``memlineage.recall`` (k, hits,
candidates, withheld, ``withheld.<stage>``, plan ``exact`` / ``ann``: how the vector index answered; update
detection and the value gate note their own index queries' plan too) and ``memlineage.hook <surface>`` (one per
adapter hook call; ``memlineage.hook.surface``). The write path's spans nest under ``memlineage.remember``; a
hook's memory calls nest under its span. Scope ids are attributes ``memlineage.user.hash``,
``memlineage.agent.hash`` and ``memlineage.session.hash``: the first 16 hex digits of a SHA-256 (salted with
:func:`configure`'s ``hash_salt``; unsalted until it is given, and then a guessable id such as an e-mail address can
be looked up from its hash), never the ids themselves. No span carries memory content, queries, reasons or
exception messages (a failed span has status ERROR and ``error.type``, the exception's class).

Metrics: counters ``memlineage.writes`` (memories written to the ledger), ``memlineage.update.decisions`` (by
``memlineage.action`` and ``memlineage.decided_by``), ``memlineage.reconciler.fallbacks`` and
``memlineage.extractor.fallbacks`` (statements the rules decided because the model's answer was unusable), and
``memlineage.adapter.errors`` (by ``memlineage.surface``), ``memlineage.erase.checkpoint_deferred`` (erasures whose
SQLite WAL checkpoint waits for the next one); histogram ``memlineage.recall.duration`` (ms).

This module sits at the bottom of the core's layers and imports nothing from ``memlineage`` (but its version).
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from memlineage._types import JSONValue

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = [
    "NOOP",
    "configure",
    "count",
    "current",
    "decisions",
    "enabled",
    "hash_id",
    "span",
    "traced",
]

NAME = "memlineage"
#: Spans whose duration is also recorded in a histogram (milliseconds).
_DURATIONS = {"memlineage.recall": "memlineage.recall.duration"}
_COUNTERS = {
    "memlineage.writes": ("{memory}", "Memories written to the ledger (new memories and new versions)"),
    "memlineage.update.decisions": ("{decision}", "Update detection decisions, by action and decider"),
    "memlineage.reconciler.fallbacks": ("{statement}", "Statements the fallback decided: the model's answer failed"),
    "memlineage.extractor.fallbacks": ("{text}", "Texts whose features the rules extracted: the model's failed"),
    "memlineage.adapter.errors": ("{error}", "Framework hook steps that failed (the agent went on)"),
    "memlineage.erase.checkpoint_deferred": ("{erasure}", "Erasures whose WAL checkpoint a reader deferred"),
}
_HISTOGRAMS = {"memlineage.recall.duration": ("ms", "Wall time of recall")}

_SCOPE_FIELDS = ("user_id", "agent_id", "session_id")
_P = ParamSpec("_P")
_R = TypeVar("_R")


class _ScopeIds(Protocol):
    """What telemetry reads of a scope: its ids (a ``memlineage.Scope`` has them; the layer below cannot name it)."""

    @property
    def user_id(self) -> str | None:
        """The user's id."""

    @property
    def agent_id(self) -> str | None:
        """The agent's id."""

    @property
    def session_id(self) -> str | None:
        """The session's id."""


class _NoSpan:
    """The span handle of the no-op mode (and of code running outside any MemLineage span)."""

    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, **attrs: object) -> _NoSpan:
        """Ignore the attributes."""
        return self

    def scope(self, *scopes: _ScopeIds, **ids: str | None) -> _NoSpan:
        """Ignore the scopes."""
        return self

    def error(self, error: BaseException) -> None:
        """Ignore the error."""

    @property
    def recording(self) -> bool:
        """Always False."""
        return False


#: The no-op span handle; ``with NOOP as sp`` works like ``with span(...) as sp`` and records nothing.
NOOP = _NoSpan()


class _Otel:
    """The resolved OpenTelemetry API with this library's tracer, meter and instruments."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        salt: bytes = b"",
    ) -> None:
        from opentelemetry import context, metrics, trace

        from memlineage._version import __version__

        self.context = context
        self.trace = trace
        self.status_error = trace.Status(trace.StatusCode.ERROR)
        self.tracer = trace.get_tracer(NAME, __version__, tracer_provider=tracer_provider)
        self.meter = metrics.get_meter(NAME, __version__, meter_provider=meter_provider)
        self.salt = salt
        self._instruments: dict[str, Any] = {}
        self._lock = threading.Lock()

    def instrument(self, name: str) -> Any:
        found = self._instruments.get(name)
        if found is not None:
            return found
        with self._lock:
            if name not in self._instruments:
                if name in _HISTOGRAMS:
                    unit, text = _HISTOGRAMS[name]
                    self._instruments[name] = self.meter.create_histogram(name, unit=unit, description=text)
                else:
                    unit, text = _COUNTERS[name]
                    self._instruments[name] = self.meter.create_counter(name, unit=unit, description=text)
            return self._instruments[name]


class _Off:
    """The no-op mode: the API is not installed, or :func:`configure` turned telemetry off."""


_OFF = _Off()
#: None until the first use decides (see :func:`_resolve`).
_state: _Otel | _Off | None = None
_salt = b""
_CURRENT: contextvars.ContextVar[Any] = contextvars.ContextVar("memlineage_span", default=NOOP)


def _resolve() -> _Otel | _Off:
    """Import the OpenTelemetry API once; the no-op mode when it is missing."""
    global _state
    try:
        _state = _Otel(salt=_salt)
    except ImportError:
        _state = _OFF
    return _state


def configure(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    enabled: bool | None = None,
    hash_salt: str | bytes | None = None,
) -> None:
    """Choose where MemLineage's spans and metrics go (default: OpenTelemetry's global providers).

    Args:
        tracer_provider: A ``TracerProvider``; None = the global one.
        meter_provider: A ``MeterProvider``; None = the global one.
        enabled: False turns every span and metric into a no-op; True or None use OpenTelemetry when its API is
            installed.
        hash_salt: Prefix of every hashed scope id (a deployment secret makes the hashes of guessable ids, such
            as e-mail addresses, impossible to look up); None keeps the current one.
    """
    global _state, _salt
    if hash_salt is not None:
        _salt = hash_salt.encode("utf-8") if isinstance(hash_salt, str) else bytes(hash_salt)
    if enabled is False:
        _state = _OFF
        return
    try:
        _state = _Otel(tracer_provider, meter_provider, _salt)
    except ImportError:
        _state = _OFF


def enabled() -> bool:
    """Whether spans and metrics go to OpenTelemetry (its API is installed and telemetry is not turned off)."""
    st = _state if _state is not None else _resolve()
    return st is not _OFF


def hash_id(value: str) -> str:
    """The 16-hex-digit SHA-256 (salted, see :func:`configure`) under which a scope id appears in telemetry."""
    return hashlib.sha256(_salt + value.encode("utf-8")).hexdigest()[:16]


def _value(v: object) -> JSONValue:
    if isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    return str(getattr(v, "value", v))  # an enum by its value


class _Span:
    """A live span: the handle ``span()`` yields (attributes are named ``<prefix>.<key>``)."""

    __slots__ = ("_attrs", "_ctx_token", "_name", "_prefix", "_scope", "_span", "_state", "_t0", "_token", "recording")

    def __init__(
        self, state: _Otel, name: str, prefix: str, scope: _ScopeIds | None, attrs: Mapping[str, object]
    ) -> None:
        self._state = state
        self._name = name
        self._prefix = prefix
        self._scope = scope
        self._attrs = attrs
        self.recording = False

    def __enter__(self) -> _Span:
        st = self._state
        self._span = st.tracer.start_span(self._name)
        self._ctx_token = st.context.attach(st.trace.set_span_in_context(self._span))
        self._token = _CURRENT.set(self)
        self.recording = self._span.is_recording()
        self._t0 = time.perf_counter()
        if self._attrs:
            self.set(**self._attrs)
        if self._scope is not None:
            self.scope(self._scope)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        st = self._state
        try:
            if exc is not None:
                self.error(exc)
            histogram = _DURATIONS.get(self._name)
            if histogram is not None:
                st.instrument(histogram).record((time.perf_counter() - self._t0) * 1000.0)
        finally:
            _CURRENT.reset(self._token)
            st.context.detach(self._ctx_token)
            self._span.end()

    def set(self, **attrs: object) -> _Span:
        """Set attributes ``<prefix>.<key>`` (None values are skipped)."""
        if self.recording:
            prefix = self._prefix
            for k, v in attrs.items():
                if v is not None:
                    self._span.set_attribute(f"{prefix}.{k}", _value(v))
        return self

    def scope(self, *scopes: _ScopeIds, **ids: str | None) -> _Span:
        """Record scope ids hashed: ``Scope`` objects (or anything with their fields), or ``user_id=`` etc.

        Several scopes that differ (a batch written for several users) record ``memlineage.scopes``, their number,
        and no ids.
        """
        if not self.recording:
            return self
        keys = {tuple(getattr(s, f, None) for f in _SCOPE_FIELDS) for s in scopes}
        if ids:
            keys.add(tuple(ids.get(f) for f in _SCOPE_FIELDS))
        if len(keys) > 1:
            self._span.set_attribute(f"{NAME}.scopes", len(keys))
        for key in keys if len(keys) == 1 else ():
            for field, value in zip(_SCOPE_FIELDS, key):
                if value:
                    self._span.set_attribute(f"{NAME}.{field[:-3]}.hash", hash_id(str(value)))
        return self

    def error(self, error: BaseException) -> None:
        """Mark the span failed: status ERROR and ``error.type`` (never the message: it may quote content)."""
        if self.recording:
            self._span.set_status(self._state.status_error)
            self._span.set_attribute("error.type", f"{type(error).__module__}.{type(error).__qualname__}")


def span(name: str, *, prefix: str | None = None, scope: _ScopeIds | None = None, **attrs: object) -> _Span | _NoSpan:
    """A span ``name`` around a ``with`` block, current for the code inside it; :data:`NOOP` in the no-op mode.

    Args:
        name: The span's name.
        prefix: Of the attribute names (default: ``name``).
        scope: A ``Scope`` whose ids the span records hashed (see :meth:`_Span.scope`).
        **attrs: Initial attributes (``<prefix>.<key>``).
    """
    st = _state if _state is not None else _resolve()
    if st is _OFF:
        return NOOP
    assert isinstance(st, _Otel)
    return _Span(st, name, prefix or name, scope, attrs)


def current() -> _Span | _NoSpan:
    """The innermost MemLineage span of this context (:data:`NOOP` when none): for attributes set along the way."""
    if _state is None or _state is _OFF:
        return NOOP
    cur: _Span | _NoSpan = _CURRENT.get()
    return cur


def traced(
    name: str,
    *,
    when: Callable[..., bool] | None = None,
    prefix: str | None = None,
    scope: _ScopeIds | None = None,
    **attrs: object,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorator: each call runs in :func:`span` ``name`` (only calls for which ``when(*args, **kwargs)`` holds).

    ``prefix``, ``scope`` and ``attrs`` are :func:`span`'s.
    """

    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def inner(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if _state is _OFF or (when is not None and not when(*args, **kwargs)):
                return fn(*args, **kwargs)
            with span(name, prefix=prefix, scope=scope, **attrs):
                return fn(*args, **kwargs)

        return inner

    return wrap


def count(name: str, value: int = 1, **attrs: object) -> None:
    """Add ``value`` to counter ``name`` (attributes ``memlineage.<key>``)."""
    st = _state if _state is not None else _resolve()
    if st is _OFF or value == 0:
        return
    assert isinstance(st, _Otel)
    st.instrument(name).add(value, {f"{NAME}.{k}": _value(v) for k, v in attrs.items() if v is not None})


def decisions(items: Iterable[tuple[str, float, str, int]]) -> None:
    """Record update detection's decisions ``(action, confidence, decided_by, candidates)``: span and counter.

    The current span gets ``statements``, ``candidates`` (total), and the parallel arrays ``actions``,
    ``confidences`` and ``decided_by``; ``memlineage.update.decisions`` counts each by action and decider.
    """
    if _state is None or _state is _OFF:
        return
    rows = list(items)
    for action, _, by, _ in rows:
        count("memlineage.update.decisions", action=action, decided_by=by)
    current().set(
        statements=len(rows), candidates=sum(r[3] for r in rows), actions=[r[0] for r in rows],
        confidences=[float(r[1]) for r in rows], decided_by=[r[2] for r in rows],
    )  # fmt: skip
