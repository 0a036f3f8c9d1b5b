"""Chat messages of the working memory: :class:`ChatMessage`, :class:`ToolCall` and the history port.

Re-exported by :mod:`memlineage.window`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlineage.errors import InvalidInputError
from memlineage.models import new_id

if TYPE_CHECKING:  # type names only: tiktoken is heavy and imported at run time on first use
    pass

__all__ = ["ChatMessage", "HistoryBackend", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]


def _repair_text(value: object) -> object:
    """Replace lone UTF-16 surrogates with U+FFFD (a surrogate pair becomes its character); other values pass."""
    if isinstance(value, str) and any("\ud800" <= ch <= "\udfff" for ch in value):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


class ToolCall(BaseModel):
    """One tool call requested by an assistant message (OpenAI ``tool_calls`` item)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="Tool-call id; tool results refer to it by ``tool_call_id``.")
    name: str = Field(description="Tool (function) name.")
    arguments: str = Field(default="{}", description="Arguments as a JSON string, as sent to the model.")

    _repair = field_validator("name", "arguments", mode="before")(_repair_text)


class ChatMessage(BaseModel):
    """One chat message: role, text, tool calls or a tool result, optional reasoning text.

    Immutable; the window shares instances and hands out new lists (copy-on-read).

    Example:
        >>> call = ToolCall(id="c1", name="weather", arguments='{"city": "Paris"}')
        >>> ChatMessage(role="assistant", tool_calls=(call,)).tool_calls[0].name
        'weather'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role = Field(description="'system', 'user', 'assistant' or 'tool'.")
    content: str = Field(default="", description="Message text (for 'tool': the tool result).")
    tool_calls: tuple[ToolCall, ...] = Field(default=(), description="Tool calls of an assistant message.")
    tool_call_id: str | None = Field(default=None, description="For role 'tool': the call this result answers.")
    name: str | None = Field(default=None, description="Optional participant or tool name.")
    reasoning: str | None = Field(default=None, description="Reasoning text sent back to the model, if any.")
    id: str = Field(
        default_factory=new_id,
        description="Message id, stable across copies; new_id() (a time-ordered UUIDv7 string) by default.",
    )

    _repair = field_validator("content", "name", "reasoning", mode="before")(_repair_text)

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> ChatMessage:
        """Build a message from an OpenAI-style chat dict (``tool_calls[].function.{name,arguments}``).

        Raises:
            InvalidInputError: the dict is not a valid chat message.
        """
        try:
            calls = tuple(
                ToolCall(
                    id=str(c["id"]),
                    name=str(c.get("function", c).get("name", "")),
                    arguments=str(c.get("function", c).get("arguments", "{}")),
                )
                for c in data.get("tool_calls") or ()
            )
            content = data.get("content") or ""
            if not isinstance(content, str):  # list of content parts: keep the text parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
            kwargs: dict[str, Any] = {
                "role": data["role"],
                "content": content,
                "tool_calls": calls,
                "tool_call_id": data.get("tool_call_id"),
                "name": data.get("name"),
                "reasoning": data.get("reasoning") or data.get("reasoning_content"),
            }
            if data.get("id"):
                kwargs["id"] = str(data["id"])
            return cls(**kwargs)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            msg = f"not a valid chat message: {data!r} ({exc}); expected keys role, content, tool_calls..."
            raise InvalidInputError(msg) from exc

    def to_openai(self) -> dict[str, Any]:
        """Return the OpenAI-style chat dict for this message (``id`` and ``reasoning`` omitted)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out


@runtime_checkable
class HistoryBackend(Protocol):
    """Where the full chat history lives; ``messages()`` may return fresh copies on every call."""

    def messages(self) -> Sequence[ChatMessage]:
        """Return the whole history, oldest first."""
        ...
