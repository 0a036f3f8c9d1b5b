"""``MemoryManager``: the facade that speaks the seeds' verbs over the ledger, the index and the lineage DAG.

remember / recall / get / revise / supersede / retract / impact / revalidate / forget / erase / explain / audit
and the rest: each is declared with :func:`~memlineage._verbs._calls.verb` (a bad call raises
``InvalidInputError``, a call on a closed store ``StorageError``) and has an ``a``-prefixed async twin generated
with the verb's full signature that runs it in a worker thread (STYLE R6).

The manager holds a store's parts and wires the services of :mod:`memlineage.services` from them (one per stage
of the write and read paths, see ``docs/architecture.md``); the verbs themselves live in the mixins of
:mod:`memlineage._verbs` and delegate to those services.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypeVar, overload

from memlineage._store_lock import StoreLock, acquire_lock
from memlineage._twins import async_twin
from memlineage._verbs._calls import verb
from memlineage._verbs.activity import ActivityVerbs
from memlineage._verbs.read import ReadVerbs
from memlineage._verbs.write import WriteVerbs
from memlineage.errors import ConfigurationError, StorageError
from memlineage.extractors._llm import LanguageModel
from memlineage.index import ChromaIndex, Embedder, OnnxMiniLMEmbedder, ScopedVectorIndex, VectorIndex, ensure_embedder
from memlineage.index._embedding import EmbedderLike
from memlineage.index.lexical import LexicalIndex
from memlineage.ledger import Ledger, url_without_password
from memlineage.models import DEFAULT_TRUST, Scope, as_utc, utcnow
from memlineage.policy import Policy, PolicyEngine, builtin_policies
from memlineage.policy._enforce import ensure_engine
from memlineage.ports import LexicalIndexPort
from memlineage.reconcile import LLMReconciler, Reconciler, RuleReconciler
from memlineage.retrieval import CandidateFilter, RetrievalConfig
from memlineage.services import Parts, Services, wire
from memlineage.services.index_sync import ConsistencyReport, ledger_loader
from memlineage.settings import MemLineageSettings
from memlineage.value import ValueModel

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

    from memlineage.transfer import BackupReport, ExportSummary, ImportReport

__all__ = ["ConsistencyReport", "MemoryManager"]

#: Where ``MemoryManager.open()`` keeps its files when no path is given: ``$MEMLINEAGE_HOME`` or ``./.memlineage``.
ENV_HOME = "MEMLINEAGE_HOME"
DEFAULT_DIR = ".memlineage"

T = TypeVar("T")
V = TypeVar("V")

#: What the ``policy=`` option takes: a policy engine, policies (one engine is made of them), or None for none.
PolicyOption: TypeAlias = PolicyEngine | Iterable[Policy] | None


class _Part(Generic[V, T]):
    """A part of the store (ledger, index, policy...): setting it re-wires the services that use it.

    ``V`` is what may be assigned, ``T`` what is kept and read back: ``normalize`` turns one into the other (e.g. a
    LangChain embedding into an :class:`~memlineage.index.Embedder`); without it they are the same type.
    """

    def __init__(self, normalize: Callable[[V], T] | None = None) -> None:
        self.normalize = normalize

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Part[V, T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> _Part[V, T] | T:
        if obj is None:
            return self
        value: T = getattr(obj.parts, self.name)  # type: ignore[attr-defined]
        return value

    def __set__(self, obj: MemoryManager, value: V) -> None:
        setattr(obj.parts, self.name, self.normalize(value) if self.normalize is not None else value)
        obj.services = wire(obj.parts, write_mutex=obj._write_mutex, previous=obj.services)


class _Default(Enum):
    """The default of an ``open()`` option whose ``None`` means "off" (policies, the value model)."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


#: Marks an ``open()`` / ``from_settings()`` option left at its default (``None`` switches the part off).
DEFAULT: Final = _Default.DEFAULT


def _scoped(index: VectorIndex, ledger: Ledger, exact_max: int | None, shared: bool) -> ScopedVectorIndex:
    if exact_max is None:
        return ScopedVectorIndex.over_ledger(index, ledger, shared=shared)
    if isinstance(exact_max, bool) or not isinstance(exact_max, int) or exact_max < 0:
        msg = f"exact_max must be an integer >= 0 (0 = always the ANN index), got {exact_max!r}"
        raise ConfigurationError(msg)
    return ScopedVectorIndex.over_ledger(index, ledger, exact_max=exact_max, shared=shared)


