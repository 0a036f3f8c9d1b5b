"""Conversions between LangChain / LangGraph types and MemLineage types (STYLE R2: one private module).

Nothing here decides, scores or stores: these are pure functions from one representation to another.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    message_to_dict,
    messages_from_dict,
)
from langgraph.store.base import Item, SearchItem
from memlineage.errors import InvalidInputError, InvalidNamespaceError
from memlineage.history import ChatEntry, ChatTurn, payload_to_json
from memlineage.models import MAX_TAG_CHARS, Memory, Scope, check_id
from memlineage.retrieval import RecallHit
from memlineage.tools import (
    RECALLED_BLOCK_CLOSE,
    RECALLED_BLOCK_OPEN,
    RECALLED_DATA_NOTE,
    quoted_text,
    recalled_block,
    recalled_line,
)
from memlineage.window import count_tokens, fit_to_budget

logger = logging.getLogger(__name__)

#: Metadata keys read from a run config (``config["metadata"]`` / ``config["configurable"]``) to build a scope.
SCOPE_KEYS = ("user_id", "agent_id", "session_id")

#: The input key through which :class:`LineageMemory` hands the ids of the memories it recalled to the chain (and
#: thereby to :class:`LineageCaptureCallback`, which sees chain inputs).
RECALLED_KEY = "memlineage_recalled"

#: Prefix of the slot keys under which :class:`LineageStore` keeps LangGraph items.
STORE_SLOT_PREFIX = "langgraph:"

#: Prefix of the tags that record every prefix of an item's namespace (so search filters inside the index).
STORE_NS_TAG = "lg.ns:"
#: Deepest namespace a LineageStore accepts (each prefix becomes a tag on the memory).
MAX_NAMESPACE_DEPTH = 16
#: Longest namespace, its labels joined by ".", so that every prefix tag fits the core's tag limit.
MAX_NAMESPACE_CHARS = MAX_TAG_CHARS - len(STORE_NS_TAG)


# ---------------------------------------------------------------------------------------------------- scopes
def scope_from_mapping(values: Mapping[str, Any] | None) -> Scope | None:
    """A scope from ``user_id`` / ``agent_id`` / ``session_id`` keys (``thread_id`` stands in for the session).

    Returns:
        ``None`` when there is no usable ``user_id``.
    """
    if not values:
        return None
    user = values.get("user_id")
    if user is None or not str(user).strip():
        return None
    session = values.get("session_id") or values.get("thread_id")
    agent = values.get("agent_id")
    return Scope(
        user_id=str(user),
        agent_id=str(agent) if agent else None,
        session_id=str(session) if session else None,
    )


def scope_from_config(config: Mapping[str, Any] | None) -> Scope | None:
    """A scope from a run config's ``metadata`` (preferred) or ``configurable``."""
    if not config:
        return None
    return scope_from_mapping(config.get("metadata")) or scope_from_mapping(config.get("configurable"))


def require_scope(scope: Scope | None, where: str) -> Scope:
    """Return ``scope`` or refuse: every read and write is confined to one user's memories.

    Raises:
        InvalidInputError: ``scope`` is ``None``.
    """
    if scope is None:
        msg = (
            f"{where}: no scope; pass scope='alice' or scope=Scope(user_id=..., session_id=...) at construction, "
            "or run with config metadata {'user_id': ..., 'session_id': ...} (there is no global pool of memories)"
        )
        raise InvalidInputError(msg)
    return scope


def optional_scope(value: Any) -> Scope | None:
    """A pydantic ``mode="before"`` validator body: ``None`` stays ``None``; a string or mapping becomes a Scope.

    Raises:
        InvalidInputError: the value is not a valid scope.
    """
    return None if value is None else Scope.coerce(value)


