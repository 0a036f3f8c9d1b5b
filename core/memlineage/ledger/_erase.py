"""The set of memories one erasure redacts, held in a temporary table so that every step is one set-based statement.

An erasure of a scope touches every row of it: the memories, their vectors, their events, the activities that
generated, used or invalidated them. Binding 100,000 ids to each statement (or walking one memory at a time, as
the cascade of a single retraction does) costs minutes; :class:`ErasureSet` inserts the ids once into
``temp.ml_erase_set`` (SQLite) or ``pg_temp.ml_erase_set`` (PostgreSQL, ``ON COMMIT DELETE ROWS``) and every
later statement joins that table. Like :mod:`._cascade`'s walk table it lives as long as the database connection
and nothing outside the transaction sees it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    MetaData,
    Select,
    String,
    Table,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.schema import CreateTable
from sqlalchemy.sql.elements import ColumnElement

from memlineage.ledger._schema import INDEXABLE_STATES, activities, edges, embeddings, events, memories
from memlineage.models import Relation, Status

#: The activity kind of a chat message's occurrence (``memlineage.history.MESSAGE_ACTIVITY``).
CHAT_MESSAGE = "chat_message"

__all__ = ["ErasureSet"]

#: Rows per ``executemany`` when filling the table.
_FILL = 10_000


def _set_table(schema: str) -> Table:
    return Table(
        "ml_erase_set",
        MetaData(),
        Column("id", String(255), primary_key=True),
        schema=schema,
        postgresql_on_commit="DELETE ROWS",
    )


_SQLITE_SET = _set_table("temp")
_POSTGRES_SET = _set_table("pg_temp")

#: Edges from an activity to a memory it used (decisions use the statement and the memory they act on).
_USED = Relation.USED.value
#: Edges from a memory to the activity that generated it, or that invalidated it (a decision, a clear).
_FROM_MEMORY = (Relation.WAS_GENERATED_BY.value, Relation.WAS_INVALIDATED_BY.value)
_DERIVED = Relation.WAS_DERIVED_FROM.value


class ErasureSet:
    """Memory ids of one erasure in a temporary table of ``conn``'s transaction; each method is a few statements.

    Args:
        conn: The erasure's write transaction.
        ids: The memories to erase.
        sqlite: Whether the ledger is SQLite (``temp`` schema) or PostgreSQL (``pg_temp``).
    """

    def __init__(self, conn: Connection, ids: Sequence[str], *, sqlite: bool) -> None:
        self.conn = conn
        self.table = _SQLITE_SET if sqlite else _POSTGRES_SET
        conn.execute(CreateTable(self.table, if_not_exists=True))
        conn.execute(delete(self.table))
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), _FILL):
            conn.execute(insert(self.table), [{"id": i} for i in unique[start : start + _FILL]])
        self.size = len(unique)

    @property
    def ids(self) -> Select[tuple[str]]:
        """``SELECT id`` of the set, for ``IN``."""
        return select(self.table.c.id)

    def searchable(self) -> int:
        """How many of the memories a search could return until now (ANN index, on their way there, exact plan)."""
        query = select(func.count()).where(memories.c.id.in_(self.ids), memories.c.index_state.in_(INDEXABLE_STATES))
        return int(self.conn.execute(query).scalar_one())

    def not_erased(self) -> Select[tuple[str, str]]:
        """``SELECT`` of the memories of the set not erased before (they get an ``erased`` event and edge)."""
        return select(memories.c.id, memories.c.user_id).where(
            memories.c.id.in_(self.ids), memories.c.status != Status.ERASED.value
        )

    def record_invalidation(self, *, activity_id: str, at: float, data: Mapping[str, Any]) -> int:
        """Each memory not erased before: a ``wasInvalidatedBy`` edge to ``activity_id`` and an ``erased`` event.

        Returns:
            The number of memories newly erased.
        """
        fresh = self.not_erased().subquery()
        edge_rows = select(
            fresh.c.id,
            literal(activity_id, edges.c.dst.type),
            literal(Relation.WAS_INVALIDATED_BY.value, edges.c.relation.type),
            literal(0, edges.c.support.type),
            literal(activity_id, edges.c.activity_id.type),
            fresh.c.user_id,
            literal(at, edges.c.created_at.type),
        )
        cols = ["src", "dst", "relation", "support", "activity_id", "user_id", "created_at"]
        done = self.conn.execute(insert(edges).from_select(cols, edge_rows)).rowcount or 0
        event_rows = select(
            literal(at, events.c.at.type),
            literal(Status.ERASED.value, events.c.type.type),
            fresh.c.id,
            literal(activity_id, events.c.activity_id.type),
            fresh.c.user_id,
            literal(dict(data), events.c.data.type),
        ).order_by(fresh.c.id)
        cols = ["at", "type", "memory_id", "activity_id", "user_id", "data"]
        self.conn.execute(insert(events).from_select(cols, event_rows))
        return int(done)

    def redact_memories(self, values: Mapping[str, Any]) -> int:
        """Set ``values`` on every memory of the set and delete their vectors; returns the rows changed.

        An ``index_state`` of ``"removing"`` becomes ``"removed"`` for a row the exact plan served (it never had
        an ANN entry), as :meth:`memlineage.ledger.Ledger.update_memories` does.
        """
        values = dict(values)
        if values.get("index_state") == "removing":
            values["index_state"] = case((memories.c.index_state == "exact", "removed"), else_="removing")
        self.conn.execute(delete(embeddings).where(embeddings.c.memory_id.in_(self.ids)))
        return int(self.conn.execute(update(memories).where(memories.c.id.in_(self.ids)).values(**values)).rowcount)

    def linked_activities(self, user_id: str) -> Select[tuple[str]]:
        """``SELECT id`` of ``user_id``'s activities that generated, used or invalidated a memory of the set.

        Update decisions (their evidence quotes the old and new values, or the withdrawn words), chat message
        occurrences (their framework data: content blocks, tool-call arguments), tool calls and runs.
        """
        from_memory = select(edges.c.dst).where(edges.c.src.in_(self.ids), edges.c.relation.in_(_FROM_MEMORY))
        used = select(edges.c.src).where(edges.c.dst.in_(self.ids), edges.c.relation == _USED)
        generating = select(memories.c.activity_id).where(memories.c.id.in_(self.ids))
        return select(activities.c.id).where(
            activities.c.user_id == user_id,
            or_(activities.c.id.in_(from_memory), activities.c.id.in_(used), activities.c.id.in_(generating)),
        )

    def redact_activities(self, conditions: Sequence[Any] | None, user_id: str, *, keep: str | None = None) -> int:
        """Redact the metadata of the activities linked to the set, and of those matching ``conditions`` (a scope).

        Args:
            conditions: Column conditions of a scope's activities (None: only the linked ones).
            user_id: The user whose activities these are.
            keep: An activity id to leave as it is (the erasure's own).

        Returns:
            The number of activities redacted.
        """
        which: ColumnElement[bool] = activities.c.id.in_(self.linked_activities(user_id))
        if conditions is not None:
            which = or_(which, and_(*conditions))
        cond: list[ColumnElement[bool]] = [which]
        if keep is not None:
            cond.append(activities.c.id != keep)
        # a chat message's occurrence keeps its position (a session never reuses one: memlineage.history)
        placed = [
            {"aid": aid, "kept": {"redacted": True, "position": meta["position"]}}
            for aid, meta in self.conn.execute(
                select(activities.c.id, activities.c.meta).where(*cond, activities.c.kind == CHAT_MESSAGE)
            )
            if isinstance(meta, Mapping) and isinstance(meta.get("position"), int)
        ]
        n = int(self.conn.execute(update(activities).where(*cond).values(meta={"redacted": True})).rowcount)
        if placed:
            self.conn.execute(
                update(activities).where(activities.c.id == bindparam("aid")).values(meta=bindparam("kept")), placed
            )
        return n

    def redact_events(self, user_id: str | None, *, keep_types: Sequence[str] = ()) -> int:
        """Redact the data of the events of the set's memories, and of every event of ``user_id`` when given.

        Args:
            user_id: A user whose every event is redacted (an erasure of all of the user's data), or None.
            keep_types: Event types of ``user_id`` left as they are (earlier erasure receipts).

        Returns:
            The number of events redacted.
        """
        which: ColumnElement[bool] = events.c.memory_id.in_(self.ids)
        if user_id is not None:
            which = or_(which, and_(events.c.user_id == user_id, events.c.type.not_in(list(keep_types))))
        return int(self.conn.execute(update(events).where(which).values(data={"redacted": True})).rowcount)

    def premises_of_others(self) -> list[str]:
        """Memories of the set that something outside the set was derived from (roots of a cascade below)."""
        query = (
            select(edges.c.dst)
            .where(edges.c.dst.in_(self.ids), edges.c.relation == _DERIVED, edges.c.src.not_in(self.ids))
            .distinct()
        )
        return sorted(str(r[0]) for r in self.conn.execute(query))

    def successors(self) -> list[str]:
        """Live memories outside the set whose indexed words may include the set's: later versions, withdrawals.

        The lexical leg indexes a version with the words of up to three versions it revised, and a withdrawal
        with the statement it withdrew (:func:`memlineage.services.index_sync.lexical_texts`).
        """
        later = select(memories.c.id).where(memories.c.supersedes.in_(self.ids))
        decisions = select(edges.c.src).where(edges.c.dst.in_(self.ids), edges.c.relation == _USED)
        statements = select(edges.c.dst).where(edges.c.src.in_(decisions), edges.c.relation == _USED)
        found = select(memories.c.id).where(
            or_(memories.c.id.in_(later), memories.c.id.in_(statements)),
            memories.c.id.not_in(self.ids),
            memories.c.status != Status.ERASED.value,
        )
        out = [str(r[0]) for r in self.conn.execute(found)]
        frontier = list(out)
        for _ in range(2):  # up to three versions back, as the lexical leg reads them
            if not frontier:
                break
            step = select(memories.c.id).where(
                memories.c.supersedes.in_(frontier), memories.c.status != Status.ERASED.value
            )
            frontier = [str(r[0]) for r in self.conn.execute(step) if r[0] not in out]
            out.extend(frontier)
        return out

    def close(self) -> None:
        """Empty the table (PostgreSQL also empties it at commit)."""
        self.conn.execute(delete(self.table))
