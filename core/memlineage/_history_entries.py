"""The messages of a chat history (re-exported by :mod:`memlineage.history`).

:class:`ChatEntry` is a message to append, :class:`ChatTurn` one stored occurrence of a message; framework message
data travels as JSON (:func:`payload_to_json`, :func:`payload_from_json`, bytes kept exactly), and is checked to be
storable before anything is written.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from memlineage._types import JSONValue
from memlineage.models import Memory, check_storable_text

__all__ = ["ChatEntry", "ChatTurn", "Role", "payload_from_json", "payload_to_json"]

Role = Literal["user", "assistant", "tool", "system"]

#: Key under which :func:`payload_to_json` keeps bytes (base64); the reserved metadata prefix, so never a user key.
_BYTES_KEY = "_ml_bytes"


@overload
def payload_to_json(value: Mapping[str, object]) -> dict[str, JSONValue]: ...
@overload
def payload_to_json(value: object) -> JSONValue: ...
def payload_to_json(value: object) -> JSONValue:
    """A JSON-safe copy of framework message data that :func:`payload_from_json` turns back into the original.

    Bytes (an image's data, an audio clip) are kept exactly, as base64 under a reserved key; tuples become lists;
    mapping keys become strings; a float that JSON cannot hold (NaN, infinity) and any other object become their
    ``str`` (the framework rebuilds what it can from it).
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_BYTES_KEY: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {str(k): payload_to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [payload_to_json(v) for v in value]
    return str(value)


def payload_from_json(value: object) -> Any:
    """The framework data :func:`payload_to_json` encoded (bytes restored)."""
    if isinstance(value, Mapping):
        if len(value) == 1 and isinstance(value.get(_BYTES_KEY), str):
            try:
                return base64.b64decode(value[_BYTES_KEY], validate=True)
            except (binascii.Error, ValueError):
                return dict(value)
        return {k: payload_from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [payload_from_json(v) for v in value]
    return value


@dataclass(frozen=True)
class ChatEntry:
    """A message to append.

    Attributes:
        role: ``"user"``, ``"assistant"``, ``"tool"`` or ``"system"``.
        text: The memory's text; non-empty (an assistant message that only calls tools passes a description of
            the calls, and its original content in ``payload``).
        name: For ``"tool"``: the tool name (the memory's source is ``tool:<name>``).
        payload: JSON-like framework data that rebuilds the message (type, tool calls, ids...), without the text.
        calls: For ``"assistant"``: the tool calls it requested, ``{tool_call_id: arguments}`` (arguments as the
            tool receives them); their values name the premises of the results.
        call_id: For ``"tool"``: the id of the call this message answers.
        confidence: How sure it is that the message is what its role says, in [0, 1] (default 1); the memory's
            trust is its source's times this (an adapter lowers it for a message of unknown role).
        failed: For ``"tool"``: the call failed, as the framework reported apart from the message (LlamaIndex's
            ``ToolOutput.is_error``). The history keeps the message; its memory is withdrawn at once, as for a
            payload that says so (LangChain ``status="error"``).
    """

    role: Role
    text: str
    name: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)
    calls: Mapping[str, Any] = field(default_factory=dict)
    call_id: str | None = None
    confidence: float = 1.0
    failed: bool = False


@dataclass(frozen=True)
class ChatTurn:
    """One message occurrence of the session, in order.

    Attributes:
        role: As appended.
        memory: The memory holding the text (shared with earlier occurrences of the same words).
        payload: The framework data given at append time.
        position: 0-based position in the session (positions of cleared turns are not reused).
        activity_id: The ``chat_message`` activity of this occurrence.
        wording: The words as said, when the memory holding them has other words (a restatement merged into an
            earlier memory: "i live in paris" into "I live in Paris."); ``None`` when the memory's content is
            exactly what was said.
    """

    role: Role
    memory: Memory
    payload: Mapping[str, Any]
    position: int
    activity_id: str
    wording: str | None = None

    @property
    def text(self) -> str:
        """The message text exactly as appended (erased memories never appear as turns)."""
        return self.wording if self.wording is not None else self.memory.content


def _check_storable(value: object, what: str) -> None:
    """Refuse text no backend can store (a lone surrogate, NUL) anywhere in a JSON-like value: keys and strings.

    Raises:
        InvalidInputError: such text, naming where it is.
    """
    stack: list[tuple[object, str]] = [(value, what)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            check_storable_text(item, where)
        elif isinstance(item, Mapping):
            for k, v in item.items():
                check_storable_text(str(k), f"a key in {where}")
                stack.append((v, f"{where}[{str(k)[:40]!r}]"))
        elif isinstance(item, (list, tuple)):
            stack.extend((v, where) for v in item)


def _failed(payload: Mapping[str, Any]) -> bool:
    """Whether a tool message's framework data says the call failed (LangChain ``status="error"``, ``is_error``)."""
    data = payload.get("data")
    fields: Mapping[str, Any] = data if isinstance(data, Mapping) else payload
    return bool(fields.get("status") == "error" or fields.get("is_error") or payload.get("is_error"))


def _same(turn: ChatTurn, entry: ChatEntry) -> bool:
    """Whether a stored turn is the message ``entry`` describes (role, exact text and framework data)."""
    return (
        turn.role == entry.role
        and turn.text == entry.text
        and payload_to_json(turn.payload) == payload_to_json(entry.payload)
    )
