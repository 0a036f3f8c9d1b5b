"""Data model: memories (PROV entities), their lineage, activities and scopes.

The vocabulary follows W3C PROV-DM: a :class:`Memory` is one immutable version of an *Entity*; what produced it is
an :class:`Activity`; who is responsible is named by its :class:`Source`. Edges between them use the exact PROV
relation names in :class:`Relation`. All timestamps are timezone-aware UTC ``datetime`` objects.
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from enum import Enum
from typing import Any, overload

import uuid_utils
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from memlineage._limits import MAX_ID_CHARS, _problems, _utc, _valid_unicode
from memlineage._limits import MAX_METADATA_BYTES as MAX_METADATA_BYTES
from memlineage._limits import MAX_METADATA_DEPTH as MAX_METADATA_DEPTH
from memlineage._limits import MAX_TAG_CHARS as MAX_TAG_CHARS
from memlineage._limits import MAX_TAGS as MAX_TAGS
from memlineage._limits import MAX_TEXT_CHARS as MAX_TEXT_CHARS
from memlineage._limits import RESERVED_METADATA_PREFIX as RESERVED_METADATA_PREFIX
from memlineage._limits import check_id as check_id
from memlineage._limits import check_storable_text as check_storable_text
from memlineage._limits import check_text as check_text
from memlineage._limits import normalize_metadata as normalize_metadata
from memlineage._limits import normalize_tags as normalize_tags
from memlineage.errors import InvalidInputError

__all__ = [
    "Activity",
    "Lineage",
    "Memory",
    "MemoryKind",
    "Relation",
    "Scope",
    "Source",
    "SourceKind",
    "Status",
    "ValueAssessment",
    "content_hash",
    "from_epoch",
    "match_short_id",
    "new_id",
    "short_id",
    "normalize_content",
    "to_epoch",
    "utcnow",
]


class StrEnum(str, Enum):
    """A ``str`` enum whose ``str()`` is its value (``enum.StrEnum`` needs Python 3.11)."""

    def __str__(self) -> str:
        return str(self.value)


class SourceKind(StrEnum):
    """Who or what a memory came from."""

    USER = "user"
    TOOL = "tool"
    REASONING = "reasoning"
    SYSTEM = "system"
    AGENT = "agent"
    CONSOLIDATION = "consolidation"
    IMPORT = "import"


class MemoryKind(StrEnum):
    """Cognitive kind of a memory (working, episodic, semantic, procedural)."""

    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


class Status(StrEnum):
    """Lifecycle status of a memory version.

    ``active`` is served by default reads; ``suspect`` means a premise was retracted or superseded and the memory
    needs revalidation; ``superseded`` / ``retracted`` / ``expired`` / ``archived`` / ``erased`` are never served
    by default reads.
    """

    ACTIVE = "active"
    SUSPECT = "suspect"
    SUPERSEDED = "superseded"
    RETRACTED = "retracted"
    EXPIRED = "expired"
    ARCHIVED = "archived"
    ERASED = "erased"


#: Statuses that make a memory an invalid premise for the memories derived from it.
INVALIDATING_STATUSES = frozenset({Status.SUPERSEDED, Status.RETRACTED, Status.EXPIRED, Status.ERASED})


class Relation(StrEnum):
    """PROV relation names, spelled exactly as in PROV-N."""

    WAS_DERIVED_FROM = "wasDerivedFrom"
    WAS_GENERATED_BY = "wasGeneratedBy"
    USED = "used"
    WAS_ATTRIBUTED_TO = "wasAttributedTo"
    WAS_ASSOCIATED_WITH = "wasAssociatedWith"
    WAS_INFORMED_BY = "wasInformedBy"
    WAS_REVISION_OF = "wasRevisionOf"
    WAS_INVALIDATED_BY = "wasInvalidatedBy"


def utcnow() -> datetime:
    """Return the current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def to_epoch(value: datetime | None) -> float | None:
    """Convert a datetime to epoch seconds (naive values are taken as UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


@overload
def from_epoch(value: float) -> datetime: ...
@overload
def from_epoch(value: None) -> None: ...
@overload
def from_epoch(value: float | None) -> datetime | None: ...
def from_epoch(value: float | None) -> datetime | None:
    """Convert epoch seconds to a timezone-aware UTC datetime (``None`` stays ``None``)."""
    if value is None:
        return None
    return datetime.fromtimestamp(value, tz=timezone.utc)


#: Characters of an id shown to people and models: ``[m:<short id>]`` markers, CLI tables, explanations.
SHORT_ID_CHARS = 8


def new_id() -> str:
    """Return a new time-ordered id: a UUIDv7 (RFC 9562) string, e.g. ``'01a22e04-ef94-72b7-b305-84a7522acd61'``.

    The first 48 bits are the Unix time in milliseconds and ids made in one process increase monotonically, so the
    ledger's B-tree indexes keyed by memory id (primary key, edges, events, supports, embeddings) grow at their right
    edge and a cascade walks neighbouring pages instead of random ones (issue 16). The short form people and models
    see is the random tail, :func:`short_id`. Generated by ``uuid-utils``.
    """
    return str(uuid_utils.uuid7())


def short_id(memory_id: str) -> str:
    """The short form of an id: its last :data:`SHORT_ID_CHARS` characters (``'a7522acd'`` for ``'...-84a7522acd'``).

    The tail is random in a UUIDv7 (the head is the creation time, shared by every id made in the same minute) and
    in the random UUIDv4 ids earlier versions wrote, so it tells ids apart in both.
    """
    return memory_id[-SHORT_ID_CHARS:]


def match_short_id(key: str, ids: Iterable[str]) -> list[str]:
    """The ids among ``ids`` that ``key`` names, case-insensitively.

    The id itself, else the ids ending with ``key`` (a short id), else those starting with it (the markers earlier
    versions showed were the first 8 characters).

    Args:
        key: A full id, a short id, or an older prefix (at least 4 characters for the last two).
        ids: Candidate ids, e.g. the memories a model was shown.

    Returns:
        The matching ids in the order given, without duplicates; more than one means ``key`` is ambiguous.
    """
    key = key.lower()
    pool = list(dict.fromkeys(ids))
    exact = [i for i in pool if i.lower() == key]
    if exact or len(key) < 4:
        return exact
    return [i for i in pool if i.lower().endswith(key)] or [i for i in pool if i.lower().startswith(key)]


def normalize_content(text: str) -> str:
    """Normalise text for duplicate detection: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def content_hash(text: str) -> str:
    """SHA-256 hex digest of :func:`normalize_content` of ``text``."""
    return hashlib.sha256(normalize_content(text).encode("utf-8", "surrogatepass")).hexdigest()


