"""``MemoryManager``: the facade that speaks the seeds' verbs over the ledger, the index and the lineage DAG.

remember / recall / get / revise / supersede / retract / impact / revalidate / forget / erase / explain / audit,
each with an ``a``-prefixed async twin that offloads the sync implementation to a thread (STYLE R6).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from sqlalchemy import Connection, select, update

from memlineage._detect import detect_updates
from memlineage.errors import (
    ConfigurationError,
    InvalidInputError,
    LineageCycleError,
    MemLineageError,
    MemoryNotFoundError,
    ScopeViolationError,
    StorageError,
    StoreLockedError,
)
from memlineage.index import Embedder, IndexFilter, VectorIndex, ensure_embedder, index_metadata
from memlineage.ledger import Event, Ledger, encode_vector, memory_to_row, row_to_memory
from memlineage.ledger._schema import activities, events, memories, supports
from memlineage.lineage import CascadeReport, ErasureReceipt, Explanation, evaluate_cascade
from memlineage.models import (
    DEFAULT_TRUST,
    Activity,
    Lineage,
    Memory,
    MemoryKind,
    Relation,
    Scope,
    Source,
    SourceKind,
    Status,
    as_utc,
    check_id,
    check_text,
    content_hash,
    from_epoch,
    new_id,
    normalize_metadata,
    normalize_tags,
    to_epoch,
    utcnow,
)
from memlineage.reconcile import Action, Decision, Reconciler, RuleReconciler, newest_first
from memlineage.retrieval import (
    CandidateFilter,
    RecallHit,
    RecallResult,
    RetrievalConfig,
    Trace,
    hybrid_recall,
)

__all__ = ["ConsistencyReport", "MemoryManager"]

logger = logging.getLogger(__name__)

#: Where ``MemoryManager.open()`` keeps its files when no path is given: ``$MEMLINEAGE_HOME`` or ``./.memlineage``.
ENV_HOME = "MEMLINEAGE_HOME"
DEFAULT_DIR = ".memlineage"

_LIVE = (Status.ACTIVE.value, Status.SUSPECT.value)


class ConsistencyReport(BaseModel):
    """What :meth:`MemoryManager.verify` found when comparing the index with the ledger (the source of truth).

    Every list holds memory ids; all empty means the two agree.
    """

    ledger_rows: int = Field(description="Memory versions in the ledger.")
    index_entries: int = Field(description="Entries in the vector index.")
    missing: list[str] = Field(default_factory=list, description="Indexed per the ledger but absent from the index.")
    orphans: list[str] = Field(default_factory=list, description="In the index but unknown to the ledger.")
    not_removed: list[str] = Field(
        default_factory=list, description="In the index although the ledger says removed (archived or erased)."
    )
    scope_mismatch: list[str] = Field(default_factory=list, description="Index entry's user_id differs.")
    status_mismatch: list[str] = Field(default_factory=list, description="Index entry's status differs.")
    hash_mismatch: list[str] = Field(
        default_factory=list, description="Index entry was made from other content (content hash differs)."
    )
    pending: list[str] = Field(
        default_factory=list, description="Index write not finished yet (pending/stale/removing); repair() does it."
    )
    quarantined: list[str] = Field(
        default_factory=list,
        description="Entries the index refused on repair: kept in the ledger, unsearchable; verify(fix=True) retries.",
    )
    fixed: int = Field(default=0, description="Differences repaired (verify(fix=True) only).")

    @property
    def ok(self) -> bool:
        """True when ledger and index agree and nothing is pending."""
        return not self.differences()

    def differences(self) -> dict[str, list[str]]:
        """The non-empty difference lists by name."""
        names = (
            "missing",
            "orphans",
            "not_removed",
            "scope_mismatch",
            "status_mismatch",
            "hash_mismatch",
            "pending",
            "quarantined",
        )
        return {n: getattr(self, n) for n in names if getattr(self, n)}


@dataclass
class _Draft:
    """A validated write request, before dedup and persistence."""

    content: str
    scope: Scope
    source: Source
    kind: MemoryKind
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    derived_from: tuple[str, ...]
    confidence: float
    trust: float
    activity_id: str | None
    parent_activity_id: str | None
    valid_from: datetime | None
    expires_at: datetime | None
    slot: str | None
    context_hash: str | None
    hash: str = ""
    embedding: list[float] | None = None
    supersedes: dict[str, Any] | None = None
    extra_rows: dict[str, Any] = field(default_factory=dict)
    decision: Decision | None = None  # update detection: the automatic decision behind supersedes / retracts
    retracts: str | None = None  # update detection: a live memory this statement withdraws
    slot_value: str | None = None  # update detection: the value the statement assigns to its (detected) slot
    auto_slot: bool = False  # the slot was detected, not given by the caller
    auto_kind: bool = False  # no kind given: episodic, or semantic when the value model promotes it

    def to_memory(self, now: datetime, *, previous: Mapping[str, Any] | None = None) -> Memory:
        """The memory this draft becomes when written at ``now`` (``previous``: the ledger row it supersedes)."""
        return Memory(
            content=self.content,
            kind=self.kind,
            scope=self.scope,
            lineage=Lineage(
                source_kind=self.source.kind,
                source_name=self.source.name,
                activity_id=self.activity_id,
                parent_activity_id=self.parent_activity_id,
                derived_from=self.derived_from,
                confidence=self.confidence,
                trust=self.trust,
                context_hash=self.context_hash,
            ),
            tags=self.tags,
            metadata=self.metadata,
            created_at=now,
            recorded_at=now,
            valid_from=self.valid_from or now,
            expires_at=self.expires_at,
            version=(previous["version"] + 1) if previous else 1,
            supersedes=previous["id"] if previous else None,
            slot=self.slot,
            **self.extra_rows,
        )

    force: bool = False  # value gate: store even below the threshold
    goal: str | None = None  # value gate: the agent's current goal, for goal relevance


class MemoryManager:
    """Agent memory with lineage: a SQL ledger (source of truth) plus a derived vector index.

    Setup:
        ``pip install memlineage``. The default embedder reads all-MiniLM-L6-v2's ONNX files (see
        :class:`~memlineage.index.OnnxMiniLMEmbedder`); offline, set ``MEMLINEAGE_EMBEDDING_MODEL_DIR``.

    Instantiate:
        >>> mm = MemoryManager.open("/tmp/my-store")  # doctest: +SKIP
        >>> from memlineage.testing import make_manager
        >>> mm = make_manager()  # in-memory, fake embedder

    Use:
        >>> alice = Scope(user_id="alice")
        >>> city = mm.remember("I live in Paris", scope=alice, source="user", kind="semantic")
        >>> hotel = mm.remember("Book Hotel Lumière", scope=alice, source="reasoning", derived_from=[city.id])
        >>> mm.retract(city.id, scope=alice, reason="moved").suspect == [hotel.id]
        True

    Args:
        ledger: The SQL ledger.
        index: The vector index (Chroma or in-memory).
        embedder: Embedder, LangChain ``Embeddings``, LlamaIndex embedding or callable; None = default ONNX.
        clock: Returns "now" (timezone-aware UTC); inject one to simulate time.
        trust_by_source: Base trust per source kind, in [0, 1]; defaults to ``models.DEFAULT_TRUST``.
        lock: A held cross-process lock released by :meth:`close` (set by :meth:`open`).
        path: The store directory, when embedded.

    Raises:
        ConfigurationError: collaborators are missing or inconsistent.
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        index: VectorIndex,
        embedder: Any = None,
        clock: Callable[[], datetime] | None = None,
        trust_by_source: Mapping[str, float] | None = None,
        policy: Any = None,
        value_model: Any = None,
        lock: Any = None,
        path: Path | None = None,
        repair_on_open: bool = True,
        lexical: Any = None,
        retrieval: RetrievalConfig | None = None,
        read_filter: CandidateFilter | None = None,
        reconciler: Reconciler | None | str = "rules",
    ) -> None:
        if ledger is None or index is None:
            msg = "MemoryManager needs a ledger and an index; use MemoryManager.open() for the defaults"
            raise ConfigurationError(msg)
        self.ledger = ledger
        self.index = index
        self.embedder: Embedder = ensure_embedder(embedder)
        self.clock = _utc_clock(clock) if clock is not None else utcnow
        self.trust_by_source = {str(k): float(v) for k, v in (trust_by_source or DEFAULT_TRUST).items()}
        self.policy = _policy_engine(policy)
        self.value_model = value_model
        self.reconciler = _reconciler(reconciler)
        self.path = path
        self._lock = lock
        # Serialises the write gate (duplicate check → insert) within this process, so two threads writing the
        # same content cannot both store it. Across processes, server mode relies on the ledger's transactions.
        self._write_mutex = threading.RLock()
        self._closed = False
        self._dims: int | None = None  # the embedder's vector size, learnt from its first output
        # hybrid retrieval (memlineage.retrieval): lexical leg built lazily per user from the ledger
        from memlineage.index.lexical import LexicalIndex

        self.lexical = lexical if lexical is not None else LexicalIndex(loader=self._lexical_rows)
        self.retrieval = retrieval or RetrievalConfig()
        self.read_filter = read_filter
        if repair_on_open:
            self.repair()

    # ================================================================== construction
    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        *,
        ledger_url: str | None = None,
        chroma_client: Any = None,
        index: VectorIndex | None = None,
        embedder: Any = None,
        collection: str = "memlineage",
        clock: Callable[[], datetime] | None = None,
        lock_timeout: float = 0.0,
        **kwargs: Any,
    ) -> MemoryManager:
        """Open (or create) a store.

        Embedded default: ``path`` (default ``$MEMLINEAGE_HOME`` or ``./.memlineage``) holds ``ledger.db``
        (SQLite, WAL) and ``chroma/`` (Chroma ``PersistentClient``), guarded by a cross-process writer lock
        (``.writer.lock``; one writer process at a time, use server mode for more). Server mode: pass
        ``ledger_url="postgresql+psycopg://..."`` and ``chroma_client=chromadb.HttpClient(...)``; no lock is taken
        then unless some part still lives in ``path``.

        Args:
            path: Store directory for the embedded parts.
            ledger_url: SQLAlchemy URL of the ledger; default SQLite in ``path``.
            chroma_client: A chromadb client to use instead of the embedded ``PersistentClient``.
            index: A ready :class:`~memlineage.index.VectorIndex` (overrides ``chroma_client``).
            embedder: See :class:`MemoryManager`.
            collection: Chroma collection name.
            clock: See :class:`MemoryManager`.
            lock_timeout: Seconds to wait for the writer lock (0 = fail at once).
            **kwargs: Passed to the constructor (``policy``, ``value_model``, ``trust_by_source``...). ``policy``
                defaults here to the built-in set (:func:`memlineage.builtin_policies`); pass ``policy=None`` to
                run without a policy engine.

        Raises:
            StoreLockedError: another process holds the embedded store.
            StorageError: the ledger or index cannot be opened.
        """
        from memlineage.index import ChromaIndex

        kwargs = {**cls.default_options(), **kwargs}
        embedded_ledger = ledger_url is None
        embedded_index = index is None and chroma_client is None
        store = Path(path or os.environ.get(ENV_HOME) or DEFAULT_DIR).expanduser()
        lock = None
        if embedded_ledger or embedded_index:
            store.mkdir(parents=True, exist_ok=True)
            lock = _acquire_lock(store, lock_timeout)
        try:
            ledger = Ledger(ledger_url or f"sqlite:///{store / 'ledger.db'}")
            if index is None:
                index = (
                    ChromaIndex(chroma_client, collection)
                    if chroma_client is not None
                    else ChromaIndex.persistent(store / "chroma", collection)
                )
            return cls(
                ledger=ledger,
                index=index,
                embedder=embedder,
                clock=clock,
                lock=lock,
                path=store if (embedded_ledger or embedded_index) else None,
                **kwargs,
            )
        except BaseException:
            if lock is not None:
                lock.release()
            raise

    @staticmethod
    def default_options() -> dict[str, Any]:
        """What :meth:`open` adds to the constructor's defaults: the built-in policies and the value model.

        Update detection (``reconciler="rules"``) is on in the constructor already. Benchmarks and tests that build
        a manager from parts use this to measure exactly what ``open()`` gives a user.

        Returns:
            ``{"policy": builtin_policies(), "value_model": ValueModel()}``.
        """
        from memlineage.policy import builtin_policies
        from memlineage.value import ValueModel

        return {"policy": builtin_policies(), "value_model": ValueModel()}

    @classmethod
    def from_settings(cls, settings: Any = None, **kwargs: Any) -> MemoryManager:
        """Open from :class:`~memlineage.settings.MemLineageSettings` (environment variables ``MEMLINEAGE_*``)."""
        from memlineage.settings import MemLineageSettings

        s = settings or MemLineageSettings()
        client = None
        if s.chroma_host:
            import chromadb

            client = chromadb.HttpClient(host=s.chroma_host, port=s.chroma_port)
        embedder = kwargs.pop("embedder", None)
        if embedder is None and s.embedding_model_dir:
            from memlineage.index import OnnxMiniLMEmbedder

            embedder = OnnxMiniLMEmbedder(s.embedding_model_dir)
        return cls.open(
            s.home, ledger_url=s.ledger_url, chroma_client=client, embedder=embedder, collection=s.collection, **kwargs
        )

    def close(self) -> None:
        """Release the connection pool and the writer lock. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._value_flush()
        self.ledger.close()
        close_index = getattr(self.index, "close", None)
        if callable(close_index):
            close_index()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ================================================================== write path
    def remember(
        self,
        content: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        source: Source | str = "user",
        kind: MemoryKind | str | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        derived_from: Iterable[str] = (),
        confidence: float = 1.0,
        activity_id: str | None = None,
        parent_activity_id: str | None = None,
        valid_from: datetime | None = None,
        ttl: timedelta | float | None = None,
        slot: str | None = None,
        trust: float | None = None,
        context_hash: str | None = None,
        embedding: Sequence[float] | None = None,
        force: bool = False,
        goal: str | None = None,
    ) -> Memory:
        """Store one memory with its lineage (the write gate).

        An exact duplicate (same normalised content, scope and kind among live memories) is a no-op that returns
        the existing memory and records ``seen_again``; when it comes from another source or other premises it is
        recorded as an independent support (corroboration). A ``slot`` already held by another live memory in the
        scope is superseded by this one.

        Args:
            content: The text; non-empty after strip.
            scope: Owner; required.
            source: ``Source`` or ``"user"``, ``"tool:flight_api"``, ``"reasoning"``, ``"agent"``...
            kind: ``episodic``, ``semantic``, ``procedural`` or ``working``; None (default) = ``episodic``, or with a
                value model ``semantic`` when V reaches the store threshold (promotion to long-term memory).
            tags: Labels for policies and filters.
            metadata: JSON-like dict; ``None`` = ``{}``; NaN/inf and keys starting with ``_ml_`` are refused.
            derived_from: Premise memory ids (wasDerivedFrom); must exist in the same scope.
            confidence: Source confidence in [0, 1].
            activity_id: The activity that generated it (wasGeneratedBy), e.g. a LangChain run id.
            parent_activity_id: That activity's parent run.
            valid_from: When the event happened / the fact became true (default: now).
            ttl: Time to live (``timedelta`` or seconds); after it the memory expires.
            slot: Semantic slot key (e.g. ``"user/seat_preference"``); a new value supersedes the old.
            trust: Trust in [0, 1]; default from the source kind times confidence; always capped by premises.
            context_hash: Hash of the producing context.
            embedding: Precomputed vector (skips the embedder).
            force: With a value model: store even when V is below the store threshold (like "remember ...").
            goal: With a value model: the agent's current goal in words, for the goal-relevance factor.

        Returns:
            The stored (or existing duplicate) memory. With a value model, a candidate whose value V is below the
            store threshold is not stored: it goes to its session's short-term buffer and the returned memory has
            kind ``working`` and is not in the ledger (see :mod:`memlineage.value`).

        Raises:
            InvalidInputError: bad content, scope, source, metadata, confidence or premises.
            ScopeViolationError: a premise belongs to another scope.
            MemoryNotFoundError: a premise does not exist.
            PolicyViolationError: a write policy denied it.
            StorageError: the ledger failed (nothing was written).
        """
        item = dict(
            content=content, scope=scope, source=source, kind=kind, tags=tags, metadata=metadata,
            derived_from=derived_from, confidence=confidence, activity_id=activity_id,
            parent_activity_id=parent_activity_id, valid_from=valid_from, ttl=ttl, slot=slot, trust=trust,
            context_hash=context_hash, embedding=embedding, force=force, goal=goal,
        )  # fmt: skip
        return self.remember_many([item])[0]

    def remember_many(self, items: Sequence[Mapping[str, Any]]) -> list[Memory]:
        """Batch :meth:`remember`: one ledger transaction and one index write for all items.

        Args:
            items: Mappings with :meth:`remember`'s keyword arguments (``content`` and ``scope`` required).

        Returns:
            One memory per item, in input order.

        Raises:
            Same as :meth:`remember`; on any error nothing is written.
        """
        if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
            msg = "remember_many() takes a list of dicts with remember()'s keyword arguments"
            raise InvalidInputError(msg)
        drafts = [self._draft(**_check_item(item)) for item in items]
        if not drafts:
            return []
        now = self.clock()
        self._persist_buffered_premises(drafts, now)
        with self.ledger.read() as conn:
            self._check_premises(drafts, conn)
        self._value_prepare(drafts)
        self._before_write(drafts)
        with self._write_mutex:
            return self._remember_locked(drafts, now)

    def _remember_locked(self, drafts: list[_Draft], now: datetime) -> list[Memory]:
        results: list[Memory | None] = [None] * len(drafts)
        todo, batch_dups, merges = self._dedupe(drafts, now)
        missing = [d for d in todo if d.embedding is None]
        if missing:
            vectors = self._embed([d.content for d in missing])
            for d, v in zip(missing, vectors):
                d.embedding = v
        todo = self._detect(drafts, todo, batch_dups, merges, now)
        # Writes start only now, after everything that can fail on bad input or a broken embedder.
        if merges:
            self._merge_duplicates(merges, results, now)
        todo = self._value_gate(drafts, todo, results, now)
        written: list[dict[str, Any]] = []
        created, suspects = self._persist(todo, now, rows_out=written)
        by_draft = {id(d): m for d, m in zip(todo, created)}
        for i, d in enumerate(drafts):
            if id(d) in by_draft:
                results[i] = by_draft[id(d)]
        for i, first in batch_dups:
            results[i] = results[first]
        # A new memory made suspect in the same transaction (its premise was the slot value it superseded) was
        # already synced from the ledger by _persist; its in-memory row is out of date.
        cascaded = set(suspects)
        self._sync_index(
            [m.id for m in created if m.id not in cascaded],
            rows=[r for r in written if r["id"] not in cascaded],
            fresh=True,
        )
        return [r for r in results if r is not None]

    def _draft(
        self,
        content: Any,
        scope: Any,
        source: Any = "user",
        kind: Any = None,
        tags: Any = (),
        metadata: Any = None,
        derived_from: Any = (),
        confidence: Any = 1.0,
        activity_id: Any = None,
        parent_activity_id: Any = None,
        valid_from: Any = None,
        ttl: Any = None,
        slot: Any = None,
        trust: Any = None,
        context_hash: Any = None,
        embedding: Any = None,
        force: Any = False,
        goal: Any = None,
    ) -> _Draft:
        content = check_text(content)
        scope = Scope.coerce(scope)
        src = Source.parse(source)
        try:
            mkind = MemoryKind(kind) if kind is not None else MemoryKind.EPISODIC
        except ValueError as exc:
            msg = f"unknown memory kind {kind!r}; use one of {[k.value for k in MemoryKind]}"
            raise InvalidInputError(msg) from exc
        conf = _unit_float(confidence, "confidence")
        base = self.trust_by_source.get(src.kind.value, 0.5) * conf
        trust_value = min(base, _unit_float(trust, "trust")) if trust is not None else base
        premises = _ids(derived_from, "derived_from")
        expires = None
        now = self.clock()
        if ttl is not None:
            seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else ttl
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < float("inf"):
                msg = f"ttl must be a positive timedelta or number of seconds, got {ttl!r}"
                raise InvalidInputError(msg)
            try:
                expires = now + timedelta(seconds=float(seconds))
            except (OverflowError, ValueError) as exc:
                msg = f"ttl {ttl!r} reaches past the year 9999; use a shorter ttl or None for no expiry"
                raise InvalidInputError(msg) from exc
        if valid_from is not None and not isinstance(valid_from, datetime):
            msg = f"valid_from must be a datetime, got {type(valid_from).__name__}"
            raise InvalidInputError(msg)
        for name, value in (
            ("activity_id", activity_id), ("parent_activity_id", parent_activity_id), ("slot", slot),
            ("context_hash", context_hash),
        ):  # fmt: skip
            if value is not None:
                check_id(value, name)
        vec = _vector(embedding) if embedding is not None else None
        if vec is not None:
            self._check_dims(vec)
        return _Draft(
            content=content,
            scope=scope,
            source=src,
            kind=mkind,
            tags=normalize_tags(tags),
            metadata=normalize_metadata(metadata),
            derived_from=premises,
            confidence=conf,
            trust=trust_value,
            activity_id=activity_id,
            parent_activity_id=parent_activity_id,
            valid_from=valid_from,
            expires_at=expires,
            slot=slot,
            context_hash=context_hash,
            hash=content_hash(content),
            embedding=vec,
            force=bool(force),
            goal=goal if isinstance(goal, str) and goal.strip() else None,
            auto_kind=kind is None,
        )

    def _persist_buffered_premises(self, drafts: Sequence[_Draft], now: datetime) -> None:
        """Store the short-term-buffer items that drafts name as premises, under the ids they were returned with.

        An adapter may take a turn the value model kept only in the session's buffer ("ok, what should I bring?")
        as the premise of the answer that follows; a derived memory needs its premise in the ledger for its
        lineage to work, so that item is persisted (forced) first.
        """
        rt = getattr(self, "_value_runtime", None)
        wanted = sorted({p for d in drafts for p in d.derived_from})
        if rt is None or not wanted:
            return
        known = {r["id"] for r in self.ledger.memory_rows(wanted) if r is not None}
        items = []
        for d in drafts:
            for p in d.derived_from:
                item = rt.buffer.pop(p, d.scope) if p not in known else None
                if item is not None:
                    known.add(p)
                    items.append(item)
        if not items:
            return
        buffered = []
        for item in items:
            draft = self._draft(
                content=item.content, scope=item.scope, source=item.source, kind=MemoryKind.EPISODIC, force=True
            )
            draft.extra_rows["id"] = item.id
            buffered.append(draft)
        with self._write_mutex:
            self._remember_locked(buffered, now)

    def _check_premises(self, drafts: Sequence[_Draft], conn: Connection) -> None:
        wanted = sorted({p for d in drafts for p in d.derived_from})
        rows = dict(zip(wanted, self.ledger.memory_rows(wanted, conn)))
        for d in drafts:
            for p in d.derived_from:
                row = rows.get(p)
                if row is None:
                    msg = f"premise {p!r} does not exist; remember it first or drop it from derived_from"
                    raise MemoryNotFoundError(msg)
                if not d.scope.contains(_row_scope(row)):
                    msg = f"premise {p!r} belongs to another scope; a memory can only derive from its own scope"
                    raise ScopeViolationError(msg)
                if row["status"] == Status.ERASED.value:
                    msg = f"premise {p!r} was erased and cannot support new memories"
                    raise InvalidInputError(msg)
            if d.derived_from:
                d.trust = min([d.trust] + [rows[p]["trust"] for p in d.derived_from])

    def _before_write(self, drafts: Sequence[_Draft]) -> None:
        """Hook for write policies and the value gate (no-op in the core store)."""
        if self.policy is not None:
            from memlineage.policy._enforce import enforce_write

            enforce_write(self, drafts)

    def _dedupe(
        self, drafts: list[_Draft], now: datetime
    ) -> tuple[list[_Draft], list[tuple[int, int]], list[tuple[int, dict[str, Any], _Draft]]]:
        """Resolve exact duplicates and slot supersession (reads only; nothing is written here).

        Returns:
            The drafts to persist, ``(index, first_index)`` pairs for in-batch duplicates, and
            ``(index, existing_row, draft)`` for duplicates of live ledger memories (to merge).
        """
        todo: list[_Draft] = []
        seen: dict[tuple[str, str | None, str, str], int] = {}
        groups: dict[tuple[str, str | None], list[int]] = {}
        for i, d in enumerate(drafts):
            groups.setdefault((d.scope.user_id, d.scope.agent_id), []).append(i)
        existing: dict[tuple[str, str | None, str, str], dict[str, Any]] = {}
        with self.ledger.read() as conn:
            for (user, agent), idx in groups.items():
                pairs = [(drafts[i].kind.value, drafts[i].hash) for i in idx]
                pairs += [(MemoryKind.SEMANTIC.value, drafts[i].hash) for i in idx if drafts[i].auto_kind]
                found = self.ledger.find_duplicates(user, agent, pairs, conn)
                for (kind, h), row in found.items():
                    existing[(user, agent, kind, h)] = row
            for d in drafts:
                if d.slot:
                    live = [
                        r
                        for r in self.ledger.slot_versions(d.scope.user_id, d.scope.agent_id, d.slot, conn)
                        if r["status"] in _LIVE
                    ]
                    if live and live[-1]["content_hash"] != d.hash:
                        d.supersedes = live[-1]
        merges: list[tuple[int, dict[str, Any], _Draft]] = []
        batch_dups: list[tuple[int, int]] = []
        for i, d in enumerate(drafts):
            key = (d.scope.user_id, d.scope.agent_id, d.kind.value, d.hash)
            promoted = (d.scope.user_id, d.scope.agent_id, MemoryKind.SEMANTIC.value, d.hash)
            if d.auto_kind and key not in existing and promoted in existing:
                key = promoted  # an unkinded restatement of a fact the value model promoted
            if key in existing and self._would_cycle(existing[key]["id"], d.derived_from):
                # Same words, but derived from what came after the first occurrence: a new event that repeats
                # earlier content (e.g. an agent saying "Noted." twice), not a circular re-derivation.
                todo.append(d)
            elif key in existing:
                merges.append((i, existing[key], d))
            elif key in seen:
                batch_dups.append((i, seen[key]))
            else:
                seen[key] = i
                todo.append(d)
        return todo, batch_dups, merges

    def _detect(
        self,
        drafts: list[_Draft],
        todo: list[_Draft],
        batch_dups: list[tuple[int, int]],
        merges: list[tuple[int, dict[str, Any], _Draft]],
        now: datetime,
    ) -> list[_Draft]:
        """Update detection (see :mod:`memlineage._detect`); reads only, decisions are carried out by ``_persist``."""
        return detect_updates(
            drafts, todo, batch_dups, merges, now, ledger=self.ledger, index=self.index, reconciler=self.reconciler,
            check_operation=lambda op, mems, scope, source: self._check_operation(op, mems, scope=scope, source=source),
        )  # fmt: skip

    def _would_cycle(self, memory_id: str, premises: Sequence[str]) -> bool:
        """Whether adding ``premises`` to ``memory_id`` would make it its own ancestor."""
        if not premises:
            return False
        if memory_id in premises:
            return True
        return bool(self.ledger.walk([memory_id], direction="descendants").keys() & set(premises))

    def _merge_duplicates(
        self, merges: list[tuple[int, dict[str, Any], _Draft]], results: list[Memory | None], now: datetime
    ) -> None:
        """Record ``seen_again`` or a corroborating support for duplicates of live ledger rows."""
        with self.ledger.transaction() as conn:
            for _, row, d in merges:
                if d.decision is not None:
                    self._record_decision(conn, d, None, now)
                self._corroborate(conn, row, d, now)
        fresh = self.ledger.memories([row["id"] for _, row, _ in merges])
        for (i, _, _), mem in zip(merges, fresh):
            results[i] = mem
        self._sync_index([row["id"] for _, row, _ in merges])

    def _corroborate(self, conn: Connection, row: dict[str, Any], d: _Draft, now: datetime) -> None:
        mid = row["id"]
        t = to_epoch(now)
        groups = self.ledger.support_rows(mid, conn)
        if d.derived_from:
            descendants = self.ledger.walk([mid], direction="descendants", conn=conn)
            if mid in d.derived_from or descendants.keys() & set(d.derived_from):
                msg = f"corroborating {mid!r} with premises {list(d.derived_from)} would create a lineage cycle"
                raise LineageCycleError(msg)
        own = next(
            (g for g in groups if g["source_kind"] == d.source.kind.value and g["source_name"] == d.source.name),
            None,
        )
        if own is not None:
            # The same source again is not independent evidence: its premises join the same conjunctive group.
            known = set(self.ledger.premises([mid], conn, support=own["support"]).get(mid, ()))
            extra = [p for p in d.derived_from if p not in known]
            if extra and own["premises"] > 0:
                self.ledger.insert_edges(
                    conn,
                    [
                        _edge(mid, p, Relation.WAS_DERIVED_FROM, t, row["user_id"], own["support"], d.activity_id)
                        for p in extra
                    ],
                )
                conn.execute(
                    update(supports).where(supports.c.id == own["id"]).values(premises=own["premises"] + len(extra))
                )
                # a premise added to a conjunctive group can only lower trust (minimum over all premises)
                self.ledger.update_memories(conn, [mid], {"trust": min(row["trust"], d.trust)})
            data = {"source": str(d.source), "new_premises": extra if own["premises"] > 0 else []}
            if d.decision is not None:
                data["decision"] = {"action": d.decision.action.value, "reason": d.decision.reason}
            self.ledger.insert_events(conn, [_event(t, "seen_again", mid, d.activity_id, row["user_id"], data)])
            return
        group = max((g["support"] for g in groups), default=-1) + 1
        self.ledger.insert_supports(
            conn,
            [
                {
                    "memory_id": mid,
                    "support": group,
                    "source_kind": d.source.kind.value,
                    "source_name": d.source.name,
                    "activity_id": d.activity_id,
                    "premises": len(d.derived_from),
                    "created_at": t,
                }
            ],
        )
        self.ledger.insert_edges(
            conn,
            [_edge(mid, p, Relation.WAS_DERIVED_FROM, t, row["user_id"], group, d.activity_id) for p in d.derived_from],
        )
        values: dict[str, Any] = {"trust": max(row["trust"], d.trust)}
        if row["status"] == Status.SUSPECT.value:
            values["status"] = Status.ACTIVE.value  # an independent valid source supports it again
            values["index_state"] = "stale"
        self.ledger.update_memories(conn, [mid], values)
        self.ledger.insert_events(
            conn,
            [_event(t, "corroborated", mid, d.activity_id, row["user_id"], {"source": str(d.source), "group": group})],
        )

    def _persist(
        self, drafts: list[_Draft], now: datetime, rows_out: list[dict[str, Any]] | None = None
    ) -> tuple[list[Memory], list[str]]:
        """Write new memories, their supports, edges and events in one transaction.

        Args:
            drafts: Validated, de-duplicated drafts.
            now: Write time.
            rows_out: When given, receives the ledger rows written (for the index write that follows).

        Returns:
            The new memories, and the ids made suspect by superseding old slot values / versions.
        """
        if not drafts:
            return [], []
        t = to_epoch(now)
        mems: list[Memory] = []
        rows: list[dict[str, Any]] = []
        edge_rows: list[dict[str, Any]] = []
        support_rows: list[dict[str, Any]] = []
        event_rows: list[dict[str, Any]] = []
        # (old id, status, reason, decision) for each memory this batch supersedes or withdraws
        invalidations: list[tuple[str, Status, str, Decision | None]] = []
        activity_ids = {d.activity_id for d in drafts if d.activity_id}
        for d in drafts:
            old = d.supersedes
            mem = d.to_memory(now, previous=old)
            mems.append(mem)
            row = memory_to_row(mem)
            row.update(
                content_hash=d.hash, index_state="pending", embedding=encode_vector(d.embedding),
                embedder=self.embedder.name,
            )  # fmt: skip
            rows.append(row)
            user = d.scope.user_id
            support_rows.append(
                {
                    "memory_id": mem.id, "support": 0, "source_kind": d.source.kind.value,
                    "source_name": d.source.name, "activity_id": d.activity_id,
                    "premises": len(d.derived_from), "created_at": t,
                }
            )  # fmt: skip
            edge_rows.extend(
                _edge(mem.id, p, Relation.WAS_DERIVED_FROM, t, user, 0, d.activity_id) for p in d.derived_from
            )
            if d.activity_id:
                edge_rows.append(_edge(mem.id, d.activity_id, Relation.WAS_GENERATED_BY, t, user))
            data: dict[str, Any] = {"source": str(d.source), "kind": d.kind.value}
            if old:
                edge_rows.append(_edge(mem.id, old["id"], Relation.WAS_REVISION_OF, t, user))
                reason = d.decision.reason if d.decision else "superseded by a new version"
                invalidations.append((old["id"], Status.SUPERSEDED, reason, d.decision))
                data["supersedes"] = old["id"]
            if d.retracts:
                assert d.decision is not None
                invalidations.append((d.retracts, Status.RETRACTED, d.decision.reason, d.decision))
                data["retracts"] = d.retracts
            if d.decision is not None:
                data["decision"] = {"action": d.decision.action.value, "target": d.decision.target}
            event_rows.append(_event(t, "created", mem.id, d.activity_id, user, data))
        with self.ledger.transaction() as conn:
            found = [r for r in self.ledger.activity_rows(sorted(activity_ids), conn) if r]
            _check_activity_owners(found, drafts)
            known = {r["id"] for r in found}
            for d in drafts:
                if d.activity_id and d.activity_id not in known:
                    known.add(d.activity_id)
                    self.ledger.upsert_activity(
                        conn,
                        Activity(
                            id=d.activity_id, kind="run", parent_id=d.parent_activity_id, scope=d.scope,
                            started_at=now,
                        ),
                    )  # fmt: skip
            self.ledger.insert_memories(conn, rows)
            if rows_out is not None:
                rows_out.extend(rows)
            self.ledger.insert_supports(conn, support_rows)
            self.ledger.insert_edges(conn, edge_rows)
            self.ledger.insert_events(conn, event_rows)
            suspects: list[str] = []
            by_target = {d.decision.target: (d, m) for d, m in zip(drafts, mems) if d.decision is not None}
            for old_id, status, reason, decision in invalidations:
                act = None
                if decision is not None:
                    d, mem = by_target[old_id]
                    act = self._record_decision(conn, d, mem.id, now)
                s, _ = self._invalidate(conn, old_id, status, now, reason=reason, activity_id=act)
                suspects.extend(s)
        if invalidations:
            self._sync_index([i[0] for i in invalidations] + suspects)
        return mems, suspects

    def _record_decision(self, conn: Connection, d: _Draft, memory_id: str | None, now: datetime) -> str:
        """Record an automatic update decision as an activity (kind ``update_detection``); return its id.

        The activity ``used`` the new statement (its evidence) and the memory it acts on; the latter's
        ``wasInvalidatedBy`` edge (written by the cascade) points at it, so ``explain`` shows why.
        """
        decision = d.decision
        assert decision is not None and decision.target is not None
        act = new_id()
        t = to_epoch(now)
        self.ledger.upsert_activity(
            conn,
            Activity(
                id=act, kind="update_detection", name=decision.action.value, scope=d.scope, started_at=now,
                ended_at=now, outcome="applied",
                metadata={
                    "reason": decision.reason, "evidence": decision.evidence, "decided_by": decision.decided_by,
                    "target": decision.target, "statement": memory_id,
                },
            ),
        )  # fmt: skip
        rows = [_edge(act, decision.target, Relation.USED, t, d.scope.user_id)]
        if memory_id is not None:
            rows.append(_edge(act, memory_id, Relation.USED, t, d.scope.user_id))
        self.ledger.insert_edges(conn, rows)
        return act

    # ================================================================== cascade
    def _invalidate(
        self,
        conn: Connection,
        mid: str,
        status: Status,
        now: datetime,
        *,
        reason: str,
        activity_id: str | None = None,
        dry_run: bool = False,
    ) -> tuple[list[str], list[str]]:
        """Set ``mid`` to an invalidating status and mark unsupported descendants suspect (in ``conn``).

        Returns:
            ``(suspect_ids, unaffected_descendant_ids)``.
        """
        t = to_epoch(now)
        row = self.ledger.memory_rows([mid], conn)[0]
        if row is None:  # pragma: no cover - callers check
            raise MemoryNotFoundError(mid)
        info = self.ledger.cascade_info(mid, conn)
        if all(n <= 1 for _, _, n in info.values()):
            # No descendant has an alternative support: each one reached lost its only support.
            order = sorted(info, key=lambda i: (info[i][0], i))
            suspect = [i for i in order if info[i][1] == Status.ACTIVE.value]
        else:
            edges = self.ledger.derivation_edges(list(info), conn)
            groups = self.ledger.support_groups(list(info), conn)
            involved = set(info) | {p for _, p, _ in edges} | {mid}
            statuses = self.ledger.statuses(sorted(involved), conn)
            statuses[mid] = status.value
            suspect = evaluate_cascade([mid], info, edges, groups, statuses)
        unaffected = sorted(set(info) - set(suspect))
        if dry_run:
            return suspect, unaffected
        inv_activity = activity_id or new_id()
        if activity_id is None or self.ledger.activity_rows([activity_id], conn)[0] is None:
            self.ledger.upsert_activity(
                conn,
                Activity(
                    id=inv_activity, kind="invalidation", name=status.value, started_at=now, ended_at=now,
                    scope=_row_scope(row), metadata={"reason": reason, "target": mid},
                ),
            )  # fmt: skip
        self.ledger.update_memories(conn, [mid], {"status": status.value, "invalidated_at": t, "index_state": "stale"})
        edge_rows = [_edge(mid, inv_activity, Relation.WAS_INVALIDATED_BY, t, row["user_id"])]
        events = [_event(t, status.value, mid, inv_activity, row["user_id"], {"reason": reason})]
        if suspect:
            self.ledger.update_memories(conn, suspect, {"status": Status.SUSPECT.value, "index_state": "stale"})
            cause = {"reason": f"premise {mid} {status.value}", "cause": mid}
            events.extend(_event(t, "suspect", s, inv_activity, row["user_id"], cause) for s in suspect)
        self.ledger.insert_edges(conn, edge_rows)
        self.ledger.insert_events(conn, events)
        return suspect, unaffected

    def retract(
        self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "retracted",
        activity_id: str | None = None, source: Source | str | None = None,
    ) -> CascadeReport:  # fmt: skip
        """Withdraw a memory; every descendant left without a valid support becomes ``suspect``.

        A conclusion needs all its premises, so one withdrawn premise is enough; a fact corroborated by another
        independent source stays active.

        Args:
            memory_id: The memory to retract.
            scope: Caller's scope; must contain the memory.
            reason: Why (kept in the event log).
            activity_id: The activity that caused it (wasInvalidatedBy); default a new invalidation activity.
            source: Who asks (e.g. ``"agent"``); delete policies see it, so write protection can refuse a
                non-user source withdrawing what the user asserted. None = the application itself.

        Returns:
            A report whose ``suspect`` lists the ids marked suspect.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
            PolicyViolationError: a delete policy denied it.
        """
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        if activity_id is not None:
            check_id(activity_id, "activity_id")
        src = Source.parse(source) if source is not None else None
        mem = self.require(memory_id, scope=scope)
        self._check_operation("delete", [mem], scope=scope, source=src)
        if mem.status in (Status.RETRACTED, Status.ERASED):
            return CascadeReport(target=memory_id, action="retract")
        with self.ledger.transaction() as conn:
            suspect, unaffected = self._invalidate(
                conn, memory_id, Status.RETRACTED, self.clock(), reason=reason, activity_id=activity_id
            )
        self._sync_index([memory_id, *suspect])
        return CascadeReport(
            target=memory_id, action="retract", suspect=suspect, unaffected=unaffected,
            attribution=self._cascade_attribution(memory_id, suspect),
        )  # fmt: skip

    def impact(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> CascadeReport:
        """Dry run of :meth:`retract`: which descendants would become suspect. Changes nothing.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
        """
        scope = Scope.coerce(scope)
        self.require(memory_id, scope=scope)
        with self.ledger.read() as conn:
            suspect, unaffected = self._invalidate(
                conn, memory_id, Status.RETRACTED, self.clock(), reason="impact", dry_run=True
            )
        return CascadeReport(
            target=memory_id, action="impact", suspect=suspect, unaffected=unaffected, dry_run=True,
            attribution=self._cascade_attribution(memory_id, suspect),
        )  # fmt: skip

    def supersede(
        self,
        old_id: str,
        new_content: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        source: Source | str = "user",
        **kwargs: Any,
    ) -> CascadeReport:
        """Store a new value and keep the old one as ``superseded`` (never delete-without-add).

        The new version records ``wasRevisionOf`` the old; the old one's descendants become suspect.
        Keyword arguments are those of :meth:`remember`; kind, tags, slot and metadata default to the old ones.

        Returns:
            A report with ``memory`` (the new version) and ``suspect``.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
            InvalidInputError: the old memory is not live (already superseded, retracted, erased...).
            PolicyViolationError: an update policy denied it (e.g. a tool overwriting a user assertion).
        """
        scope = Scope.coerce(scope)
        old = self.require(old_id, scope=scope)
        if old.status.value not in _LIVE:
            msg = f"memory {old_id!r} is {old.status.value}; supersede its newest version instead"
            raise InvalidInputError(msg)
        params = {
            "kind": old.kind,
            "tags": old.tags,
            "metadata": old.metadata,
            "slot": old.slot,
            "valid_from": None,
            **kwargs,
        }
        d = self._draft(content=new_content, scope=_write_scope(scope, old.scope), source=source, **params)
        self._check_operation("update", [old], scope=scope, source=d.source)
        with self.ledger.read() as conn:
            self._check_premises([d], conn)
            if d.derived_from:
                desc = self.ledger.walk([old_id], direction="descendants", conn=conn)
                if old_id in d.derived_from or desc.keys() & set(d.derived_from):
                    msg = f"the new version of {old_id!r} cannot derive from the old one or its descendants"
                    raise LineageCycleError(msg)
            d.supersedes = self.ledger.memory_rows([old_id], conn)[0]
        if d.embedding is None:
            d.embedding = self._embed([d.content])[0]
        d.force = True  # an explicit revision is always stored; a value model only scores it
        self._value_gate([d], [d], [None], self.clock())
        with self._write_mutex:
            current = self.ledger.memory_rows([old_id])[0]
            if current is None or current["status"] not in _LIVE:
                msg = f"memory {old_id!r} was superseded or invalidated meanwhile; supersede its newest version"
                raise InvalidInputError(msg)
            (new,), suspect = self._persist([d], self.clock())
        self._sync_index([new.id])
        return CascadeReport(
            target=old_id, action="supersede", suspect=suspect, memory=self.get(new.id, scope=scope),
            attribution=self._cascade_attribution(old_id, suspect),
        )  # fmt: skip

    def revise(
        self,
        memory_id: str,
        content: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        source: Source | str | None = None,
        **kwargs: Any,
    ) -> Memory:
        """Write a new version of a memory (``wasRevisionOf``); same as :meth:`supersede` but returns the memory.

        A revision keeps the old version's provenance unless told otherwise: ``source`` defaults to the old
        version's source and ``derived_from`` to its premises (those not erased), so its trust stays the minimum
        over them (a revision never launders an untrusted premise).

        Raises:
            See :meth:`supersede`.
        """
        old = self.require(memory_id, scope=scope)
        if "derived_from" not in kwargs and old.derived_from:
            live = self.ledger.statuses(list(old.derived_from))
            kwargs["derived_from"] = [p for p in old.derived_from if live.get(p) not in (None, Status.ERASED.value)]
        report = self.supersede(memory_id, content, scope=scope, source=old.source if source is None else source,
                                **kwargs)  # fmt: skip
        assert report.memory is not None
        return report.memory

    def revalidate(
        self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "revalidated"
    ) -> Memory:
        """Mark a ``suspect`` (or ``expired``) memory active again after it was checked.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
            InvalidInputError: the memory is not suspect or expired.
        """
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        mem = self.require(memory_id, scope=scope)
        if mem.status not in (Status.SUSPECT, Status.EXPIRED):
            msg = f"memory {memory_id!r} is {mem.status.value}; only suspect or expired memories can be revalidated"
            raise InvalidInputError(msg)
        self._check_operation("update", [mem], scope=scope)
        t = to_epoch(self.clock())
        with self.ledger.transaction() as conn:
            self.ledger.update_memories(
                conn, [memory_id], {"status": Status.ACTIVE.value, "invalidated_at": None, "index_state": "stale"}
            )
            self.ledger.insert_events(
                conn, [_event(t, "revalidated", memory_id, None, mem.scope.user_id, {"reason": reason})]
            )
        self._sync_index([memory_id])
        return self.require(memory_id, scope=scope)

    def undo(
        self, decision_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "decision undone"
    ) -> Memory:
        """Reverse an automatic update decision (``update`` or ``contradict``) made by update detection.

        The memory the decision superseded or retracted is active again, every memory that the decision's cascade
        made suspect and that is still suspect is active again, and the decision activity's outcome becomes
        ``undone``. For an undone ``update`` the two statements are taken to be about different attributes: the
        restored memory gives up its slot, the newer one keeps it. Decision ids are in ``explain(...).decisions``
        and in the ``audit`` events.

        Args:
            decision_id: Id of the ``update_detection`` activity.
            scope: Caller's scope; must own the decision.
            reason: Why (kept in the event log).

        Returns:
            The restored memory.

        Raises:
            MemoryNotFoundError: no such decision in the scope.
            InvalidInputError: already undone, a ``duplicate`` decision (nothing was stored to restore), or the
                memory changed since (it is no longer in the state the decision left it in).
        """
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        row = self.ledger.activity_rows([check_id(decision_id, "decision_id")])[0]
        if row is None or row["kind"] != "update_detection" or row["user_id"] != scope.user_id:
            msg = f"no update decision {decision_id!r} in this scope; see explain(...).decisions"
            raise MemoryNotFoundError(msg)
        if row["outcome"] == "undone":
            msg = f"decision {decision_id!r} was already undone"
            raise InvalidInputError(msg)
        meta = dict(row["meta"] or {})
        if row["name"] not in (Action.UPDATE.value, Action.CONTRADICT.value):
            msg = f"a {row['name']} decision stored nothing that could be restored; remember the statement again"
            raise InvalidInputError(msg)
        target = str(meta.get("target"))
        mem = self.require(target, scope=scope)
        expected = Status.SUPERSEDED if row["name"] == Action.UPDATE.value else Status.RETRACTED
        if mem.status is not expected:
            msg = f"memory {target!r} is {mem.status.value} now, not {expected.value}; it changed since the decision"
            raise InvalidInputError(msg)
        now = self.clock()
        t = to_epoch(now)
        with self.ledger.transaction() as conn:
            marked = conn.execute(
                select(events.c.memory_id).where(events.c.activity_id == decision_id, events.c.type == "suspect")
            ).all()
            statuses = self.ledger.statuses([m[0] for m in marked if m[0]], conn)
            restored = sorted(m for m, st in statuses.items() if st == Status.SUSPECT.value)
            values: dict[str, Any] = {"status": Status.ACTIVE.value, "invalidated_at": None, "index_state": "stale"}
            if expected is Status.SUPERSEDED:
                values["slot"] = None
            self.ledger.update_memories(conn, [target], values)
            if restored:
                self.ledger.update_memories(conn, restored, {"status": Status.ACTIVE.value, "index_state": "stale"})
            data = {"reason": reason, "decision": decision_id}
            self.ledger.insert_events(
                conn,
                [_event(t, "decision_undone", target, decision_id, scope.user_id, data)]
                + [_event(t, "revalidated", m, decision_id, scope.user_id, data) for m in restored],
            )
            self.ledger.upsert_activity(
                conn, _row_activity(row).model_copy(update={"outcome": "undone", "metadata": {**meta, "undo": reason}})
            )
        self._sync_index([target, *restored])
        return self.require(target, scope=scope)

    def forget(
        self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str, reason: str = "forgotten",
        source: Source | str | None = None,
    ) -> Memory:  # fmt: skip
        """Archive a memory: out of the index, kept in the ledger (its descendants are not affected).

        ``source`` is who asks (see :meth:`retract`); None = the application itself.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
            PolicyViolationError: a delete policy denied it (e.g. an agent forgetting a user assertion).
        """
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        src = Source.parse(source) if source is not None else None
        mem = self.require(memory_id, scope=scope)
        self._check_operation("delete", [mem], scope=scope, source=src)
        self._archive([memory_id], reason)
        return self.require(memory_id, scope=scope)

    def _archive(self, ids: Sequence[str], reason: str) -> None:
        if not ids:
            return
        t = to_epoch(self.clock())
        rows = [r for r in self.ledger.memory_rows(list(ids)) if r]
        with self.ledger.transaction() as conn:
            self.ledger.update_memories(
                conn, [r["id"] for r in rows], {"status": Status.ARCHIVED.value, "index_state": "removing"}
            )
            self.ledger.insert_events(
                conn, [_event(t, "archived", r["id"], None, r["user_id"], {"reason": reason}) for r in rows]
            )
        self._sync_index([r["id"] for r in rows])

    def erase(
        self, memory_id: str | None = None, *, scope: Scope | Mapping[str, Any] | str, reason: str = "erasure request",
        source: Source | str | None = None,
    ) -> ErasureReceipt:  # fmt: skip
        """Redact content in the ledger and the index; keep the events (without content) and return a receipt.

        With ``memory_id``: that memory and every version in its revision chain. Without: every memory in
        ``scope`` (all of the user's memories, or one agent's / session's when the scope names one), plus the
        scope's activity metadata. Consolidated summaries derived from what is erased are erased with it (their
        text restates it); other descendants outside the erased set become suspect. ``source`` is who asks (see
        :meth:`retract`); None = the application itself.

        Raises:
            MemoryNotFoundError: ``memory_id`` is not in the scope.
            PolicyViolationError: a delete policy denied it.
        """
        scope = Scope.coerce(scope)
        reason = check_text(reason, "reason")
        src = Source.parse(source) if source is not None else None
        now = self.clock()
        t = to_epoch(now)
        if memory_id is not None:
            mem = self.require(memory_id, scope=scope)
            ids = self._revision_chain(mem.id)
        else:
            with self.ledger.read() as conn:
                ids = self.ledger.ids_in_scope(scope, conn=conn, session_only=scope.session_id is not None)
                if scope.agent_id is not None:
                    rows = self.ledger.memory_rows(ids, conn)
                    ids = [r["id"] for r in rows if r and r["agent_id"] == scope.agent_id]
        ids = [*ids, *self._derived_summaries(ids)]
        mems = [m for m in self.ledger.memories(ids) if m is not None]
        self._check_operation("delete", mems, scope=scope, source=src)
        if memory_id is None:
            self._value_erase(scope)  # buffered (never stored) candidates of the scope go too
        suspects: list[str] = []
        acts = 0
        with self.ledger.transaction() as conn:
            for m in mems:
                if m.status is not Status.ERASED:
                    s, _ = self._invalidate(conn, m.id, Status.ERASED, now, reason=reason)
                    suspects.extend(x for x in s if x not in ids)
            self.ledger.update_memories(
                conn,
                ids,
                {
                    "content": "", "content_hash": "erased", "meta": {}, "tags": [], "embedding": None,
                    "assessment": None, "slot": None, "status": Status.ERASED.value, "index_state": "removing",
                    "context_hash": None,
                },
            )  # fmt: skip
            redacted = self._redact_events(conn, ids)
            if memory_id is None:
                acts = self._redact_activities(conn, scope)
            self.ledger.insert_events(
                conn,
                [_event(t, "erasure_receipt", None, None, scope.user_id, {"memories": len(ids), "reason": reason})],
            )
        removed = self._sync_index([*ids, *dict.fromkeys(suspects)])  # descendants made suspect need a sync too
        self._compact(ids)
        return ErasureReceipt(
            user_id=scope.user_id,
            memory_ids=list(ids),
            index_entries_removed=removed,
            events_redacted=redacted,
            activities_redacted=acts,
            suspect=sorted(set(suspects)),
            erased_at=now.isoformat(),
        )

    def _revision_chain(self, mid: str) -> list[str]:
        chain = [mid]
        rows = self.ledger.memory_rows([mid])
        row = rows[0]
        while row and row["supersedes"]:
            chain.append(row["supersedes"])
            row = self.ledger.memory_rows([row["supersedes"]])[0]
        frontier = [mid]
        with self.ledger.read() as conn:
            while frontier:
                nxt = [r[0] for r in conn.execute(select(memories.c.id).where(memories.c.supersedes.in_(frontier)))]
                nxt = [n for n in nxt if n not in chain]
                chain.extend(nxt)
                frontier = nxt
        return chain

    def _redact_events(self, conn: Connection, ids: Sequence[str]) -> int:
        n = 0
        for start in range(0, len(ids), 900):
            chunk = list(ids[start : start + 900])
            res = conn.execute(update(events).where(events.c.memory_id.in_(chunk)).values(data={"redacted": True}))
            n += res.rowcount or 0
        return n

    def _redact_activities(self, conn: Connection, scope: Scope) -> int:
        cond = [activities.c.user_id == scope.user_id]
        if scope.agent_id is not None:
            cond.append(activities.c.agent_id == scope.agent_id)
        if scope.session_id is not None:
            cond.append(activities.c.session_id == scope.session_id)
        res = conn.execute(update(activities).where(*cond).values(meta={"redacted": True}))
        return res.rowcount or 0

    def _derived_summaries(self, ids: Sequence[str]) -> list[str]:
        """Consolidated summaries derived (transitively) from ``ids``: their text restates what is erased."""
        found = self.ledger.walk(list(ids), direction="descendants")
        rows = self.ledger.memory_rows(sorted(set(found) - set(ids)), embedding=False)
        return [r["id"] for r in rows if r and r["source_kind"] == SourceKind.CONSOLIDATION.value]

    def _compact(self, ids: Sequence[str] = ()) -> None:
        """Make redactions physical after an erasure.

        Drops the index's log records of ``ids`` (embedded Chroma), then checkpoints and truncates SQLite's WAL
        (``secure_delete`` zeroes freed cells).
        """
        purge = getattr(self.index, "purge_log", None)
        if callable(purge) and ids:
            purge(ids)
        if self.ledger.is_sqlite:
            with self.ledger.transaction() as conn:
                conn.exec_driver_sql("SELECT 1")
            with self.ledger.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    def expire_due(self, *, scope: Scope | Mapping[str, Any] | str | None = None) -> list[str]:
        """Mark memories whose TTL has passed as ``expired`` (descendants become suspect).

        Args:
            scope: Only this scope's memories; ``None`` = every scope (maintenance jobs).

        Returns:
            The ids that expired now.
        """
        t = to_epoch(self.clock())
        cond = [memories.c.expires_at.is_not(None), memories.c.expires_at <= t, memories.c.status.in_(_LIVE)]
        if scope is not None:
            cond.append(memories.c.user_id == Scope.coerce(scope).user_id)
        with self.ledger.read() as conn:
            due = [r[0] for r in conn.execute(select(memories.c.id).where(*cond))]
        return self._expire(due)

    def _expire(self, ids: Sequence[str], reason: str = "ttl elapsed") -> list[str]:
        if not ids:
            return []
        now = self.clock()
        touched: list[str] = []
        with self.ledger.transaction() as conn:
            for mid in ids:
                suspect, _ = self._invalidate(conn, mid, Status.EXPIRED, now, reason=reason)
                touched.extend([mid, *suspect])
        self._sync_index(touched)
        return list(ids)

    # ================================================================== reads
    def get(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Memory | None:
        """The memory version with this id, or ``None`` when absent or in another scope.

        Raises:
            InvalidInputError: bad id or scope.
        """
        return self.get_many([memory_id], scope=scope)[0]

    def get_many(self, ids: Sequence[str], *, scope: Scope | Mapping[str, Any] | str) -> list[Memory | None]:
        """Batch :meth:`get`, aligned with ``ids`` (``None`` for misses and other scopes' memories)."""
        scope = Scope.coerce(scope)
        wanted = list(ids) if not isinstance(ids, str) else [ids]
        unique = list(_ids(wanted, "ids"))  # validated and de-duplicated; the answer stays aligned with ``ids``
        found = dict(zip(unique, self.ledger.memories(unique)))
        return [m if (m := found[i]) is not None and scope.contains(m.scope) else None for i in wanted]

    def require(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Memory:
        """Like :meth:`get` but raises.

        Raises:
            MemoryNotFoundError: no memory with that id in the scope (other scopes' memories are reported as
                not found, never as existing).
        """
        mem = self.get(memory_id, scope=scope)
        if mem is None:
            msg = f"no memory {memory_id!r} in this scope; check the id and the scope's user_id"
            raise MemoryNotFoundError(msg)
        return mem

    def find(
        self,
        *,
        scope: Scope | Mapping[str, Any] | str,
        slot: str | None = None,
        tags: Iterable[str] | None = None,
        kinds: Iterable[MemoryKind | str] | None = None,
        include_suspect: bool = True,
        session_only: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Memory]:
        """Live memories in ``scope`` matching exact criteria, oldest first; no query, no ranking, no reinforcement.

        Use it to look a memory up by its slot key (``find(scope=s, slot="user/seat")[-1]`` is the current value)
        or to list a session's memories; use :meth:`recall` to search by meaning.

        Args:
            scope: Caller's scope; only its memories are listed.
            slot: Only memories holding this semantic slot key.
            tags: Memories must carry all these tags.
            kinds: Restrict to these memory kinds.
            include_suspect: Also list ``suspect`` memories (default); otherwise ``active`` only.
            session_only: Only memories written in ``scope.session_id``.
            limit: At most this many (``None`` = all).
            offset: Skip this many first.

        Raises:
            InvalidInputError: bad scope, kinds, limit or offset.
        """
        scope = Scope.coerce(scope)
        for name, value in (("limit", limit), ("offset", offset)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                msg = f"{name} must be a non-negative int, got {value!r}"
                raise InvalidInputError(msg)
        kind_values = _kind_values(kinds)
        if slot is not None:
            check_id(slot, "slot")
        wanted_tags = set(normalize_tags(tags))
        statuses = list(_LIVE) if include_suspect else [Status.ACTIVE.value]
        cond = [memories.c.user_id == scope.user_id, memories.c.status.in_(statuses)]
        if scope.agent_id is not None:
            cond.append(memories.c.agent_id.is_(None) | (memories.c.agent_id == scope.agent_id))
        if session_only and scope.session_id is not None:
            cond.append(memories.c.session_id == scope.session_id)
        if slot is not None:
            cond.append(memories.c.slot == slot)
        if kind_values is not None:
            cond.append(memories.c.kind.in_(kind_values))
        query = select(memories.c.id, memories.c.tags).where(*cond).order_by(memories.c.recorded_at, memories.c.id)
        with self.ledger.read() as conn:
            ids = [r[0] for r in conn.execute(query) if wanted_tags <= set(r[1] or ())]
        ids = ids[offset:] if limit is None else ids[offset : offset + limit]
        return [m for m in self.ledger.memories(ids) if m is not None]

    def slots(
        self,
        *,
        scope: Scope | Mapping[str, Any] | str | None = None,
        prefix: str = "",
        admin: tuple[str, str] | None = None,
    ) -> list[tuple[str, str]]:
        """Distinct ``(user_id, slot)`` keys held by live memories, sorted; keys only, never content.

        Args:
            scope: Only this scope's slots. ``None`` lists every user's keys, which is a cross-user read: it
                needs ``admin``.
            prefix: Only slot keys starting with this string.
            admin: ``(actor, reason)`` for a cross-user listing; recorded as an ``admin_access`` event.

        Raises:
            ScopeViolationError: ``scope`` is None and no ``admin`` actor and reason were given.
        """
        cond = [memories.c.slot.is_not(None), memories.c.status.in_(list(_LIVE))]
        if scope is None:
            actor, reason = admin or ("", "")
            if not (isinstance(actor, str) and actor.strip() and isinstance(reason, str) and reason.strip()):
                msg = "listing slots across users is an admin read: pass scope=..., or admin=(actor, reason)"
                raise ScopeViolationError(msg)
            data = {"actor": actor, "reason": reason, "operation": "slots", "prefix": prefix}
            with self.ledger.transaction() as conn:
                # no user owns a cross-user listing: user_id NULL, which no scope's audit matches
                event = _event(to_epoch(self.clock()), "admin_access", None, None, None, data)
                self.ledger.insert_events(conn, [event])
        if scope is not None:
            s = Scope.coerce(scope)
            cond.append(memories.c.user_id == s.user_id)
            if s.agent_id is not None:
                cond.append(memories.c.agent_id.is_(None) | (memories.c.agent_id == s.agent_id))
        if prefix:
            cond.append(memories.c.slot.startswith(prefix, autoescape=True))
        query = select(memories.c.user_id, memories.c.slot).where(*cond).distinct()
        with self.ledger.read() as conn:
            return sorted((r[0], r[1]) for r in conn.execute(query))

    async def afind(self, **kwargs: Any) -> list[Memory]:
        """Async :meth:`find`."""
        return await asyncio.to_thread(self.find, **kwargs)

    async def aslots(self, **kwargs: Any) -> list[tuple[str, str]]:
        """Async :meth:`slots`."""
        return await asyncio.to_thread(self.slots, **kwargs)

    def recall(
        self,
        query: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        k: int = 5,
        kinds: Iterable[MemoryKind | str] | None = None,
        tags: Iterable[str] | None = None,
        include_suspect: bool = False,
        purpose: str | None = None,
        session_only: bool = False,
        activity_id: str | None = None,
        trace: bool = False,
        reinforce: bool = True,
        budget: float | None = None,
    ) -> RecallResult:
        """Retrieve the ``k`` best memories for ``query`` within ``scope`` (the retrieval gate).

        Candidates come from the index filtered by scope and status inside the query; read policies run before
        the top-k cut (so ``k`` results come back whenever ``k`` eligible memories exist); a final guard re-checks
        scope and status against the ledger; served memories are reinforced.

        Args:
            query: Query text; non-empty.
            scope: Caller's scope; only its memories are considered.
            k: Number of results, >= 0.
            kinds: Restrict to these memory kinds.
            tags: Memories must carry all these tags.
            include_suspect: Also serve ``suspect`` memories (flagged); ignored for ``purpose="decision"``.
            purpose: ``"decision"`` asks for decision-grade memories only (policies may be stricter).
            session_only: Only memories written in ``scope.session_id``.
            activity_id: The run that reads; records ``used`` edges from it to every served memory.
            trace: Keep timings and full exclusion details (off by default in hot paths).
            reinforce: Update last use and use count of served memories.
            budget: Refresh budget in policy cost units (>= 0; None = unlimited); a refresh costing more than
                what is left serves the stale memory flagged ``stale`` instead.

        Returns:
            A :class:`~memlineage.retrieval.RecallResult`, best first; ``hit.score`` in [0, 1], higher = better.

        Raises:
            InvalidInputError: bad query, k, kinds or scope.
        """
        query = check_text(query, "query")
        scope = Scope.coerce(scope)
        _check_read_args(k=k, purpose=purpose, budget=budget, activity_id=activity_id)
        kind_values = _kind_values(kinds)
        statuses = [Status.ACTIVE.value]
        if include_suspect and purpose != "decision":
            statuses.append(Status.SUSPECT.value)
        where = IndexFilter(
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            session_id=scope.session_id if session_only else None,
            statuses=tuple(statuses),
            kinds=kind_values,
            tags=normalize_tags(tags),
        )
        tr = Trace(query=query, k=k)
        if k == 0:
            return RecallResult([], tr)
        now = self.clock()
        # Expire what is past its TTL first, so conclusions derived from it are already suspect when ranked.
        self.expire_due(scope=scope)
        hits = hybrid_recall(
            query,
            k=k,
            where=where,
            scope=scope,
            now=now,
            query_vector=lambda: self._embed([query])[0],
            vector_index=self.index,
            lexical_index=self.lexical,
            load=self.ledger.memories,
            trace=tr,
            config=self.retrieval,
            candidate_filter=self.read_filter,
            read_filter=lambda c: self._filter_read(
                c, scope=scope, purpose=purpose, query=query, trace=tr, budget=budget
            ),
            expire=self._expire,
            value_of=None if self.value_model is not None else (lambda m, _now: m.value),
        )
        hits = _policy_hits(self.policy, hits, tr)
        hits = self._value_rerank(hits, now)
        hits.sort(key=lambda h: (-h.score, h.memory.id))
        # two live values of one attribute: the later event ranks first (among the hits that can reach the top k)
        window = max(2 * k, k + 10)
        hits = (newest_first(hits[:window]) + hits[window:])[:k]
        if hits and (reinforce or activity_id):
            self._mark_used([h.memory for h in hits], activity_id, now)
        return RecallResult(hits, tr)

    def _filter_read(
        self,
        candidates: list[tuple[Memory, float]],
        *,
        scope: Scope,
        purpose: str | None,
        query: str,
        trace: Trace,
        budget: float | None = None,
    ) -> list[tuple[Memory, float]]:
        """Hook: read policies drop or flag candidates before the top-k cut (no policy engine: keep all)."""
        if self.policy is None:
            return candidates
        from memlineage.policy._enforce import enforce_read

        return enforce_read(self, candidates, scope=scope, purpose=purpose, query=query, trace=trace, budget=budget)

    def _check_operation(
        self, operation: str, memories: Sequence[Memory], *, scope: Scope, source: Source | None = None
    ) -> None:
        """Hook: update / delete policies (no policy engine: allow)."""
        if self.policy is not None:
            from memlineage.policy._enforce import enforce_operation

            enforce_operation(self, operation, memories, scope=scope, source=source)

    def admin_recall(
        self,
        query: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        actor: str,
        reason: str,
        **kwargs: Any,
    ) -> RecallResult:
        """Explicit, audited cross-scope read: recall in ``scope`` (another user's) on behalf of an operator.

        Writes an ``admin_access`` event (actor, reason, SHA-256 of the query) to that user's log before reading;
        every other read and write stays confined to its caller's scope. Keyword arguments are those of
        :meth:`recall`.

        Raises:
            InvalidInputError: ``actor`` or ``reason`` is empty, or a bad recall argument.
        """
        from memlineage.policy._enforce import admin_recall

        return admin_recall(self, query, scope=Scope.coerce(scope), actor=actor, reason=reason, **kwargs)

    def _mark_used(self, mems: Sequence[Memory], activity_id: str | None, now: datetime) -> None:
        t = to_epoch(now)
        ids = sorted(m.id for m in mems)
        self._value_reinforce(ids, now)
        try:
            with self.ledger.transaction() as conn:
                conn.execute(
                    update(memories)
                    .where(memories.c.id.in_(ids))
                    .values(use_count=memories.c.use_count + 1, last_used_at=t)
                )
                if activity_id:
                    user = mems[0].scope.user_id
                    self.ledger.insert_edges(conn, [_edge(activity_id, m.id, Relation.USED, t, user) for m in mems])
        except StorageError as exc:
            # Usage bookkeeping must never fail a read (e.g. a PostgreSQL deadlock with a concurrent cascade).
            logger.warning("could not record the use of %d memories: %s", len(ids), exc)

    def ancestors(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> list[Memory]:
        """Every premise of the memory, transitively, nearest first.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
        """
        scope = Scope.coerce(scope)
        self.require(memory_id, scope=scope)
        depth = self.ledger.walk([memory_id], direction="ancestors")
        ordered = sorted(depth, key=lambda i: (depth[i], i))
        return [m for m in self.ledger.memories(ordered) if m is not None and scope.contains(m.scope)]

    def descendants(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> list[Memory]:
        """Every memory derived from this one, transitively, nearest first.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
        """
        scope = Scope.coerce(scope)
        self.require(memory_id, scope=scope)
        depth = self.ledger.walk([memory_id], direction="descendants")
        ordered = sorted(depth, key=lambda i: (depth[i], i))
        return [m for m in self.ledger.memories(ordered) if m is not None and scope.contains(m.scope)]

    def explain(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Explanation:
        """The provenance chain of a memory down to its source memories and activities.

        Returns:
            An :class:`~memlineage.lineage.Explanation` with ``to_text()``, ``to_mermaid()``, ``to_dot()`` and
            ``to_prov_json()``.

        Raises:
            MemoryNotFoundError: no such memory in the scope.
        """
        scope = Scope.coerce(scope)
        mem = self.require(memory_id, scope=scope)
        depth = self.ledger.walk([memory_id], direction="ancestors")
        ordered = sorted(depth, key=lambda i: (depth[i], i))
        ancestors = [m for m in self.ledger.memories(ordered) if m is not None and scope.contains(m.scope)]
        shown = {mem.id, *(a.id for a in ancestors)}
        edges: list[tuple[str, str, str]] = []
        act_ids: list[str] = []
        attribution: dict[tuple[str, str], str] = {}
        for e in self.ledger.edges_touching(sorted(shown)):
            rel = e["relation"]
            if rel in (Relation.WAS_DERIVED_FROM.value, Relation.WAS_REVISION_OF.value) and e["dst"] in shown:
                edges.append((e["src"], rel, e["dst"]))
                if e.get("attribution"):
                    attribution[(e["src"], e["dst"])] = e["attribution"]
            elif rel == Relation.WAS_GENERATED_BY.value:
                edges.append((e["src"], rel, e["dst"]))
                act_ids.append(e["dst"])
        activities: list[Activity] = []
        seen: set[str] = set()
        frontier = list(dict.fromkeys(act_ids))
        while frontier:
            rows = [r for r in self.ledger.activity_rows(frontier, user_id=scope.user_id) if r and r["id"] not in seen]
            frontier = []
            for r in rows:
                if r["user_id"] not in (None, scope.user_id) or r["id"] in seen:
                    continue
                seen.add(r["id"])
                activities.append(_row_activity(r))
                if r["parent_id"]:
                    edges.append((r["id"], Relation.WAS_INFORMED_BY.value, r["parent_id"]))
                    if r["parent_id"] not in seen and r["parent_id"] not in frontier:
                        frontier.append(r["parent_id"])
        revisions, decisions, extra = self._explain_decisions(mem, shown, scope)
        activities.extend(decisions)
        known = shown | seen | {r.id for r in revisions} | {a.id for a in decisions}
        edges = [e for e in dict.fromkeys([*edges, *extra]) if e[2] in known and e[0] in known]
        return Explanation(
            memory=mem, ancestors=ancestors, edges=edges, activities=activities, depth=depth, revisions=revisions,
            decisions=decisions, attribution=attribution,
        )  # fmt: skip

    def _explain_decisions(
        self, mem: Memory, shown: set[str], scope: Scope
    ) -> tuple[list[Memory], list[Activity], list[tuple[str, str, str]]]:
        """Earlier versions of ``mem`` and the update decisions touching what ``explain`` shows."""
        revisions: list[Memory] = []
        row = self.ledger.memory_rows([mem.id])[0]
        while row is not None and row["supersedes"] and len(revisions) < 20:
            row = self.ledger.memory_rows([row["supersedes"]])[0]
            if row is None or row["user_id"] != scope.user_id:
                break
            revisions.append(row_to_memory(row))
        ids = sorted(shown | {r.id for r in revisions})
        edges: list[tuple[str, str, str]] = []
        act_ids: list[str] = []
        touching = self.ledger.edges_touching(ids) + self.ledger.edges_into(ids, Relation.USED.value)
        for e in touching:
            if e["relation"] == Relation.WAS_INVALIDATED_BY.value and e["src"] in ids:
                edges.append((e["src"], e["relation"], e["dst"]))
                act_ids.append(e["dst"])
            elif e["relation"] == Relation.USED.value and e["dst"] in ids:
                edges.append((e["src"], e["relation"], e["dst"]))
                act_ids.append(e["src"])
            elif e["relation"] == Relation.WAS_REVISION_OF.value and e["src"] in ids:
                edges.append((e["src"], e["relation"], e["dst"]))
        decisions = [
            _row_activity(r)
            for r in self.ledger.activity_rows(list(dict.fromkeys(act_ids)))
            if r and r["kind"] == "update_detection" and r["user_id"] == scope.user_id
        ]
        return revisions, decisions, edges

    def audit(
        self,
        scope: Scope | Mapping[str, Any] | str,
        *,
        memory_id: str | None = None,
        types: Iterable[str] | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """The scope's events, oldest first (``created``, ``seen_again``, ``suspect``, ``retracted``, ...).

        Raises:
            MemoryNotFoundError: ``memory_id`` is not in the scope.
        """
        scope = Scope.coerce(scope)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT):
            msg = f"limit must be None or an int from 0 to {MAX_LIMIT}, got {limit!r:.40}"
            raise InvalidInputError(msg)
        if types is not None:
            types = [types] if isinstance(types, str) else types
            if not isinstance(types, Iterable) or not all(isinstance(t, str) for t in types):
                msg = f"types must be a list of event type names such as ['created', 'retracted'], got {types!r}"
                raise InvalidInputError(msg)
        if memory_id is not None:
            self.require(memory_id, scope=scope)
        return self.ledger.events(user_id=scope.user_id, memory_id=memory_id, types=types, limit=limit)

    def stats(self, scope: Scope | Mapping[str, Any] | str | None = None) -> dict[str, Any]:
        """Counts per status, kind and source, edges, activities, events and index size."""
        user = Scope.coerce(scope).user_id if scope is not None else None
        out = self.ledger.counts(user)
        if user is None:
            out["index_entries"] = self.index.count()
        return out

    # ================================================================== value model (memlineage.value)
    # Thin hooks: the logic lives in memlineage.value and memlineage.consolidation; each is a no-op without a
    # value model, so the core store behaves as before when none is configured.
    def _value_prepare(self, drafts: Sequence[_Draft]) -> None:
        from memlineage import value

        value.prepare_drafts(self, drafts)

    def _value_gate(
        self, drafts: Sequence[_Draft], todo: list[_Draft], results: list[Memory | None], now: datetime
    ) -> list[_Draft]:
        from memlineage import value

        return value.gate_drafts(self, drafts, todo, results, now)

    def _value_rerank(self, hits: list[RecallHit], now: datetime) -> list[RecallHit]:
        """Retrieval hook: ``similarity·(1−w) + V_eff·w`` (w = 0.3) with a value model; else unchanged."""
        from memlineage import value

        return value.rerank_hits(self, hits, now)

    def _value_reinforce(self, ids: Sequence[str], now: datetime) -> None:
        from memlineage import value

        value.reinforce(self, ids, now)

    def _value_flush(self) -> None:
        if self.value_model is not None:
            from memlineage import value

            value.flush(self)

    def _value_erase(self, scope: Scope) -> None:
        if self.value_model is not None:
            from memlineage import value

            value.runtime(self).buffer.clear_scope(scope)

    def flush_reinforcement(self) -> int:
        """Write pending value reinforcements (+0.05 per use) now; returns the number of memories written."""
        from memlineage import value

        return value.flush(self)

    def buffered(self, scope: Scope | Mapping[str, Any] | str) -> list[Any]:
        """The session's short-term buffer: what the write gate kept out of long-term memory, oldest first.

        Returns:
            :class:`~memlineage.value.BufferedItem` list (empty without a value model or session).
        """
        scope = Scope.coerce(scope)
        if self.value_model is None:
            return []
        from memlineage import value

        return value.runtime(self).buffer.items(scope)

    def sweep(self, *, now: datetime | None = None, scope: Scope | Mapping[str, Any] | str | None = None) -> Any:
        """The forget gate: archive memories whose decayed value ``V_eff`` fell below the threshold (0.2).

        Archived memories leave the index and stay in the ledger with an ``archived`` event saying why. A
        memory that live memories still derive from is kept and reported in ``protected``.

        Args:
            now: Time to evaluate decay at (default: the clock); pass a future time to simulate.
            scope: Only this user's memories; None = all users (maintenance job).

        Returns:
            A :class:`~memlineage.value.SweepReport` (``archived`` ids with V_eff, ``protected`` ids with
            their live dependants, ``checked``).
        """
        from memlineage import value

        at = as_utc(now, "now") if now is not None else None
        return value.sweep(self, now=at, scope=Scope.coerce(scope) if scope is not None else None)

    def consolidate(
        self,
        scope: Scope | Mapping[str, Any] | str,
        session_id: str | None = None,
        summarizer: Any = None,
        *,
        require_overlap: bool = True,
    ) -> Any:
        """Summarise a session into cited semantic memories (seed 002 citation check).

        Args:
            scope: Owner; its ``session_id`` is used when ``session_id`` is None.
            session_id: The session to consolidate.
            summarizer: A LangChain chat model, a LlamaIndex LLM, a callable ``prompt -> str`` or an object
                with ``summarize(messages) -> str``; None = the offline
                :class:`~memlineage.consolidation.RuleBasedConsolidator`.
            require_overlap: Also reject lines sharing no content term with the messages they cite.

        Returns:
            A :class:`~memlineage.consolidation.ConsolidationResult`: ``memories`` written (each
            ``wasDerivedFrom`` the messages it cites), ``accepted`` and ``rejected`` lines with reasons.

        Raises:
            InvalidInputError: no session given.
        """
        from memlineage.consolidation import consolidate_session

        return consolidate_session(self, scope, session_id, summarizer, require_overlap=require_overlap)

    def slot_history(self, slot: str, *, scope: Scope | Mapping[str, Any] | str) -> list[Memory]:
        """Every version that ever held a semantic slot in the scope, oldest first (superseded included)."""
        scope = Scope.coerce(scope)
        rows = self.ledger.slot_versions(scope.user_id, scope.agent_id, check_id(slot, "slot"))
        return [m for m in self.ledger.memories([r["id"] for r in rows]) if m is not None]

    def slot_value(
        self, slot: str, *, scope: Scope | Mapping[str, Any] | str, as_of: datetime | None = None
    ) -> Memory | None:
        """Point-in-time read of a slot: the version that held it at ``as_of`` (system time; default now).

        A version holds the slot from its ``recorded_at`` until its ``invalidated_at`` (superseded,
        retracted...).

        Returns:
            That memory, or ``None`` when the slot was empty then.
        """
        at = as_utc(as_of, "as_of") if as_of is not None else self.clock()
        held = None
        for m in self.slot_history(slot, scope=scope):
            if m.recorded_at <= at and (m.invalidated_at is None or m.invalidated_at > at):
                if m.status not in (Status.ERASED,):
                    held = m
        return held

    # ================================================================== activities
    def record_activity(self, activity: Activity, *, scope: Scope | Mapping[str, Any] | str | None = None) -> Activity:
        """Insert or update an activity (agent run, LLM call, tool call...) owned by a scope.

        The activity's ``id`` is MemLineage's key: an id already used by another user is refused, so a run can
        never take over another user's activity. Framework ids go into ``run_id`` / ``tool_call_id``, which are
        unique per user and run (:meth:`find_activities` looks them up).

        Args:
            activity: The activity; ``activity.scope`` is its owner unless ``scope`` is given.
            scope: Owner (required unless ``activity.scope`` is set; must agree with it when both are).

        Returns:
            The stored activity (with its scope).

        Raises:
            InvalidInputError: ``activity`` is not an :class:`Activity`, no scope is given, or another activity of
                the user already has this ``run_id`` and ``tool_call_id``.
            ScopeViolationError: the id belongs to another user's activity, or ``scope`` and ``activity.scope``
                name different users.
        """
        if not isinstance(activity, Activity):
            msg = f"record_activity() takes an Activity, not {type(activity).__name__}"
            raise InvalidInputError(msg)
        owner = _activity_owner(activity, scope)
        if activity.scope != owner:
            activity = activity.model_copy(update={"scope": owner})
        with self.ledger.transaction() as conn:
            row = self.ledger.activity_rows([activity.id], conn)[0]
            if row is not None and row["user_id"] != owner.user_id:
                msg = f"activity id {activity.id!r} is taken by another user's activity; use a new id"
                raise ScopeViolationError(msg)
            if activity.tool_call_id is not None and activity.run_id is not None:
                same = self.ledger.find_activity_rows(
                    owner.user_id, run_id=activity.run_id, tool_call_id=activity.tool_call_id, conn=conn
                )
                if any(r["id"] != activity.id and r["run_id"] == activity.run_id for r in same):
                    msg = (
                        f"tool call {activity.tool_call_id!r} of run {activity.run_id!r} is already recorded; "
                        "find it with find_activities() and update it"
                    )
                    raise InvalidInputError(msg)
            self.ledger.upsert_activity(conn, activity)
            if activity.parent_id and row is None:
                self.ledger.insert_edges(
                    conn,
                    [
                        _edge(
                            activity.id, activity.parent_id, Relation.WAS_INFORMED_BY,
                            to_epoch(activity.started_at) or 0.0, owner.user_id,
                        )
                    ],
                )  # fmt: skip
        return activity

    def activities(
        self,
        scope: Scope | Mapping[str, Any] | str,
        *,
        run_id: str | None = None,
        kinds: Iterable[str] | None = None,
        outcome: str | None = None,
        limit: int | None = None,
    ) -> list[Activity]:
        """The scope's activities (agent runs, LLM calls, tool calls, invalidations), oldest first.

        A read: nothing is written. ``scope.session_id``, when set, narrows to that session.

        Args:
            scope: Whose activities; never another user's.
            run_id: Only this activity and the activities it informed, transitively (``parent_id`` chain): one
                agent run's LLM and tool calls.
            kinds: Only these kinds (``"tool_call"``, ``"llm_call"``, ``"agent_run"``...).
            outcome: Only this outcome (``"error"`` lists failed calls; ``"success"``, ``"unknown"``...).
            limit: Only the last N (>= 0) after filtering.

        Returns:
            :class:`Activity` records, oldest first; ``metadata`` holds the call's input, tool-call id or error.

        Raises:
            InvalidInputError: bad scope, kinds or limit.
            MemoryNotFoundError: ``run_id`` is not an activity of this scope.
        """
        scope = Scope.coerce(scope)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            msg = f"limit must be None or a non-negative int, got {limit!r}"
            raise InvalidInputError(msg)
        kind_set = None
        if kinds is not None:
            kind_set = {kinds} if isinstance(kinds, str) else set(kinds)
            if not all(isinstance(k, str) for k in kind_set):
                msg = f"kinds must be activity kind names such as ['tool_call'], got {kinds!r}"
                raise InvalidInputError(msg)
        rows = self.ledger.activities_of(user_id=scope.user_id, agent_id=scope.agent_id, session_id=scope.session_id)
        if run_id is not None:
            if run_id not in {r["id"] for r in rows}:
                msg = f"no activity {run_id!r} in this scope; list the runs with activities(scope, kinds=['agent_run'])"
                raise MemoryNotFoundError(msg)
            children: dict[str, list[str]] = {}
            for r in rows:
                if r["parent_id"]:
                    children.setdefault(r["parent_id"], []).append(r["id"])
            keep, todo = {run_id}, [run_id]
            while todo:
                for child in children.get(todo.pop(), []):
                    if child not in keep:
                        keep.add(child)
                        todo.append(child)
            rows = [r for r in rows if r["id"] in keep]
        if kind_set is not None:
            rows = [r for r in rows if r["kind"] in kind_set]
        if outcome is not None:
            rows = [r for r in rows if r["outcome"] == outcome]
        if limit is not None:
            rows = rows[len(rows) - limit :] if limit else []
        return [_row_activity(r) for r in rows]

    def get_activity(self, activity_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Activity | None:
        """The activity with this id if it is readable in ``scope`` (same user; same agent when one is named).

        Raises:
            InvalidInputError: bad scope.
        """
        scope = Scope.coerce(scope)
        row = self.ledger.activity_rows([activity_id], user_id=scope.user_id)[0]
        act = _row_activity(row) if row else None
        return act if act is not None and act.scope is not None and scope.contains(act.scope) else None

    def find_activities(
        self,
        scope: Scope | Mapping[str, Any] | str,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
        kind: str | None = None,
        outcome: str | None = None,
        session_only: bool = False,
    ) -> list[Activity]:
        """The scope's activities matching every given filter, oldest first.

        E.g. ``find_activities(alice, run_id=r, outcome="error")`` lists the failed calls of one run.

        Raises:
            InvalidInputError: bad scope.
        """
        scope = Scope.coerce(scope)
        rows = self.ledger.find_activity_rows(
            scope.user_id, run_id=run_id, tool_call_id=tool_call_id, kind=kind, outcome=outcome,
            session_id=scope.session_id if session_only else None,
        )  # fmt: skip
        acts = [_row_activity(r) for r in rows]
        return [a for a in acts if a.scope is not None and scope.contains(a.scope)]

    def end_activity(
        self,
        activity_id: str,
        *,
        scope: Scope | Mapping[str, Any] | str,
        outcome: str = "success",
        metadata: Mapping[str, Any] | None = None,
    ) -> Activity:
        """Close an activity of ``scope`` with an outcome (``success``, ``error``, ``unknown``, ``fallback``).

        Raises:
            MemoryNotFoundError: no such activity in the scope.
            InvalidInputError: bad scope or metadata.
        """
        act = self.get_activity(activity_id, scope=scope)
        if act is None:
            msg = f"no activity {activity_id!r} in this scope; record_activity() it first"
            raise MemoryNotFoundError(msg)
        meta = {**act.metadata, **normalize_metadata(metadata)}
        ended = act.model_copy(update={"ended_at": self.clock(), "outcome": outcome, "metadata": meta})
        with self.ledger.transaction() as conn:
            self.ledger.upsert_activity(conn, ended)
        return ended

    def _cascade_attribution(self, target: str, suspect: Sequence[str]) -> dict[str, str]:
        """For each suspect memory, the attribution of its premise edge into the invalidated chain."""
        chain = {target, *suspect}
        out: dict[str, str] = {}
        for e in self.ledger.edges_touching(list(suspect)):
            if e["relation"] == Relation.WAS_DERIVED_FROM.value and e["dst"] in chain and e.get("attribution"):
                out.setdefault(e["src"], e["attribution"])
        return out

    def _set_attribution(
        self, memory_id: str, premises: Mapping[str, str], *, scope: Scope, activity_id: str | None = None
    ) -> None:
        """Annotate the wasDerivedFrom edges of a memory with how each premise was attributed (capture only)."""
        self.require(memory_id, scope=scope)
        with self._write_mutex, self.ledger.transaction() as conn:
            self.ledger.set_attribution(conn, memory_id, premises, activity_id)

    def link(
        self,
        memory_id: str,
        activity_id: str,
        relation: Relation | str = Relation.WAS_GENERATED_BY,
        *,
        scope: Scope | Mapping[str, Any] | str,
    ) -> bool:
        """Record that an activity also generated (``wasGeneratedBy``) or read (``used``) an existing memory.

        For a write absorbed by an exact duplicate (``seen_again``), which keeps the first writer's activity only,
        e.g. a user turn stored by a memory component before the agent run that received it was recorded.
        Idempotent; records a ``linked`` event. Premises are not edited here (use :meth:`remember`).

        Args:
            memory_id: The memory; must be readable in ``scope``.
            activity_id: A recorded activity of the same user (or of none).
            relation: ``wasGeneratedBy`` (memory -> activity) or ``used`` (activity -> memory).
            scope: Caller's scope.

        Returns:
            ``True`` when the edge was added, ``False`` when it already existed.

        Raises:
            InvalidInputError: another relation.
            MemoryNotFoundError: no such memory in the scope, or no such activity.
            ScopeViolationError: the activity belongs to another user.
        """
        allowed = (Relation.WAS_GENERATED_BY.value, Relation.USED.value)
        rel = relation.value if isinstance(relation, Relation) else relation
        if rel not in allowed:
            msg = f"link() records {' or '.join(allowed)} edges, not {relation!r}"
            raise InvalidInputError(msg)
        scope = Scope.coerce(scope)
        mem = self.require(memory_id, scope=scope)
        act = self.get_activity(activity_id, scope=mem.scope)
        if act is None:
            row = self.ledger.activity_rows([activity_id])[0]
            if row is not None and row["user_id"] not in (None, mem.scope.user_id):
                msg = f"activity {activity_id!r} belongs to another user"
                raise ScopeViolationError(msg)
            msg = f"no activity {activity_id!r} in this scope; record_activity() it first"
            raise MemoryNotFoundError(msg)
        src, dst = (mem.id, act.id) if rel == Relation.WAS_GENERATED_BY.value else (act.id, mem.id)
        t = to_epoch(self.clock())
        user = mem.scope.user_id
        with self._write_mutex, self.ledger.transaction() as conn:
            if any(e["dst"] == dst and e["relation"] == rel for e in self.ledger.edges_touching([src], conn)):
                return False
            self.ledger.insert_edges(conn, [_edge(src, dst, Relation(rel), t, user)])
            self.ledger.insert_events(conn, [_event(t, "linked", mem.id, act.id, user, {"relation": rel})])
        return True

    # ================================================================== index maintenance
    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            vectors = self.embedder.embed(list(texts))
        except MemLineageError:
            raise  # e.g. ConfigurationError: the model files are missing (the message says what to set)
        except Exception as exc:
            msg = f"embedder {self.embedder.name!r} failed: {exc}"
            raise StorageError(msg) from exc
        if len(vectors) != len(texts):
            msg = f"embedder {self.embedder.name!r} returned {len(vectors)} vectors for {len(texts)} texts"
            raise StorageError(msg)
        out = [list(map(float, v)) for v in vectors]
        if out:
            self._dims = len(out[0])
        return out

    def _check_dims(self, vector: Sequence[float]) -> None:
        """A precomputed embedding must have the embedder's size, or it would poison the index for the scope."""
        if self._dims is None:
            declared = getattr(self.embedder, "dims", None)
            if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
                self._dims = declared
            else:
                self._embed(["dimension probe"])
        if len(vector) != self._dims:
            msg = (
                f"embedding has {len(vector)} dimensions but the embedder {self.embedder.name!r} makes "
                f"{self._dims}; pass vectors from the same model, or embedding=None"
            )
            raise InvalidInputError(msg)

    def _sync_index(
        self, ids: Sequence[str], *, rows: Sequence[dict[str, Any]] | None = None, fresh: bool = False
    ) -> int:
        """Bring index entries of ``ids`` in line with the ledger; failures leave them for :meth:`repair`.

        Args:
            ids: Memory ids to sync.
            rows: Their ledger rows when the caller just wrote them (skips a read-back).
            fresh: The rows are new, never indexed: ``add`` instead of ``upsert``.

        Returns:
            Number of index entries removed.
        """
        if not ids:
            return 0
        if rows is None:
            rows = [r for r in self.ledger.memory_rows(list(dict.fromkeys(ids)), embedding=False) if r]
            pending = [r for r in rows if r["index_state"] == "pending"]
            if pending:  # only a full write needs the stored vector
                vectors = self.ledger.memory_rows([r["id"] for r in pending])
                for r, full in zip(pending, vectors, strict=True):
                    r["embedding"] = full["embedding"] if full else None
        try:
            return self._apply_index(rows, fresh=fresh)
        except StorageError as exc:
            logger.warning("index update deferred (ledger is safe, repaired on next open): %s", exc)
            return 0

    def _apply_index(self, rows: Sequence[dict[str, Any]], *, fresh: bool = False) -> int:
        gone = (Status.ARCHIVED.value, Status.ERASED.value)
        for r in rows:  # archived / erased rows never stay in the index, whatever transition touched them
            if r["index_state"] in ("pending", "stale") and r["status"] in gone:
                r["index_state"] = "removing"
        upserts = [r for r in rows if r["index_state"] == "pending"]
        stale = [r for r in rows if r["index_state"] == "stale"]
        removing = [r for r in rows if r["index_state"] == "removing"]
        need = [r for r in upserts if r["embedding"] is None]
        if need:
            for r, v in zip(need, self._embed([r["content"] for r in need])):
                r["embedding"] = encode_vector(v)
        if upserts:
            write = self.index.add if fresh and hasattr(self.index, "add") else self.index.upsert
            write(
                [r["id"] for r in upserts],
                [np.frombuffer(r["embedding"], dtype="<f4") for r in upserts],
                [index_metadata(r) for r in upserts],
            )
        if stale:
            self.index.update_metadata([r["id"] for r in stale], [index_metadata(r) for r in stale])
        removed = self.index.delete([r["id"] for r in removing])
        self._lexical_apply(upserts, stale, removing)
        done = [r["id"] for r in upserts + stale]
        with self.ledger.transaction() as conn:
            if done:
                self.ledger.update_memories(conn, done, {"index_state": "indexed"})
            if removing:
                self.ledger.update_memories(conn, [r["id"] for r in removing], {"index_state": "removed"})
        return removed

    def _lexical_apply(
        self, upserts: Sequence[dict[str, Any]], stale: Sequence[dict[str, Any]], removing: Sequence[dict[str, Any]]
    ) -> None:
        """Mirror an index write into the lexical leg (in memory; rebuilt from the ledger if lost)."""
        if upserts:
            self.lexical.upsert(
                [r["id"] for r in upserts], self._lexical_texts(upserts), [index_metadata(r) for r in upserts]
            )
        if stale:
            self.lexical.update_metadata([r["id"] for r in stale], [index_metadata(r) for r in stale])
        if removing:
            self.lexical.delete([r["id"] for r in removing])

    def _lexical_rows(self, user_id: str) -> list[tuple[str, str, dict[str, Any]]]:
        """Loader of the lexical leg: one user's indexable memories from the ledger, as (id, text, metadata)."""
        query = select(memories).where(
            memories.c.user_id == user_id, memories.c.index_state.in_(("pending", "indexed", "stale"))
        )
        with self.ledger.transaction() as conn:
            rows = [dict(r) for r in conn.execute(query).mappings()]
        return [(r["id"], text, index_metadata(r)) for r, text in zip(rows, self._lexical_texts(rows))]

    def _lexical_texts(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        """What the lexical leg indexes per row: its content, plus the words of the versions it revised or withdrew.

        A revision answers the questions its predecessors answered ("我早上喝什么？" still names the drink the
        superseded "我每天早上喝绿茶" named), so the current version is found by the old wording too; the old
        version itself is never served (status filter).
        """
        chains: dict[str, list[str]] = {r["id"]: [] for r in rows}
        cursor = {r["id"]: r["supersedes"] for r in rows if r.get("supersedes")}
        for _ in range(3):  # up to three versions back
            if not cursor:
                break
            found = {r["id"]: r for r in self.ledger.memory_rows(sorted(set(cursor.values()))) if r is not None}
            step: dict[str, str] = {}
            for rid, prev in cursor.items():
                old = found.get(prev)
                if old is not None:
                    chains[rid].append(old["content"])
                    if old["supersedes"]:
                        step[rid] = old["supersedes"]
            cursor = step
        # A withdrawal ("that's not true anymore: I pulled out of the marathon") is likewise found by the words of
        # the statement it withdrew: the contradict decision used both.
        acts = {e["src"] for e in self.ledger.edges_into(list(chains), Relation.USED.value)}
        targets: dict[str, str] = {}
        for a in self.ledger.activity_rows(sorted(acts)) if acts else []:
            meta = (a or {}).get("meta") or {}
            if a and a["kind"] == "update_detection" and a["name"] == "contradict" and meta.get("statement") in chains:
                targets[str(meta["target"])] = str(meta["statement"])
        for old in self.ledger.memory_rows(sorted(targets)) if targets else []:
            if old is not None:
                chains[targets[old["id"]]].append(old["content"])
        return [" ".join([r["content"], *chains[r["id"]]]) for r in rows]

    def repair(self) -> dict[str, int]:
        """Finish index writes interrupted by a crash (run on open); never fails because of one bad entry.

        When the batch write fails, each entry is retried alone; an entry the index still refuses is
        *quarantined* (``index_state='quarantined'``: kept in the ledger, left out of the index, listed by
        :meth:`verify` and retried by ``verify(fix=True)``), so one bad entry can never block opening the store.

        Returns:
            ``{"upserted": n, "updated": n, "removed": n, "quarantined": n}``.

        Raises:
            StorageError: the ledger failed (an index failure is quarantined instead).
        """
        rows = self.ledger.index_backlog()
        quarantined: list[str] = []
        try:
            removed = self._apply_index(rows) if rows else 0
        except StorageError:
            removed, quarantined = self._apply_index_each(rows)
        # _apply_index settles each row's action in place (e.g. a stale entry the index lost is upserted).
        ok = [r for r in rows if r["id"] not in set(quarantined)]
        report = {
            "upserted": sum(r["index_state"] == "pending" for r in ok),
            "updated": sum(r["index_state"] == "stale" for r in ok),
            "removed": removed,
            "quarantined": len(quarantined),
        }
        if rows:
            logger.info("index repaired: %s", report)
        return report

    def _apply_index_each(self, rows: Sequence[dict[str, Any]]) -> tuple[int, list[str]]:
        """Apply index rows one at a time; quarantine those the index refuses. Returns (removed, quarantined)."""
        removed = 0
        bad: list[str] = []
        for r in rows:
            try:
                removed += self._apply_index([r])
            except Exception as exc:  # noqa: BLE001 - whatever the index raises, the entry must not block opening
                logger.warning("index entry %s quarantined (%s); verify() lists it", r["id"], type(exc).__name__)
                bad.append(r["id"])
        if bad:
            with self.ledger.transaction() as conn:
                self.ledger.update_memories(conn, bad, {"index_state": "quarantined"})
        return removed, bad

    def verify(self, *, fix: bool = False) -> ConsistencyReport:
        """Check that the index agrees with the ledger: ids, scope, status and content hash.

        The ledger is the source of truth: every memory it marks as indexed must have one index entry with the
        same ``user_id``, ``status`` and ``content_hash``, and the index must hold nothing else. Unfinished index
        writes (a crash between the ledger commit and the index write) are listed as ``pending``.

        Args:
            fix: Also repair what was found: re-index missing or mismatched entries, delete orphans and entries
                that should be gone, then finish pending writes (:meth:`repair`). The report describes the state
                before the fix.

        Returns:
            A :class:`ConsistencyReport`; ``report.ok`` is True when ledger and index agree.

        Raises:
            StorageError: the ledger or the index cannot be read.
        """
        rows = {r["id"]: r for r in self.ledger.index_summary()}
        present = self.index.ids()
        report = ConsistencyReport(ledger_rows=len(rows), index_entries=len(present))
        report.pending = sorted(i for i, r in rows.items() if r["index_state"] in ("pending", "stale", "removing"))
        report.quarantined = sorted(i for i, r in rows.items() if r["index_state"] == "quarantined")
        expected = sorted(i for i, r in rows.items() if r["index_state"] == "indexed")
        report.missing = [i for i in expected if i not in present]
        report.orphans = sorted(i for i in present if i not in rows)
        report.not_removed = sorted(i for i in present if i in rows and rows[i]["index_state"] == "removed")
        both = [i for i in expected if i in present]
        for start in range(0, len(both), 2000):
            chunk = both[start : start + 2000]
            for mid, meta in zip(chunk, self.index.get_metadata(chunk), strict=True):
                row, meta = rows[mid], meta or {}
                if meta.get("user_id") != row["user_id"]:
                    report.scope_mismatch.append(mid)
                if meta.get("status") != row["status"]:
                    report.status_mismatch.append(mid)
                if meta.get("content_hash") != row["content_hash"]:
                    report.hash_mismatch.append(mid)
        if fix and not report.ok:
            report.fixed = self._fix_index(report)
        return report

    def _fix_index(self, report: ConsistencyReport) -> int:
        reupsert = sorted({*report.missing, *report.scope_mismatch, *report.hash_mismatch, *report.quarantined})
        restale = sorted(set(report.status_mismatch) - set(reupsert))
        with self.ledger.transaction() as conn:
            if reupsert:
                self.ledger.update_memories(conn, reupsert, {"index_state": "pending"})
            if restale:
                self.ledger.update_memories(conn, restale, {"index_state": "stale"})
        removed = self.index.delete(report.orphans + report.not_removed)
        self.repair()
        return len(reupsert) + len(restale) + removed + len(report.pending)

    def reindex(self) -> int:
        """Rebuild the whole index from the ledger (vectors stored in the ledger; re-embedded where missing).

        Returns:
            Number of entries indexed.
        """
        self.index.reset()
        self.lexical.reset()
        rows = self.ledger.all_index_rows()
        for r in rows:
            r["index_state"] = (
                "pending" if r["status"] not in (Status.ARCHIVED.value, Status.ERASED.value) else "removing"
            )
        live = [r for r in rows if r["index_state"] == "pending"]
        for start in range(0, len(live), 2000):
            self._apply_index(live[start : start + 2000])
        return len(live)

    # ================================================================== async twins (R6)
    async def aremember(self, content: str, **kwargs: Any) -> Memory:
        """Async :meth:`remember`."""
        return await asyncio.to_thread(self.remember, content, **kwargs)

    async def aremember_many(self, items: Sequence[Mapping[str, Any]]) -> list[Memory]:
        """Async :meth:`remember_many`."""
        return await asyncio.to_thread(self.remember_many, items)

    async def aget(self, memory_id: str, **kwargs: Any) -> Memory | None:
        """Async :meth:`get`."""
        return await asyncio.to_thread(self.get, memory_id, **kwargs)

    async def arequire(self, memory_id: str, **kwargs: Any) -> Memory:
        """Async :meth:`require`."""
        return await asyncio.to_thread(self.require, memory_id, **kwargs)

    async def arecall(self, query: str, **kwargs: Any) -> RecallResult:
        """Async :meth:`recall`."""
        return await asyncio.to_thread(self.recall, query, **kwargs)

    async def aadmin_recall(self, query: str, **kwargs: Any) -> RecallResult:
        """Async :meth:`admin_recall`."""
        return await asyncio.to_thread(self.admin_recall, query, **kwargs)

    async def arevise(self, memory_id: str, content: str, **kwargs: Any) -> Memory:
        """Async :meth:`revise`."""
        return await asyncio.to_thread(self.revise, memory_id, content, **kwargs)

    async def asupersede(self, old_id: str, new_content: str, **kwargs: Any) -> CascadeReport:
        """Async :meth:`supersede`."""
        return await asyncio.to_thread(self.supersede, old_id, new_content, **kwargs)

    async def aretract(self, memory_id: str, **kwargs: Any) -> CascadeReport:
        """Async :meth:`retract`."""
        return await asyncio.to_thread(self.retract, memory_id, **kwargs)

    async def aimpact(self, memory_id: str, **kwargs: Any) -> CascadeReport:
        """Async :meth:`impact`."""
        return await asyncio.to_thread(self.impact, memory_id, **kwargs)

    async def arevalidate(self, memory_id: str, **kwargs: Any) -> Memory:
        """Async :meth:`revalidate`."""
        return await asyncio.to_thread(self.revalidate, memory_id, **kwargs)

    async def aundo(self, decision_id: str, **kwargs: Any) -> Memory:
        """Async :meth:`undo`."""
        return await asyncio.to_thread(self.undo, decision_id, **kwargs)

    async def aforget(self, memory_id: str, **kwargs: Any) -> Memory:
        """Async :meth:`forget`."""
        return await asyncio.to_thread(self.forget, memory_id, **kwargs)

    async def aerase(self, memory_id: str | None = None, **kwargs: Any) -> ErasureReceipt:
        """Async :meth:`erase`."""
        return await asyncio.to_thread(self.erase, memory_id, **kwargs)

    async def aexplain(self, memory_id: str, **kwargs: Any) -> Explanation:
        """Async :meth:`explain`."""
        return await asyncio.to_thread(self.explain, memory_id, **kwargs)

    async def aaudit(self, scope: Scope | Mapping[str, Any] | str, **kwargs: Any) -> list[Event]:
        """Async :meth:`audit`."""
        return await asyncio.to_thread(self.audit, scope, **kwargs)

    async def arecord_activity(self, activity: Activity, **kwargs: Any) -> Activity:
        """Async :meth:`record_activity`."""
        return await asyncio.to_thread(self.record_activity, activity, **kwargs)

    async def aget_activity(self, activity_id: str, **kwargs: Any) -> Activity | None:
        """Async :meth:`get_activity`."""
        return await asyncio.to_thread(self.get_activity, activity_id, **kwargs)

    async def afind_activities(self, scope: Scope | Mapping[str, Any] | str, **kwargs: Any) -> list[Activity]:
        """Async :meth:`find_activities`."""
        return await asyncio.to_thread(self.find_activities, scope, **kwargs)

    async def aactivities(self, scope: Scope | Mapping[str, Any] | str, **kwargs: Any) -> list[Activity]:
        """Async :meth:`activities`."""
        return await asyncio.to_thread(self.activities, scope, **kwargs)

    async def aend_activity(self, activity_id: str, **kwargs: Any) -> Activity:
        """Async :meth:`end_activity`."""
        return await asyncio.to_thread(self.end_activity, activity_id, **kwargs)

    async def alink(self, memory_id: str, activity_id: str, *args: Any, **kwargs: Any) -> bool:
        """Async :meth:`link`."""
        return await asyncio.to_thread(self.link, memory_id, activity_id, *args, **kwargs)

    async def asweep(self, **kwargs: Any) -> Any:
        """Async :meth:`sweep`."""
        return await asyncio.to_thread(self.sweep, **kwargs)

    async def aconsolidate(self, scope: Scope | Mapping[str, Any] | str, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`consolidate`."""
        return await asyncio.to_thread(self.consolidate, scope, *args, **kwargs)


# ====================================================================== helpers
def _reconciler(reconciler: Any) -> Reconciler | None:
    """``"rules"`` → the offline :class:`~memlineage.reconcile.RuleReconciler`; None → no update detection."""
    if reconciler is None or isinstance(reconciler, Reconciler):
        return reconciler
    if reconciler == "rules":
        return RuleReconciler()
    msg = (
        f"reconciler must be 'rules', None or an object with decide(items) and a name (e.g. LLMReconciler(model)), "
        f"got {type(reconciler).__name__}"
    )
    raise ConfigurationError(msg)


def _policy_engine(policy: Any) -> Any:
    """Accept ``policy=`` as None, a ``PolicyEngine`` or a list of ``Policy`` objects."""
    if policy is None:
        return None
    from memlineage.policy._enforce import ensure_engine

    return ensure_engine(policy)


def _policy_hits(policy: Any, hits: list[RecallHit], trace: Trace) -> list[RecallHit]:
    """Attach policy decisions and flags to recall hits and swap in refreshed memories (no engine: unchanged)."""
    if policy is None:
        return hits
    from memlineage.policy._enforce import annotate_hits

    return annotate_hits(hits, trace)


def _check_item(item: Any) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        msg = f"each item must be a dict of remember() arguments, not {type(item).__name__}"
        raise InvalidInputError(msg)
    allowed = _remember_keys()
    unknown = sorted(str(k) for k in item if k not in allowed)
    if unknown:
        msg = f"unknown remember() argument(s) {unknown}; allowed: {sorted(allowed)}"
        raise InvalidInputError(msg)
    missing = [k for k in ("content", "scope") if k not in item]
    if missing:
        msg = f"each item needs {missing}; e.g. {{'content': 'text', 'scope': Scope(user_id='u1')}}"
        raise InvalidInputError(msg)
    return dict(item)


@functools.cache
def _remember_keys() -> frozenset[str]:
    """The keyword arguments a remember_many() item may carry (those of ``_draft``, whatever hooks add)."""
    import inspect

    params = inspect.signature(MemoryManager._draft).parameters
    return frozenset(n for n, p in params.items() if n != "self" and p.kind is not p.VAR_KEYWORD)


def _vector(value: Any) -> list[float]:
    """A precomputed embedding: a non-empty sequence of finite numbers."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        msg = f"embedding must be a list of floats, not {type(value).__name__}"
        raise InvalidInputError(msg)
    # Vectorised check (numpy infers one dtype for the whole list): numbers only, flat, all finite.
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
    arr = raw.astype(np.float64, copy=False)
    if arr.ndim != 1 or arr.size == 0:
        msg = "embedding must be a non-empty flat list of numbers; pass embedding=None to embed the content"
        raise InvalidInputError(msg)
    if not np.isfinite(arr).all():
        msg = "embedding must contain finite numbers only (found NaN or inf); pass embedding=None to embed the content"
        raise InvalidInputError(msg)
    return arr.tolist()


def _unit_float(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        msg = f"{name} must be a number in [0, 1], got {value!r}"
        raise InvalidInputError(msg)
    return float(value)


def _ids(values: Any, name: str) -> tuple[str, ...]:
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


def _row_scope(row: Mapping[str, Any]) -> Scope:
    return Scope.model_construct(user_id=row["user_id"], agent_id=row["agent_id"], session_id=row["session_id"])


def _write_scope(request: Scope, original: Scope) -> Scope:
    """A new version keeps the original's agent and takes the request's session when given."""
    return Scope(
        user_id=original.user_id,
        agent_id=original.agent_id,
        session_id=request.session_id or original.session_id,
    )


def _row_activity(row: Mapping[str, Any]) -> Activity:
    scope = (
        Scope.model_construct(user_id=row["user_id"], agent_id=row["agent_id"], session_id=row["session_id"])
        if row["user_id"]
        else None
    )
    return Activity.model_construct(
        id=row["id"],
        kind=row["kind"],
        name=row["name"],
        parent_id=row["parent_id"],
        scope=scope,
        started_at=from_epoch(row["started_at"]),
        ended_at=from_epoch(row["ended_at"]),
        outcome=row["outcome"],
        metadata=dict(row["meta"] or {}),
        run_id=row.get("run_id"),
        tool_call_id=row.get("tool_call_id"),
    )


def _check_activity_owners(rows: Sequence[Mapping[str, Any]], drafts: Sequence[Any]) -> None:
    """Refuse a write whose ``activity_id`` is another user's activity (it would link across users)."""
    owners = {r["id"]: r["user_id"] for r in rows}
    for d in drafts:
        owner = owners.get(d.activity_id or "")
        if owner is not None and owner != d.scope.user_id:
            msg = f"activity {d.activity_id!r} belongs to another user; record your own activity"
            raise ScopeViolationError(msg)


def _activity_owner(activity: Activity, scope: Scope | Mapping[str, Any] | str | None) -> Scope:
    """The scope an activity is recorded under: ``scope`` or ``activity.scope``; they must name one user."""
    if scope is None and activity.scope is None:
        msg = "record_activity() needs a scope: pass scope=... or Activity(scope=...); activities are never global"
        raise InvalidInputError(msg)
    owner = Scope.coerce(scope) if scope is not None else activity.scope
    assert owner is not None
    if activity.scope is not None and activity.scope.user_id != owner.user_id:
        msg = "record_activity(): scope and activity.scope name different users"
        raise ScopeViolationError(msg)
    return activity.scope if activity.scope is not None and scope is None else owner


def _edge(
    src: str,
    dst: str,
    relation: Relation,
    at: float | None,
    user_id: str,
    support: int = 0,
    activity_id: str | None = None,
) -> dict[str, Any]:
    return {
        "src": src,
        "dst": dst,
        "relation": relation.value,
        "support": support,
        "activity_id": activity_id,
        "user_id": user_id,
        "created_at": at or 0.0,
    }


def _event(
    at: float | None,
    type_: str,
    memory_id: str | None,
    activity_id: str | None,
    user_id: str | None,
    data: dict[str, Any],
) -> dict[str, Any]:
    return {
        "at": at or 0.0,
        "type": type_,
        "memory_id": memory_id,
        "activity_id": activity_id,
        "user_id": user_id,
        "data": data,
    }


#: Largest ``k`` a recall accepts (candidate fetches scale with it; 2**63 overflowed PostgreSQL's LIMIT).
MAX_K = 10_000
#: Largest ``limit`` of a listing that reaches SQL (both backends take it; 2**63 overflowed both).
MAX_LIMIT = 2**31 - 1


def _check_read_args(*, k: Any, purpose: Any, budget: Any, activity_id: Any) -> None:
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


def _kind_values(kinds: Any) -> tuple[str, ...] | None:
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


def _utc_clock(clock: Callable[[], datetime]) -> Callable[[], datetime]:
    """A clock that follows the one datetime rule (naive means UTC), whatever the caller's clock returns."""
    if not callable(clock):
        msg = f"clock must be a callable returning a datetime, not {type(clock).__name__}"
        raise ConfigurationError(msg)

    def now() -> datetime:
        return as_utc(clock(), "the clock's value")

    return now


#: Stores opened by this process (resolved paths): a second open of one of them is refused with that reason.
_OPEN_STORES: set[Path] = set()
_OPEN_STORES_LOCK = threading.Lock()


def _acquire_lock(store: Path, timeout: float) -> Any:
    from filelock import FileLock, Timeout

    key = store.resolve()
    with _OPEN_STORES_LOCK:
        if key in _OPEN_STORES:
            msg = (
                f"the store at {store} is already open in this process; share that MemoryManager (it is "
                "thread-safe) or close it before opening the store again"
            )
            raise StoreLockedError(msg)
    lock = FileLock(str(store / ".writer.lock"))
    try:
        lock.acquire(timeout=timeout)
    except Timeout as exc:
        msg = (
            f"the store at {store} is open in another process (embedded mode allows one writer process); close "
            "it first, or run in server mode (PostgreSQL ledger_url + Chroma HttpClient) for several processes"
        )
        raise StoreLockedError(msg) from exc
    with _OPEN_STORES_LOCK:
        _OPEN_STORES.add(key)
    return _StoreLock(lock, key)


class _StoreLock:
    """The writer lock of an embedded store, also registered as open in this process until released."""

    def __init__(self, lock: Any, key: Path) -> None:
        self._lock = lock
        self._key = key
        self._held = True

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        with _OPEN_STORES_LOCK:
            _OPEN_STORES.discard(self._key)
        self._lock.release()

    def __del__(self) -> None:  # a manager dropped without close() must not keep its store "open" forever
        self.release()


def _typed_arguments(method: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a call with unknown or missing arguments into :class:`InvalidInputError` (no overhead otherwise).

    Python raises ``TypeError`` before the method body runs, so nothing was written; the binding is only
    checked when a ``TypeError`` comes out, to tell a bad call from an error inside the method.
    """
    signature = inspect.signature(method)

    @functools.wraps(method)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except TypeError as exc:
            try:
                signature.bind(*args, **kwargs)
            except TypeError:
                msg = f"{method.__name__}(): {exc}; see help(MemoryManager.{method.__name__}) for its arguments"
                raise InvalidInputError(msg) from None
            raise

    return checked


#: Public verbs whose bad calls (unknown keyword, missing argument) raise InvalidInputError, not TypeError.
_VERBS = (
    "remember", "remember_many", "retract", "impact", "supersede", "revise", "revalidate", "forget", "erase",
    "expire_due", "get", "get_many", "require", "find", "slots", "recall", "admin_recall", "ancestors",
    "descendants", "explain", "audit", "stats", "sweep", "consolidate", "slot_history", "slot_value",
    "record_activity", "get_activity", "end_activity", "link", "repair", "verify", "reindex", "undo",
    "flush_reinforcement", "buffered",
)  # fmt: skip
for _name in _VERBS:
    setattr(MemoryManager, _name, _typed_arguments(getattr(MemoryManager, _name)))
