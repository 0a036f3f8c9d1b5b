"""Conversions between LlamaIndex types and MemLineage arguments (STYLE R2: translation only, no decisions).

Everything here is a pure function: chat messages to ``remember()`` items, tool calls to JSON-safe metadata,
recall hits to the compact text the model reads, and scope resolution from block arguments or instrument tags.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.bridge.pydantic import BaseModel
from memlineage.errors import InvalidInputError
from memlineage.history import ChatEntry, ChatTurn, payload_to_json
from memlineage.models import Scope, check_text
from memlineage.retrieval import RecallHit
from memlineage.tools import recalled_line

from memlineage_llamaindex._failures import failed_call

#: Instrument-tag keys that name the scope of a run (see ``instrument_tags`` in
#: ``llama_index.core.instrumentation.dispatcher``).
TAG_USER_ID = "memlineage.user_id"
TAG_AGENT_ID = "memlineage.agent_id"
TAG_SESSION_ID = "memlineage.session_id"


def message_text(message: ChatMessage) -> str:
    """The text of a chat message (its text blocks joined), without tool-call blocks."""
    parts = [block.text for block in message.blocks if isinstance(block, TextBlock) and block.text]
    return "\n".join(parts).strip()


def json_safe(value: Any) -> Any:
    """A JSON-serialisable copy of ``value`` (unknown objects become their ``str``)."""
    return json.loads(json.dumps(value, default=str))


def tool_calls_of(message: ChatMessage) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{tool_call_id: (tool_name, kwargs)}`` for the tool calls an assistant message requested."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for block in message.blocks:
        if isinstance(block, ToolCallBlock) and block.tool_call_id:
            kwargs = block.tool_kwargs
            if isinstance(kwargs, str):
                try:
                    kwargs = json.loads(kwargs)
                except ValueError:
                    kwargs = {"input": kwargs}
            calls[block.tool_call_id] = (block.tool_name, dict(kwargs) if isinstance(kwargs, Mapping) else {})
    for selection in message.additional_kwargs.get("tool_calls", None) or []:
        tool_id = getattr(selection, "tool_id", None)
        if tool_id:
            calls[tool_id] = (
                getattr(selection, "tool_name", "tool"),
                dict(getattr(selection, "tool_kwargs", {})),
            )
    return calls


def latest_user_text(messages: Sequence[ChatMessage] | None) -> str | None:
    """The text of the latest user message that has text, or ``None``."""
    for message in reversed(messages or []):
        if message.role == MessageRole.USER:
            text = message_text(message)
            if text:
                return text
    return None


def resolve_scope(
    user_id: str | None,
    *,
    agent_id: str | None = None,
    session_id: str | None = None,
) -> Scope:
    """Build the block's scope; a user id is required (there is no shared default key).

    Raises:
        InvalidInputError: no user id.
    """
    if not user_id:
        msg = (
            "LineageMemoryBlock needs a scope: pass scope=Scope(user_id=...) or user_id=...; "
            "MemLineage never reads or writes a shared default pool"
        )
        raise InvalidInputError(msg)
    return Scope(user_id=user_id, agent_id=agent_id, session_id=session_id)


def scope_from_tags(tags: Mapping[str, Any] | None, default: Scope | None) -> Scope | None:
    """The scope named by instrument tags (``memlineage.user_id`` ...), else ``default``."""
    user_id = (tags or {}).get(TAG_USER_ID)
    if not user_id:
        return default
    return Scope(
        user_id=str(user_id),
        agent_id=(tags or {}).get(TAG_AGENT_ID) or (default.agent_id if default else None),
        session_id=(tags or {}).get(TAG_SESSION_ID),
    )


def hit_line(hit: RecallHit) -> str:
    """One recalled memory as a line with a citable marker (:func:`memlineage.tools.recalled_line`).

    Example: ``- [m:1a2b3c4d] (active, tool:get_weather, 2025-06-01) get_weather(city='Paris') -> 18C``; a memory
    that a later one restates ends its parenthesis with ``older: see [m:<id>]``.
    """
    return recalled_line(hit)


def render_hits(hits: Sequence[RecallHit], header: str) -> str:
    """The block text: a one-line header and one line per hit, best first; empty when there is nothing."""
    if not hits:
        return ""
    return "\n".join([header, *(hit_line(h) for h in hits)])


def truncate_lines(content: str, tokens_to_truncate: int, count_tokens: Callable[[str], int]) -> str | None:
    """Drop whole memory lines from the end (the lowest ranked) until ``tokens_to_truncate`` are saved.

    Returns:
        The shortened text, or ``None`` when no memory line is left.
    """
    lines = content.splitlines()
    if len(lines) <= 1:
        return None
    header, body = lines[0], lines[1:]
    saved = 0
    while body and saved < tokens_to_truncate:
        saved += count_tokens(body.pop() + "\n")
    if not body:
        return None
    return "\n".join([header, *body])


# ---------------------------------------------------------------------------------------------------- chat history
_ROLE_OF = {
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.CHATBOT: "assistant",
    MessageRole.MODEL: "assistant",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
}
#: Confidence of a message whose role is not known: stored as a tool result of that role at the lowest trust.
UNKNOWN_ROLE_CONFIDENCE = 0.5


#: Key of the text blocks kept in a chat turn's payload: the ``[start, end]`` of their text in the memory's text.
_TEXT_SPAN = "memlineage_text"


def message_to_entry(message: ChatMessage) -> ChatEntry:
    """A history entry for a LlamaIndex message: its text for the memory, the rest as payload.

    The memory's text is the message's text blocks joined by newlines; the payload keeps every block in order
    (a text block as the place of its text in the memory's, so erasure reaches the text), the role and
    ``additional_kwargs``, bytes included (an image's data comes back exactly). A message without text, or that
    only calls tools, is remembered as ``called name({...})`` and keeps its blocks whole. A role outside the known
    ones is stored as a tool result named ``role:<role>`` at the lowest trust, never as the user's or the system's
    words.

    Raises:
        InvalidInputError: not a ``ChatMessage``.
    """
    if not isinstance(message, ChatMessage):
        msg = f"chat store messages must be llama_index ChatMessage objects, got {type(message).__name__}"
        raise InvalidInputError(msg)
    payload = payload_to_json(message.model_dump())
    # LlamaIndex serialises bytes in additional_kwargs as base64 text: kept as bytes here, they come back as bytes
    payload["additional_kwargs"] = payload_to_json(_plain(message.additional_kwargs))
    blocks = [b for b in payload.get("blocks") or [] if isinstance(b, dict)]
    texts = [str(b.get("text") or "") for b in blocks if b.get("block_type") == "text"]
    text = "\n".join(texts)
    if texts and _storable(text):  # the memory holds the text; each text block keeps its place
        kept, start = [], 0
        for b in blocks:
            if b.get("block_type") == "text":
                size = len(str(b.get("text") or ""))
                kept.append({**{k: v for k, v in b.items() if k != "text"}, _TEXT_SPAN: [start, start + size]})
                start += size + 1
            else:
                kept.append(b)
        payload["blocks"] = kept
    else:
        calls = tool_calls_of(message)
        described = ", ".join(
            f"{name}({json.dumps(kw, ensure_ascii=False, default=str)})" for name, kw in calls.values()
        )
        text = f"called {described}" if described else f"({message.role.value} message without text)"
    name = message.additional_kwargs.get("name") or message.additional_kwargs.get("tool_name")
    role = _ROLE_OF.get(message.role)
    confidence = 1.0
    if role is None:  # a role this mapping does not know is never the user's or the system's words
        role, name, confidence = "tool", name or f"role:{message.role}", UNKNOWN_ROLE_CONFIDENCE
    requested = {i: kw for i, (_, kw) in tool_calls_of(message).items()} if role == "assistant" else {}
    call_id = message.additional_kwargs.get("tool_call_id") if role == "tool" else None
    return ChatEntry(
        role=role,  # type: ignore[arg-type]
        text=text, name=str(name) if name else None, payload=payload, calls=requested,
        call_id=str(call_id) if call_id else None, confidence=confidence,
        failed=role == "tool" and failed_call(str(call_id) if call_id else None, text),
    )  # fmt: skip


def _plain(value: Any) -> Any:
    """``value`` with pydantic models as their dicts (as LlamaIndex dumps them), bytes left as bytes."""
    if isinstance(value, BaseModel):
        return _plain(value.model_dump())
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _storable(text: str) -> bool:
    try:
        check_text(text)
    except InvalidInputError:
        return False
    return True


def turn_to_message(turn: ChatTurn) -> ChatMessage:
    """The LlamaIndex message a history turn holds: its blocks in order, text from the memory, bytes exact."""
    payload = dict(turn.payload)
    if "role" not in payload:  # written through another framework
        return ChatMessage(
            role={"user": "user", "assistant": "assistant", "tool": "tool"}.get(turn.role, "system"), content=turn.text
        )
    if payload.pop("text_from_memory", False):  # written before text blocks kept their place: the text first
        payload["blocks"] = [{"block_type": "text", "text": turn.text}, *payload.get("blocks", [])]
    else:
        payload["blocks"] = [_block(b, turn.text) for b in payload.get("blocks") or []]
    return ChatMessage.model_validate(payload)


def _block(block: Any, text: str) -> Any:
    span = block.get(_TEXT_SPAN) if isinstance(block, Mapping) else None
    if not (isinstance(span, list) and len(span) == 2 and all(isinstance(i, int) for i in span)):
        return block
    return {**{k: v for k, v in block.items() if k != _TEXT_SPAN}, "text": text[span[0] : span[1]]}
