"""Lineage-graph and index-state queries of the ledger (a mixin of :class:`~memlineage.ledger.Ledger`).

Graph walks are recursive CTEs whose cost grows with the affected set, not with the store; the cascade's writes
join the walk instead of binding the descendants' ids (issue 16).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, and_, case, cast, func, insert, literal, or_, select, update

from memlineage.ledger._schema import edges, events, memories, select_full_memories, supports
from memlineage.models import Relation, Status

#: Max bound parameters per IN (...) chunk; well under SQLite's and PostgreSQL's limits.
CHUNK = 900


def _chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class GraphQueries:
    """Premises, walks, the set-based cascade and index-state queries; needs ``_maybe`` and ``update_memories``."""

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

    @staticmethod
    def _descendants_cte(mid: str) -> Any:
        """Recursive CTE ``(id, depth)`` over wasDerivedFrom edges below ``mid`` (one row per id and depth)."""
        rel = edges.c.relation == Relation.WAS_DERIVED_FROM.value
        seed = select(edges.c.src.label("id"), cast(literal(1), edges.c.support.type).label("depth")).where(
            edges.c.dst == mid, rel
        )
        cte = seed.cte("cascade", recursive=True)
        step = select(edges.c.src.label("id"), (cte.c.depth + 1).label("depth")).where(
            edges.c.dst == cte.c.id, rel, cte.c.depth < 10_000
        )
        return cte.union(step)

    def cascade_info(self, mid: str, conn: Connection | None = None) -> dict[str, tuple[int, str, int]]:
        """Descendants of ``mid`` with what a cascade needs, in one recursive query.

        Returns:
            ``{memory_id: (min_depth, status, number_of_support_groups)}``.
        """
        cte = self._descendants_cte(mid)
        walked = select(cte.c.id, func.min(cte.c.depth).label("depth")).group_by(cte.c.id).subquery()
        groups = (
            select(supports.c.memory_id, func.count().label("n"))
            .where(supports.c.memory_id.in_(select(walked.c.id)))
            .group_by(supports.c.memory_id)
            .subquery()
        )
        query = (
            select(walked.c.id, walked.c.depth, memories.c.status, func.coalesce(groups.c.n, 0))
            .join(memories, memories.c.id == walked.c.id)
            .outerjoin(groups, groups.c.memory_id == walked.c.id)
        )
        with self._maybe(conn) as c:
            return {i: (d, st, n) for i, d, st, n in c.execute(query)}

    def cascade_graph(
        self, mid: str, conn: Connection | None = None
    ) -> tuple[list[tuple[str, str, int]], dict[str, dict[int, int]], dict[str, str]]:
        """The derivation graph below ``mid`` for a cascade with alternative supports, in three set-based reads.

        Each read joins the recursive walk (:meth:`cascade_info`'s) instead of binding the descendants' ids, so
        the number of statements does not grow with the affected set.

        Returns:
            ``(edges, groups, statuses)``: ``(derived, premise, support_group)`` for every wasDerivedFrom edge of a
            descendant; ``{memory_id: {support_group: number_of_premises}}`` of the descendants; the status of
            every descendant and of every premise of one.
        """
        cte = self._descendants_cte(mid)
        walked = select(cte.c.id)
        rel = edges.c.relation == Relation.WAS_DERIVED_FROM.value
        with self._maybe(conn) as c:
            edge_rows = [
                (s, d, g)
                for s, d, g in c.execute(
                    select(edges.c.src, edges.c.dst, edges.c.support).where(edges.c.src.in_(walked), rel)
                )
            ]
            groups: dict[str, dict[int, int]] = {}
            query = select(supports.c.memory_id, supports.c.support, supports.c.premises).where(
                supports.c.memory_id.in_(walked)
            )
            for m, group, count in c.execute(query):
                groups.setdefault(m, {})[group] = count
            premises = select(edges.c.dst).where(edges.c.src.in_(walked), rel)
            query = select(memories.c.id, memories.c.status).where(
                or_(memories.c.id.in_(walked), memories.c.id.in_(premises))
            )
            statuses: dict[str, str] = {str(r[0]): str(r[1]) for r in c.execute(query)}
        return edge_rows, groups, statuses

    def attributed_premises(self, root: str, conn: Connection | None = None) -> list[tuple[str, str, str]]:
        """``(derived, premise, attribution)`` of every annotated wasDerivedFrom edge below ``root``, oldest first.

        One statement joined to the recursive walk; only annotated edges (captured runs) come back, so the cost
        of a cascade report does not grow with the descendants that have none.
        """
        cte = self._descendants_cte(root)
        query = (
            select(edges.c.src, edges.c.dst, edges.c.attribution)
            .where(
                edges.c.src.in_(select(cte.c.id)),
                edges.c.relation == Relation.WAS_DERIVED_FROM.value,
                edges.c.attribution.is_not(None),
            )
            .order_by(edges.c.id)
        )
        with self._maybe(conn) as c:
            return [(s, d, a) for s, d, a in c.execute(query)]

    def mark_suspect(
        self,
        conn: Connection,
        root: str,
        ids: Sequence[str],
        *,
        every_active: bool,
        event: Mapping[str, Any],
    ) -> None:
        """Set ``ids`` (descendants of ``root``) to ``suspect``, their index entries ``stale``, one event each.

        Args:
            conn: The cascade's write transaction.
            root: The invalidated memory whose descendants these are.
            ids: The descendants to mark, in topological order (the events are appended in this order).
            every_active: ``ids`` is exactly every active descendant of ``root`` (no alternative supports below
                it): one ``INSERT ... SELECT`` and one ``UPDATE ... WHERE id IN (recursive walk)`` do it without
                binding the ids. Otherwise one ``executemany`` appends the events and the ids are bound in chunks.
            event: The event every marked memory gets: ``at``, ``type``, ``activity_id``, ``user_id``, ``data``
                (the same payload for all, serialised once).
        """
        if not ids:
            return
        shared = {k: event[k] for k in ("at", "type", "activity_id", "user_id")}
        shared["data"] = dict(event.get("data") or {})
        if not every_active:
            conn.execute(insert(events).values(**shared), [{"memory_id": i} for i in ids])
            self.update_memories(conn, ids, {"status": Status.SUSPECT.value, "index_state": "stale"})
            return
        cte = self._descendants_cte(root)
        walked = select(cte.c.id, func.min(cte.c.depth).label("depth")).group_by(cte.c.id).subquery()
        active = (
            select(
                literal(shared["at"], events.c.at.type),
                literal(shared["type"], events.c.type.type),
                walked.c.id,
                literal(shared["activity_id"], events.c.activity_id.type),
                literal(shared["user_id"], events.c.user_id.type),
                literal(shared["data"], events.c.data.type),
            )
            .join(memories, memories.c.id == walked.c.id)
            .where(memories.c.status == Status.ACTIVE.value)
            .order_by(walked.c.depth, walked.c.id)
        )
        cols = ["at", "type", "memory_id", "activity_id", "user_id", "data"]
        conn.execute(insert(events).from_select(cols, active))  # before the UPDATE: it selects the active ones
        values = {
            "status": Status.SUSPECT.value,
            "index_state": case((memories.c.index_state == "indexed", "stale"), else_=memories.c.index_state),
        }
        cte = self._descendants_cte(root)
        stmt = (
            update(memories)
            .where(memories.c.id.in_(select(cte.c.id)), memories.c.status == Status.ACTIVE.value)
            .values(**values)
        )
        conn.execute(stmt)

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
        """One user's rows that belong in the index (pending, indexed or stale), with their vectors."""
        query = select_full_memories().where(
            memories.c.user_id == user_id, memories.c.index_state.in_(("pending", "indexed", "stale"))
        )
        with self._maybe(conn) as c:
            return [dict(r) for r in c.execute(query).mappings()]

    def count_indexable(self, user_id: str, conn: Connection | None = None) -> int:
        """How many of one user's rows belong in the index (the size of the scope's vector search)."""
        query = (
            select(func.count())
            .select_from(memories)
            .where(memories.c.user_id == user_id, memories.c.index_state.in_(("pending", "indexed", "stale")))
        )
        with self._maybe(conn) as c:
            return int(c.execute(query).scalar_one())
