"""Layered layout of a memory's lineage (premises above, dependents below) for the viewer's SVG.

No JavaScript and no graph library: the layers are longest-path distances from the memory shown (premises at
negative layers, dependents at positive ones, so every edge points up); within a layer, nodes are ordered by the
mean position of their neighbours in the layer nearer the centre (one barycentre pass), which keeps small lineage
graphs readable.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memlineage.models import Memory

__all__ = ["Edge", "Graph", "Node", "layout"]

NODE_W = 230
NODE_H = 56
GAP_X = 28
GAP_Y = 64
MARGIN = 16
BULGE = 90
#: Most nodes drawn; a larger neighbourhood is cut (nearest layers kept) and the page says so.
MAX_NODES = 150


@dataclass
class Node:
    """A memory placed in the drawing: ``role`` is ``focus``, ``ancestor`` or ``dependent``."""

    memory: Memory
    role: str
    layer: int
    x: float = 0.0
    y: float = 0.0

    @property
    def cx(self) -> float:
        """Horizontal centre."""
        return self.x + NODE_W / 2


@dataclass
class Edge:
    """``derived`` wasDerivedFrom ``premise``; ``path`` is the SVG path data from one to the other."""

    derived: Node
    premise: Node
    path: str


@dataclass
class Graph:
    """Placed nodes, the edges between them, the canvas size and how many nodes were left out."""

    nodes: list[Node]
    edges: list[Edge]
    width: float
    height: float
    truncated: int = 0
    node_w: int = NODE_W
    node_h: int = NODE_H
    by_id: dict[str, Node] = field(default_factory=dict)


def _levels(start: str, preds: dict[str, list[str]], members: set[str]) -> dict[str, int]:
    """Longest-path level of each member from ``start`` (so every edge goes one way), following ``preds``.

    ``preds[m]`` are the nodes nearer ``start`` that ``m`` is attached to; a member whose predecessors never all
    resolve (a cycle, which a lineage DAG never has) falls back to one past its deepest resolved one.
    """
    level = {start: 0}
    pending = {m: [p for p in preds.get(m, ()) if p in members or p == start] for m in members if m != start}
    while pending:
        ready = [m for m, ps in pending.items() if all(p in level for p in ps)]
        if not ready:  # defensive: break a cycle at its member with the most resolved predecessors
            ready = [max(pending, key=lambda m: sum(p in level for p in pending[m]))]
        for m in ready:
            known = [level[p] for p in pending.pop(m) if p in level]
            level[m] = 1 + max(known, default=0)
    return level


def layout(focus: Memory, ancestors: Sequence[Memory], dependents: Sequence[Memory]) -> Graph:
    """Place ``focus``, its premises (transitively) and the memories derived from it (transitively).

    Args:
        focus: The memory shown.
        ancestors: Its premises, transitively (``MemoryManager.ancestors`` / ``explain().ancestors``).
        dependents: What derives from it, transitively (``MemoryManager.descendants``).

    Returns:
        The placed :class:`Graph`; edges point from a derived memory to its premise (``wasDerivedFrom``).
    """
    mems: dict[str, Memory] = {focus.id: focus}
    for m in (*ancestors, *dependents):
        mems.setdefault(m.id, m)
    premises: dict[str, list[str]] = {mid: [p for p in m.derived_from if p in mems] for mid, m in mems.items()}
    derived: dict[str, list[str]] = defaultdict(list)
    for mid, ps in premises.items():
        for p in ps:
            derived[p].append(mid)
    anc_ids = {m.id for m in ancestors} - {focus.id}
    dep_ids = {m.id for m in dependents} - {focus.id} - anc_ids
    up = _levels(focus.id, derived, anc_ids)
    down = _levels(focus.id, premises, dep_ids)
    layer: dict[str, int] = {focus.id: 0}
    role: dict[str, str] = {focus.id: "focus"}
    for mid in anc_ids:
        layer[mid], role[mid] = -up.get(mid, 1), "ancestor"
    for mid in dep_ids:
        layer[mid], role[mid] = down.get(mid, 1), "dependent"
    order = sorted(layer, key=lambda i: (abs(layer[i]), layer[i]))  # nearest layers first
    truncated = max(0, len(order) - MAX_NODES)
    kept = order[:MAX_NODES]
    nodes = {mid: Node(mems[mid], role[mid], layer[mid]) for mid in kept}
    rows: dict[int, list[Node]] = defaultdict(list)
    for mid in kept:  # keeps the walk's order (nearest first) as the starting order within a row
        rows[layer[mid]].append(nodes[mid])
    _order_rows(rows, premises, derived, nodes)
    widest = max(len(r) for r in rows.values())
    width = 2 * MARGIN + widest * NODE_W + (widest - 1) * GAP_X
    top = min(rows)
    for n_layer, row in rows.items():
        row_w = len(row) * NODE_W + (len(row) - 1) * GAP_X
        left = (width - row_w) / 2
        for i, node in enumerate(row):
            node.x = left + i * (NODE_W + GAP_X)
            node.y = MARGIN + (n_layer - top) * (NODE_H + GAP_Y)
    height = 2 * MARGIN + len(rows) * NODE_H + (len(rows) - 1) * GAP_Y
    edges = [_edge(nodes[mid], nodes[p]) for mid in kept for p in premises[mid] if p in nodes]
    if any(abs(e.derived.layer - e.premise.layer) > 1 for e in edges):
        width += BULGE  # room for the edges that go around the layers they skip
    return Graph(list(nodes.values()), edges, width, height, truncated, by_id=nodes)


def _edge(derived: Node, premise: Node) -> Edge:
    """A curve from the derived memory's top to its premise's bottom (dependents sit below their premises).

    An edge that skips layers leaves and enters on the right-hand side and bulges right, so it never runs
    hidden behind the nodes in between.
    """
    down = derived.layer > premise.layer
    y1 = derived.y if down else derived.y + NODE_H
    y2 = premise.y + NODE_H if down else premise.y
    if abs(derived.layer - premise.layer) <= 1:
        x1, x2 = derived.cx, premise.cx
        mid = (y1 + y2) / 2
        return Edge(
            derived, premise, f"M {x1:.1f} {y1:.1f} C {x1:.1f} {mid:.1f}, {x2:.1f} {mid:.1f}, {x2:.1f} {y2:.1f}"
        )
    x1, x2 = derived.x + NODE_W - 24, premise.x + NODE_W - 24
    side = max(derived.x, premise.x) + NODE_W + BULGE * 0.8
    return Edge(derived, premise, f"M {x1:.1f} {y1:.1f} C {side:.1f} {y1:.1f}, {side:.1f} {y2:.1f}, {x2:.1f} {y2:.1f}")


def _order_rows(
    rows: dict[int, list[Node]], premises: dict[str, list[str]], derived: dict[str, list[str]], nodes: dict[str, Node]
) -> None:
    """Order each row by the mean index of its neighbours in the row nearer the centre (one outward pass)."""

    def sweep(layers: Iterable[int], towards: int) -> None:
        for n_layer in layers:
            inner = rows.get(n_layer - towards)
            if not inner:
                continue
            pos = {n.memory.id: i for i, n in enumerate(inner)}
            row = rows[n_layer]

            def key(node: Node, row: list[Node] = row, pos: dict[str, int] = pos) -> float:
                mid = node.memory.id
                near = [pos[o] for o in (*premises.get(mid, ()), *derived.get(mid, ())) if o in pos and o in nodes]
                return sum(near) / len(near) if near else float(row.index(node))

            row.sort(key=key)

    sweep(sorted(n for n in rows if n > 0), 1)
    sweep(sorted((n for n in rows if n < 0), reverse=True), -1)
