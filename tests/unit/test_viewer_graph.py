"""The viewer's lineage layout: premises above, dependents below, every edge pointing up, long edges go around."""

from __future__ import annotations

from memlineage import Scope
from memlineage.testing import make_manager
from memlineage.viewer._graph import MAX_NODES, NODE_W, layout

S = Scope(user_id="u")


def test_diamond_and_skip_edges_are_layered_by_longest_path() -> None:
    mm = make_manager()
    root = mm.remember("root fact", scope=S)
    mid = mm.remember("middle conclusion", scope=S, source="reasoning", derived_from=[root.id])
    top = mm.remember("top conclusion", scope=S, source="reasoning", derived_from=[mid.id, root.id])
    g = layout(root, [], mm.descendants(root.id, scope=S))
    layer = {n.memory.id: n.layer for n in g.nodes}
    assert layer == {root.id: 0, mid.id: 1, top.id: 2}  # not 1 for `top` (shortest path): its edge to mid points up
    y = {n.memory.id: n.y for n in g.nodes}
    assert y[root.id] < y[mid.id] < y[top.id]
    skip = next(e for e in g.edges if (e.derived.memory.id, e.premise.memory.id) == (top.id, root.id))
    # the edge skipping `mid` bulges right of the column instead of running behind `mid`'s box
    side = float(skip.path.split(" C ")[1].split()[0])
    assert side > max(n.x for n in g.nodes) + NODE_W
    assert g.width >= side

    up = layout(top, mm.ancestors(top.id, scope=S), [])
    assert {n.memory.id: (n.layer, n.role) for n in up.nodes} == {
        top.id: (0, "focus"), mid.id: (-1, "ancestor"), root.id: (-2, "ancestor")
    }  # fmt: skip
    mm.close()


def test_a_large_neighbourhood_is_cut_nearest_first() -> None:
    mm = make_manager()
    root = mm.remember("root fact", scope=S)
    chain = [root]
    for i in range(MAX_NODES + 5):
        chain.append(mm.remember(f"step {i} follows", scope=S, source="reasoning", derived_from=[chain[-1].id]))
    g = layout(root, [], chain[1:])
    assert len(g.nodes) == MAX_NODES and g.truncated == 6
    assert max(n.layer for n in g.nodes) == MAX_NODES - 1  # the nearest layers are the ones kept
    mm.close()