def as_utc(value: object, what: str) -> datetime:
    """The one datetime rule, applied at every boundary: a naive ``datetime`` means UTC; aware ones convert to UTC.

    Raises:
        InvalidInputError: ``value`` is not a ``datetime`` (strings such as ``"2024"`` are not parsed).
    """
    if not isinstance(value, datetime):
        msg = f"{what} must be a datetime (naive values are taken as UTC), not {type(value).__name__}"
        raise InvalidInputError(msg)
    return _utc(value)  # type: ignore[return-value]


class Scope(BaseModel):
    """Who a memory belongs to. Every read and write carries one.

    ``user_id`` is the isolation boundary: no read ever returns a memory of another user. ``agent_id``, when given
    on a read, narrows it to that agent's memories plus the user's agent-independent ones. ``session_id`` is
    recorded on writes; reads span all sessions of the user unless asked for ``session_only``.

    Example:
        >>> Scope(user_id="alice", session_id="s1")
        Scope(user_id='alice', agent_id=None, session_id='s1')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str = Field(description="Owner of the memory; required, non-empty.")
    agent_id: str | None = Field(default=None, description="Agent the memory belongs to; None = any agent.")
    session_id: str | None = Field(default=None, description="Session the memory was written in.")

    @field_validator("user_id")
    @classmethod
    def _user_id_non_empty(cls, value: str) -> str:
        if not isinstance(value, str) or not value.strip():
            msg = "Scope.user_id must be a non-empty string; pass the id of the user the memory belongs to"
            raise ValueError(msg)
        return _valid_unicode(value, "Scope.user_id")

    @field_validator("agent_id", "session_id")
    @classmethod
    def _optional_non_empty(cls, value: str | None) -> str | None:
        if value is not None and (not isinstance(value, str) or not value.strip()):
            msg = "agent_id / session_id must be None or a non-empty string"
            raise ValueError(msg)
        return value if value is None else _valid_unicode(value, "agent_id / session_id")

    def __init__(self, **data: str | None) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            msg = f"invalid scope ({_problems(exc, 'scope')}); e.g. Scope(user_id='alice', session_id='s1')"
            raise InvalidInputError(msg) from None

    @classmethod
    def coerce(cls, value: Scope | Mapping[str, Any] | str | None) -> Scope:
        """Build a scope from a ``Scope``, a mapping or a bare user id.

        Raises:
            InvalidInputError: ``value`` is None or not a valid scope.
        """
        if isinstance(value, Scope):
            return value
        if value is None:
            msg = (
                "a scope is required: pass scope='alice' or scope=Scope(user_id='alice', session_id='s1'); every read "
                "and write is confined to one user's memories (there is no global pool to read or write)"
            )
            raise InvalidInputError(msg)
        try:
            if isinstance(value, str):
                return cls(user_id=value)
            if isinstance(value, Mapping):
                return cls(**dict(value))
        except InvalidInputError:
            raise
        except Exception as exc:  # TypeError (unknown keys are caught by the model)
            msg = f"invalid scope {value!r}: {exc}"
            raise InvalidInputError(msg) from exc
        msg = f"scope must be a Scope, a mapping or a user id string, not {type(value).__name__}"
        raise InvalidInputError(msg)

    def contains(self, other: Scope) -> bool:
        """Whether a memory written in ``other`` is readable by a request in this scope.

        Same ``user_id``; if this scope names an agent, the memory's agent is that agent or none.
        """
        if other.user_id != self.user_id:
            return False
        if self.agent_id is not None and other.agent_id not in (None, self.agent_id):
            return False
        return True


class Source(BaseModel):
    """Where a memory came from: a :class:`SourceKind` and an optional name (tool name, model name...).

    The seed's string notation is accepted by :meth:`parse`: ``"user"``, ``"tool:flight_api"``, ``"reasoning"``.
    """

    model_config = ConfigDict(frozen=True)

    kind: SourceKind = Field(description="Category of the source.")
    name: str | None = Field(default=None, description="Tool, model or agent name; e.g. 'flight_api'.")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str | None) -> str | None:
        return value if value is None else _valid_unicode(value, "source name")

    @classmethod
    def parse(cls, value: Source | str | SourceKind | Mapping[str, Any]) -> Source:
        """Parse ``"kind"`` or ``"kind:name"`` (or pass a ``Source`` through).

        Raises:
            InvalidInputError: unknown kind or wrong type.
        """
        if isinstance(value, Source):
            return value
        if isinstance(value, SourceKind):
            return cls(kind=value)
        if isinstance(value, Mapping):
            try:
                return cls(**dict(value))
            except Exception as exc:
                msg = f"invalid source {value!r}: {exc}"
                raise InvalidInputError(msg) from exc
        if not isinstance(value, str):
            msg = f"source must be a Source or a string like 'user' or 'tool:name', not {type(value).__name__}"
            raise InvalidInputError(msg)
        kind, colon, name = value.strip().partition(":")
        if colon and not name.strip():
            msg = f"source {value!r} names no one after ':'; use {kind.strip()!r} alone or '{kind.strip()}:<name>'"
            raise InvalidInputError(msg)
        try:
            source_kind = SourceKind(kind.strip().lower())
        except ValueError as exc:
            allowed = ", ".join(k.value for k in SourceKind)
            msg = f"unknown source kind {kind!r} in {value!r}; use one of: {allowed} (optionally 'kind:name')"
            raise InvalidInputError(msg) from exc
        try:
            return cls(kind=source_kind, name=name.strip() or None)
        except ValidationError as exc:
            msg = f"invalid source name: {exc.errors()[0]['msg']}"
            raise InvalidInputError(msg) from None

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.name}" if self.name else self.kind.value


#: Default trust per source kind, in [0, 1] (higher = more trusted).
DEFAULT_TRUST: dict[SourceKind, float] = {
    SourceKind.USER: 1.0,
    SourceKind.SYSTEM: 1.0,
    SourceKind.TOOL: 0.8,
    SourceKind.IMPORT: 0.7,
    SourceKind.AGENT: 0.7,
    SourceKind.CONSOLIDATION: 0.7,
    SourceKind.REASONING: 0.6,
}


class Lineage(BaseModel):
    """How a memory came to be: its source, the activity that generated it and the memories it derives from."""

    model_config = ConfigDict(frozen=True)

    source_kind: SourceKind = Field(description="Category of the source (PROV wasAttributedTo).")
    source_name: str | None = Field(default=None, description="Tool / model / agent name, if any.")
    activity_id: str | None = Field(default=None, description="Activity that generated it (wasGeneratedBy).")
    parent_activity_id: str | None = Field(default=None, description="Parent run of that activity.")
    derived_from: tuple[str, ...] = Field(default=(), description="Ids of premise memories (wasDerivedFrom).")
    confidence: float = Field(default=1.0, ge=0.0, le=1.0, description="Source's confidence, in [0, 1].")
    trust: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="Trust in [0, 1], higher = more trusted; never above the lowest trust among its premises.",
    )
    context_hash: str | None = Field(default=None, description="Hash of the context it was produced in.")

    @property
    def source(self) -> Source:
        """The source as a :class:`Source` (one shared frozen instance per kind and name)."""
        return _source(self.source_kind, self.source_name)


@functools.lru_cache(maxsize=1024)
def _source(kind: SourceKind, name: str | None) -> Source:
    # Source is frozen: recall reads a memory's source for every pair of hits it compares, and building (validating)
    # a new model each time cost as much as the comparison itself
    return Source(kind=kind, name=name)


class ValueAssessment(BaseModel):
    """The factor values behind a memory's value score (seed: multi-factor value model).

    Every factor is in [0, 1], higher = more worth keeping.
    """

    model_config = ConfigDict(frozen=True)

    goal_relevance: float = Field(default=0.5, ge=0.0, le=1.0, description="Relevance to the current goal.")
    salience: float = Field(default=0.0, ge=0.0, le=1.0, description="Directives, emotion, key entities.")
    utility: float = Field(default=0.5, ge=0.0, le=1.0, description="Utility of the information type.")
    novelty: float = Field(default=1.0, ge=0.0, le=1.0, description="1 - similarity to nearest memory.")
    trust: float = Field(default=1.0, ge=0.0, le=1.0, description="Trust from lineage.")
    score: float = Field(default=0.5, ge=0.0, le=1.0, description="Weighted value V in [0, 1], higher = keep.")
    info_type: str | None = Field(default=None, description="Detected information type (preference, fact...).")
    forced: bool = Field(default=False, description="An explicit directive forced storage.")
    extractor: str | None = Field(default=None, description="Name of the extractor that produced the factors.")


class Memory(BaseModel):
    """One immutable version of a remembered item (a PROV entity).

    Content never changes in place: a revision is a new ``Memory`` whose ``supersedes`` names the previous version
    (``wasRevisionOf``). Status, use count and last use are state kept by the ledger.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=new_id, description="Version id (new_id(): a time-ordered UUIDv7 string).")
    content: str = Field(description="The remembered text (empty once erased).")
    kind: MemoryKind = Field(default=MemoryKind.EPISODIC, description="working / episodic / semantic / procedural.")
    scope: Scope = Field(description="Owner of the memory.")
    lineage: Lineage = Field(description="Source, generating activity and premises.")
    status: Status = Field(default=Status.ACTIVE, description="Lifecycle status.")
    tags: tuple[str, ...] = Field(default=(), description="Free-form labels used by policies (e.g. 'price').")
    metadata: dict[str, Any] = Field(default_factory=dict, description="JSON-serialisable user metadata.")
    created_at: datetime = Field(default_factory=utcnow, description="When the memory was created (UTC).")
    recorded_at: datetime = Field(default_factory=utcnow, description="When the ledger recorded it (UTC).")
    valid_from: datetime | None = Field(default=None, description="When the fact became true / event happened.")
    valid_to: datetime | None = Field(default=None, description="When the fact stopped being true (world time).")
    expires_at: datetime | None = Field(default=None, description="TTL deadline; after it the memory expires.")
    invalidated_at: datetime | None = Field(default=None, description="System time of invalidation, if any.")
    version: int = Field(default=1, ge=1, description="1 for the first version, +1 per revision.")
    supersedes: str | None = Field(default=None, description="Id of the version this one replaces.")
    slot: str | None = Field(default=None, description="Semantic slot key; a new value supersedes the old.")
    value: float = Field(default=0.5, ge=0.0, le=1.0, description="Stored value V in [0, 1], higher = keep.")
    assessment: ValueAssessment | None = Field(default=None, description="Factor values behind ``value``.")
    last_used_at: datetime | None = Field(default=None, description="Last time it was served by a read.")
    use_count: int = Field(default=0, ge=0, description="How many reads served it.")

    @field_validator(
        "created_at", "recorded_at", "valid_from", "valid_to", "expires_at", "invalidated_at", "last_used_at"
    )
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return _utc(value)

    @property
    def source(self) -> Source:
        """The memory's source."""
        return self.lineage.source

    @property
    def trust(self) -> float:
        """Trust in [0, 1] (higher = more trusted)."""
        return self.lineage.trust

    @property
    def confidence(self) -> float:
        """Source confidence in [0, 1]."""
        return self.lineage.confidence

    @property
    def derived_from(self) -> tuple[str, ...]:
        """Premise ids."""
        return self.lineage.derived_from

    def summary(self) -> str:
        """A one-line lineage summary, e.g. ``tool:flight_api ← 2 premises, trust 0.80``."""
        parts = [str(self.source)]
        if self.derived_from:
            parts.append(f"← {len(self.derived_from)} premise{'s' if len(self.derived_from) != 1 else ''}")
        parts.append(f"trust {self.trust:.2f}")
        if self.status is not Status.ACTIVE:
            parts.append(self.status.value)
        return ", ".join(parts)


