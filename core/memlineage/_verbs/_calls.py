"""How a verb is called: typed bad-call errors and the closed-store check.

Every public verb of :class:`~memlineage.MemoryManager` is declared with :func:`verb` and gets its ``a``-prefixed
twin from :func:`memlineage._twins.async_twin`, so one definition serves both.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from memlineage.errors import InvalidInputError, StorageError

__all__ = ["verb"]

P = ParamSpec("P")
R = TypeVar("R")


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
