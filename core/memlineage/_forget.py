"""What an erasure must also empty in the process: caches keyed by text, and per-scope state of other modules.

Pure functions over text (clause splitting, slot detection, question analysis...) are memoised with
:func:`functools.lru_cache`; their keys and values are memory texts, queries and pieces of them. The stemmer keeps
its own cache of words, and a value model caches features per text. An erasure must leave none of the erased words
in the process, so every such cache is made with :func:`text_cache` or registered with :func:`on_erase`, and
``erase`` empties them all (:func:`clear_text_caches`). They refill on use: clearing costs the next calls a miss.

An ``lru_cache`` cannot drop one key, so everything goes: erasure is rare, and a cache miss is cheap.

State kept per scope by a module above the manager (the run recorder's open runs) registers with
:func:`on_scope_erased`; the manager's ``erase(scope=...)`` calls :func:`scope_erased`.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from memlineage.models import Scope

__all__ = [
    "clear_text_caches", "memories_erased", "on_erase", "on_memories_erased", "on_scope_erased", "scope_erased",
    "text_cache",
]  # fmt: skip

_F = TypeVar("_F", bound=Callable[..., Any])

_lock = threading.Lock()
#: Functions that empty one cache each: plain functions strongly, bound methods weakly (their object may go).
_clearers: list[Callable[[], Callable[[], Any] | None]] = []
#: Functions ``(manager, scope) -> None`` that drop what they hold for an erased scope of a manager.
_scope_hooks: list[Callable[[Any, Any], Any]] = []
#: Functions ``(manager, scope, ids) -> None`` that drop what they hold of erased memories (one memory's erasure).
_memory_hooks: list[Callable[[Any, Any, Any], Any]] = []


def on_erase(clear: Callable[[], Any]) -> None:
    """Register ``clear`` (a function or a bound method) to run on every erasure.

    A bound method is held weakly: registering an object's method never keeps the object alive.
    """
    ref: Callable[[], Callable[[], Any] | None]
    if hasattr(clear, "__self__") and hasattr(clear, "__func__"):
        ref = weakref.WeakMethod(cast(Any, clear))
    else:
        ref = lambda: clear  # noqa: E731 - a strong reference that looks like a weak one
    with _lock:
        _clearers.append(ref)
        if len(_clearers) % 1024 == 0:  # objects that registered and went (a chat history per request): drop them
            _clearers[:] = [r for r in _clearers if r() is not None]


def text_cache(maxsize: int) -> Callable[[_F], _F]:
    """:func:`functools.lru_cache` of a function over text, emptied by every erasure (see the module).

    Args:
        maxsize: Entries kept, least recently used dropped first.
    """

    def wrap(fn: _F) -> _F:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        on_erase(cached.cache_clear)
        return cast(_F, cached)

    return wrap


def clear_text_caches() -> int:
    """Empty every registered text cache of the process; returns how many were emptied."""
    with _lock:
        live = [(ref, ref()) for ref in _clearers]
        _clearers[:] = [ref for ref, fn in live if fn is not None]
    for _, fn in live:
        if fn is not None:
            fn()
    return sum(fn is not None for _, fn in live)


def on_scope_erased(hook: Callable[[Any, Any], Any]) -> None:
    """Register ``hook(manager, scope)``, run after every ``erase(scope=...)`` of any manager (module-level state)."""
    with _lock:
        if hook not in _scope_hooks:
            _scope_hooks.append(hook)


def scope_erased(manager: object, scope: Scope) -> None:
    """Run the hooks of :func:`on_scope_erased` for ``scope`` of ``manager`` (passed on as it is: the hooks know it)."""
    with _lock:
        hooks = list(_scope_hooks)
    for hook in hooks:
        hook(manager, scope)


def on_memories_erased(hook: Callable[[Any, Any, Any], Any]) -> None:
    """Register ``hook(manager, scope, ids)``, run after ``erase(memory_id, ...)`` with the erased version ids."""
    with _lock:
        if hook not in _memory_hooks:
            _memory_hooks.append(hook)


def memories_erased(manager: object, scope: Scope, ids: frozenset[str]) -> None:
    """Run the hooks of :func:`on_memories_erased` for the erased version ``ids`` of ``scope`` of ``manager``."""
    with _lock:
        hooks = list(_memory_hooks)
    for hook in hooks:
        hook(manager, scope, ids)