class Activity(BaseModel):
    """Something that produced or used memories: an agent run, an LLM call, a tool call, a job (PROV activity)."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(
        default_factory=new_id,
        description="MemLineage's own id (primary key; a caller-chosen id must be unused by other users).",
    )
    kind: str = Field(default="run", description="'agent_run', 'llm_call', 'tool_call', 'consolidation'...")
    run_id: str | None = Field(
        default=None,
        description="Framework id of the run this belongs to (LangChain root run_id, LlamaIndex run span id).",
    )
    tool_call_id: str | None = Field(
        default=None, description="The model's tool-call id; unique per scope and run_id (not globally)."
    )
    name: str | None = Field(default=None, description="Tool or chain name.")
    parent_id: str | None = Field(default=None, description="Parent activity (wasInformedBy).")
    scope: Scope | None = Field(default=None, description="Scope it ran in.")
    started_at: datetime = Field(default_factory=utcnow, description="Start time (UTC).")
    ended_at: datetime | None = Field(default=None, description="End time (UTC), None while running.")
    outcome: str | None = Field(default=None, description="'success', 'error', 'unknown', 'fallback'.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Inputs, call ids, error text...")

    @field_validator("started_at", "ended_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return _utc(value)

    def __init__(self, **data: object) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            msg = f"invalid Activity ({_problems(exc, 'activity')}); e.g. Activity(id='run-1', kind='agent_run')"
            raise InvalidInputError(msg) from None

    @field_validator("id", "kind", "name", "parent_id", "outcome")
    @classmethod
    def _storable(cls, value: str | None, info: ValidationInfo) -> str | None:
        # the same rule on SQLite and PostgreSQL: no NUL, no lone surrogate, within the column's width
        if value is None:
            return None
        width = {"kind": 64, "outcome": 32}.get(str(info.field_name), MAX_ID_CHARS)
        if len(value) > width:
            raise ValueError(f"Activity.{info.field_name} is {len(value)} characters long; the limit is {width}")
        return _valid_unicode(value, f"Activity.{info.field_name}")
