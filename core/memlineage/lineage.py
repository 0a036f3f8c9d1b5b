"""Lineage DAG operations: cascade evaluation, provenance explanation and exports (PROV-JSON, Mermaid, DOT).

Cascade rule (the seed's dependency consistency): a memory is derived from one or more *support groups*; the
premises of a group are conjunctive (a conclusion needs all of them), the groups are alternatives (a fact
corroborated by several independent sources stays valid while one of them remains). A memory whose every group has
an invalid premise becomes ``suspect``; suspicion propagates down the DAG in topological order.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from memlineage.models import INVALIDATING_STATUSES, Activity, Memory, Status, short_id

if TYPE_CHECKING:
    from memlineage.ledger._cascade import CascadeWalk

__all__ = ["CascadeReport", "ErasureReceipt", "Explanation", "evaluate_cascade", "plan_cascade"]

#: Statuses that make a premise invalid for what derives from it (suspect propagates).
_BAD_PREMISE = frozenset(s.value for s in INVALIDATING_STATUSES) | {Status.SUSPECT.value}


def evaluate_cascade(
    roots: Iterable[str],
    descendants: Iterable[str],
    edges: Iterable[tuple[str, str, int]],
    groups: Mapping[str, Mapping[int, int]],
    statuses: Mapping[str, str],
) -> list[str]:
    """Decide which descendants become suspect after ``roots`` were invalidated.

    Args:
        roots: Ids that were just retracted / superseded / expired / erased.
        descendants: Every id reachable from ``roots`` through wasDerivedFrom (the affected set).
        edges: ``(derived, premise, support_group)`` for every derivation edge of the descendants.
        groups: ``{memory_id: {support_group: n_premises}}``; a group with 0 premises is an independent
            assertion that keeps the memory valid on its own.
        statuses: Current status of every id involved (descendants and their premises).

    Returns:
        Descendant ids that must become ``suspect``, in topological order (premises first). Descendants that are
        already suspect or otherwise not active are not listed.
    """
    roots = set(roots)
    affected = set(descendants) - roots
    premises: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    children: dict[str, list[str]] = defaultdict(list)
    indegree: dict[str, int] = {m: 0 for m in affected}
    for derived, premise, group in edges:
        if derived not in affected:
            continue
        premises[derived][group].append(premise)
        if premise in affected:
            children[premise].append(derived)
            indegree[derived] += 1
    invalid = set(roots)
    queue = deque(sorted(m for m, d in indegree.items() if d == 0))
    newly: list[str] = []
    while queue:
        mid = queue.popleft()
        status = statuses.get(mid, Status.ACTIVE.value)
        if status in _BAD_PREMISE:
            invalid.add(mid)
        elif _unsupported(mid, premises[mid], groups.get(mid, {}), invalid, statuses):
            # An archived memory keeps its status but no longer supports what derives from it.
            invalid.add(mid)
            if status == Status.ACTIVE.value:
                newly.append(mid)
        for child in children[mid]:
            indegree[child] -= 1
            if indegree[child] == 0:
                queue.append(child)
    return newly


def plan_cascade(walk: CascadeWalk, status: Status) -> tuple[list[str], list[str], bool]:
    """Decide a cascade below ``walk.root`` (about to take the invalidating ``status``) from one walk of the graph.

    The walk lists the descendants with their status and number of support groups. When none has an alternative
    support, every active descendant lost its only support: all of them become suspect, and the caller can mark them
    with one statement joined to the walk. Otherwise the derivation graph is read (three statements joined to the
    walk) and :func:`evaluate_cascade` applies the support-group rule.

    Args:
        walk: A filled :class:`memlineage.ledger._cascade.CascadeWalk` (``root``, ``info``, ``graph()``).
        status: The root's new status (retracted, superseded, expired, erased).

    Returns:
        ``(suspect, unaffected, every_active)``: ids to mark suspect (in walk order when none has a second
        support group, else in :func:`evaluate_cascade`'s topological order), the other
        descendants sorted, and whether ``suspect`` is exactly every active descendant.
    """
    info: Mapping[str, tuple[str, int]] = walk.info
    if all(n <= 1 for _, n in info.values()):
        active = Status.ACTIVE.value
        suspect = [i for i, (st, _) in info.items() if st == active]  # info is in walk (breadth-first) order
        every_active = True
    else:
        edges, groups, statuses = walk.graph()
        statuses[walk.root] = status.value
        suspect = evaluate_cascade([walk.root], info, edges, groups, statuses)
        every_active = False
    unaffected = sorted(set(info) - set(suspect))
    return suspect, unaffected, every_active


def _unsupported(
    mid: str,
    by_group: Mapping[int, list[str]],
    groups: Mapping[int, int],
    invalid: set[str],
    statuses: Mapping[str, str],
) -> bool:
    group_ids = set(groups) | set(by_group)
    if not group_ids:
        return False
    for group in group_ids:
        members = by_group.get(group, [])
        if not members:
            return False  # an independent assertion with no premises
        if all(p not in invalid and statuses.get(p, Status.ACTIVE.value) not in _BAD_PREMISE for p in members):
            return False
    return True


class CascadeReport(BaseModel):
    """Result of ``retract`` / ``supersede`` / ``impact``.

    ``suspect`` lists the ids marked suspect (for ``impact``: that would be marked). When no descendant has a
    second support group, every active descendant is listed in the walk's order (on SQLite breadth first: nearer
    descendants first, any order within one distance); otherwise in topological order (premises first).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    target: str = Field(description="Id of the retracted / superseded memory.")
    action: str = Field(description="'retract', 'supersede', 'expire' or 'impact'.")
    suspect: list[str] = Field(default_factory=list, description="Descendants marked (or that would be) suspect.")
    unaffected: list[str] = Field(
        default_factory=list, description="Descendants that stay valid (corroborated or already inactive)."
    )
    memory: Memory | None = Field(default=None, description="The new version, for supersede.")
    dry_run: bool = Field(default=False, description="True for impact(): nothing was changed.")
    attribution: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "For each suspect id, how it rested on the invalidated chain: 'cited', 'arguments', 'results', "
            "'content' or 'context' (captured runs; absent for premises given explicitly)."
        ),
    )


