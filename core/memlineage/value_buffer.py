"""The value model's state and reports: the short-term buffer, reinforcement batching and the sweep report.

Re-exported by :mod:`memlineage.value`; the formulas are there, the gate that uses these is
:mod:`memlineage.value_gate`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memlineage.errors import ConfigurationError
from memlineage.extractors import MemoryFeatures
from memlineage.models import Scope, ValueAssessment, normalize_content

__all__ = ["BufferedItem", "ReinforcementBatch", "ReinforcementWriter", "ShortTermBuffer", "SweepReport"]


# ------------------------------------------------------------------------------------------------------------
# Short-term buffer and reinforcement batching
# ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BufferedItem:
    """A candidate that stayed below the store threshold and lives only in its session's buffer."""

    id: str
    content: str
    scope: Scope
    assessment: ValueAssessment
    created_at: datetime
    features: MemoryFeatures | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    source: str = "user"


def _session_key(scope: Scope) -> tuple[str, str | None, str | None]:
    return (scope.user_id, scope.agent_id, scope.session_id)


class ShortTermBuffer:
    """Bounded FIFO buffers of below-threshold candidates, one per (user, agent, session) (seed 004 §3.3).

    Items never reach the ledger or the index; the oldest is dropped when a session's buffer is full. A
    session consolidation (:func:`memlineage.consolidation.consolidate`) may still turn them into cited
    memories.

    Example:
        >>> from memlineage.models import Scope, ValueAssessment
        >>> buf = ShortTermBuffer(capacity=2)
        >>> s = Scope(user_id="u", session_id="s1")
        >>> for i in range(3):
        ...     _ = buf.add(BufferedItem(str(i), f"t{i}", s, ValueAssessment(), datetime.now(timezone.utc)))
        >>> [i.id for i in buf.items(s)]
        ['1', '2']
    """

    def __init__(self, capacity: int = 10) -> None:
        if capacity < 1:
            msg = f"buffer capacity must be >= 1, got {capacity}"
            raise ConfigurationError(msg)
        self.capacity = capacity
        self._buffers: dict[tuple[str, str | None, str | None], deque[BufferedItem]] = {}
        self._lock = threading.Lock()
        self.dropped = 0

    def add(self, item: BufferedItem, capacity: int | None = None) -> BufferedItem | None:
        """Append ``item`` to its session's buffer; return the evicted oldest item, if any.

        A restatement of an item already buffered (same normalised text) replaces it and moves to the newest
        position instead of taking a second place: ten "ok thanks" hold one place, not ten.
        """
        key = _session_key(item.scope)
        text = normalize_content(item.content)
        with self._lock:
            buf = self._buffers.get(key)
            if buf is None:
                buf = self._buffers[key] = deque(maxlen=capacity or self.capacity)
            for old in list(buf):
                if normalize_content(old.content) == text:
                    buf.remove(old)
            evicted = buf[0] if len(buf) == buf.maxlen else None
            buf.append(item)
            if evicted is not None:
                self.dropped += 1
            return evicted

    def items(self, scope: Scope) -> list[BufferedItem]:
        """Items of the scope's session, oldest first (same user, agent and session)."""
        with self._lock:
            return list(self._buffers.get(_session_key(scope), ()))

    def get(self, item_id: str, scope: Scope) -> BufferedItem | None:
        """The buffered item with that id in the scope's session, or None."""
        return next((i for i in self.items(scope) if i.id == item_id), None)

    def pop(self, item_id: str, scope: Scope) -> BufferedItem | None:
        """Remove and return the buffered item with that id in the scope's session (None when absent)."""
        with self._lock:
            buf = self._buffers.get(_session_key(scope))
            item = next((i for i in buf or () if i.id == item_id), None)
            if buf is not None and item is not None:
                buf.remove(item)
            return item

    def drain(self, scope: Scope) -> list[BufferedItem]:
        """Remove and return the scope's session buffer (at session end)."""
        with self._lock:
            return list(self._buffers.pop(_session_key(scope), ()))

    def clear_user(self, user_id: str) -> int:
        """Drop every buffer of a user (erasure); return the number of items dropped."""
        return self.clear_scope(Scope(user_id=user_id))

    def clear_scope(self, scope: Scope) -> int:
        """Drop the buffers a scope covers (its user; only its agent / session when it names one).

        Returns:
            The number of items dropped.
        """
        with self._lock:
            keys = [
                k
                for k in self._buffers
                if k[0] == scope.user_id
                and (scope.agent_id is None or k[1] == scope.agent_id)
                and (scope.session_id is None or k[2] == scope.session_id)
            ]
            return sum(len(self._buffers.pop(k)) for k in keys)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(b) for b in self._buffers.values())


