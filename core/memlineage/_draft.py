"""The write request as the write path carries it: :class:`Draft`, from ``remember()`` to the ledger row.

It sits below the stages that read it (update detection, the policy gate, the value gate, the write service), so
each of them types its drafts instead of taking ``Any``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memlineage.models import Lineage, Memory, MemoryKind, Scope, Source
from memlineage.reconcile import UpdateDecision

__all__ = ["Draft"]


@dataclass
class Draft:
    """A validated write request, before dedup and persistence."""

    content: str
    scope: Scope
    source: Source
    kind: MemoryKind
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    derived_from: tuple[str, ...]
    confidence: float
    trust: float
    activity_id: str | None
    parent_activity_id: str | None
    valid_from: datetime | None
    expires_at: datetime | None
    slot: str | None
    context_hash: str | None
    hash: str = ""
    embedding: list[float] | np.ndarray | None = None  # a precomputed vector is a float64 array (see ``vector``)
    supersedes: dict[str, Any] | None = None
    extra_rows: dict[str, Any] = field(default_factory=dict)
    decision: UpdateDecision | None = None  # update detection: the automatic decision behind supersedes / retracts
    retracts: str | None = None  # update detection: a live memory this statement withdraws
    decision_activity: str | None = None  # update detection: the recorded decision (set when it is applied)
    slot_value: str | None = None  # update detection: the value the statement assigns to its (detected) slot
    auto_slot: bool = False  # the slot was detected, not given by the caller
    auto_kind: bool = False  # no kind given: episodic, or semantic when the value model promotes it
    strict: bool = False  # supersede(): the named memory must still be current when written (else ConflictError)
    possible: list[UpdateDecision] = field(default_factory=list)  # update detection: possible updates to record
    carried_over: bool = False  # a clause a correction kept: written as it was, never run through update detection

    def to_memory(self, now: datetime, *, previous: Mapping[str, Any] | None = None) -> Memory:
        """The memory this draft becomes when written at ``now`` (``previous``: the ledger row it supersedes)."""
        return Memory(
            content=self.content,
            kind=self.kind,
            scope=self.scope,
            lineage=Lineage(
                source_kind=self.source.kind,
                source_name=self.source.name,
                activity_id=self.activity_id,
                parent_activity_id=self.parent_activity_id,
                derived_from=self.derived_from,
                confidence=self.confidence,
                trust=self.trust,
                context_hash=self.context_hash,
            ),
            tags=self.tags,
            metadata=self.metadata,
            created_at=now,
            recorded_at=now,
            valid_from=self.valid_from or now,
            expires_at=self.expires_at,
            version=(previous["version"] + 1) if previous else 1,
            supersedes=previous["id"] if previous else None,
            slot=self.slot,
            **self.extra_rows,
        )

    force: bool = False  # value gate: store even below the threshold
    goal: str | None = None  # value gate: the agent's current goal, for goal relevance
