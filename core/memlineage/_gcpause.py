"""Pausing Python's cyclic garbage collector over one bulk step (issue 16).

A cascade over 10,000 memories or a batch of 1,000 writes allocates tens of thousands of tracked objects (result
rows, drafts, dicts). Each 700 allocations start a young collection, and every so often a full one, which walks
every tracked object of the process: with chromadb, SQLAlchemy and pydantic loaded, a full collection takes tens
of milliseconds here (measured: ~55 ms of a 10,000-memory ``retract``, 50-150 us per record of a bulk ingest).
Inside :func:`gc_paused` the collector does not run; reference counting still frees everything that is not in a
cycle, and the cycles made meanwhile are collected by the first collection after the step. Nested and concurrent
pauses are counted, so the collector comes back when the last one ends, and only if it was on before the first.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the ``with`` block with the cyclic garbage collector paused (see the module docstring)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
