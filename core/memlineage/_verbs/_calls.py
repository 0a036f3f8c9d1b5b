"""How a verb is called: typed bad-call errors, the closed-store check, and the generated async twins.

Every public verb of :class:`~memlineage.MemoryManager` is declared with :func:`verb` and gets its ``a``-prefixed
twin from :func:`async_twin`, which keeps the verb's full signature for type checkers (``ParamSpec``) and runs the
sync implementation in a worker thread (STYLE R6), so one definition serves both.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from memlineage.errors import InvalidInputError, StorageError

__all__ = ["async_twin", "verb"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def verb(method: Callable[P, R]) -> Callable[P, R]:
    """Declare a public verb: a bad call raises :class:`InvalidInputError`, a closed store :class:`StorageError`.

    Python raises ``TypeError`` for an unknown keyword or a missing argument before the method body runs, so
    nothing was written; the binding is checked only when a ``TypeError`` comes out, to tell a bad call from an
    error inside the method, so a good call pays one attribute read.

    Args:
        method: The verb's sync implementation; its first argument is the manager (or its class).

    Returns:
        The checked method, with ``method``'s name, docstring and signature.
    """
    signature = inspect.signature(method)
    name = method.__name__

    @functools.wraps(method)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if args and getattr(args[0], "_closed", False):
            msg = f"{name}(): this MemoryManager is closed; open the store again (MemoryManager.open(...))"
            raise StorageError(msg)
        try:
            return method(*args, **kwargs)
        except TypeError as exc:
            try:
                signature.bind(*args, **kwargs)
            except TypeError:
                msg = f"{name}(): {exc}; see help(MemoryManager.{name}) for its arguments"
                raise InvalidInputError(msg) from None
            raise

    checked.__memlineage_verb__ = True  # type: ignore[attr-defined]
    return checked


def async_twin(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The ``a``-prefixed async twin of a verb: same arguments, same result, same errors.

    The twin looks the verb up on the instance when called (so a subclass's override is the one that runs) and
    runs it with :func:`asyncio.to_thread`, which carries the caller's context variables (e.g. an adapter's
    reconciler) into the thread.

    Args:
        method: The sync verb, as defined in the class body.

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
