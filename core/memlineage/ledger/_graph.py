"""Lineage-graph and index-state queries of the ledger (a mixin of :class:`~memlineage.ledger.Ledger`).

Graph walks are recursive CTEs whose cost grows with the affected set, not with the store. A cascade walks once,
into a temporary table its later steps join (:mod:`memlineage.ledger._cascade`, issue 16).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from sqlalchemy import Connection, and_, case, cast, func, literal, select, update

from memlineage.ledger._schema import (
    INDEXABLE_STATES,
    activities,
    edges,
    embeddings,
    memories,
    select_full_memories,
    supports,
)
from memlineage.models import Relation

#: Max bound parameters per IN (...) chunk; well under SQLite's and PostgreSQL's limits.
CHUNK = 900


def _chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class GraphQueries:
    """Premises, walks, edges, the set-based cascade and index-state queries; needs ``_maybe``, ``update_memories``."""

    def _maybe(self, conn: Connection | None) -> AbstractContextManager[Connection]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def update_memories(
        self, conn: Connection, ids: Sequence[str], values: Mapping[str, Any]
    ) -> int:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def premises(
        self, ids: Sequence[str], conn: Connection | None = None, *, support: int | None = None
    ) -> dict[str, tuple[str, ...]]:
        """``wasDerivedFrom`` targets of each id (optionally one support group only), in insertion order."""
        out: dict[str, list[str]] = {}
        with self._maybe(conn) as c:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                cond = and_(edges.c.src.in_(chunk), edges.c.relation == Relation.WAS_DERIVED_FROM.value)
                if support is not None:
                    cond = and_(cond, edges.c.support == support)
                query = select(edges.c.src, edges.c.dst).where(cond).order_by(edges.c.id)
                for src, dst in c.execute(query):
                    out.setdefault(src, []).append(dst)
        return {k: tuple(v) for k, v in out.items()}

    def derivation_edges(self, ids: Sequence[str], conn: Connection | None = None) -> list[tuple[str, str, int]]:
        """``(derived, premise, support_group)`` for every wasDerivedFrom edge whose derived side is in ``ids``."""
        rows: list[tuple[str, str, int]] = []
        with self._maybe(conn) as c:
            for chunk in _chunks(list(ids)):
                query = select(edges.c.src, edges.c.dst, edges.c.support).where(
                    edges.c.src.in_(chunk), edges.c.relation == Relation.WAS_DERIVED_FROM.value
                )
                rows.extend((s, d, g) for s, d, g in c.execute(query))
        return rows

    def support_groups(self, ids: Sequence[str], conn: Connection | None = None) -> dict[str, dict[int, int]]:
        """For each memory, ``{support_group: number_of_premises}``."""
        out: dict[str, dict[int, int]] = {}
        with self._maybe(conn) as c:
            for chunk in _chunks(list(ids)):
                query = select(supports.c.memory_id, supports.c.support, supports.c.premises).where(
                    supports.c.memory_id.in_(chunk)
                )
                for mid, group, count in c.execute(query):
                    out.setdefault(mid, {})[group] = count
        return out

    def support_rows(self, memory_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """All support groups of one memory, oldest first."""
        with self._maybe(conn) as c:
            query = select(supports).where(supports.c.memory_id == memory_id).order_by(supports.c.support)
            return [dict(r) for r in c.execute(query).mappings()]

    def statuses(self, ids: Sequence[str], conn: Connection | None = None) -> dict[str, str]:
        """Status of each existing id."""
        out: dict[str, str] = {}
        with self._maybe(conn) as c:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                query = select(memories.c.id, memories.c.status).where(memories.c.id.in_(chunk))
                out.update({i: s for i, s in c.execute(query)})
        return out

    def walk(
        self, ids: Sequence[str], *, direction: str, conn: Connection | None = None, max_depth: int | None = None
    ) -> dict[str, int]:
        """Transitive ``wasDerivedFrom`` closure by a recursive CTE, cost proportional to the result.

        Args:
            ids: Start memory ids (not included in the result unless reachable through a cycle).
            direction: ``"descendants"`` (memories derived from ``ids``) or ``"ancestors"`` (their premises).
            conn: Optional connection to run in (to see uncommitted writes).
            max_depth: Stop after this many hops (None = unlimited).

        Returns:
            ``{memory_id: depth}`` with the smallest depth at which each was reached (1 = direct).
        """
        if not ids:
            return {}
        near, far = (edges.c.dst, edges.c.src) if direction == "descendants" else (edges.c.src, edges.c.dst)
        rel = edges.c.relation == Relation.WAS_DERIVED_FROM.value
        result: dict[str, int] = {}
        with self._maybe(conn) as c:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                seed = select(far.label("id"), cast(literal(1), edges.c.support.type).label("depth")).where(
                    near.in_(chunk), rel
                )
                cte = seed.cte("walk", recursive=True)
                step = select(far.label("id"), (cte.c.depth + 1).label("depth")).where(near == cte.c.id, rel)
                if max_depth is not None:
                    step = step.where(cte.c.depth < max_depth)
                else:
                    # Cycles are refused on write; the bound is a guard against corrupted data.
                    step = step.where(cte.c.depth < 10_000)
                cte = cte.union(step)
                query = select(cte.c.id, func.min(cte.c.depth)).group_by(cte.c.id)
                for mid, depth in c.execute(query):
                    if mid not in result or depth < result[mid]:
                        result[mid] = depth
        return result

    def mark_indexed(self, conn: Connection, written: Sequence[tuple[str, str]]) -> None:
        """Mark index entries written as ``indexed``, each only if its status is still the one written.

        Args:
            conn: A write transaction.
            written: ``(memory_id, status)`` of each entry as it was written to the index. A row whose status
                changed meanwhile (a cascade committed after the rows were read) keeps its ``pending`` / ``stale``
                state, so the sync that follows that change still writes it (a compare-and-set on the status).
        """
        by_status: dict[str, list[str]] = {}
        for mid, status in written:
            by_status.setdefault(status, []).append(mid)
        for status, ids in by_status.items():
            for chunk in _chunks(ids):
                conn.execute(
                    update(memories)
                    .where(
                        memories.c.id.in_(chunk),
                        memories.c.status == status,
                        memories.c.index_state.in_(("pending", "stale")),
                    )
                    .values(index_state="indexed")
                )

    def indexable_rows(self, user_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """One user's rows that belong in the index (exact, pending, indexed or stale), with their vectors."""
        query = select_full_memories().where(
            memories.c.user_id == user_id, memories.c.index_state.in_(INDEXABLE_STATES)
        )
        with self._maybe(conn) as c:
            return [dict(r) for r in c.execute(query).mappings()]

    def count_indexable(self, user_id: str, conn: Connection | None = None) -> int:
        """How many of one user's rows belong in the index (the size of the scope's vector search)."""
        return self._count_in_states(user_id, INDEXABLE_STATES, conn)

    def _count_in_states(self, user_id: str, states: Sequence[str], conn: Connection | None) -> int:
        query = (
            select(func.count())
            .select_from(memories)
            .where(memories.c.user_id == user_id, memories.c.index_state.in_(states))
        )
        with self._maybe(conn) as c:
            return int(c.execute(query).scalar_one())

    def scope_plan_counts(self, user_ids: Sequence[str], conn: Connection | None = None) -> dict[str, tuple[int, int]]:
        """``user_id -> (indexable rows, rows in the ANN index or on their way there)``; index-only reads.

        The second figure is what ``indexed``, ``stale`` and ``pending`` rows add up to: a scope that has any is
        served by, or being handed to, the ANN index, and its new memories go there too. Users without rows are
        ``(0, 0)``.
        """
        handed = case((memories.c.index_state.in_(("indexed", "stale", "pending")), 1), else_=0)
        out = dict.fromkeys(user_ids, (0, 0))
        with self._maybe(conn) as c:
            for chunk in _chunks(list(out)):
                query = (
                    select(memories.c.user_id, func.count(), func.coalesce(func.sum(handed), 0))
                    .where(memories.c.user_id.in_(chunk), memories.c.index_state.in_(INDEXABLE_STATES))
                    .group_by(memories.c.user_id)
                )
                for user, n, handed_n in c.execute(query):
                    out[user] = (int(n), int(handed_n))
        return out

    def scope_stamp(self, user_id: str, conn: Connection | None = None) -> tuple[int, int, int]:
        """``(indexable rows, sum of their stamp keys, sum of the active ones' keys)`` for one user.

        Each row's ``stamp_key`` is a 31-bit number, its creation time above random bits
        (:func:`memlineage.ledger._ledger.new_stamp_key`), so the stamp changes with any insert or removal and with
        any change into or out of ``active`` (a miss needs keys that cancel exactly: about 1 in 2^31).
        One index-only read (``ix_ml_memories_stamp``).
        """
        key = func.coalesce(memories.c.stamp_key, 0)
        active = case((memories.c.status == "active", key), else_=0)
        query = select(func.count(), func.coalesce(func.sum(key), 0), func.coalesce(func.sum(active), 0)).where(
            memories.c.user_id == user_id, memories.c.index_state.in_(INDEXABLE_STATES)
        )
        with self._maybe(conn) as c:
            n, keys, active_keys = c.execute(query).one()
        return int(n), int(keys), int(active_keys)

    def count_awaiting_ann(self, user_id: str, conn: Connection | None = None) -> int:
        """How many of one user's indexable rows the ANN index does not hold yet (``exact`` or ``pending``)."""
        return self._count_in_states(user_id, ("exact", "pending"), conn)

    def premise_counts(self, ids: Sequence[str], conn: Connection | None = None) -> dict[str, int]:
        """How many premises each memory rests on (all its support groups), for the index's metadata."""
        out: dict[str, int] = {}
        with self._maybe(conn) as c:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                query = (
                    select(supports.c.memory_id, func.sum(supports.c.premises))
                    .where(supports.c.memory_id.in_(chunk))
                    .group_by(supports.c.memory_id)
                )
                out.update((mid, int(n or 0)) for mid, n in c.execute(query))
        return out

    def index_states(self, ids: Sequence[str], conn: Connection | None = None) -> dict[str, tuple[str, str]]:
        """``(status, index_state)`` of each memory in ``ids`` that exists.

        The index sync's cheap re-check of rows it already holds: two short columns, no JSON or dates decoded.
        """
        out: dict[str, tuple[str, str]] = {}
        with self._maybe(conn) as c:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                query = select(memories.c.id, memories.c.status, memories.c.index_state).where(memories.c.id.in_(chunk))
                out.update((mid, (status, state)) for mid, status, state in c.execute(query))
        return out

    def promote_all_exact(self, conn: Connection) -> int:
        """Hand every ``exact`` row (stores written when small scopes stayed out of Chroma) to the index sync.

        Returns:
            The number of rows changed.
        """
        done = conn.execute(update(memories).where(memories.c.index_state == "exact").values(index_state="pending"))
        return int(done.rowcount or 0)

    def promote_exact(self, conn: Connection, user_id: str) -> list[str]:
        """Hand one user's ``exact`` rows to the ANN index: they become ``pending`` for the index sync.

        Returns:
            The ids changed, oldest first.
        """
        cond = (memories.c.user_id == user_id, memories.c.index_state == "exact")
        ids = [r[0] for r in conn.execute(select(memories.c.id).where(*cond).order_by(memories.c.id))]
        for chunk in _chunks(ids):
            conn.execute(update(memories).where(memories.c.id.in_(chunk), *cond).values(index_state="pending"))
        return ids

    def vectors(self, ids: Sequence[str], conn: Connection | None = None) -> dict[str, np.ndarray]:
        """The stored vectors of ``ids`` as float32 arrays (memories without one are left out)."""
        out: dict[str, np.ndarray] = {}
        with self._maybe(conn) as c:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                query = select(embeddings.c.memory_id, embeddings.c.embedding).where(embeddings.c.memory_id.in_(chunk))
                for mid, blob in c.execute(query):
                    out[mid] = np.frombuffer(blob, dtype="<f4")
        return out

    def possible_updates(
        self, user_id: str, ids: Sequence[str], conn: Connection | None = None
    ) -> dict[tuple[str, str], str]:
        """Pending possible updates among ``ids``: ``{(older_id, newer_id): decision_id}`` of one user.

        A possible update is an ``update_detection`` activity named ``possible_update`` with outcome ``pending``
        that ``used`` both memories (its metadata names the ``target`` and the ``statement``).
        """
        wanted = list(dict.fromkeys(ids))
        if len(wanted) < 2:
            return {}
        out: dict[tuple[str, str], str] = {}
        with self._maybe(conn) as c:
            for chunk in _chunks(wanted):
                query = (
                    select(activities.c.id, activities.c.meta)
                    .join(edges, edges.c.src == activities.c.id)
                    .where(
                        edges.c.dst.in_(chunk), edges.c.relation == "used", activities.c.user_id == user_id,
                        activities.c.kind == "update_detection", activities.c.name == "possible_update",
                        activities.c.outcome == "pending",
                    )
                )  # fmt: skip
                for act_id, meta in c.execute(query):
                    meta = meta or {}
                    target, statement = meta.get("target"), meta.get("statement")
                    if isinstance(target, str) and isinstance(statement, str):
                        out[(target, statement)] = act_id
        keep = set(wanted)
        return {pair: act for pair, act in out.items() if pair[0] in keep and pair[1] in keep}

    def edges_touching(self, ids: Sequence[str], conn: Connection | None = None) -> list[dict[str, Any]]:
        """Every edge whose ``src`` is in ``ids``."""
        out: list[dict[str, Any]] = []
        with self._maybe(conn) as c:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                query = select(edges).where(edges.c.src.in_(chunk)).order_by(edges.c.id)
                out.extend(dict(r) for r in c.execute(query).mappings())
        return out

    def edges_into(self, ids: Sequence[str], relation: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Every edge of ``relation`` whose ``dst`` is in ``ids`` (e.g. the activities that ``used`` a memory)."""
        out: list[dict[str, Any]] = []
        with self._maybe(conn) as c:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                query = select(edges).where(edges.c.dst.in_(chunk), edges.c.relation == relation).order_by(edges.c.id)
                out.extend(dict(r) for r in c.execute(query).mappings())
        return out
