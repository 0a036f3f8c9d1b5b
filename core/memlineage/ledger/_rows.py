"""Conversions between ledger rows and models: memories, vectors (float32 blobs) and events.

Re-exported by :mod:`memlineage.ledger`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memlineage._forget import text_cache
from memlineage.models import (
    Lineage,
    Memory,
    MemoryKind,
    Scope,
    SourceKind,
    Status,
    ValueAssessment,
    from_epoch,
    to_epoch,
)

__all__ = ["Event", "decode_vector", "encode_vector", "memory_to_row", "row_to_memory"]


def encode_vector(vector: Sequence[float] | np.ndarray | None) -> bytes | None:
    """Encode a vector (a sequence of floats or a numpy array) as little-endian float32 bytes (None stays None)."""
    if vector is None:
        return None
    return np.asarray(vector, dtype="<f4").tobytes()


def decode_vector(blob: bytes | None) -> list[float] | None:
    """Decode :func:`encode_vector` output."""
    if blob is None:
        return None
    return np.frombuffer(blob, dtype="<f4").astype(float).tolist()


def memory_to_row(mem: Memory) -> dict[str, Any]:
    """Flatten a :class:`Memory` into a ledger row (without embedding and index state)."""
    lin = mem.lineage
    return {
        "id": mem.id,
        "user_id": mem.scope.user_id,
        "agent_id": mem.scope.agent_id,
        "session_id": mem.scope.session_id,
        "kind": mem.kind.value,
        "content": mem.content,
        "status": mem.status.value,
        "source_kind": lin.source_kind.value,
        "source_name": lin.source_name,
        "activity_id": lin.activity_id,
        "parent_activity_id": lin.parent_activity_id,
        "confidence": lin.confidence,
        "trust": lin.trust,
        "context_hash": lin.context_hash,
        "tags": list(mem.tags),
        "meta": mem.metadata,
        "created_at": to_epoch(mem.created_at),
        "recorded_at": to_epoch(mem.recorded_at),
        "valid_from": to_epoch(mem.valid_from),
        "valid_to": to_epoch(mem.valid_to),
        "expires_at": to_epoch(mem.expires_at),
        "invalidated_at": to_epoch(mem.invalidated_at),
        "version": mem.version,
        "supersedes": mem.supersedes,
        "slot": mem.slot,
        "value": mem.value,
        "assessment": mem.assessment.model_dump(mode="json") if mem.assessment else None,
        "last_used_at": to_epoch(mem.last_used_at),
        "use_count": mem.use_count,
    }


@text_cache(maxsize=4096)
def _scope(user_id: str, agent_id: str | None, session_id: str | None) -> Scope:
    """One shared :class:`Scope` per ``(user, agent, session)`` (frozen, so sharing is safe; emptied by erasures)."""
    return Scope.model_construct(user_id=user_id, agent_id=agent_id, session_id=session_id)


def row_to_memory(row: Mapping[str, Any], derived_from: Sequence[str] = ()) -> Memory:
    """Build a :class:`Memory` from a ledger row and its original premises (support group 0)."""
    return Memory.model_construct(
        id=row["id"],
        content=row["content"],
        kind=MemoryKind(row["kind"]),
        scope=_scope(row["user_id"], row["agent_id"], row["session_id"]),
        lineage=Lineage.model_construct(
            source_kind=SourceKind(row["source_kind"]),
            source_name=row["source_name"],
            activity_id=row["activity_id"],
            parent_activity_id=row["parent_activity_id"],
            derived_from=tuple(derived_from),
            confidence=row["confidence"],
            trust=row["trust"],
            context_hash=row["context_hash"],
        ),
        status=Status(row["status"]),
        tags=tuple(row["tags"] or ()),
        metadata=dict(row["meta"] or {}),
        created_at=from_epoch(row["created_at"]),
        recorded_at=from_epoch(row["recorded_at"]),
        valid_from=from_epoch(row["valid_from"]),
        valid_to=from_epoch(row["valid_to"]),
        expires_at=from_epoch(row["expires_at"]),
        invalidated_at=from_epoch(row["invalidated_at"]),
        version=row["version"],
        supersedes=row["supersedes"],
        slot=row["slot"],
        value=row["value"],
        assessment=ValueAssessment.model_validate(row["assessment"]) if row["assessment"] else None,
        last_used_at=from_epoch(row["last_used_at"]),
        use_count=row["use_count"] or 0,
    )


class Event(dict):  # type: ignore[type-arg]
    """One event of the append-only log.

    Keys: ``id``, ``at`` (UTC datetime), ``type``, ``memory_id``, ``activity_id``, ``user_id`` and ``data``
    (dict). A ``dict`` subclass so it serialises as is.
    """

    @property
    def type(self) -> str:
        """Event type, e.g. ``created``, ``retracted``, ``policy_decision``."""
        return str(self["type"])
