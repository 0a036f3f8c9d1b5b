"""Async twins generated from sync methods, so one definition serves both (STYLE R6)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["async_twin"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def async_twin(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The ``a``-prefixed async twin of a sync method: same arguments, same result, same errors (STYLE R6).

    The twin looks the method up on the instance when called (so a subclass's override is the one that runs) and
    runs it with :func:`asyncio.to_thread`, which carries the caller's context variables (e.g. an adapter's
    reconciler) into the thread. Used in class bodies: ``aremember = async_twin(remember)``.

    Args:
        method: The sync method, as defined in the class body.

    Returns:
        ``async def a<name>(self, *args, **kwargs)`` typed with ``method``'s parameters; ``help()`` shows them.
    """
    name = method.__name__

    async def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound: Callable[P, R] = getattr(self, name)
        return await asyncio.to_thread(bound, *args, **kwargs)

    twin.__name__ = f"a{name}"
    twin.__qualname__ = method.__qualname__.rsplit(".", 1)[0] + f".a{name}"
    twin.__module__ = method.__module__
    twin.__doc__ = f"Async :meth:`{name}`: the same arguments, result and errors; runs it in a worker thread."
    twin.__wrapped__ = method  # type: ignore[attr-defined]  # inspect.signature() and help() show the verb's
    return twin
