"""``LineageStore``: a LangGraph ``BaseStore`` over MemLineage (``create_agent(store=...)``, LangMem-style tools)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from memlineage.capture import RunRecorder
from memlineage.errors import InvalidInputError, InvalidNamespaceError
from memlineage.manager import MemoryManager
from memlineage.models import Memory, Scope, content_hash
from typing_extensions import override

from memlineage_langchain._convert import (
    STORE_SLOT_PREFIX,
    item_content,
    item_metadata,
    matches_filter,
    memory_to_item,
    namespace_scope,
    namespace_tag,
    namespace_tags,
    parse_store_slot,
    store_slot,
    validate_namespace,
)

__all__ = ["LineageStore"]

logger = logging.getLogger(__name__)


class LineageStore(BaseStore):
    """LangGraph long-term memory store whose items are MemLineage memories with lineage.

    Mapping (documented contract):

    - ``namespace[user_label]`` (default ``namespace[0]``) is the ``user_id`` of the :class:`~memlineage.Scope`;
      users never see each other's items. A namespace too short to name a user raises ``InvalidNamespaceError``.
    - ``(namespace, key)`` is a semantic slot, so ``put`` of an existing key supersedes the previous version
      (``wasRevisionOf``; memories derived from it become suspect) and keeps the item's ``created_at``;
      re-putting an identical value is a no-op. ``put`` replaces the whole value, also when only fields outside
      ``index=`` change (the embedded text stays the same; the item still gets a new version).
    - ``delete`` (``PutOp(value=None)``) retracts the current version: ``get`` returns ``None`` afterwards but the
      ledger keeps the version with a ``wasInvalidatedBy`` edge. Nothing is ever hard-deleted.
    - ``search`` with a query uses MemLineage recall (scope- and status-filtered, policies applied); ``score`` is
      in [0, 1], higher = more relevant. Without a query items come oldest first with ``score=None``.
    - ``list_namespaces`` lists the namespaces of live items (``prefix`` / ``suffix`` / ``max_depth``) of the user
      its prefix names; listing across users needs ``admin=(actor, reason)`` and is audited.
    - TTL is not supported (``supports_ttl = False``); use MemLineage TTLs.

    Setup:
        ``pip install "memlineage[langchain]"``.

    Instantiate:
        >>> from memlineage.testing import make_manager
        >>> store = LineageStore(make_manager())

    Use:
        >>> store.put(("alice", "prefs"), "seat", {"text": "aisle seat"})
        >>> store.get(("alice", "prefs"), "seat").value
        {'text': 'aisle seat'}

    Args:
        manager: The memory manager.
        user_label: Position of the namespace label that names the user.
        source: Source recorded for items (who writes through the store).
        kind: Memory kind of items.
        admin: ``(actor, reason)`` allowing ``list_namespaces`` across users (each call is recorded as an
            audited ``admin_access`` event); without it a listing must name the user in its prefix.
    """

    supports_ttl: bool = False

    def __init__(
        self,
        manager: MemoryManager,
        *,
        user_label: int = 0,
        source: str = "agent",
        kind: str = "semantic",
        admin: tuple[str, str] | None = None,
    ) -> None:
        self.manager = manager
        self.user_label = user_label
        self.source = source
        self.kind = kind
        self.admin = admin

    def _listed_user(self, op: ListNamespacesOp) -> str | None:
        """The user a ``list_namespaces`` prefix names, if it names one (no wildcard at the user label)."""
        for cond in op.match_conditions or ():
            path = tuple(cond.path)
            if cond.match_type == "prefix" and len(path) > self.user_label and path[self.user_label] != "*":
                return str(path[self.user_label])
        return None

    # ------------------------------------------------------------------ validation (ours, before LangGraph's)
    @override
    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any] | None,  # type: ignore[override]
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        validate_namespace(namespace)
        super().put(namespace, key, value, index, ttl=ttl)  # type: ignore[arg-type]

    @override
    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any] | None,  # type: ignore[override]
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        validate_namespace(namespace)
        await super().aput(namespace, key, value, index, ttl=ttl)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ batch
    @override
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    @override
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list(op)
        msg = f"unknown store operation {type(op).__name__}"
        raise TypeError(msg)

    def _scope(self, namespace: tuple[str, ...]) -> Scope:
        return namespace_scope(validate_namespace(namespace), self.user_label)

    def _current(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        found = self.manager.find(scope=self._scope(namespace), slot=store_slot(namespace, key))
        return found[-1] if found else None

    def _get(self, op: GetOp) -> Item | None:
        mem = self._current(op.namespace, op.key)
        return memory_to_item(mem) if mem is not None else None

    def _put(self, op: PutOp) -> None:
        _check_value(op.value)
        scope = self._scope(op.namespace)
        old = self._current(op.namespace, op.key)
        if op.value is None:
            if old is not None:
                self.manager.retract(old.id, scope=scope, reason="deleted through the LangGraph store")
            return
        fields = op.index if isinstance(op.index, list) else None
        created = memory_to_item(old).created_at if old is not None else None
        # Inside a captured tool call the write is that call's: generated by it, resting on what it rests on.
        call = RunRecorder.current_call(scope)
        lineage: dict[str, Any] = {}
        if call is not None:
            activity_id, premises = call
            lineage = {"activity_id": activity_id, "derived_from": [p for p in premises if old is None or p != old.id]}
        content = item_content(op.namespace, op.key, op.value, fields)
        metadata = item_metadata(op.namespace, op.key, op.value, created)
        same_text = old is not None and content_hash(old.content) == content_hash(content)
        if old is not None and same_text and memory_to_item(old).value != op.value:
            # Only fields outside ``index=`` changed (or only case / spacing): the embedded text is the same, so
            # remember() would take it for a duplicate; put replaces the value, so the item gets a new version.
            self.manager.supersede(
                old.id, content, scope=scope, source=self.source, kind=self.kind,
                tags=namespace_tags(op.namespace), metadata=metadata, **lineage,
            )  # fmt: skip
            return
        self.manager.remember(
            content,
            scope=scope,
            source=self.source,
            kind=self.kind,
            slot=store_slot(op.namespace, op.key),
            tags=namespace_tags(op.namespace),
            metadata=metadata,
            **lineage,
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = validate_namespace(op.namespace_prefix)
        scope = self._scope(prefix)
        tags = [namespace_tag(prefix)]
        wanted = op.offset + op.limit
        if not op.query:
            mems = self.manager.find(scope=scope, tags=tags)
            items = [memory_to_item(m, search=True) for m in mems]
            items = [i for i in items if matches_filter(i.value, op.filter)]
            return items[op.offset : wanted]  # type: ignore[return-value]
        k = wanted
        while True:
            hits = self.manager.recall(op.query, scope=scope, k=k, tags=tags).hits
            items = [memory_to_item(h.memory, h.score, search=True) for h in hits]
            items = [i for i in items if matches_filter(i.value, op.filter)]
            if len(items) >= wanted or len(hits) < k or not op.filter:
                return items[op.offset : wanted]  # type: ignore[return-value]
            k *= 2

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = set()
        user = self._listed_user(op)
        if user is not None:
            keys = self.manager.slots(scope=Scope(user_id=user), prefix=STORE_SLOT_PREFIX)
        elif self.admin is not None:
            keys = self.manager.slots(prefix=STORE_SLOT_PREFIX, admin=self.admin)
        else:
            msg = (
                f"list_namespaces across users is an admin read: pass a prefix naming the user "
                f"(namespace[{self.user_label}]), or build the store with admin=(actor, reason)"
            )
            raise InvalidNamespaceError(msg)
        for _, slot in keys:
            parsed = parse_store_slot(slot)
            if parsed is None:
                continue
            ns = parsed[0]
            if not _matches(ns, op.match_conditions):
                continue
            namespaces.add(ns[: op.max_depth] if op.max_depth is not None else ns)
        out = sorted(namespaces)
        return out[op.offset : op.offset + op.limit]


def _check_value(value: Any) -> None:
    if value is not None and not isinstance(value, dict):
        msg = f"LineageStore values are dicts (JSON objects) or None to delete, not {type(value).__name__}"
        raise InvalidInputError(msg)


def _matches(namespace: tuple[str, ...], conditions: tuple[Any, ...] | None) -> bool:
    for cond in conditions or ():
        path = tuple(cond.path)
        if len(path) > len(namespace):
            return False
        part = namespace[: len(path)] if cond.match_type == "prefix" else namespace[len(namespace) - len(path) :]
        if any(p != "*" and p != n for p, n in zip(path, part, strict=True)):
            return False
    return True
