"""``LineageChatStore``: a LlamaIndex ``BaseChatStore`` whose messages are memories with lineage."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.storage.chat_store.base import BaseChatStore
from memlineage.capture import shield
from memlineage.construct import typed_construction
from memlineage.errors import InvalidInputError
from memlineage.history import MESSAGE_ACTIVITY, ChatHistory
from memlineage.models import Scope
from typing_extensions import override

from memlineage_llamaindex._convert import message_to_entry, turn_to_message
from memlineage_llamaindex._failures import watch_failures

__all__ = ["LineageChatStore"]


@typed_construction
class LineageChatStore(BaseChatStore):
    """One user's chat sessions for LlamaIndex (``ChatMemoryBuffer``, chat engines): each key is a session id.

    Every message is a memory in the user's scope with the session id (``user``, ``agent``, ``tool:<name>`` or
    ``system`` source): recall finds it, an answer derives from the question it answered and the tool results of
    the turn, and repeated messages stay separate messages. Deleting is an invalidation, never a hard delete
    (``delete_messages`` retracts the session's memories, or archives them with ``on_clear="forget"``);
    ``set_messages`` keeps the messages the new history starts with unchanged (setting the same history again
    changes nothing) and invalidates only those after the first difference, then appends the rest, all checked
    before anything changes (:meth:`memlineage.history.ChatHistory.replace`). Messages come back as they were put:
    blocks in order, text from the memory, bytes (images) exact, roles, tool calls and ``additional_kwargs``; the
    history is append-only, so ``add_message(..., idx=...)`` only accepts the end. A store failure while an agent
    reads or writes (``get_messages``, ``add_message``, ``set_messages``) is recorded, never raised into the agent.

    A chat store sees messages only: LlamaIndex writes a failed tool call's message without its ``is_error`` flag.
    The store therefore watches the workflow agents' ``call_tool`` spans (a span handler on LlamaIndex's root
    dispatcher, added once per process, that writes nothing): a tool message whose call id and text are those of
    a call seen failing in this process stays in the transcript, and its memory is withdrawn at once, so recall
    never serves the error as a fact. A failure outside this process (a message written by another service)
    cannot be told from a result; ``lineage_memory`` together with ``capture_run`` records a failed call as an
    activity with ``outcome="error"`` wherever the agent runs.

    Setup:
        ``pip install "memlineage[llamaindex]"``.

    Instantiate:
        >>> from memlineage.testing import make_manager
        >>> store = LineageChatStore(manager=make_manager(), user_id="alice")

    Use:
        >>> from llama_index.core.memory import ChatMemoryBuffer
        >>> memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="trip-1")
        >>> memory.put(ChatMessage(role="user", content="Hi"))
        >>> [m.content for m in store.get_messages("trip-1")]
        ['Hi']

    Args:
        manager: A :class:`~memlineage.MemoryManager`.
        user_id: Whose sessions these are (every read and write stays in this user's scope).
        agent_id: Optional agent within the user's scope.
        on_clear: ``"retract"`` (default) or ``"forget"``.

    Raises:
        InvalidInputError: a bad user id or ``on_clear``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    manager: Any = Field(exclude=True, description="The MemoryManager.")
    user_id: str = Field(description="The user whose sessions the keys name.")
    agent_id: str | None = Field(default=None, description="Optional agent within the user's scope.")
    on_clear: Literal["retract", "forget"] = Field(default="retract", description="How deletes invalidate.")

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        Scope(user_id=self.user_id, agent_id=self.agent_id)  # validates (InvalidInputError)
        watch_failures()  # a failed call's message is an outcome, not a fact (see the class docstring)
        if self.on_clear not in ("retract", "forget"):
            msg = f"on_clear must be 'retract' or 'forget', got {self.on_clear!r}"
            raise InvalidInputError(msg)

    @classmethod
    @override
    def class_name(cls) -> str:
        return "LineageChatStore"

    def history(self, key: str) -> ChatHistory:
        """The :class:`~memlineage.history.ChatHistory` of session ``key``.

        Made per call (it is a light view; the session's lock is shared by every view alive), so a store that sees
        many sessions keeps nothing per session.
        """
        scope = Scope(user_id=self.user_id, agent_id=self.agent_id, session_id=key)
        return ChatHistory(self.manager, scope=scope, on_clear=self.on_clear)

    @override
    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        entries = [message_to_entry(m) for m in messages]  # bad input raises here, before anything changes
        history = self.history(key)
        # agent.run(chat_history=...) sets the history inside the agent: a store failure is recorded, not raised
        shield(self.manager, "LineageChatStore.set_messages", history.replace, entries, scope=history.scope)

    @override
    def get_messages(self, key: str) -> list[ChatMessage]:
        history = self.history(key)
        return shield(
            self.manager, "LineageChatStore.get_messages",
            lambda: [turn_to_message(t) for t in history.turns()], default=[], scope=history.scope,
        )  # fmt: skip

    @override
    def add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        history = self.history(key)
        at_end = idx is None or idx == shield(
            self.manager, "LineageChatStore.add_message", lambda: len(history.turns()), default=idx,
            scope=history.scope,
        )  # fmt: skip
        if not at_end:
            msg = f"a MemLineage chat history is append-only; add_message(idx={idx}) can only append at the end"
            raise InvalidInputError(msg)
        entry = message_to_entry(message)  # bad input raises here, before anything is written
        # a store failure never raises into the agent (ChatMemoryBuffer.put runs inside agent.run): recorded instead
        shield(self.manager, "LineageChatStore.add_message", history.append, [entry], scope=history.scope)

    @override
    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        history = self.history(key)
        turns = history.turns()
        if not turns:
            return None
        history.clear(turns=turns)
        return [turn_to_message(t) for t in turns]

    @override
    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        history = self.history(key)
        turns = history.turns()
        if not -len(turns) <= idx < len(turns):
            return None
        history.clear(reason="chat message deleted", turns=[turns[idx]])
        return turn_to_message(turns[idx])

    @override
    def delete_last_message(self, key: str) -> ChatMessage | None:
        return self.delete_message(key, -1)

    @override
    def get_keys(self) -> list[str]:
        scope = Scope(user_id=self.user_id, agent_id=self.agent_id)
        acts = self.manager.activities(scope, kinds=[MESSAGE_ACTIVITY])
        live = [
            a.scope.session_id
            for a in acts
            if "memory_id" in a.metadata  # a finished occurrence (not one of a failed batch, nor redacted)
            and a.outcome not in ("cleared", "failed")
            and a.scope
            and a.scope.session_id
        ]
        return list(dict.fromkeys(live))

    # -- async twins (R6: the sync implementation offloaded to a thread)
    @override
    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        await asyncio.to_thread(self.set_messages, key, messages)

    @override
    async def aget_messages(self, key: str) -> list[ChatMessage]:
        return await asyncio.to_thread(self.get_messages, key)

    @override
    async def async_add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        await asyncio.to_thread(self.add_message, key, message, idx)

    @override
    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        return await asyncio.to_thread(self.delete_messages, key)

    @override
    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        return await asyncio.to_thread(self.delete_message, key, idx)

    @override
    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        return await asyncio.to_thread(self.delete_last_message, key)

    @override
    async def aget_keys(self) -> list[str]:
        return await asyncio.to_thread(self.get_keys)
