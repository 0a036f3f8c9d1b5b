"""Lineage writes of the write path that :class:`memlineage.ledger.Ledger`'s inserts do not cover."""

from __future__ import annotations

from sqlalchemy import Connection, update

from memlineage.ledger._schema import supports

__all__ = ["set_support_premises"]


def set_support_premises(conn: Connection, support_id: int, premises: int) -> None:
    """Set the number of premises of one support group (row ``support_id`` of the supports table)."""
    conn.execute(update(supports).where(supports.c.id == support_id).values(premises=premises))
