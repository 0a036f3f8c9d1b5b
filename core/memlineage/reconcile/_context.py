"""Which reconciler a write uses: the store's, or one an adapter chose for the calls it makes (the agent's model).

An adapter that knows the agent's model (``LineageMiddleware``, ``LineageMemory(llm=...)``, ``lineage_memory(...,
llm=...)``) wraps the writes it makes in :func:`using_reconciler`; the write path reads :func:`active_reconciler`
first. A context variable, so concurrent runs (threads, asyncio tasks) never see each other's choice. A store opened
with ``reconciler=None`` (update detection off) stays off whatever an adapter asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from memlineage.reconcile._model import Reconciler

__all__ = ["active_reconciler", "using_reconciler"]

_ACTIVE: ContextVar[Reconciler | None] = ContextVar("memlineage_reconciler", default=None)


@contextmanager
def using_reconciler(reconciler: Reconciler | None) -> Iterator[None]:
    """Make ``reconciler`` decide the writes made inside the block; None leaves the enclosing choice as it is."""
    if reconciler is None:
        yield
        return
    token = _ACTIVE.set(reconciler)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_reconciler() -> Reconciler | None:
    """The reconciler an enclosing :func:`using_reconciler` chose, or None."""
    return _ACTIVE.get()
