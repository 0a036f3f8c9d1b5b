"""``lineage_memory()``: a drop-in ``Memory`` for ``FunctionAgent`` / ``ReActAgent`` backed by MemLineage."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory.memory import DEFAULT_TOKEN_LIMIT, Memory
from llama_index.core.storage.chat_store.sql import MessageStatus
from memlineage.capture import hook_span
from memlineage.construct import typed_construction
from memlineage.errors import MemLineageError
from memlineage.manager import MemoryManager
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from typing_extensions import Self, override

from memlineage_llamaindex._block import LineageMemoryBlock
from memlineage_llamaindex._convert import message_text

__all__ = ["LineageMemory", "lineage_memory"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


def _run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion from synchronous code, also when an event loop is running in this thread.

    Without a running loop: on a fresh loop (``asyncio.run``). Inside one (a notebook, an async web handler, a
    chat engine's sync ``chat_history`` called from async code): on a fresh loop in a worker thread, with this
    context's variables, while the caller waits; never a nested loop. Exceptions propagate as raised.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    ctx = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlineage-sync") as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()


@typed_construction
class LineageMemory(Memory):
    """LlamaIndex ``Memory`` whose long-term tier is a :class:`LineageMemoryBlock`, optionally write-through.

    The short-term queue, token budget and flushing are LlamaIndex's own. With ``write_through=True`` every
    message put into the memory is also stored in MemLineage at once (so a short session that never overflows
    its queue is still remembered), and the block ignores flushes of messages it already has. With
    ``write_through=False`` only flushed messages reach MemLineage, as with any other memory block.
    The synchronous methods run on a fresh event loop, in a worker thread when an event loop is already running
    (never a nested loop), so ``get()``, ``get_all()``, ``reset()`` and the rest also work from async code.
    Putting no messages (``put_messages([])``) does nothing.

    Setup:
        ``pip install "memlineage[llamaindex]"``.

    Instantiate:
        >>> from memlineage.testing import make_manager
        >>> memory = lineage_memory(make_manager(), user_id="alice", session_id="s1")

    Use:
        >>> agent.run(user_msg="Book me a hotel", memory=memory)  # doctest: +SKIP

    Close:
        ``memory.close()`` / ``await memory.aclose()`` (or ``with`` / ``async with``) releases the short-term
        queue's in-memory SQLite connection (aiosqlite) that :func:`lineage_memory` opened; the memories stored in
        MemLineage stay. A chat store or engine passed in by the caller is left to the caller.
    """

    write_through: bool = Field(default=True, description="Store every put message in MemLineage at once.")
    _owned_engine: AsyncEngine | None = PrivateAttr(default=None)

    async def aclose(self) -> None:
        """Dispose of the chat store engine :func:`lineage_memory` created (idempotent)."""
        engine, self._owned_engine = self._owned_engine, None
        if engine is not None:
            await engine.dispose()

    def close(self) -> None:
        """Synchronous :meth:`aclose`."""
        _run_sync(self.aclose())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @classmethod
    def class_name(cls) -> str:
        """Name used by LlamaIndex serialisation."""
        return "LineageMemory"

    @property
    def lineage_block(self) -> LineageMemoryBlock:
        """The MemLineage block of this memory.

        Raises:
            MemLineageError: the memory has no :class:`LineageMemoryBlock`.
        """
        for block in self.memory_blocks:
            if isinstance(block, LineageMemoryBlock):
                return block
        msg = "this LineageMemory has no LineageMemoryBlock; build it with lineage_memory()"
        raise MemLineageError(msg)

    async def _write_through(self, messages: list[ChatMessage]) -> None:
        if self.write_through and messages:
            copies = [m.model_copy(deep=True) for m in messages]
            await self.lineage_block.aput(copies, session_id=self.session_id)

    @override
    async def aget(  # type: ignore[override]
        self, input: str | ChatMessage | None = None, **block_kwargs: Any
    ) -> list[ChatMessage]:
        # LlamaIndex hands memory blocks a ``str`` input only; a ChatMessage input would be ignored.
        if isinstance(input, ChatMessage):
            input = message_text(input) or None
        with hook_span("LineageMemory.aget"):  # one span per memory call (the block's own step is inside)
            return await super().aget(input=input, **block_kwargs)

    @override
    async def aput(self, message: ChatMessage) -> None:
        with hook_span("LineageMemory.aput"):
            await super().aput(message)
            await self._write_through([message])

    @override
    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        messages = list(messages)
        if not messages:  # LlamaIndex's SQL chat store would insert an empty row set (an IntegrityError)
            return
        with hook_span("LineageMemory.aput_messages"):
            await super().aput_messages(messages)
            await self._write_through(messages)

    # ---- sync wrappers: a fresh loop, never a nested one ----
    @override
    def get(  # type: ignore[override]
        self, input: str | ChatMessage | None = None, **block_kwargs: Any
    ) -> list[ChatMessage]:
        return _run_sync(self.aget(input=input, **block_kwargs))

    @override
    def get_all(self, status: MessageStatus | None = None) -> list[ChatMessage]:
        return _run_sync(self.aget_all(status=status))

    @override
    def put(self, message: ChatMessage) -> None:
        _run_sync(self.aput(message))

    @override
    def put_messages(self, messages: list[ChatMessage]) -> None:
        _run_sync(self.aput_messages(messages))

    @override
    def set(self, messages: list[ChatMessage]) -> None:
        _run_sync(self.aset(messages))

    @override
    def reset(self) -> None:
        _run_sync(self.areset())


#: LlamaIndex's default chat store for ``Memory`` (``SQLAlchemyChatStore``): SQLite in memory through aiosqlite.
IN_MEMORY_CHAT_STORE = "sqlite+aiosqlite:///:memory:"


def lineage_memory(
    manager: MemoryManager,
    *,
    user_id: str,
    session_id: str | None = None,
    agent_id: str | None = None,
    token_limit: int = DEFAULT_TOKEN_LIMIT,
    k: int = 5,
    write_through: bool = True,
    session_only: bool = False,
    include_suspect: bool = False,
    priority: int = 1,
    llm: Any = None,
    **memory_kwargs: Any,
) -> LineageMemory:
    """A ready ``Memory`` for ``agent.run(user_msg=..., memory=...)`` with MemLineage as its long-term tier.

    Args:
        manager: The MemLineage store.
        user_id: Owner of the memories; required.
        session_id: The ``Memory`` session (its chat-store key); default a new unique id.
        agent_id: Optional agent the memories belong to.
        token_limit: ``Memory``'s overall token limit (short-term queue plus memory blocks).
        k: Memories recalled per turn.
        write_through: Store every message at once (default) instead of only flushed ones.
        session_only: Recall only this session's memories (default: all of the user's sessions).
        include_suspect: Also serve ``suspect`` memories, flagged.
        priority: The block's truncation priority (0 = never truncate).
        llm: The agent's LLM (``agent.llm``): it judges whether what the user says updates a memory
            (:meth:`~memlineage.MemoryManager.model_reconciler`); None = the store's reconciler (offline rules).
        **memory_kwargs: Passed to ``Memory.from_defaults`` (``token_flush_size``, ``chat_store``,
            ``insert_method``...).

    Returns:
        A :class:`LineageMemory` (a ``llama_index.core.memory.Memory``); close it (``close()``, ``aclose()``,
        ``with``) when the session ends.

    Raises:
        InvalidInputError: no ``user_id``.

    Example:
        >>> from memlineage.testing import make_manager
        >>> memory = lineage_memory(make_manager(), user_id="alice", session_id="trip-42", token_limit=4000)
        >>> memory.lineage_block.scope_for(memory.session_id).session_id
        'trip-42'
    """
    block = LineageMemoryBlock(
        manager=manager,
        user_id=user_id,
        agent_id=agent_id,
        k=k,
        session_only=session_only,
        include_suspect=include_suspect,
        priority=priority,
        accept_short_term_memory=not write_through,
        llm=llm,
    )
    owned = None
    if not {"chat_store", "async_database_uri", "async_engine"} & set(memory_kwargs):
        # LlamaIndex's default short-term store, made here so that LineageMemory.close() can release it.
        owned = memory_kwargs["async_engine"] = create_async_engine(IN_MEMORY_CHAT_STORE)
    memory = LineageMemory.from_defaults(
        session_id=session_id, token_limit=token_limit, memory_blocks=[block], **memory_kwargs
    )
    assert isinstance(memory, LineageMemory)  # from_defaults builds the class it is called on
    memory.write_through = write_through
    memory._owned_engine = owned
    return memory
