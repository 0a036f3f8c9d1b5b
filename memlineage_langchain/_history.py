"""``LineageChatMessageHistory``: a LangChain ``BaseChatMessageHistory`` whose messages are memories with lineage."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage
from memlineage.capture import shield
from memlineage.history import ChatHistory
from memlineage.models import Scope
from typing_extensions import override

from memlineage_langchain._convert import message_to_entry, turn_to_message

__all__ = ["LineageChatMessageHistory"]


class LineageChatMessageHistory(BaseChatMessageHistory):
    """A session's chat history, in order, for ``RunnableWithMessageHistory`` and anything that takes a history.

    Every message is a memory in the user's scope (``user``, ``agent``, ``tool:<name>`` or ``system`` source, with
    the session id): recall finds it, ``explain`` shows that an answer derives from the question it answered (and
    the tool results of the turn), and correcting a question makes the answers built on it ``suspect``. Repeated
    messages ("yes", "yes") stay two messages, and every message comes back exactly as added (content blocks,
    bytes, tool calls, ids and metadata), also when its words merged into an earlier memory. Several history
    objects (or threads, or processes on a PostgreSQL store) may write one session: each ``add_messages`` batch
    takes consecutive positions and is stored whole or not at all. ``clear()`` is an invalidation, never a hard
    delete (see :class:`memlineage.history.ChatHistory`). Reading and adding never raise a store failure into the
    chain (it is recorded: ``stats()["adapter_errors"]``).

    Setup:
        ``pip install "memlineage[langchain]"``.

    Instantiate:
        ``LineageChatMessageHistory(mm, scope="alice", session_id="trip-1")``, or a ``Scope`` with a session.

    Use:
        .. code-block:: python

            from langchain_core.runnables.history import RunnableWithMessageHistory

            chain_with_history = RunnableWithMessageHistory(
                prompt | model,
                lambda session_id: LineageChatMessageHistory(mm, scope="alice", session_id=session_id),
                input_messages_key="input",
                history_messages_key="history",
            )
            chain_with_history.invoke({"input": "Hi"}, config={"configurable": {"session_id": "trip-1"}})

    Args:
        manager: A :class:`~memlineage.MemoryManager`.
        scope: The user's scope: a ``Scope``, a mapping or a user id string.
        session_id: The session (overrides ``scope.session_id``); required one way or the other.
        max_messages: Return only the last N messages (>= 0) from :attr:`messages`; default all. The window
            never starts with a ``ToolMessage`` whose ``AIMessage`` tool call was cut off (it is left out too).
        on_clear: ``"retract"`` (default) or ``"forget"`` (archive), see :class:`~memlineage.history.ChatHistory`.

    Raises:
        InvalidInputError: no session id or a bad scope.
    """

    def __init__(
        self,
        manager: Any,
        *,
        scope: Scope | Mapping[str, Any] | str,
        session_id: str | None = None,
        max_messages: int | None = None,
        on_clear: Literal["retract", "forget"] = "retract",
    ) -> None:
        self.history = ChatHistory(manager, scope=scope, session_id=session_id, on_clear=on_clear)
        self.max_messages = max_messages

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages, oldest first (the last ``max_messages`` when set)."""
        return shield(
            self.history.manager, "LineageChatMessageHistory.messages",
            lambda: [turn_to_message(t) for t in self.history.turns(self.max_messages)], default=[],
            scope=self.history.scope,
        )  # fmt: skip

    @override
    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    @override
    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        entries = [message_to_entry(m) for m in messages]  # bad input raises here, before anything is written
        # a store failure never breaks the chain: recorded (stats()["adapter_errors"], an event), the turn goes on
        shield(self.history.manager, "LineageChatMessageHistory.add_messages", self.history.append, entries,
               scope=self.history.scope)  # fmt: skip

    @override
    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.add_messages, messages)

    @override
    def clear(self) -> None:
        self.history.clear()

    @override
    async def aclear(self) -> None:
        await self.history.aclear()