class MemoryManager(WriteVerbs, ReadVerbs, ActivityVerbs):
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
        index: The vector index (Chroma or in-memory); wrapped in a
            :class:`~memlineage.index.ScopedVectorIndex` unless it is one.
        embedder: Embedder, LangChain ``Embeddings``, LlamaIndex embedding or callable; None = default ONNX.
        clock: Returns "now" (timezone-aware UTC); inject one to simulate time.
        trust_by_source: Base trust per source kind, in [0, 1]; defaults to ``models.DEFAULT_TRUST``.
        lock: A held cross-process lock released by :meth:`close` (set by :meth:`open` for the embedded store).
            Without one, other processes may write to the same ledger (server mode): the scopes held in memory
            are compared with ``Ledger.scope_stamp`` before each query, and reloaded when another process
            changed them.
        path: The store directory, when embedded.
        exact_max: Largest scope (memories of one ``user_id``) searched exactly over the ledger's vectors, >= 0;
            None = :class:`~memlineage.index.ScopedVectorIndex`'s default (100,000). Memories of such a scope are
            not written to ``index`` (the ANN index) until the scope grows past it; 0 = every memory goes to
            ``index`` and every query uses it. Ignored when ``index`` is already a ``ScopedVectorIndex``.

    Raises:
        ConfigurationError: collaborators are missing or inconsistent.
    """

    ledger = _Part[Ledger, Ledger]()
    index = _Part[VectorIndex, VectorIndex]()
    embedder = _Part[EmbedderLike | None, Embedder](ensure_embedder)
    lexical = _Part[LexicalIndexPort, LexicalIndexPort]()
    clock = _Part[Callable[[], datetime], Callable[[], datetime]]()
    trust_by_source = _Part[Mapping[str, float], Mapping[str, float]]()
    policy = _Part[PolicyOption, PolicyEngine | None](ensure_engine)
    value_model = _Part[ValueModel | None, ValueModel | None]()
    reconciler = _Part[Reconciler | None, Reconciler | None]()
    retrieval = _Part[RetrievalConfig, RetrievalConfig]()
    read_filter = _Part[CandidateFilter | None, CandidateFilter | None]()

    def __init__(
        self,
        *,
        ledger: Ledger,
        index: VectorIndex,
        embedder: EmbedderLike | None = None,
        clock: Callable[[], datetime] | None = None,
        trust_by_source: Mapping[str, float] | None = None,
        policy: PolicyOption = None,
        value_model: ValueModel | None = None,
        lock: StoreLock | None = None,
        path: Path | None = None,
        repair_on_open: bool = True,
        lexical: LexicalIndexPort | None = None,
        retrieval: RetrievalConfig | None = None,
        read_filter: CandidateFilter | None = None,
        reconciler: Reconciler | None | str = "rules",
        exact_max: int | None = None,
    ) -> None:
        if ledger is None or index is None:
            msg = "MemoryManager needs a ledger and an index; use MemoryManager.open() for the defaults"
            raise ConfigurationError(msg)
        # Without the embedded store's writer lock, other processes may write to this ledger: the in-memory
        # blocks and lexical leg compare each scope with its stamp in the ledger before a query (Ledger.scope_stamp).
        shared = lock is None
        #: The store's parts (ports and configuration); assigning one of the attributes above re-wires services.
        self.parts = Parts(
            ledger=ledger,
            # query plan by scope size: exact search over a small scope's vectors, the ANN index for large ones
            index=index if isinstance(index, ScopedVectorIndex) else _scoped(index, ledger, exact_max, shared),
            embedder=ensure_embedder(embedder),
            # hybrid retrieval (memlineage.retrieval): lexical leg built lazily per user from the ledger
            lexical=lexical
            if lexical is not None
            else LexicalIndex(loader=ledger_loader(ledger), stamp=ledger.scope_stamp if shared else None),
            clock=_utc_clock(clock) if clock is not None else utcnow,
            trust_by_source={str(k): float(v) for k, v in (trust_by_source or DEFAULT_TRUST).items()},
            policy=ensure_engine(policy),
            value_model=value_model,
            reconciler=_reconciler(reconciler),
            retrieval=retrieval or RetrievalConfig(),
            read_filter=read_filter,
            single_writer=not shared,
        )
        self.path = path
        self._lock = lock
        # Serialises the write gate (duplicate check → insert) within this process, so two threads writing the
        # same content cannot both store it. Across processes, server mode relies on the ledger's transactions.
        self._write_mutex = threading.RLock()
        self._closed = False
        #: The stages behind the verbs (:mod:`memlineage.services`), for benchmarks and advanced use.
        self.services: Services = wire(self.parts, write_mutex=self._write_mutex)
        if repair_on_open:
            self.repair()

    # ================================================================== construction
    @classmethod
    @verb
    def open(
        cls,
        path: str | Path | None = None,
        *,
        ledger_url: str | None = None,
        ledger_schema: str | None = None,
        chroma_client: ClientAPI | None = None,
        index: VectorIndex | None = None,
        embedder: EmbedderLike | None = None,
        collection: str | None = None,
        clock: Callable[[], datetime] | None = None,
        lock_timeout: float = 0.0,
        policy: PolicyOption | _Default = DEFAULT,
        value_model: ValueModel | _Default | None = DEFAULT,
        reconciler: Reconciler | str | None = "rules",
        trust_by_source: Mapping[str, float] | None = None,
        exact_max: int | None = None,
        retrieval: RetrievalConfig | None = None,
        read_filter: CandidateFilter | None = None,
        lexical: LexicalIndexPort | None = None,
        repair_on_open: bool = True,
    ) -> MemoryManager:
        """Open (or create) a store.

        Embedded default: ``path`` (default ``$MEMLINEAGE_HOME`` or ``./.memlineage``) holds ``ledger.db``
        (SQLite, WAL) and ``chroma/`` (Chroma ``PersistentClient``, run in a child process of its own: see
        :meth:`ChromaIndex.persistent <memlineage.index.ChromaIndex.persistent>`), guarded by a cross-process writer
        lock (``.writer.lock``; one writer process at a time, use server mode for more). Server mode: pass
        ``ledger_url="postgresql+psycopg://..."`` and ``chroma_client=chromadb.HttpClient(...)``; no lock is taken
        then unless some part still lives in ``path``.

        Args:
            path: Store directory for the embedded parts.
            ledger_url: SQLAlchemy URL of the ledger; default SQLite in ``path``.
            ledger_schema: PostgreSQL schema for the ledger's tables (created if missing; default: the URL's search
                path). Any name: it is quoted as an identifier.
            chroma_client: A chromadb client to use instead of the embedded ``PersistentClient``.
            index: A ready :class:`~memlineage.index.VectorIndex` (overrides ``chroma_client``).
            embedder: See :class:`MemoryManager`.
            collection: Chroma collection name. Default ``"memlineage"`` in the store directory's own Chroma; on a
                Chroma server (``chroma_client``) a name derived from the ledger (its URL without credentials and
                its schema, :func:`collection_for`), so two stores sharing a server never share entries.
            clock: See :class:`MemoryManager`.
            lock_timeout: Seconds to wait for the writer lock (0 = fail at once).
            policy: A :class:`~memlineage.PolicyEngine`, a list of policies, or None for no policy engine. Default
                here: the built-in set (:func:`memlineage.builtin_policies`).
            value_model: A :class:`~memlineage.value.ValueModel`, or None to store without value assessment.
                Default here: ``ValueModel()`` (rule-based, offline).
            reconciler: Update detection: ``"rules"`` (default, offline), any
                :class:`~memlineage.reconcile.Reconciler` (e.g. ``LLMReconciler(model)``), or None (off).
            trust_by_source: Trust per source kind in [0, 1]; default ``memlineage.models.DEFAULT_TRUST``.
            exact_max: Largest scope (memories of one user) read exactly from an in-process copy of its vectors;
                larger scopes query Chroma's ANN index. Default 100,000; 0 sends every query to Chroma.
            retrieval: Fusion weights and boosts (:class:`~memlineage.retrieval.RetrievalConfig`).
            read_filter: A last filter over recall candidates (``(memory) -> bool``).
            lexical: A keyword index to use instead of the built-in BM25 leg.
            repair_on_open: Finish index writes a crash left pending before returning (default True).

        Raises:
            StoreLockedError: another process holds the embedded store.
            SchemaVersionError: a server ledger's schema needs ``memlineage migrate`` first (or is newer).
            StorageError: the store directory cannot be created (a file in its place, no permission), or the
                ledger or index cannot be opened.
        """
        defaults = cls.default_options()
        kwargs: dict[str, Any] = {
            "policy": defaults["policy"] if policy is DEFAULT else policy,
            "value_model": defaults["value_model"] if value_model is DEFAULT else value_model,
            "reconciler": reconciler,
            "trust_by_source": trust_by_source,
            "exact_max": exact_max,
            "retrieval": retrieval,
            "read_filter": read_filter,
            "lexical": lexical,
            "repair_on_open": repair_on_open,
        }
        embedded_ledger = ledger_url is None
        embedded_index = index is None and chroma_client is None
        store = Path(path or os.environ.get(ENV_HOME) or DEFAULT_DIR).expanduser()
        lock = None
        if embedded_ledger or embedded_index:
            try:
                store.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a file in the way, a read-only or missing parent, no permission
                msg = f"cannot use {str(store)!r} as the store directory: {exc.strerror or exc}"
                raise StorageError(msg) from exc
            lock = acquire_lock(store, lock_timeout)
        try:
            ledger = Ledger(ledger_url or f"sqlite:///{store / 'ledger.db'}", schema=ledger_schema)
            if index is None:
                if chroma_client is not None:
                    index = ChromaIndex(chroma_client, collection or collection_for(ledger_url, ledger_schema))
                else:
                    index = ChromaIndex.persistent(store / "chroma", collection or DEFAULT_COLLECTION)
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
        return {"policy": builtin_policies(), "value_model": ValueModel()}

    @classmethod
    @verb
    def from_settings(
        cls,
        settings: MemLineageSettings | None = None,
        *,
        index: VectorIndex | None = None,
        embedder: EmbedderLike | None = None,
        clock: Callable[[], datetime] | None = None,
        lock_timeout: float = 0.0,
        policy: PolicyOption | _Default = DEFAULT,
        value_model: ValueModel | _Default | None = DEFAULT,
        reconciler: Reconciler | str | None = "rules",
        trust_by_source: Mapping[str, float] | None = None,
        exact_max: int | None = None,
        retrieval: RetrievalConfig | None = None,
        read_filter: CandidateFilter | None = None,
        lexical: LexicalIndexPort | None = None,
        repair_on_open: bool = True,
    ) -> MemoryManager:
        """Open from :class:`~memlineage.settings.MemLineageSettings` (environment variables ``MEMLINEAGE_*``).

        The settings choose where the store is (home, ledger URL and schema, Chroma host and port, collection,
        embedding model directory); the keyword arguments are :meth:`open`'s and override the settings' choice of
        ``index`` and ``embedder``.

        Raises:
            StorageError: the Chroma server the settings name cannot be reached (and what :meth:`open` raises).
        """
        s = settings or MemLineageSettings()
        if index is None and s.chroma_host:
            import chromadb  # deferred: chromadb is heavy and only server mode needs its HttpClient

            # made here, so the index owns it: close() releases its connections
            try:
                client = chromadb.HttpClient(host=s.chroma_host, port=s.chroma_port)
            except Exception as exc:  # chromadb raises ValueError (or httpx errors) for a server it cannot reach
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                msg = (
                    f"cannot reach the Chroma server at {s.chroma_host}:{s.chroma_port} ({first}); check "
                    "MEMLINEAGE_CHROMA_HOST / MEMLINEAGE_CHROMA_PORT (or --chroma-host / --chroma-port)"
                )
                raise StorageError(msg) from None
            name = s.collection or collection_for(s.ledger_url, s.ledger_schema)
            index = ChromaIndex(client, name, owns_client=True)
        if embedder is None and s.embedding_model_dir:
            embedder = OnnxMiniLMEmbedder(s.embedding_model_dir)
        try:
            return cls.open(
                s.home,
                ledger_url=s.ledger_url,
                ledger_schema=s.ledger_schema,
                index=index,
                embedder=embedder,
                collection=s.collection,
                clock=clock,
                lock_timeout=lock_timeout,
                policy=policy,
                value_model=value_model,
                reconciler=reconciler,
                trust_by_source=trust_by_source,
                exact_max=exact_max,
                retrieval=retrieval,
                read_filter=read_filter,
                lexical=lexical,
                repair_on_open=repair_on_open,
            )
        except BaseException:
            if index is not None and s.chroma_host and isinstance(index, ChromaIndex) and index._owns_client:
                index.close()
            raise

    def model_reconciler(self, model: LanguageModel | None) -> Reconciler | None:
        """The reconciler that decides updates with ``model`` for this store (one per model, made on first use).

        The adapters call this with the agent's own model and wrap their writes in
        :func:`memlineage.reconcile.using_reconciler`, so an agent's corrections are judged by its model: an
        :class:`~memlineage.reconcile.LLMReconciler` whose fallback is the store's own reconciler (the offline rules
        by default). Returns None when update detection is off (``reconciler=None``) or ``model`` is None, so an
        adapter never turns it on.

        Args:
            model: A LangChain chat model or runnable, a LlamaIndex LLM or a callable ``str -> str``.

        Raises:
            ConfigurationError: ``model`` is none of these.
        """
        if model is None or self.reconciler is None:
            return None
        with self._write_mutex:
            cache: dict[int, tuple[Any, Reconciler]] = self.__dict__.setdefault("_model_reconcilers", {})
            found = cache.get(id(model))
            if found is None or found[0] is not model:
                base = self.reconciler if not isinstance(self.reconciler, LLMReconciler) else RuleReconciler()
                found = cache[id(model)] = (model, LLMReconciler(model, fallback=base))
            return found[1]

    def close(self) -> None:
        """Release the connection pool and the writer lock. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for _, made in self.__dict__.get("_model_reconcilers", {}).values():
            made.close()
        self.services.value.flush()
        self.services.index_sync.close()
        self.ledger.close()
        close_index = getattr(self.index, "close", None)
        if callable(close_index):
            close_index()
        if self._lock is not None:
            self._lock.release()

    # ================================================================== export, import, backup
    @verb
    def export(
        self,
        path: str | Path,
        *,
        scope: Scope | Mapping[str, Any] | str | None = None,
        format: str = "jsonl",  # noqa: A002 - the natural name of the option
        vectors: bool = True,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> ExportSummary:
        """Export the store (or one user: ``scope``) to ``path`` as JSON Lines or a PROV-JSON bundle.

        See :func:`memlineage.transfer.export_store` (same arguments); returns its ``ExportSummary``.
        """
        from memlineage.transfer import export_store

        return export_store(
            self,
            path,
            scope=scope,
            format=format,  # type: ignore[arg-type]
            vectors=vectors,
            on_progress=on_progress,
        )

    @verb
    def import_file(
        self,
        path: str | Path,
        *,
        merge: bool = False,
        on_progress: Callable[[int, int], None] | None = None,
        on_reindex_progress: Callable[[int, int], None] | None = None,
    ) -> ImportReport:
        """Import a JSON Lines export (from any backend) into this store, then rebuild the index.

        See :func:`memlineage.transfer.import_store`; returns its ``ImportReport``. A file that does not match its
        header raises ``TransferIntegrityError``; a store already holding the file's users raises
        ``ImportConflictError`` unless ``merge=True``.
        """
        from memlineage.transfer import import_store

        return import_store(self, path, merge=merge, on_progress=on_progress, on_reindex_progress=on_reindex_progress)

    @verb
    def backup(self, path: str | Path) -> BackupReport:
        """Copy this embedded store's ledger to the new directory ``path`` while the store stays in use.

        See :func:`memlineage.transfer.backup_store`: one consistent point in time (SQLite's online backup API);
        the backup holds ``ledger.db`` only and its index is rebuilt when it is opened. Returns a ``BackupReport``.
        """
        from memlineage.transfer import backup_store

        return backup_store(self, path)

    aexport = async_twin(export)
    aimport_file = async_twin(import_file)
    abackup = async_twin(backup)

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ====================================================================== helpers
#: The collection of an embedded store's own Chroma directory.
DEFAULT_COLLECTION = "memlineage"


def collection_for(ledger_url: str | None, schema: str | None = None) -> str:
    """The Chroma collection of the store whose ledger is ``ledger_url`` (and ``schema``), on a shared server.

    ``memlineage_<12 hex>``: a digest of the URL without its password and of the schema, so that stores sharing a
    Chroma server (another database, another schema) never share entries, and one store finds its collection again
    from every process. An embedded ledger (``None``) keeps ``"memlineage"``.

    Example:
        >>> collection_for("postgresql+psycopg://app:secret@db/mem", "tenant_a") == collection_for(
        ...     "postgresql+psycopg://app:other@db/mem", "tenant_a"
        ... )
        True
    """
    if ledger_url is None:
        return DEFAULT_COLLECTION
    try:
        url = url_without_password(ledger_url)
    except Exception:  # noqa: BLE001 - an unparsable URL fails in Ledger() with its own message
        url = ledger_url
    digest = hashlib.sha256(f"{url}\x1f{schema or ''}".encode()).hexdigest()[:12]
    return f"memlineage_{digest}"


def _reconciler(reconciler: Reconciler | str | None) -> Reconciler | None:
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


def _utc_clock(clock: Callable[[], datetime]) -> Callable[[], datetime]:
    """A clock that follows the one datetime rule (naive means UTC), whatever the caller's clock returns."""
    if not callable(clock):
        msg = f"clock must be a callable returning a datetime, not {type(clock).__name__}"
        raise ConfigurationError(msg)

    def now() -> datetime:
        return as_utc(clock(), "the clock's value")

    return now
