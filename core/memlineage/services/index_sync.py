"""Index sync: the derived vector and lexical indexes follow the ledger (pending → indexed, repair, verify, reindex).

The ledger is the source of truth; every memory row carries an ``index_state`` (``pending``, ``stale``,
``removing``, ``indexed``, ``removed``, ``quarantined``, ``exact``) that says what the index still owes it, so a
crash between the ledger commit and the index write is finished by :meth:`IndexSync.repair` on the next open.

``exact``: a memory of a scope that the exact plan serves (:class:`~memlineage.index.ScopedVectorIndex`, at most
``exact_max`` memories) is never written to the ANN index (Chroma). The ledger holds its vector, the scope's loaded
block and the lexical leg get it in memory, and it costs the write path nothing more. When the scope grows past
``exact_max``, :meth:`IndexSync.sync` turns its ``exact`` rows ``pending`` and the background worker writes them to
the ANN index; the scope keeps the exact plan until they are all there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from memlineage._indexsync import LINGER_S, DeferredIndexSync, InFlightWrite
from memlineage.errors import StorageError
from memlineage.index import index_metadata
from memlineage.index._scoped import IN_ANN
from memlineage.ledger import Ledger, encode_vector
from memlineage.ledger._queries_index import INDEXABLE_STATES, lexical_rows
from memlineage.models import Relation, Status
from memlineage.ports import LexicalIndexPort, VectorIndex
from memlineage.services._index_writes import OrderedWrites, held_metadata, stored_vectors
from memlineage.services.embedding import Embedding

__all__ = ["ConsistencyReport", "IndexSync", "ledger_loader", "lexical_texts"]

logger = logging.getLogger(__name__)


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


def ledger_loader(ledger: Ledger) -> Callable[[str], list[tuple[str, str, dict[str, Any]]]]:
    """The lexical leg's loader: one user's indexable memories from ``ledger``, as ``(id, text, metadata)``."""

    def load(user_id: str) -> list[tuple[str, str, dict[str, Any]]]:
        with ledger.transaction() as conn:
            rows = lexical_rows(conn, user_id)
        return [(r["id"], text, held_metadata(r)) for r, text in zip(rows, lexical_texts(ledger, rows))]

    return load


def lexical_texts(ledger: Ledger, rows: Sequence[Mapping[str, Any]]) -> list[str]:
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
        found = {r["id"]: r for r in ledger.memory_rows(sorted(set(cursor.values()))) if r is not None}
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
    acts = {e["src"] for e in ledger.edges_into(list(chains), Relation.USED.value)}
    targets: dict[str, str] = {}
    for a in ledger.activity_rows(sorted(acts)) if acts else []:
        meta = (a or {}).get("meta") or {}
        if a and a["kind"] == "update_detection" and a["name"] == "contradict" and meta.get("statement") in chains:
            targets[str(meta["target"])] = str(meta["statement"])
    for old in ledger.memory_rows(sorted(targets)) if targets else []:
        if old is not None:
            chains[targets[old["id"]]].append(old["content"])
    return [" ".join([r["content"], *chains[r["id"]]]) for r in rows]


#: Server mode: deferred status changes of at most this many memories reach the in-memory legs at once (one ledger
#: read of their rows, about 16 µs a row); a larger batch (a cascade over a big subtree) stays on the critical path's
#: budget and leaves them to the background sync.
LOCAL_STATUSES_MAX = 256


class IndexSync(OrderedWrites):
    """Keeps the vector index and the lexical leg in line with the ledger (port :class:`~memlineage.ports.IndexSyncer`).

    Args:
        ledger: The ledger (source of truth).
        index: The vector index port.
        lexical: The lexical index port.
        embedding: Embeds rows stored without a vector.
        gather: Let the background worker gather deferred ids for ``LINGER_S`` into one write (only where no other
            process reads the index: another process would not see this one's new memories until then).
        shared: Other processes may write to the ledger (server mode): the in-memory legs compare each scope with
            the ledger's stamp before a query, so a deferred status change of up to :data:`LOCAL_STATUSES_MAX`
            memories (a supersede, a small cascade) reaches them before :meth:`defer` returns; only Chroma's copy
            waits for the background thread. Otherwise they would differ from the ledger until the thread ran, and
            a query meanwhile would reload the scope (what a larger cascade costs: its rows are not read twice).
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        index: VectorIndex,
        lexical: LexicalIndexPort,
        embedding: Embedding,
        gather: bool = False,
        shared: bool = False,
    ) -> None:
        self.ledger = ledger
        self.index = index
        self.lexical = lexical
        self.embedding = embedding
        # One index writer at a time (foreground syncs and the background worker): read rows, write, mark.
        self._lock = threading.RLock()
        # Index writes in the order their rows were read (the background worker writes Chroma without _lock).
        self._write_lock = threading.Lock()
        self._handoff: dict[str, dict[str, Any]] = {}  # new rows deferred to the worker, by id (under _lock)
        self._in_flight: InFlightWrite | None = None  # the worker's Chroma write still running (under _write_lock)
        self._deferred = DeferredIndexSync(
            self._sync_deferred,
            linger=LINGER_S if gather else 0.0,
            settle=self._settle,
            writing=lambda: (w := self._in_flight) is not None and w.running,
        )
        self._shared = shared
        self._prestarted = False

    def initial_state(self, user_ids: Sequence[str], *, rebuild: bool = False) -> dict[str, str]:
        """The ``index_state`` new memories of each user are written with: always ``pending``.

        Chroma is the vector store of record: every memory is written to it. A scope the exact plan serves gets its
        new memories into the in-process block at once and into Chroma behind the ledger commit (see
        :meth:`_apply`). ``rebuild`` is kept for :meth:`reindex`.
        """
        return dict.fromkeys(user_ids, "pending")

    def defer(self, ids: Sequence[str]) -> None:
        """Sync ``ids`` on the background thread: status changes of a cascade (see :mod:`memlineage._indexsync`)."""
        if self._shared and 0 < len(ids) <= LOCAL_STATUSES_MAX:
            self._local_statuses(ids)
        self._deferred.defer(ids)

    def _local_statuses(self, ids: Sequence[str]) -> None:
        """Server mode: bring the in-memory legs to the ledger's statuses of ``ids`` now, Chroma later.

        Runs without the sync lock: a background write stuck in the index must not hold up a cascade. If the
        background thread then applies an older read of a row, the leg differs from the ledger's stamp and the
        next query reloads the scope, so nothing stale is served either way.
        """
        rows = [
            r
            for r in self.ledger.memory_rows(list(dict.fromkeys(ids)), embedding=False)
            if r is not None and r["index_state"] in ("pending", "stale", "exact")
        ]
        if rows:
            held, metas = [r["id"] for r in rows], [index_metadata(r) for r in rows]
            self._local("update_local", held, metas)
            self.lexical.update_metadata(held, metas)

    def flush(self) -> None:
        """Apply every deferred sync now (before reading the index directly, verifying or closing)."""
        self._deferred.flush()

    def close(self) -> None:
        """Flush and stop the background thread (later deferrals apply at once). Idempotent."""
        self._deferred.close()

    def sync(self, ids: Sequence[str], *, rows: Sequence[dict[str, Any]] | None = None, fresh: bool = False) -> int:
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
        with self._lock:
            return self._sync_locked(ids, rows, fresh)

    def reindex_words(self, ids: Sequence[str]) -> None:
        """Index the words of ``ids`` in the lexical leg again (after an erasure of versions their words drew on).

        The lexical leg indexes a version with the words of the versions it revised and a withdrawal with the
        statement it withdrew (:func:`lexical_texts`); once those are erased, their words must not find it.
        Rows no search returns are left out; users the leg has not loaded are skipped by the leg itself.
        """
        with self._lock:
            rows = [
                r
                for r in self.ledger.memory_rows(list(dict.fromkeys(ids)), embedding=False)
                if r is not None and r["index_state"] in INDEXABLE_STATES
            ]
            if rows:
                self.lexical.upsert([r["id"] for r in rows], lexical_texts(self.ledger, rows),
                                    [held_metadata(r) for r in rows])  # fmt: skip

    def _sync_deferred(self, ids: Sequence[str]) -> int:
        """The background sync: status changes (``stale``, ``exact``) and new rows (``pending``) only.

        Removals stay with the call that made them: ``erase`` and ``archive`` sync them before returning and
        report what they removed.
        """
        with self._lock:
            return self._sync_locked(ids, None, False, states=("pending", "stale", "exact"), release=True)

    def _sync_locked(
        self,
        ids: Sequence[str],
        rows: Sequence[dict[str, Any]] | None,
        fresh: bool,
        *,
        states: tuple[str, ...] | None = None,
        release: bool = False,
    ) -> int:
        new: frozenset[str] = frozenset()
        if states is None:  # a foreground sync reads these rows itself; the worker then reads them in full too
            for i in ids:
                self._handoff.pop(i, None)
        if rows is None:
            rows, new = self._rows_for(ids, states)
        try:
            return self._apply(rows, fresh=fresh, release=release, new=new)
        except StorageError as exc:
            logger.warning("index update deferred (ledger is safe, repaired on next open): %s", exc)
            return 0

    def _rows_for(
        self, ids: Sequence[str], states: tuple[str, ...] | None
    ) -> tuple[list[dict[str, Any]], frozenset[str]]:
        """The ledger rows of ``ids`` to sync, and the ids among them that no index write has touched yet.

        Only rows in ``states`` when given; with vectors and premise counts where a full write needs them. Rows a
        foreground write handed to the background worker (new memories of exact-plan scopes, see :meth:`_apply`)
        are taken from :attr:`_handoff` when the ledger still has them pending with the same status (one short read
        of two columns): those were never written to the index. Any other row is read in full.
        """
        unique = list(dict.fromkeys(ids))
        handed: list[dict[str, Any]] = []
        if states is not None and self._handoff:
            held = {i: self._handoff.pop(i) for i in unique if i in self._handoff}
            now = self.ledger.index_states(list(held)) if held else {}
            handed = [r for i, r in held.items() if now.get(i) == (r["status"], "pending")]
        known = {r["id"] for r in handed}
        rest = [i for i in unique if i not in known]
        rows = [r for r in self.ledger.memory_rows(rest, embedding=False) if r] if rest else []
        if states is not None:
            rows = [r for r in rows if r["index_state"] in states]
        # Only a full write needs the stored vector: a pending row, or an exact row outside the deferred path
        # (which only carries status changes of exact rows: their blocks are updated in place).
        writes = ("pending",) if states is not None else ("pending", "exact")
        pending = [r for r in rows if r["index_state"] in writes]
        if pending:
            vectors = self.ledger.memory_rows([r["id"] for r in pending])
            for r, full in zip(pending, vectors, strict=True):
                r["embedding"] = full["embedding"] if full else None
        if pending or handed:
            counts = self.ledger.premise_counts([r["id"] for r in pending + handed])
            for r in pending + handed:
                r["premises"] = counts.get(r["id"], 0)
        return rows + handed, frozenset(known)

    def _apply(
        self,
        rows: Sequence[dict[str, Any]],
        *,
        fresh: bool = False,
        release: bool = False,
        new: frozenset[str] = frozenset(),
    ) -> int:
        gone = (Status.ARCHIVED.value, Status.ERASED.value)
        for r in rows:  # archived / erased rows never stay in the index, whatever transition touched them
            if r["index_state"] in ("pending", "stale") and r["status"] in gone:
                r["index_state"] = "removing"
        upserts = [r for r in rows if r["index_state"] == "pending"]
        stale = [r for r in rows if r["index_state"] == "stale"]
        removing = [r for r in rows if r["index_state"] == "removing"]
        # Rows the exact plan serves from the ledger: in-memory legs only (a status change, or a new row when its
        # vector is at hand), and rows that just left them (an erased or archived exact row is 'removed' at once).
        exact = [r for r in rows if r["index_state"] == "exact"]
        dropped = [r for r in rows if r["index_state"] == "removed" and r["status"] in gone]
        need = [r for r in upserts if r["embedding"] is None]
        if need:
            for r, v in zip(need, self.embedding.embed([r["content"] for r in need])):
                r["embedding"] = encode_vector(v)
        if fresh and upserts:
            # New memories of scopes the exact plan serves: into the in-process legs now (reads see them at once),
            # into Chroma on the background thread, behind the ledger commit (Chroma's add holds the GIL).
            later = self._local_first(upserts)
            if later:  # the worker writes them from these rows, after a short check that the ledger's still match
                self._handoff.update((r["id"], dict(r)) for r in upserts if r["id"] in later)
                upserts = [r for r in upserts if r["id"] not in later]
                self._prestart()
                self._deferred.defer(sorted(later))  # already in the in-process legs
        self._apply_exact(exact, dropped, fresh=fresh)
        # the in-memory lexical leg first: the worker lets the sync lock go while it writes Chroma, and the leg must
        # take the rows as they were read, before another writer's newer change to them
        self._lexical_apply(upserts, stale, removing)
        split = getattr(self.index, "split_writes", None) if release else None
        if split is not None and (upserts or stale or removing):
            self._launch(split, upserts, stale, removing, new)
            return 0
        removed = self._write_index(upserts, stale, removing, fresh=fresh)
        if upserts or stale or removing:
            with self.ledger.transaction() as conn:
                if upserts or stale:  # only rows whose status is still the one written: a newer change stays
                    self.ledger.mark_indexed(conn, [(r["id"], r["status"]) for r in upserts + stale])  # stale
                if removing:
                    self.ledger.update_memories(conn, [r["id"] for r in removing], {"index_state": "removed"})
        self._purge([r["id"] for r in removing if r["status"] == Status.ERASED.value])
        return removed

    def _prestart(self) -> None:
        """Start the vector index's backend now if it starts lazily (the embedded Chroma child process).

        Called when the first new rows are queued for the background Chroma write: the child imports chromadb
        while the writer's ledger work and the worker's gathering run, not after them.
        """
        if self._prestarted:
            return
        self._prestarted = True
        start = getattr(self.index, "prestart", None)
        if callable(start):
            start()

    def _local_first(self, rows: Sequence[dict[str, Any]]) -> set[str]:
        """Put new rows of exact-plan scopes into the in-process legs; return their ids (Chroma is written later)."""
        wants = getattr(self.index, "wants_ann_many", None)
        if wants is None or not hasattr(self.index, "put_local"):
            return set()
        ann = wants(list(dict.fromkeys(r["user_id"] for r in rows)))
        local = [r for r in rows if not ann.get(r["user_id"], True)]
        if not local:
            return set()
        metas = [{**held_metadata(r), IN_ANN: False} for r in local]
        vectors = stored_vectors(local)
        self._local("put_local", [r["id"] for r in local], vectors, metas, new=True)
        self.lexical.upsert([r["id"] for r in local], lexical_texts(self.ledger, local), metas)
        return {r["id"] for r in local}

    def _apply_exact(
        self, exact: Sequence[dict[str, Any]], dropped: Sequence[dict[str, Any]], *, fresh: bool = False
    ) -> None:
        """Bring the in-memory legs of exact-plan rows in line; hand scopes that outgrew the plan to the ANN index.

        Only ``fresh`` rows (just inserted) can take a scope past ``exact_max``; a rewrite of known rows cannot.
        """
        put = [r for r in exact if r.get("embedding") is not None]
        moved = [r for r in exact if r.get("embedding") is None]
        if put:
            vectors = stored_vectors(put)
            self._local("put_local", [r["id"] for r in put], vectors, [held_metadata(r) for r in put], new=fresh)
            self.lexical.upsert(
                [r["id"] for r in put], lexical_texts(self.ledger, put), [held_metadata(r) for r in put]
            )
        if moved:
            self._local("update_local", [r["id"] for r in moved], [index_metadata(r) for r in moved])
            self.lexical.update_metadata([r["id"] for r in moved], [index_metadata(r) for r in moved])
        if dropped:
            self._local("drop_local", [r["id"] for r in dropped])
            self.lexical.delete([r["id"] for r in dropped])
        wants = getattr(self.index, "wants_ann_many", None)
        users = list(dict.fromkeys(r["user_id"] for r in put)) if fresh else []
        grown = [u for u, ann in wants(users).items() if ann] if wants is not None and users else []
        for user in grown:  # the scope outgrew the exact plan: its exact rows go to the ANN index, in the background
            with self.ledger.transaction() as conn:
                ids = self.ledger.promote_exact(conn, user)
            logger.info("scope %s outgrew the exact plan: %d memories handed to the ANN index", user, len(ids))
            self._deferred.defer(ids)  # the in-process legs hold them already

    def _local(self, method: str, *args: object, **kwargs: object) -> None:
        """Call an in-memory leg method of the vector index (a plain index has none: its entries are all ANN).

        The method is looked up by name (``put_local``, ``update_local``, ``drop_local``), so its arguments are
        passed on as they are.
        """
        fn = getattr(self.index, method, None)
        if fn is not None:
            fn(*args, **kwargs)

    def _lexical_apply(
        self, upserts: Sequence[dict[str, Any]], stale: Sequence[dict[str, Any]], removing: Sequence[dict[str, Any]]
    ) -> None:
        """Mirror an index write into the lexical leg (in memory; rebuilt from the ledger if lost)."""
        if upserts:
            self.lexical.upsert(
                [r["id"] for r in upserts], lexical_texts(self.ledger, upserts), [held_metadata(r) for r in upserts]
            )
        if stale:
            self.lexical.update_metadata([r["id"] for r in stale], [index_metadata(r) for r in stale])
        if removing:
            self.lexical.delete([r["id"] for r in removing])

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
        with self.ledger.transaction() as conn:
            handed = self.ledger.promote_all_exact(conn)  # stores of the exact-only plan: Chroma gets them now
        if handed:
            logger.info("index repair: %d memories the exact plan held alone are written to Chroma", handed)
        rows = self.ledger.index_backlog()
        quarantined: list[str] = []
        try:
            removed = self._apply(rows) if rows else 0
        except StorageError:
            removed, quarantined = self._apply_each(rows)
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

    def _apply_each(self, rows: Sequence[dict[str, Any]]) -> tuple[int, list[str]]:
        """Apply index rows one at a time; quarantine those the index refuses. Returns (removed, quarantined)."""
        removed = 0
        bad: list[str] = []
        for r in rows:
            try:
                removed += self._apply([r])
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
        self.flush()  # status changes deferred by cascades are applied first
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
            report.fixed = self._fix(report)
        return report

    def _fix(self, report: ConsistencyReport) -> int:
        reupsert = sorted({*report.missing, *report.scope_mismatch, *report.hash_mismatch, *report.quarantined})
        restale = sorted(set(report.status_mismatch) - set(reupsert))
        with self.ledger.transaction() as conn:
            if reupsert:
                self.ledger.update_memories(conn, reupsert, {"index_state": "pending"})
            if restale:
                self.ledger.update_memories(conn, restale, {"index_state": "stale"})
        with self._ordered():
            removed = self.index.delete(report.orphans + report.not_removed)
        self._purge(report.orphans + report.not_removed)
        self.repair()
        return len(reupsert) + len(restale) + removed + len(report.pending)

    def reindex(self, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the whole index from the ledger (vectors stored in the ledger; re-embedded where missing).

        Args:
            on_progress: Called as ``on_progress(done, total)`` after each batch of entries written.

        Returns:
            Number of entries indexed.
        """
        self.flush()
        with self._lock:
            return self._reindex_locked(on_progress)

    def _reindex_locked(self, on_progress: Callable[[int, int], None] | None = None) -> int:
        rows = self.ledger.all_index_rows()
        gone = (Status.ARCHIVED.value, Status.ERASED.value)
        live = [r for r in rows if r["status"] not in gone]
        state = self.initial_state([r["user_id"] for r in live], rebuild=True)
        moved: dict[str, list[str]] = {"exact": [], "pending": []}
        for r in rows:
            target = state[r["user_id"]] if r["status"] not in gone else "removing"
            # every row takes its plan's state (a new exact_max), an indexed one too: the ledger says what the
            # index is about to lose before it loses it, so a rebuild cut short is finished by repair() on open
            if target in moved and r["index_state"] != target:
                moved[target].append(r["id"])
            r["index_state"] = target
        # a memory without a stored vector (an import without vectors) is embedded once and the vector kept, so
        # the exact plan, which reads vectors from the ledger, serves it too
        missing = [r for r in live if r["embedding"] is None]
        for start in range(0, len(missing), 256):
            chunk = missing[start : start + 256]
            for r, v in zip(chunk, self.embedding.embed([r["content"] for r in chunk]), strict=True):
                r["embedding"] = encode_vector(v)
            with self.ledger.transaction() as conn:
                self.ledger.insert_vectors(conn, [(r["id"], r["embedding"]) for r in chunk])
        with self.ledger.transaction() as conn:
            for target, ids in moved.items():
                self.ledger.update_memories(conn, ids, {"index_state": target})
        with self._ordered():
            self.index.reset()
        self.lexical.reset()
        if on_progress is not None:
            on_progress(0, len(live))
        for start in range(0, len(live), 2000):
            self._apply(live[start : start + 2000])
            if on_progress is not None:
                on_progress(min(start + 2000, len(live)), len(live))
        return len(live)
