"""Reads by id, by exact criteria and along the lineage DAG: get, find, slots, ancestors, explain, audit, stats.

No ranking and no reinforcement here (that is :mod:`memlineage.services.recall`); every read is confined to its
caller's scope, and other scopes' memories are reported as not found.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memlineage.errors import InvalidInputError, MemoryNotFoundError, ScopeViolationError
from memlineage.ledger import Event, Ledger, row_to_memory
from memlineage.ledger._queries_memories import find_rows, slot_names
from memlineage.lineage import Explanation
from memlineage.models import (
    Activity,
    Memory,
    MemoryKind,
    Relation,
    Scope,
    Status,
    as_utc,
    check_id,
    normalize_tags,
    to_epoch,
)
from memlineage.ports import Clock, VectorIndex
from memlineage.services._checks import MAX_LIMIT, id_tuple, kind_values
from memlineage.services._rows import LIVE, event_row, row_activity, row_scope

__all__ = ["Reads"]


class Reads:
    """Scope-checked reads of the ledger.

    Args:
        ledger: The ledger.
        index: The vector index (its size, for :meth:`stats`).
        clock: Returns "now" (default of :meth:`slot_value`; time of admin-read events).
    """

    def __init__(self, *, ledger: Ledger, index: VectorIndex, clock: Clock) -> None:
        self.ledger = ledger
        self.index = index
        self.clock = clock

    def get(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Memory | None:
        """See :meth:`memlineage.MemoryManager.get`."""
        return self.get_many([memory_id], scope=scope)[0]

    def get_many(self, ids: Sequence[str], *, scope: Scope | Mapping[str, Any] | str) -> list[Memory | None]:
        """See :meth:`memlineage.MemoryManager.get_many`."""
        scope = Scope.coerce(scope)
        wanted = list(ids) if not isinstance(ids, str) else [ids]
        unique = list(id_tuple(wanted, "ids"))  # validated and de-duplicated; the answer stays aligned with ``ids``
        found = dict(zip(unique, self.ledger.memories(unique)))
        return [m if (m := found[i]) is not None and scope.contains(m.scope) else None for i in wanted]

    def require(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Memory:
        """See :meth:`memlineage.MemoryManager.require`."""
        mem = self.get(memory_id, scope=scope)
        if mem is None:
            raise _not_found(memory_id)
        return mem

    def require_in_scope(self, memory_id: str, *, scope: Scope) -> None:
        """Like :meth:`require` without loading the memory's lineage: only its row's scope is checked.

        Raises:
            MemoryNotFoundError: no such memory in ``scope``.
        """
        row = self.ledger.memory_rows([memory_id], embedding=False)[0]
        if row is None or not scope.contains(row_scope(row)):
            raise _not_found(memory_id)

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
        newest: int | None = None,
    ) -> list[Memory]:
        """See :meth:`memlineage.MemoryManager.find`."""
        scope = Scope.coerce(scope)
        for name, value in (("limit", limit), ("offset", offset), ("newest", newest)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                msg = f"{name} must be a non-negative int, got {value!r}"
                raise InvalidInputError(msg)
        kinds_wanted = kind_values(kinds)
        if slot is not None:
            check_id(slot, "slot")
        wanted_tags = set(normalize_tags(tags))
        statuses = list(LIVE) if include_suspect else [Status.ACTIVE.value]
        session = scope.session_id if session_only else None
        # the newest few of a long history are read with a limit, not by reading every id (a chat window per turn)
        pushed = newest if newest is not None and not wanted_tags and not offset and limit is None else None
        with self.ledger.read() as conn:
            found = find_rows(
                conn,
                scope.user_id,
                statuses,
                agent_id=scope.agent_id,
                session_id=session,
                slot=slot,
                kinds=kinds_wanted,
                newest=pushed,
            )
            ids = [mid for mid, mem_tags in found if wanted_tags <= set(mem_tags or ())]
        ids = ids[offset:] if limit is None else ids[offset : offset + limit]
        if newest is not None:
            ids = ids[max(0, len(ids) - newest) :] if newest else []
        return [m for m in self.ledger.memories(ids) if m is not None]

    def slots(
        self,
        *,
        scope: Scope | Mapping[str, Any] | str | None = None,
        prefix: str = "",
        admin: tuple[str, str] | None = None,
    ) -> list[tuple[str, str]]:
        """See :meth:`memlineage.MemoryManager.slots`."""
        user: str | None = None
        agent: str | None = None
        if scope is None:
            actor, reason = admin or ("", "")
            if not (isinstance(actor, str) and actor.strip() and isinstance(reason, str) and reason.strip()):
                msg = "listing slots across users is an admin read: pass scope=..., or admin=(actor, reason)"
                raise ScopeViolationError(msg)
            data = {"actor": actor, "reason": reason, "operation": "slots", "prefix": prefix}
            with self.ledger.transaction() as conn:
                # no user owns a cross-user listing: user_id NULL, which no scope's audit matches
                event = event_row(to_epoch(self.clock()), "admin_access", None, None, None, data)
                self.ledger.insert_events(conn, [event])
        if scope is not None:
            s = Scope.coerce(scope)
            user, agent = s.user_id, s.agent_id
        with self.ledger.read() as conn:
            return slot_names(conn, list(LIVE), user_id=user, agent_id=agent, prefix=prefix)

    def slot_history(self, slot: str, *, scope: Scope | Mapping[str, Any] | str) -> list[Memory]:
        """See :meth:`memlineage.MemoryManager.slot_history`."""
        scope = Scope.coerce(scope)
        rows = self.ledger.slot_versions(scope.user_id, scope.agent_id, check_id(slot, "slot"))
        return [m for m in self.ledger.memories([r["id"] for r in rows]) if m is not None]

    def slot_value(
        self, slot: str, *, scope: Scope | Mapping[str, Any] | str, as_of: datetime | None = None
    ) -> Memory | None:
        """See :meth:`memlineage.MemoryManager.slot_value`."""
        at = as_utc(as_of, "as_of") if as_of is not None else self.clock()
        held = None
        for m in self.slot_history(slot, scope=scope):
            if m.recorded_at <= at and (m.invalidated_at is None or m.invalidated_at > at):
                if m.status not in (Status.ERASED,):
                    held = m
        return held

    def ancestors(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> list[Memory]:
        """See :meth:`memlineage.MemoryManager.ancestors`."""
        scope = Scope.coerce(scope)
        self.require(memory_id, scope=scope)
        depth = self.ledger.walk([memory_id], direction="ancestors")
        ordered = sorted(depth, key=lambda i: (depth[i], i))
        return [m for m in self.ledger.memories(ordered) if m is not None and scope.contains(m.scope)]

    def descendants(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> list[Memory]:
        """See :meth:`memlineage.MemoryManager.descendants`."""
        scope = Scope.coerce(scope)
        self.require(memory_id, scope=scope)
        depth = self.ledger.walk([memory_id], direction="descendants")
        ordered = sorted(depth, key=lambda i: (depth[i], i))
        return [m for m in self.ledger.memories(ordered) if m is not None and scope.contains(m.scope)]

    def explain(self, memory_id: str, *, scope: Scope | Mapping[str, Any] | str) -> Explanation:
        """See :meth:`memlineage.MemoryManager.explain`."""
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
                activities.append(row_activity(r))
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
            row_activity(r)
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
        """See :meth:`memlineage.MemoryManager.audit`."""
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
        """See :meth:`memlineage.MemoryManager.stats`."""
        user = Scope.coerce(scope).user_id if scope is not None else None
        out = self.ledger.counts(user)
        if user is None:
            out["index_entries"] = self.index.count()
        return out


def _not_found(memory_id: str) -> MemoryNotFoundError:
    return MemoryNotFoundError(f"no memory {memory_id!r} in this scope; check the id and the scope's user_id")
