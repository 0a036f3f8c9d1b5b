"""Reading :class:`~memlineage.models.Memory` objects by id, reusing those built from an unchanged row.

A recall reads every fused candidate (about 66 at ``k = 5``) as a ``Memory``: three pydantic objects and three
JSON columns a row. Most of them were read by the previous recall too. :class:`MemoryReader` reads the rows'
columns as the driver gives them (the JSON columns as their stored text on SQLite) and builds a ``Memory`` only
for a row whose columns or original premises differ from those it was last built from. The comparison is with the
row as read now, so a reused object is always what the ledger holds: no write needs to tell the reader.

Columns a ``Memory`` does not carry (``content_hash``, ``embedder``, ``index_state``, ``stamp_key``) are not read:
the index sync's state changes do not cost a rebuild. The cache holds memory texts, so every erasure empties it
(:func:`memlineage._forget.on_erase`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Text, select, type_coerce
from sqlalchemy.engine import Connection

from memlineage._forget import on_erase
from memlineage.ledger._graph import _chunks
from memlineage.ledger._rows import row_to_memory
from memlineage.ledger._schema import memories
from memlineage.models import Memory

__all__ = ["MemoryReader"]

#: Columns a ``Memory`` does not carry: not read (the index sync's state changes cost no rebuild).
_NOT_CARRIED = frozenset({"content_hash", "embedder", "index_state", "stamp_key"})
_NAMES = tuple(c.name for c in memories.c if c.name not in _NOT_CARRIED)
_JSON = frozenset(c.name for c in memories.c if isinstance(c.type, JSON))
#: JSON columns as text: SQLite hands the stored text, which compares and hashes cheaply; PostgreSQL's driver
#: decodes them either way (dicts and lists compare too).
_SELECT = select(*(type_coerce(memories.c[n], Text).label(n) if n in _JSON else memories.c[n] for n in _NAMES))
_JSON_AT = tuple(i for i, n in enumerate(_NAMES) if n in _JSON)

Premises = Callable[[Sequence[str], Connection], Mapping[str, tuple[str, ...]]]


def _decoded(values: tuple[Any, ...]) -> dict[str, Any]:
    row = dict(zip(_NAMES, values, strict=True))
    for i in _JSON_AT:
        raw = values[i]
        if isinstance(raw, str):
            row[_NAMES[i]] = json.loads(raw)
    return row


class MemoryReader:
    """Builds ``Memory`` objects from ledger rows, reusing the last one built for an unchanged row.

    Args:
        maxsize: Memories kept, least recently read dropped first (≥ 1; about 5 KB each, so 2,048 hold ~11 MB).

    A reused ``Memory`` is the same (frozen) object as before; a caller must not change its ``metadata`` or
    ``tags`` in place (pydantic's ``frozen`` guards the fields, not what they hold).
    """

    def __init__(self, *, maxsize: int = 2048) -> None:
        self._maxsize = max(1, maxsize)
        self._built: OrderedDict[str, tuple[tuple[Any, ...], Memory]] = OrderedDict()
        self._lock = threading.Lock()
        self.reused = 0
        on_erase(self.clear)

    def clear(self) -> None:
        """Forget every memory built (erasures call it: the objects hold memory texts)."""
        with self._lock:
            self._built.clear()

    def read(self, conn: Connection, ids: Sequence[str], premises_of: Premises) -> list[Memory | None]:
        """Memories for ``ids`` in input order (``None`` for ids that do not exist), read in ``conn``.

        ``premises_of(ids, conn)`` gives each found id's original premises (support group 0).
        """
        found: dict[str, tuple[Any, ...]] = {}
        for chunk in _chunks(list(dict.fromkeys(ids))):
            for row in conn.execute(_SELECT.where(memories.c.id.in_(chunk))):
                found[row[0]] = tuple(row)
        premises = premises_of(list(found), conn) if found else {}
        out: dict[str, Memory] = {}
        with self._lock:
            for mid, values in found.items():
                key = (*values, premises.get(mid, ()))
                held = self._built.get(mid)
                if held is not None and held[0] == key:
                    self._built.move_to_end(mid)
                    self.reused += 1
                    out[mid] = held[1]
                    continue
                mem = row_to_memory(_decoded(values), premises.get(mid, ()))
                self._built[mid] = (key, mem)
                self._built.move_to_end(mid)
                out[mid] = mem
            while len(self._built) > self._maxsize:
                self._built.popitem(last=False)
        return [out.get(i) for i in ids]
