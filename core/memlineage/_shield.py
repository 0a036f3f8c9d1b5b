"""Running a framework hook's memory step so that nothing it raises reaches the agent (issue 25).

Re-exported by :mod:`memlineage.capture`, where the adapters import it from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar, overload

from memlineage import telemetry

if TYPE_CHECKING:
    from memlineage.manager import MemoryManager
    from memlineage.models import Scope

__all__ = ["ashield", "hook_span", "shield"]

_R = TypeVar("_R")
_D = TypeVar("_D")

# ``*args`` and ``**kwargs`` are ``fn``'s, typed ``object`` rather than with a ParamSpec: ``default`` and ``scope``
# are keyword-only parameters between them, which PEP 612 forbids next to ``P.args`` / ``P.kwargs`` (``fn`` can
# never receive a keyword of those names).


@overload
def shield(
    manager: MemoryManager,
    surface: str,
    fn: Callable[..., _R],
    *args: object,
    default: _D,
    scope: Scope | None = None,
    **kwargs: object,
) -> _R | _D: ...


@overload
def shield(
    manager: MemoryManager,
    surface: str,
    fn: Callable[..., _R],
    *args: object,
    scope: Scope | None = None,
    **kwargs: object,
) -> _R | None: ...


def shield(
    manager: MemoryManager,
    surface: str,
    fn: Callable[..., _R],
    *args: object,
    default: object = None,
    scope: Scope | None = None,
    **kwargs: object,
) -> object:
    """Run one memory step of a framework hook; what it raises is recorded and the agent goes on.

    Memory never raises into the agent loop: a failure is logged at WARNING, counted per ``surface`` and kept as an
    ``adapter_error`` event (:meth:`~memlineage.MemoryManager.record_adapter_error`), and ``default`` is returned.
    The step runs in a span ``memlineage.hook <surface>`` (see :func:`hook_span`).

    Args:
        manager: The store the step writes to.
        surface: Which hook, e.g. ``"LineageMiddleware.after_agent"``.
        fn: The step.
        *args: Its positional arguments.
        default: What the hook gets instead of the step's result when it fails.
        scope: Whose run it was (for the event), when known.
        **kwargs: Its keyword arguments.
    """
    with hook_span(surface, scope):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the point: nothing from memory breaks the agent
            manager.record_adapter_error(surface, exc, scope=scope)
            return default


@overload
async def ashield(
    manager: MemoryManager,
    surface: str,
    fn: Callable[..., Awaitable[_R]],
    *args: object,
    default: _D,
    scope: Scope | None = None,
    **kwargs: object,
) -> _R | _D: ...


@overload
async def ashield(
    manager: MemoryManager,
    surface: str,
    fn: Callable[..., Awaitable[_R]],
    *args: object,
    scope: Scope | None = None,
    **kwargs: object,
) -> _R | None: ...


async def ashield(
    manager: MemoryManager,
    surface: str,
    fn: Callable[..., Awaitable[_R]],
    *args: object,
    default: object = None,
    scope: Scope | None = None,
    **kwargs: object,
) -> object:
    """Async :func:`shield`: awaits ``fn(*args, **kwargs)``."""
    with hook_span(surface, scope):
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the point: nothing from memory breaks the agent
            await asyncio.to_thread(manager.record_adapter_error, surface, exc, scope=scope)
            return default


def hook_span(surface: str, scope: Scope | None = None) -> telemetry._Span | telemetry._NoSpan:
    """The span of one framework hook call: ``memlineage.hook <surface>``, the scope's ids hashed.

    A failure the hook records (:meth:`~memlineage.MemoryManager.record_adapter_error`) marks it ERROR.
    """
    return telemetry.span(f"memlineage.hook {surface}", prefix="memlineage.hook", scope=scope, surface=surface)
