"""Event-log reads of the services (the event log's writes are :meth:`memlineage.ledger.Ledger.insert_events`)."""

from __future__ import annotations

from sqlalchemy import Connection, select

from memlineage.ledger._schema import events

__all__ = ["memories_with_event"]


def memories_with_event(conn: Connection, activity_id: str, event_type: str) -> list[str | None]:
    """The ``memory_id`` of every event of type ``event_type`` that ``activity_id`` recorded.

    Returns:
        One entry per event, in the database's order (None for an event about no memory).
    """
    query = select(events.c.memory_id).where(events.c.activity_id == activity_id, events.c.type == event_type)
    return [r[0] for r in conn.execute(query).all()]
