"""The write request as the write path carries it: :class:`Draft`, from ``remember()`` to the ledger row.

A draft is frozen. It is built once at the public edge (:class:`memlineage.services.draft.DraftBuilder` checks
``remember()``'s arguments into it) and each stage of the write path returns new drafts
(``dataclasses.replace``) with what it decided: the value model's features, a policy's obligations, the slot
value a draft supersedes, update detection's decision, the value gate's assessment. It sits below those stages
(update detection, the policy gate, the value gate, the write service), so each of them types its drafts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memlineage.extractors import MemoryFeatures
from memlineage.models import Lineage, Memory, MemoryKind, Scope, Source, ValueAssessment, new_id
from memlineage.reconcile import UpdateDecision

__all__ = ["Draft"]


@dataclass(frozen=True, slots=True)
class Draft:
    """A validated write request, and what the write path's stages decided about it so far.

    Attributes:
        id: The id the memory gets when this draft is written (``new_id()``, or the id a short-term buffer
            item was returned with). Drafts of one batch refer to each other by it.
        embedding: A precomputed or embedded vector (a float64 array, see ``services._checks.vector``).
        features: The value model's features of ``content`` (set by the value gate's ``prepare``).
        assessment: The value gate's score; written as the memory's ``value`` and ``assessment``.
        supersedes: The ledger row (or in-batch stand-in ``{"id", "version", "slot"}``) this draft replaces.
        retracts: A live memory this statement withdraws (update detection).
        decision: The automatic decision behind ``supersedes`` / ``retracts`` (or a merge into a duplicate).
        possible: Possible updates to record with the new memory (they change no status).
        slot_value: The value the statement assigns to its (detected) slot.
        auto_slot: The slot was detected, not given by the caller.
        auto_kind: No kind given: episodic, or semantic when the value model promotes it.
        strict: ``supersede()``: the named memory must still be current when written (else ``ConflictError``).
        carried_over: A clause a correction kept: written as it was, never run through update detection.
        force: Store even below the value model's threshold.
        goal: The agent's current goal, for goal relevance.
    """

    content: str
    scope: Scope
    source: Source
    kind: MemoryKind
    tags: tuple[str, ...]
    metadata: Mapping[str, Any]
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
    id: str = field(default_factory=new_id)
    embedding: list[float] | np.ndarray | None = None
    force: bool = False
    goal: str | None = None
    auto_kind: bool = False
    strict: bool = False
    carried_over: bool = False
    features: MemoryFeatures | None = None
    assessment: ValueAssessment | None = None
    supersedes: Mapping[str, Any] | None = None
    retracts: str | None = None
    decision: UpdateDecision | None = None
    possible: tuple[UpdateDecision, ...] = ()
    slot_value: str | None = None
    auto_slot: bool = False

    def to_memory(self, now: datetime, *, previous: Mapping[str, Any] | None = None) -> Memory:
        """The memory this draft becomes when written at ``now`` (``previous``: the ledger row it supersedes)."""
        scored: dict[str, Any] = (
            {"value": self.assessment.score, "assessment": self.assessment} if self.assessment is not None else {}
        )
        return Memory(
            id=self.id,
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
            metadata=dict(self.metadata),
            created_at=now,
            recorded_at=now,
            valid_from=self.valid_from or now,
            expires_at=self.expires_at,
            version=(previous["version"] + 1) if previous else 1,
            supersedes=previous["id"] if previous else None,
            slot=self.slot,
            **scored,
        )
