"""Rich renderings shared by the CLI and the demos."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rich.tree import Tree

from memlineage.models import Memory, short_id

__all__ = ["explanation_tree"]


class _Explained(Protocol):
    """What the tree reads of a :class:`~memlineage.lineage.Explanation` (a sibling layer: not imported)."""

    @property
    def memory(self) -> Memory: ...

    @property
    def memories(self) -> Sequence[Memory]: ...

    @property
    def edges(self) -> Sequence[tuple[str, str, str]]: ...


def explanation_tree(ex: _Explained) -> Tree:
    """A rich tree of an :class:`~memlineage.lineage.Explanation` (premises as children, each memory once)."""
    by_id = {m.id: m for m in ex.memories}
    kids: dict[str, list[str]] = {}
    for src, rel, dst in ex.edges:
        if rel == "wasDerivedFrom" and dst in by_id:
            kids.setdefault(src, []).append(dst)
    colour = {"active": "green", "suspect": "yellow"}

    def label(mid: str) -> str:
        m = by_id[mid]
        c = colour.get(m.status.value, "red")
        return (
            f"[{c}]{m.status.value}[/] [bold]{m.source}[/] {m.content}  [dim]({short_id(mid)}, trust {m.trust:.2f})[/]"
        )

    root = Tree(label(ex.memory.id))
    shown = {ex.memory.id}
    stack = [(root, child) for child in reversed(kids.get(ex.memory.id, []))]
    while stack:  # pre-order, so "see above" always points at a line printed earlier
        parent, mid = stack.pop()
        if mid in shown:
            parent.add(f"[dim]^ see {short_id(mid)} above ({by_id[mid].source})[/]")
            continue
        shown.add(mid)
        node = parent.add(label(mid))
        stack.extend((node, child) for child in reversed(kids.get(mid, [])))
    return root