class ErasureReceipt(BaseModel):
    """What ``erase`` touched: every memory version, edge count, event count and index entry."""

    user_id: str = Field(description="Scope owner the erasure ran for.")
    memory_ids: list[str] = Field(default_factory=list, description="Memory versions whose content was redacted.")
    index_entries_removed: int = Field(
        default=0,
        description="Memories a search could return until the erasure (in the ANN index, on their way there, or "
        "in an exact-plan block) whose vectors were deleted.",
    )
    events_redacted: int = Field(default=0, description="Event payloads scrubbed of content.")
    activities_redacted: int = Field(default=0, description="Activities whose metadata was scrubbed.")
    suspect: list[str] = Field(default_factory=list, description="Descendants outside the erasure now suspect.")
    erased_at: str = Field(description="ISO-8601 UTC time of the erasure.")


@dataclass
class Explanation:
    """The provenance chain of a memory down to its source activities.

    Attributes:
        memory: The explained memory.
        ancestors: Every premise reachable through wasDerivedFrom, nearest first.
        edges: ``(src, relation, dst)`` triples among the memories and activities shown (PROV argument order).
        activities: Activities that generated the memories shown, and the update decisions in ``decisions``.
        depth: ``{memory_id: hops from the explained memory}``.
        revisions: Earlier versions of the memories shown (``wasRevisionOf``), newest first.
        decisions: Automatic update decisions (activities of kind ``update_detection``) that superseded, withdrew or
            merged into a memory shown; ``metadata`` holds ``reason``, ``evidence``, ``decided_by``, ``target`` and
            ``statement``; ``outcome`` is ``applied`` or ``undone``.
        attribution: ``{(memory_id, premise_id): how}`` for premises a captured run attributed ('cited',
            'arguments', 'results', 'content', 'context').
    """

    memory: Memory
    ancestors: list[Memory] = field(default_factory=list)
    edges: list[tuple[str, str, str]] = field(default_factory=list)
    activities: list[Activity] = field(default_factory=list)
    depth: dict[str, int] = field(default_factory=dict)
    revisions: list[Memory] = field(default_factory=list)
    decisions: list[Activity] = field(default_factory=list)
    attribution: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def memories(self) -> list[Memory]:
        """The explained memory, its ancestors, then earlier versions."""
        return [self.memory, *self.ancestors, *self.revisions]

    def sources(self) -> list[Memory]:
        """Ancestors (or the memory itself) with no premises: the original statements and tool results."""
        derived = {src for src, rel, _ in self.edges if rel == "wasDerivedFrom"}
        return [m for m in (self.memory, *self.ancestors) if m.id not in derived]

    def to_text(self) -> str:
        """An indented tree of premises: ``- [status] source: content (id8)``, each memory printed once.

        A premise shared by several memories (a user turn behind every tool result of a run) is printed in full
        where it first appears, depth first; later occurrences are one ``- ^ see id8 above`` line, so the text
        grows with the number of memories, not with the number of paths.

        Example:
            >>> print(mm.explain(plan.id, scope=alice).to_text())  # doctest: +SKIP
            - [active] reasoning: Book Hotel Lumière (3f2a9c1d)
              - [active] tool:flight_api: Flight to Paris: 120 EUR (8b1e77a0)
                - [active] user: I want to travel to Paris (c0d4e5f6)
              - ^ see c0d4e5f6 above (user)
        """
        by_id = {m.id: m for m in self.memories}
        kids: dict[str, list[str]] = defaultdict(list)
        for src, rel, dst in self.edges:
            if rel == "wasDerivedFrom" and dst in by_id and dst not in kids[src]:
                kids[src].append(dst)
        lines: list[str] = []
        shown: set[str] = set()
        stack: list[tuple[str, int, str | None]] = [(self.memory.id, 0, None)]
        while stack:  # iterative depth-first walk: deep chains never hit the recursion limit
            mid, level, how = stack.pop()
            mem, indent = by_id[mid], "  " * level
            if mid in shown:
                lines.append(f"{indent}- ^ see {short_id(mid)} above ({mem.source})")
                continue
            shown.add(mid)
            via = f" <{how}>" if how else ""
            lines.append(
                f"{indent}- [{mem.status.value}]{via} {mem.source}: {_short(mem.content, 80)} ({short_id(mid)})"
            )
            stack.extend(
                (child, level + 1, self.attribution.get((mid, child))) for child in reversed(kids.get(mid, []))
            )
        for old in self.revisions:
            lines.append(
                f"  revision of: [{old.status.value}] {old.source}: {_short(old.content, 72)} ({short_id(old.id)})"
            )
        for act in self.decisions:
            meta = act.metadata
            target = by_id.get(str(meta.get("target")))
            what = f" {_short(target.content, 48)!r}" if target is not None else ""
            how = f"{meta.get('decided_by', '?')}, {act.outcome or 'applied'}, {short_id(act.id)}"
            lines.append(
                f"  decision {act.name} ({how}) on {short_id(str(meta.get('target')))}{what}: {meta.get('reason', '')}"
            )
        return "\n".join(lines)

    def to_mermaid(self) -> str:
        """A Mermaid ``flowchart`` of the chain (memories as boxes, activities as rounded nodes)."""
        out = ["flowchart BT"]
        for mem in self.memories:
            label = f"{mem.source}<br/>{_escape(_short(mem.content, 48))}<br/><i>{mem.status.value}</i>"
            out.append(f'  {_node(mem.id)}["{label}"]')
            if mem.status is not Status.ACTIVE:
                out.append(f"  style {_node(mem.id)} stroke-dasharray: 5 5")
        for act in self.activities:
            out.append(f'  {_node(act.id)}(["{_escape(act.kind)}: {_escape(act.name or short_id(act.id))}"])')
        for src, rel, dst in self.edges:
            how = self.attribution.get((src, dst))
            out.append(f"  {_node(src)} -->|{rel}{f' ({how})' if how else ''}| {_node(dst)}")
        return "\n".join(out)

    def to_dot(self) -> str:
        """A Graphviz DOT digraph of the chain."""
        out = ["digraph lineage {", "  rankdir=BT; node [shape=box, fontsize=10];"]
        for mem in self.memories:
            label = f"{mem.source}\\n{_short(mem.content, 40)}\\n{mem.status.value}".replace('"', "'")
            style = ', style="dashed"' if mem.status is not Status.ACTIVE else ""
            out.append(f'  "{mem.id}" [label="{label}"{style}];')
        for act in self.activities:
            out.append(f'  "{act.id}" [shape=ellipse, label="{act.kind}: {(act.name or short_id(act.id))}"];')
        for src, rel, dst in self.edges:
            out.append(f'  "{src}" -> "{dst}" [label="{rel}"];')
        out.append("}")
        return "\n".join(out)

    def to_prov_json(self) -> dict[str, Any]:
        """A W3C PROV-JSON document (``entity``, ``activity``, ``agent`` and relation sections)."""
        doc: dict[str, Any] = {
            "prefix": {"ml": "https://memlineage.dev/ns#", "prov": "http://www.w3.org/ns/prov#"},
            "entity": {},
            "activity": {},
            "agent": {},
            "wasDerivedFrom": {},
            "wasGeneratedBy": {},
            "wasAttributedTo": {},
            "wasRevisionOf": {},
            "wasInformedBy": {},
            "wasInvalidatedBy": {},
            "used": {},
        }
        for mem in self.memories:
            doc["entity"][f"ml:{mem.id}"] = {
                "prov:value": mem.content,
                "ml:kind": mem.kind.value,
                "ml:status": mem.status.value,
                "ml:trust": mem.trust,
                "ml:confidence": mem.confidence,
                "prov:generatedAtTime": mem.created_at.isoformat(),
            }
            agent = f"ml:agent/{mem.source}"
            doc["agent"].setdefault(agent, {"prov:type": mem.source.kind.value})
            doc["wasAttributedTo"][f"_:attr-{mem.id}"] = {"prov:entity": f"ml:{mem.id}", "prov:agent": agent}
        for act in self.activities:
            entry: dict[str, Any] = {"prov:type": act.kind, "prov:startTime": act.started_at.isoformat()}
            if act.name:
                entry["prov:label"] = act.name
            if act.ended_at:
                entry["prov:endTime"] = act.ended_at.isoformat()
            doc["activity"][f"ml:{act.id}"] = entry
        for n, (src, rel, dst) in enumerate(self.edges):
            key = f"_:e{n}"
            if rel == "wasDerivedFrom":
                doc[rel][key] = {"prov:generatedEntity": f"ml:{src}", "prov:usedEntity": f"ml:{dst}"}
                if (src, dst) in self.attribution:
                    doc[rel][key]["ml:attribution"] = self.attribution[(src, dst)]
            elif rel == "wasRevisionOf":
                doc[rel][key] = {"prov:generatedEntity": f"ml:{src}", "prov:usedEntity": f"ml:{dst}"}
            elif rel == "wasGeneratedBy":
                doc[rel][key] = {"prov:entity": f"ml:{src}", "prov:activity": f"ml:{dst}"}
            elif rel == "wasInformedBy":
                doc[rel][key] = {"prov:informed": f"ml:{src}", "prov:informant": f"ml:{dst}"}
            elif rel == "wasInvalidatedBy":
                doc[rel][key] = {"prov:entity": f"ml:{src}", "prov:activity": f"ml:{dst}"}
            elif rel == "used":
                doc[rel][key] = {"prov:activity": f"ml:{src}", "prov:entity": f"ml:{dst}"}
        return {k: v for k, v in doc.items() if v}

    def to_json(self) -> str:
        """PROV-JSON as a string."""
        return json.dumps(self.to_prov_json(), ensure_ascii=False, indent=2)


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _escape(text: str) -> str:
    return text.replace('"', "&quot;").replace("[", "(").replace("]", ")")


def _node(mid: str) -> str:
    return "n" + "".join(ch for ch in mid if ch.isalnum())[:32]


def ordered_unique(items: Sequence[str]) -> list[str]:
    """De-duplicate keeping first occurrences."""
    return list(dict.fromkeys(items))
