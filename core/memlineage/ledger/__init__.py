"""Ledger: the SQL source of truth (memories, lineage edges, activities, append-only events)."""

from memlineage.ledger._ledger import Ledger
from memlineage.ledger._rows import Event, decode_vector, encode_vector, memory_to_row, row_to_memory

__all__ = ["Event", "Ledger", "decode_vector", "encode_vector", "memory_to_row", "row_to_memory"]
