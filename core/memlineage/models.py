"""Data model: memories (PROV entities), their lineage, activities and scopes.

The vocabulary follows W3C PROV-DM: a :class:`Memory` is one immutable version of an *Entity*; what produced it is
an :class:`Activity`; who is responsible is named by its :class:`Source`. Edges between them use the exact PROV
relation names in :class:`Relation`. All timestamps are timezone-aware UTC ``datetime`` objects.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from enum import Enum
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

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
    "new_id",
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


def new_id() -> str:
    """Return a new random id (``str(uuid4())``)."""
    return str(uuid.uuid4())


def normalize_content(text: str) -> str:
    """Normalise text for duplicate detection: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def content_hash(text: str) -> str:
    """SHA-256 hex digest of :func:`normalize_content` of ``text``."""
    return hashlib.sha256(normalize_content(text).encode("utf-8", "surrogatepass")).hexdigest()


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def as_utc(value: Any, what: str) -> datetime:
    """The one datetime rule, applied at every boundary: a naive ``datetime`` means UTC; aware ones convert to UTC.

    Raises:
        InvalidInputError: ``value`` is not a ``datetime`` (strings such as ``"2024"`` are not parsed).
    """
    if not isinstance(value, datetime):
        msg = f"{what} must be a datetime (naive values are taken as UTC), not {type(value).__name__}"
        raise InvalidInputError(msg)
    return _utc(value)  # type: ignore[return-value]


#: Limits checked at the boundary, before anything is written (one user's write must not break a shared store).
#: Ids (user, agent, session, activity, slot, source name, memory ids): characters, on every backend.
MAX_ID_CHARS = 255
#: Tags per memory, and characters per tag.
MAX_TAGS = 64
MAX_TAG_CHARS = 256
#: Metadata: size of its JSON form in bytes, and nesting depth of dicts / lists.
MAX_METADATA_BYTES = 64 * 1024
MAX_METADATA_DEPTH = 8
#: Characters of memory content (and of any other free text such as a reason or a query).
MAX_TEXT_CHARS = 4 * 1024 * 1024

#: Characters that render as nothing (format controls such as zero-width spaces and joiners).
_INVISIBLE = frozenset({"Cf", "Cc", "Zs", "Zl", "Zp"})


def _text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored on every backend (None if it can): lone surrogate or NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid Unicode text (lone surrogate at position {exc.start}); fix the encoding"
    if "\x00" in value:
        return "contains a NUL character, which PostgreSQL cannot store; remove it"
    return None


def _valid_unicode(value: str, what: str) -> str:
    problem = _text_problem(value)
    if problem is None and len(value) > MAX_ID_CHARS:
        problem = f"is {len(value)} characters long; ids are limited to {MAX_ID_CHARS}"
    if problem is not None:
        raise ValueError(f"{what} {problem}")
    return value


