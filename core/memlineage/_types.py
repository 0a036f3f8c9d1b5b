"""Type aliases shared across the core (no run-time behaviour, no imports of the package)."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONValue"]

#: A value JSON can hold: what ``json.loads`` returns, and what metadata, payloads and attributes are made of.
JSONValue: TypeAlias = "None | bool | int | float | str | list[JSONValue] | dict[str, JSONValue]"