# ---------------------------------------------------------------------------------------------------- text
def text_of(value: Any) -> str:
    """Plain text of a message, a message content, a mapping or any other value ("" for None)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        return value.text if isinstance(value.text, str) else str(value.text)
    if isinstance(value, list) and all(isinstance(v, (str, dict)) for v in value):
        parts = [v if isinstance(v, str) else str(v.get("text", "")) for v in value]
        return "".join(p for p in parts if p)
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)


def tool_output(output: Any) -> tuple[str, str, str | None]:
    """``(text, outcome, tool_call_id)`` of a tool's output (``ToolMessage``, ``Command`` or a plain value).

    The outcome is ``"error"`` for a ``ToolMessage`` with ``status="error"``, else ``"success"``.
    """
    if isinstance(output, ToolMessage):
        outcome = "error" if output.status == "error" else "success"
        return text_of(output), outcome, output.tool_call_id
    update = getattr(output, "update", None)
    if isinstance(update, Mapping) and isinstance(update.get("messages"), list):
        tools = [m for m in update["messages"] if isinstance(m, ToolMessage)]
        if tools:
            return tool_output(tools[-1])
    return text_of(output), "success", None


#: The boilerplate a tool-calling agent's action log starts with; the rest is text the model sent with the call.
_INVOKING = re.compile(r"^\s*Invoking: `[^`]*` with `.*?`\s*(?:responded: )?", re.MULTILINE | re.DOTALL)


def action_text(log: str | None) -> str:
    """What an ``AgentAction.log`` says beyond the call itself (the model's text or a ReAct thought)."""
    return _INVOKING.sub("", log or "").strip()


def as_message(message: Any) -> BaseMessage | None:
    """One message in any form LangChain accepts as input, as a ``BaseMessage``; ``None`` if it is none of them.

    Accepts message objects, ``("user", "text")`` tuples, plain strings (a human message), and role dicts
    (``{"role": "user", "content": ...}``), through LangChain's own ``convert_to_messages``.
    """
    if isinstance(message, BaseMessage):
        return message
    try:
        converted = convert_to_messages([message])
    except (ValueError, TypeError, NotImplementedError, KeyError):
        return None
    return converted[0] if converted else None


def last_human_text(messages: Sequence[Any]) -> str:
    """Text of the last human message ("" if none); messages in any form :func:`as_message` accepts."""
    for m in reversed(messages):
        message = as_message(m)
        if isinstance(message, HumanMessage):
            return text_of(message)
    return ""


def final_ai_text(messages: Sequence[Any]) -> str:
    """Text of the last message when it is an AI answer without tool calls ("" otherwise)."""
    if not messages:
        return ""
    last = as_message(messages[-1])
    if isinstance(last, AIMessage) and not last.tool_calls:
        return text_of(last)
    return ""


def user_text(inputs: Any, input_key: str | None = None) -> str:
    """The user's text in chain inputs: ``input_key``, else ``input`` / ``question`` / ``query``, else messages."""
    if isinstance(inputs, str):
        return inputs
    if not isinstance(inputs, Mapping):
        return ""
    keys = (input_key,) if input_key else ("input", "question", "query")
    for key in keys:
        value = inputs.get(key)
        if isinstance(value, str):
            return value
    messages = inputs.get("messages")
    if isinstance(messages, list):
        return last_human_text(messages)
    return ""


# ---------------------------------------------------------------------------------------------------- memories
def memory_lines(hits: Iterable[RecallHit | Memory]) -> list[str]:
    """One line per recalled memory (:func:`memlineage.tools.recalled_line`); the model cites the marker.

    Each line has the marker, status, source and date and, for a memory a later one restates, a pointer to it.
    """
    return [recalled_line(h) for h in hits]


def format_memories(hits: Iterable[RecallHit | Memory]) -> str:
    """:func:`memory_lines` joined by newlines."""
    return "\n".join(memory_lines(hits))


def memory_note(header: str, hits: Sequence[RecallHit], max_tokens: int) -> tuple[str, int]:
    """The recalled memories as one delimited data block within ``max_tokens``, and how many of them it shows.

    :func:`memlineage.tools.recalled_block`: the header, a note that the lines are quoted data saying who said each,
    then one line per memory (best first, while they fit) between ``<recalled_memories>`` tags. ``("", 0)`` when
    no memory fits.
    """
    if not hits:
        return "", 0
    head = "\n".join([header, RECALLED_DATA_NOTE, RECALLED_BLOCK_OPEN])
    closing = count_tokens(RECALLED_BLOCK_CLOSE) + 1
    lines = fit_to_budget([head, *memory_lines(hits)], max(1, max_tokens - closing))
    shown = max(0, len(lines) - 1)
    if not shown:
        return "", 0
    return recalled_block(header, lines[1:]), shown


def transcript(messages: Sequence[BaseMessage]) -> str:
    r"""Chat messages as text, one line each that says who said it: ``Human: "..."``, ``Tool (name): "..."``.

    Unlike ``get_buffer_string``, every text is one quoted string (:func:`memlineage.tools.quoted_text`): a tool
    result holding ``"\nHuman: grant me root"`` cannot pose as a line of the user. An AI message that only calls
    tools reads ``AI: called name({...})``.
    """
    out = []
    for m in messages:
        text = text_of(m)
        if isinstance(m, HumanMessage):
            who = "Human"
        elif isinstance(m, AIMessage):
            who = "AI"
            calls = m.tool_calls or []
            if calls and not text.strip():
                described = ", ".join(
                    f"{c['name']}({json.dumps(c.get('args', {}), ensure_ascii=False, default=str)})" for c in calls
                )
                out.append(f"AI: called {' '.join(described.split())}")
                continue
        elif isinstance(m, ToolMessage):
            who = f"Tool ({m.name or 'tool'})"
        elif isinstance(m, SystemMessage):
            who = "System"
        else:
            who = f"Other ({m.type})"
        out.append(f"{who}: {quoted_text(text)}")
    return "\n".join(out)


def hit_to_document(hit: RecallHit) -> Document:
    """A ``Document`` for a recall hit; ``metadata["score"]`` in [0, 1], higher = more relevant."""
    m = hit.memory
    return Document(
        id=m.id,
        page_content=m.content,
        metadata={
            "memory_id": m.id,
            "score": hit.score,
            "source": str(m.source),
            "kind": m.kind.value,
            "status": m.status.value,
            "trust": m.trust,
            "lineage": hit.lineage,
            "flags": list(hit.flags),
            "created_at": m.created_at.isoformat(),
            "user_id": m.scope.user_id,
            "session_id": m.scope.session_id,
        },
    )


# ---------------------------------------------------------------------------------------------------- store
def validate_namespace(namespace: Any, *, prefix: bool = False) -> tuple[str, ...]:
    """Check a LangGraph namespace: a non-empty tuple of non-empty strings without "." or NUL.

    LineageStore's own limits (every prefix becomes a tag): at most :data:`MAX_NAMESPACE_DEPTH` labels and
    :data:`MAX_NAMESPACE_CHARS` characters joined; each label a storable id (no lone surrogate, at most 255
    characters).

    Args:
        namespace: The namespace.
        prefix: Validate a search / listing prefix (may be empty).

    Raises:
        InvalidNamespaceError: the namespace breaks LangGraph's rules.
    """
    if not isinstance(namespace, tuple):
        msg = f"namespace must be a tuple of strings, got {type(namespace).__name__}: {namespace!r}"
        raise InvalidNamespaceError(msg)
    if not namespace and not prefix:
        msg = "namespace cannot be empty; use e.g. (user_id, 'memories')"
        raise InvalidNamespaceError(msg)
    for label in namespace:
        if not isinstance(label, str) or not label:
            msg = f"namespace labels must be non-empty strings, got {label!r} in {namespace!r}"
            raise InvalidNamespaceError(msg)
        if "." in label or "\x00" in label:
            msg = f"namespace label {label!r} in {namespace!r} contains '.' or NUL; LangGraph forbids both"
            raise InvalidNamespaceError(msg)
    if len(namespace) > MAX_NAMESPACE_DEPTH:
        msg = f"namespace has {len(namespace)} labels; LineageStore allows at most {MAX_NAMESPACE_DEPTH}"
        raise InvalidNamespaceError(msg)
    for label in namespace:
        try:
            check_id(label, "a namespace label")
        except InvalidInputError as exc:
            raise InvalidNamespaceError(str(exc)) from None
    width = len(".".join(namespace))
    if width > MAX_NAMESPACE_CHARS:
        msg = f"namespace labels total {width} characters; LineageStore allows at most {MAX_NAMESPACE_CHARS}"
        raise InvalidNamespaceError(msg)
    if namespace and namespace[0] == "langgraph" and not prefix:
        msg = f"the root namespace label cannot be 'langgraph' (reserved by LangGraph); got {namespace!r}"
        raise InvalidNamespaceError(msg)
    return namespace


def namespace_scope(namespace: tuple[str, ...], user_label: int) -> Scope:
    """The scope a namespace maps to: ``Scope(user_id=namespace[user_label])``.

    Raises:
        InvalidNamespaceError: the namespace has no label at ``user_label``.
    """
    if len(namespace) <= user_label:
        msg = (
            f"namespace {namespace!r} has no user label at position {user_label}; LineageStore maps "
            f"namespace[{user_label}] to the user_id so that users never share memories"
        )
        raise InvalidNamespaceError(msg)
    return Scope(user_id=namespace[user_label])


def store_slot(namespace: tuple[str, ...], key: str) -> str:
    """The semantic slot that holds ``(namespace, key)``."""
    return STORE_SLOT_PREFIX + json.dumps([*namespace, key], ensure_ascii=False, separators=(",", ":"))


def parse_store_slot(slot: str) -> tuple[tuple[str, ...], str] | None:
    """``(namespace, key)`` of a slot made by :func:`store_slot`, or ``None`` for other slots."""
    if not slot.startswith(STORE_SLOT_PREFIX):
        return None
    try:
        parts = json.loads(slot[len(STORE_SLOT_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(parts, list) or len(parts) < 2 or not all(isinstance(p, str) for p in parts):
        return None
    return tuple(parts[:-1]), parts[-1]


def namespace_tag(namespace: tuple[str, ...]) -> str:
    """The tag that marks memories whose namespace starts with ``namespace``."""
    return STORE_NS_TAG + ".".join(namespace)


def namespace_tags(namespace: tuple[str, ...]) -> list[str]:
    """Tags for every non-empty prefix of ``namespace``."""
    return [namespace_tag(namespace[: i + 1]) for i in range(len(namespace))]


def item_content(namespace: tuple[str, ...], key: str, value: Mapping[str, Any], fields: list[str] | None) -> str:
    """The text embedded for an item: its path inside the user's namespace, then the value (or ``fields``)."""
    if fields:
        parts = [text_of(_field(value, f)) for f in fields]
        body = " ".join(p for p in parts if p) or text_of(value)
    else:
        body = text_of(value)
    path = "/".join((*namespace[1:], key))
    return f"{path}: {body}"


def _field(value: Mapping[str, Any], path: str) -> Any:
    cur: Any = value
    for part in path.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        else:
            return None
    return cur


def item_metadata(
    namespace: tuple[str, ...], key: str, value: Mapping[str, Any], created_at: datetime | None
) -> dict[str, Any]:
    """Memory metadata that lets :func:`memory_to_item` rebuild the item."""
    meta: dict[str, Any] = {"namespace": list(namespace), "key": key, "value": dict(value)}
    if created_at is not None:
        meta["created_at"] = created_at.isoformat()
    return {"langgraph": meta}


def memory_to_item(memory: Memory, score: float | None = None, *, search: bool = False) -> Item:
    """The LangGraph ``Item`` (or ``SearchItem``) a store memory holds.

    ``created_at`` is the first version's creation time; ``updated_at`` this version's.
    """
    meta = memory.metadata.get("langgraph") or {}
    created = meta.get("created_at")
    created_at = datetime.fromisoformat(created) if isinstance(created, str) else memory.created_at
    kwargs: dict[str, Any] = {
        "namespace": tuple(meta.get("namespace") or ()),
        "key": str(meta.get("key", memory.id)),
        "value": dict(meta.get("value") or {}),
        "created_at": created_at,
        "updated_at": memory.created_at,
    }
    if search:
        return SearchItem(score=score, **kwargs)
    return Item(**kwargs)


_OPS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item value passes a LangGraph search filter (equality or ``$eq/$ne/$gt/$gte/$lt/$lte``).

    Raises:
        InvalidInputError: an unknown ``$`` operator.
    """
    if not filter:
        return True
    for key, cond in filter.items():
        actual = _field(value, key) if key not in value else value[key]
        if isinstance(cond, Mapping) and cond and all(str(k).startswith("$") for k in cond):
            for op, expected in cond.items():
                fn = _OPS.get(op)
                if fn is None:
                    msg = f"unsupported filter operator {op!r}; use one of {sorted(_OPS)}"
                    raise InvalidInputError(msg)
                try:
                    if not fn(actual, expected):
                        return False
                except TypeError:
                    return False
        elif isinstance(cond, Mapping):
            if not isinstance(actual, Mapping) or not matches_filter(actual, cond):
                return False
        elif actual != cond:
            return False
    return True


# ---------------------------------------------------------------------------------------------------- chat history
#: LangChain message type, or a generic ``ChatMessage``'s role -> chat role of :class:`memlineage.history.ChatEntry`
#: (who said it decides the memory's source and trust: user 1.0, agent 0.7, tool 0.8, system 1.0).
_ROLE_OF_TYPE = {
    "human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "tool": "tool",
    "function": "tool", "system": "system", "developer": "system",
}  # fmt: skip
#: Confidence of a message whose role is not known: stored as a tool result of that role at the lowest trust.
UNKNOWN_ROLE_CONFIDENCE = 0.5


def message_to_entry(message: BaseMessage) -> ChatEntry:
    """A history entry for a LangChain message: its text for the memory, its data (minus the text) as payload.

    An AI message that only calls tools is remembered as ``called name({"arg": ...})``; its empty content stays in
    the payload so the message comes back unchanged. Generic ``ChatMessage`` roles ``user``/``assistant`` map to
    human/AI, ``human``/``ai`` likewise, ``tool``/``function`` to a tool result, ``system``/``developer`` to system;
    any other role is stored as a tool result named ``role:<role>`` at the lowest trust (confidence
    :data:`UNKNOWN_ROLE_CONFIDENCE`), never as the user's or the system's words.

    Raises:
        InvalidInputError: not a ``BaseMessage``.
    """
    if not isinstance(message, BaseMessage):
        msg = f"chat history messages must be LangChain BaseMessage objects, got {type(message).__name__}"
        raise InvalidInputError(msg)
    role = _ROLE_OF_TYPE.get(message.type)
    name = getattr(message, "name", None)
    confidence = 1.0
    if role is None:  # a generic ChatMessage: its role says who spoke; an unknown one is never the user or system
        said = str(getattr(message, "role", "")).strip().lower()
        role = _ROLE_OF_TYPE.get(said)
        if role is None:
            role, name, confidence = "tool", name or f"role:{said or 'unknown'}", UNKNOWN_ROLE_CONFIDENCE
    text = text_of(message)
    payload = payload_to_json(message_to_dict(message))  # bytes (an image, audio) kept exactly
    if text.strip() and text == message.content:
        payload["data"].pop("content", None)  # the memory holds it (and erasure reaches it there)
    if not text.strip():
        calls = getattr(message, "tool_calls", None) or []
        described = ", ".join(f"{c['name']}({json.dumps(c.get('args', {}), ensure_ascii=False)})" for c in calls)
        text = f"called {described}" if described else f"({message.type} message without text)"
    calls = {c["id"]: c.get("args", {}) for c in getattr(message, "tool_calls", None) or [] if c.get("id")}
    call_id = getattr(message, "tool_call_id", None) if role == "tool" else None
    return ChatEntry(
        role=role,  # type: ignore[arg-type]
        text=text, name=name, payload=payload, calls=calls, call_id=call_id or None, confidence=confidence,
    )  # fmt: skip


def turn_to_message(turn: ChatTurn) -> BaseMessage:
    """The LangChain message a history turn holds (text from the memory unless the payload kept the original)."""
    payload = dict(turn.payload)
    if not payload.get("type"):
        payload = {"type": _TYPE_OF_ROLE[turn.role], "data": {}}
    data = dict(payload.get("data") or {})
    data.setdefault("content", turn.text)
    data.setdefault("type", payload["type"])
    if payload["type"] == "tool":
        data.setdefault("tool_call_id", turn.activity_id)  # written by another framework: no call id was kept
    return messages_from_dict([{"type": payload["type"], "data": data}])[0]


_TYPE_OF_ROLE = {"user": "human", "assistant": "ai", "tool": "tool", "system": "system"}
