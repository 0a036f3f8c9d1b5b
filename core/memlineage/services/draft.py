"""Write path, stage 1: turn a ``remember()`` call into a validated :class:`Draft` (nothing is read or written)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from memlineage._draft import Draft
from memlineage.errors import InvalidInputError
from memlineage.models import (
    MemoryKind,
    Scope,
    Source,
    check_id,
    check_text,
    content_hash,
    normalize_metadata,
    normalize_tags,
)
from memlineage.ports import Clock
from memlineage.services._checks import id_tuple, unit_float, vector
from memlineage.services.embedding import Embedding

__all__ = ["Draft", "DraftBuilder", "check_item", "remember_keys"]


class DraftBuilder:
    """Validates write requests into drafts.

    Args:
        trust_by_source: Base trust per source kind, in [0, 1].
        clock: Returns "now" (for ``ttl``).
        embedding: Checks the size of precomputed embeddings.
    """

    def __init__(self, *, trust_by_source: Mapping[str, float], clock: Clock, embedding: Embedding) -> None:
        self.trust_by_source = trust_by_source
        self.clock = clock
        self.embedding = embedding

    def draft(
        self,
        content: str,
        scope: Scope | Mapping[str, Any] | str,
        source: Source | str = "user",
        kind: MemoryKind | str | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        derived_from: Iterable[str] = (),
        confidence: float = 1.0,
        activity_id: str | None = None,
        parent_activity_id: str | None = None,
        valid_from: datetime | None = None,
        ttl: timedelta | float | None = None,
        slot: str | None = None,
        trust: float | None = None,
        context_hash: str | None = None,
        embedding: Sequence[float] | None = None,
        force: bool = False,
        goal: str | None = None,
    ) -> Draft:
        """Validate one write request (``remember()``'s arguments, typed as there) into a draft.

        Every argument is checked at run time as well: a ``remember_many()`` item reaches here unchecked.
        """
        content = check_text(content)
        scope = Scope.coerce(scope)
        src = Source.parse(source)
        try:
            mkind = MemoryKind(kind) if kind is not None else MemoryKind.EPISODIC
        except ValueError as exc:
            msg = f"unknown memory kind {kind!r}; use one of {[k.value for k in MemoryKind]}"
            raise InvalidInputError(msg) from exc
        conf = unit_float(confidence, "confidence")
        base = self.trust_by_source.get(src.kind.value, 0.5) * conf
        trust_value = min(base, unit_float(trust, "trust")) if trust is not None else base
        premises = id_tuple(derived_from, "derived_from")
        expires = None
        now = self.clock()
        if ttl is not None:
            seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else ttl
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < float("inf"):
                msg = f"ttl must be a positive timedelta or number of seconds, got {ttl!r}"
                raise InvalidInputError(msg)
            try:
                expires = now + timedelta(seconds=float(seconds))
            except (OverflowError, ValueError) as exc:
                msg = f"ttl {ttl!r} reaches past the year 9999; use a shorter ttl or None for no expiry"
                raise InvalidInputError(msg) from exc
        if valid_from is not None and not isinstance(valid_from, datetime):
            msg = f"valid_from must be a datetime, got {type(valid_from).__name__}"
            raise InvalidInputError(msg)
        for name, value in (
            ("activity_id", activity_id), ("parent_activity_id", parent_activity_id), ("slot", slot),
            ("context_hash", context_hash),
        ):  # fmt: skip
            if value is not None:
                check_id(value, name)
        vec = vector(embedding) if embedding is not None else None
        if vec is not None:
            self.embedding.check_dims(vec)
        return Draft(
            content=content,
            scope=scope,
            source=src,
            kind=mkind,
            tags=normalize_tags(tags),
            metadata=normalize_metadata(metadata),
            derived_from=premises,
            confidence=conf,
            trust=trust_value,
            activity_id=activity_id,
            parent_activity_id=parent_activity_id,
            valid_from=valid_from,
            expires_at=expires,
            slot=slot,
            context_hash=context_hash,
            hash=content_hash(content),
            embedding=vec,
            force=bool(force),
            goal=goal if isinstance(goal, str) and goal.strip() else None,
            auto_kind=kind is None,
        )


def check_item(item: object) -> dict[str, Any]:
    """One ``remember_many()`` item as a dict of known keyword arguments with ``content`` and ``scope``."""
    if not isinstance(item, Mapping):
        msg = f"each item must be a dict of remember() arguments, not {type(item).__name__}"
        raise InvalidInputError(msg)
    allowed = remember_keys()
    unknown = sorted(str(k) for k in item if k not in allowed)
    if unknown:
        msg = f"unknown remember() argument(s) {unknown}; allowed: {sorted(allowed)}"
        raise InvalidInputError(msg)
    missing = [k for k in ("content", "scope") if k not in item]
    if missing:
        msg = f"each item needs {missing}; e.g. {{'content': 'text', 'scope': Scope(user_id='u1')}}"
        raise InvalidInputError(msg)
    return dict(item)


@functools.cache
def remember_keys() -> frozenset[str]:
    """The keyword arguments a remember_many() item may carry (those of ``DraftBuilder.draft``, whatever hooks add)."""
    params = inspect.signature(DraftBuilder.draft).parameters
    return frozenset(n for n, p in params.items() if n != "self" and p.kind is not p.VAR_KEYWORD)