ReinforcementWriter = Callable[[Sequence[tuple[str, int, datetime]]], Any]


class ReinforcementBatch:
    """Collects uses of memories and writes them in batches (seed 004 §5.3 "批量处理与异步更新").

    Each pending entry is ``(memory_id, uses, last_used_at)``. :meth:`flush` hands all pending entries to
    ``writer`` in one call (the manager's writer does one ledger transaction) and is called automatically once
    ``batch_size`` distinct memories are pending.

    Args:
        writer: Callable receiving a sequence of ``(memory_id, uses, last_used_at)``.
        batch_size: Distinct pending memories that trigger a flush, ≥ 1 (default 64; 1 = write through).

    Example:
        >>> seen = []
        >>> batch = ReinforcementBatch(seen.extend, batch_size=2)
        >>> now = datetime(2025, 1, 1, tzinfo=timezone.utc)
        >>> batch.add(["a"], now)
        >>> batch.add(["a", "b"], now)  # two distinct memories pending: flushed
        >>> [(mid, uses) for mid, uses, _ in seen]
        [('a', 2), ('b', 1)]
    """

    def __init__(self, writer: ReinforcementWriter, *, batch_size: int = 64) -> None:
        if batch_size < 1:
            msg = f"batch_size must be >= 1, got {batch_size}"
            raise ConfigurationError(msg)
        self._writer = writer
        self.batch_size = batch_size
        self._pending: dict[str, tuple[int, datetime]] = {}
        self._lock = threading.Lock()
        self.flushes = 0

    def add(self, memory_ids: Iterable[str], now: datetime) -> None:
        """Record one use of each id at ``now``; flush when the batch is full."""
        with self._lock:
            for memory_id in memory_ids:
                uses, last = self._pending.get(memory_id, (0, now))
                self._pending[memory_id] = (uses + 1, max(last, now))
            full = len(self._pending) >= self.batch_size
        if full:
            self.flush()

    def pending(self) -> dict[str, tuple[int, datetime]]:
        """A copy of the pending uses: ``{memory_id: (uses, last_used_at)}``."""
        with self._lock:
            return dict(self._pending)

    def flush(self) -> int:
        """Write all pending uses in one writer call; return how many memories were written."""
        with self._lock:
            entries = [(mid, uses, last) for mid, (uses, last) in self._pending.items()]
            self._pending.clear()
        if entries:
            self._writer(entries)
            self.flushes += 1
        return len(entries)


# ------------------------------------------------------------------------------------------------------------
# The forget gate's report (the gate itself, bound to a ledger and an index, is memlineage.value_gate.ValueGate).
# ------------------------------------------------------------------------------------------------------------
@dataclass
class SweepReport:
    """Outcome of :meth:`memlineage.MemoryManager.sweep` (the forget gate).

    Attributes:
        checked: Number of active memories examined.
        archived: Ids archived (V_eff below the forget threshold), each with its V_eff in [0, 1].
        protected: Ids below the threshold that were *not* archived because live memories still derive from
            them, each with the ids of those dependants.
        now: The time the sweep evaluated decay at.
    """

    checked: int = 0
    archived: dict[str, float] = field(default_factory=dict)
    protected: dict[str, list[str]] = field(default_factory=dict)
    now: datetime | None = None
