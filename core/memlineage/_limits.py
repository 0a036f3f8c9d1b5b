"""The limits checked at the boundary and the checks that enforce them (re-exported by :mod:`memlineage.models`).

Ids, tags, metadata and free text are checked before anything is written, so that one user's write cannot break a
shared store: length limits, text every backend can store (no lone surrogate, no NUL), JSON-safe metadata, and
normalised tags. ``_utc`` is the datetime rule the data model and metadata share (naive means UTC).
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from pydantic import ValidationError

from memlineage._types import JSONValue
from memlineage.errors import InvalidInputError

__all__ = [
    "MAX_ID_CHARS",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_TAG_CHARS",
    "MAX_TAGS",
    "MAX_TEXT_CHARS",
    "RESERVED_METADATA_PREFIX",
    "check_id",
    "check_storable_text",
    "check_text",
    "normalize_metadata",
    "normalize_tags",
]


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


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


def check_id(value: object, what: str) -> str:
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


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        msg = f"metadata keys must be non-empty strings, got {type(key).__name__}"
        raise InvalidInputError(msg)
    if key.startswith(RESERVED_METADATA_PREFIX):
        msg = f"metadata key {key!r} uses the reserved prefix {RESERVED_METADATA_PREFIX!r}; rename it"
        raise InvalidInputError(msg)
    _check_text(key, "a metadata key", limit=MAX_ID_CHARS)
    return key


def _norm_value(value: object, key: str, depth: int = 1) -> JSONValue:
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


def _check_key_nested(key: object, parent: str) -> str:
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


def check_storable_text(text: str, what: str) -> None:
    """Refuse a string no backend can store: a lone surrogate or NUL, or longer than :data:`MAX_TEXT_CHARS`.

    Raises:
        InvalidInputError: naming ``what`` and the problem.
    """
    _check_text(text, what)


def _visible(text: str) -> bool:
    """Whether ``text`` has a character that renders (not only whitespace, zero-width or control characters)."""
    return any(unicodedata.category(ch) not in _INVISIBLE for ch in text)


def check_text(text: object, what: str = "content") -> str:
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