def _problems(exc: ValidationError, what: str) -> str:
    """A validation error's problems in one line (field: message), without the offending values."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or what}: {e['msg']}" for e in exc.errors())


def check_id(value: Any, what: str) -> str:
    """Validate an id-like string: non-empty, at most :data:`MAX_ID_CHARS` characters, no NUL or lone surrogate.

    Raises:
        InvalidInputError: wrong type, empty, too long or not storable text.
    """
    if not isinstance(value, str) or not value.strip():
        msg = f"{what} must be a non-empty string, got {type(value).__name__}"
        raise InvalidInputError(msg)
    try:
        return _valid_unicode(value, what)
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from None


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

    def __init__(self, **data: Any) -> None:
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
        """The source as a :class:`Source`."""
        return Source(kind=self.source_kind, name=self.source_name)


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

    id: str = Field(default_factory=new_id, description="Version id, str(uuid4()).")
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

    def __init__(self, **data: Any) -> None:
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


RESERVED_METADATA_PREFIX = "_ml_"


def normalize_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a JSON-safe copy of ``metadata``.

    ``None`` becomes ``{}``; tuples and sets become lists; nested dicts are kept; keys must be strings that do not
    start with the reserved prefix ``_ml_``; floats must be finite.

    Raises:
        InvalidInputError: a key is not a string or reserved, a float is NaN/inf, or a value is not JSON-like.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        msg = f"metadata must be a mapping (dict) or None, not {type(metadata).__name__}"
        raise InvalidInputError(msg)
    out = {_check_key(k): _norm_value(v, k) for k, v in metadata.items()}
    size = len(json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        msg = f"metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES} (store large payloads elsewhere)"
        raise InvalidInputError(msg)
    return out


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        msg = f"metadata keys must be non-empty strings, got {type(key).__name__}"
        raise InvalidInputError(msg)
    if key.startswith(RESERVED_METADATA_PREFIX):
        msg = f"metadata key {key!r} uses the reserved prefix {RESERVED_METADATA_PREFIX!r}; rename it"
        raise InvalidInputError(msg)
    _check_text(key, "a metadata key", limit=MAX_ID_CHARS)
    return key


def _norm_value(value: Any, key: str, depth: int = 1) -> Any:
    if depth > MAX_METADATA_DEPTH:
        msg = f"metadata[{key!r}] nests deeper than {MAX_METADATA_DEPTH} levels (or refers to itself); flatten it"
        raise InvalidInputError(msg)
    if value is None or isinstance(value, (bool, int, str)):
        if isinstance(value, str):
            _check_text(value, f"metadata[{key!r}]")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            msg = f"metadata[{key!r}] is {value}; NaN and infinity cannot be stored, use None or a finite number"
            raise InvalidInputError(msg)
        return value
    if isinstance(value, datetime):
        return _utc(value).isoformat()  # type: ignore[union-attr]
    if isinstance(value, Enum):
        return _norm_value(value.value, key)
    if isinstance(value, Mapping):
        return {_check_key_nested(k, key): _norm_value(v, f"{key}.{k}", depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_norm_value(v, key, depth + 1) for v in items]
    msg = f"metadata[{key!r}] has type {type(value).__name__}; use str, int, float, bool, None, list or dict"
    raise InvalidInputError(msg)


def _check_key_nested(key: Any, parent: str) -> str:
    if not isinstance(key, str):
        msg = f"metadata[{parent!r}] has a non-string key of type {type(key).__name__}; nested keys must be strings"
        raise InvalidInputError(msg)
    _check_text(key, f"a key in metadata[{parent!r}]", limit=MAX_ID_CHARS)
    return key


def _check_text(text: str, what: str, *, limit: int = MAX_TEXT_CHARS) -> None:
    problem = _text_problem(text)
    if problem is None and len(text) > limit:
        problem = f"is {len(text)} characters long; the limit is {limit}"
    if problem is not None:
        raise InvalidInputError(f"{what} {problem}")


def _visible(text: str) -> bool:
    """Whether ``text`` has a character that renders (not only whitespace, zero-width or control characters)."""
    return any(unicodedata.category(ch) not in _INVISIBLE for ch in text)


def check_text(text: Any, what: str = "content") -> str:
    """Validate user text: a ``str`` with a visible character, storable on every backend.

    Raises:
        InvalidInputError: wrong type; empty, whitespace or only invisible characters (zero-width spaces,
            joiners, controls); a lone surrogate or NUL; longer than :data:`MAX_TEXT_CHARS`.
    """
    if not isinstance(text, str):
        msg = f"{what} must be a str, not {type(text).__name__}"
        raise InvalidInputError(msg)
    if not text.strip() or not _visible(text):
        tail = "there is nothing to remember" if what == "content" else f"pass a non-empty {what}"
        msg = f"{what} is empty, whitespace or invisible characters only; {tail}"
        raise InvalidInputError(msg)
    _check_text(text, what)
    return text


def normalize_tags(tags: Iterable[str] | str | None) -> tuple[str, ...]:
    """Return sorted, de-duplicated, stripped, NFC-normalised tags.

    Raises:
        InvalidInputError: a tag is not a non-empty string, holds a lone surrogate or NUL, is longer than
            :data:`MAX_TAG_CHARS`, or there are more than :data:`MAX_TAGS` distinct tags.
    """
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = (tags,)
    if isinstance(tags, (bytes, Mapping)) or not isinstance(tags, Iterable):
        msg = f"tags must be a list of strings, not {type(tags).__name__}"
        raise InvalidInputError(msg)
    out = set()
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip():
            msg = f"tags must be non-empty strings, got {type(tag).__name__}"
            raise InvalidInputError(msg)
        _check_text(tag, "a tag", limit=MAX_TAG_CHARS)
        out.add(unicodedata.normalize("NFC", tag.strip()))
        if len(out) > MAX_TAGS:
            msg = f"more than {MAX_TAGS} tags on one memory; the limit keeps the index usable for everyone"
            raise InvalidInputError(msg)
    return tuple(sorted(out))
