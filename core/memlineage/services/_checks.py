"""Argument validation shared by the services: numbers in [0, 1], id lists, vectors, kinds and read options."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from memlineage.errors import InvalidInputError
from memlineage.models import MemoryKind, check_id

__all__ = ["MAX_K", "MAX_LIMIT", "check_read_args", "id_tuple", "kind_values", "unit_float", "vector"]

#: Largest ``k`` a recall accepts (candidate fetches scale with it; 2**63 overflowed PostgreSQL's LIMIT).
MAX_K = 10_000
#: Largest ``limit`` of a listing that reaches SQL (both backends take it; 2**63 overflowed both).
MAX_LIMIT = 2**31 - 1


def vector(value: Iterable[float]) -> np.ndarray:
    """A precomputed embedding: a non-empty sequence of finite numbers, as a read-only float64 array (a copy).

    The array, not a list: the write path stores it as float32 bytes and compares it in numpy, so a list would be
    converted back and forth (two conversions of every vector of a bulk import).
    """
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        msg = f"embedding must be a list of floats, not {type(value).__name__}"
        raise InvalidInputError(msg)
    if type(value) is list and value and set(map(type, value)) == {float}:
        # the common case (an embedder's output): Python floats only, read without numpy's type discovery
        arr = np.fromiter(value, dtype=np.float64, count=len(value))
    else:
        # Vectorised check (numpy infers one dtype for the whole list): numbers only, flat.
        try:
            raw = value if isinstance(value, np.ndarray) else np.asarray(list(value))
        except (TypeError, ValueError) as exc:
            msg = "embedding must be a flat list of finite numbers; pass embedding=None to embed the content"
            raise InvalidInputError(msg) from exc
        if raw.dtype.kind not in "fiu":
            msg = (
                f"embedding must contain numbers only (got {raw.dtype.name} values); pass embedding=None to embed "
                "the content"
            )
            raise InvalidInputError(msg)
        arr = raw.astype(np.float64, copy=raw is value)  # never share the caller's array
        if arr.ndim != 1 or arr.size == 0:
            msg = "embedding must be a non-empty flat list of numbers; pass embedding=None to embed the content"
            raise InvalidInputError(msg)
    if not np.isfinite(arr).all():
        msg = "embedding must contain finite numbers only (found NaN or inf); pass embedding=None to embed the content"
        raise InvalidInputError(msg)
    arr.flags.writeable = False
    return arr


def unit_float(value: float, name: str) -> float:
    """``value`` as a float in [0, 1] (booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        msg = f"{name} must be a number in [0, 1], got {value!r}"
        raise InvalidInputError(msg)
    return float(value)


def id_tuple(values: Iterable[str] | str | None, name: str) -> tuple[str, ...]:
    """Validated, de-duplicated memory ids (one bare string counts as one id)."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = (values,)
    try:
        items = tuple(values)
    except TypeError as exc:
        msg = f"{name} must be a list of memory ids, not {type(values).__name__}"
        raise InvalidInputError(msg) from exc
    for v in items:
        check_id(v, name)  # a lone surrogate, NUL or overlong id would only fail deep inside the database driver
    return tuple(dict.fromkeys(items))


def check_read_args(*, k: int, purpose: str | None, budget: float | None, activity_id: str | None) -> None:
    """Validate recall's options up front, so no bad value reaches a policy request or the database."""
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_K:
        msg = f"k must be an int from 0 to {MAX_K}, got {k!r:.40}"
        raise InvalidInputError(msg)
    if purpose is not None:
        check_id(purpose, "purpose")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 <= budget < float("inf")
    ):
        msg = f"budget must be None or a finite number >= 0 (policy cost units), got {budget!r:.40}"
        raise InvalidInputError(msg)
    if activity_id is not None:
        check_id(activity_id, "activity_id")


def kind_values(kinds: Iterable[MemoryKind | str] | MemoryKind | str | None) -> tuple[str, ...] | None:
    """Memory kinds as values; one kind may be passed as a bare string (``kinds="semantic"``)."""
    if kinds is None:
        return None
    items = (kinds,) if isinstance(kinds, (str, MemoryKind)) else kinds
    try:
        return tuple(MemoryKind(x).value for x in items)
    except (ValueError, TypeError) as exc:
        allowed = [k.value for k in MemoryKind]
        msg = f"unknown memory kind in {kinds!r:.60}; use one or a list of {allowed}"
        raise InvalidInputError(msg) from exc
