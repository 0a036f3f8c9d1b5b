"""Serving helpers: competing attributes among recall hits, near duplicates, newest first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from memlineage._forget import text_cache
from memlineage.reconcile._rules import _exclusive, _key_change, _other_subjects
from memlineage.reconcile._signals import asserting_text
from memlineage.reconcile._text import slot_of


# ------------------------------------------------------------------------------------------------------------
# Read side: facts that compete for one attribute
# ------------------------------------------------------------------------------------------------------------
def competing_key(content: str, slot: str | None) -> str | None:
    """The key under which two live memories compete (same slot, stored or detected), or None.

    A slot is detected only in what the memory asserts: "Do I live in Berlin now?" competes for nothing.
    """
    if slot:
        return slot
    asserted = asserting_text(content)
    return slot_of(asserted)[0] if asserted else None


@text_cache(maxsize=16384)
def near_duplicates(a: str, b: str, *, threshold: float = 0.5) -> bool:
    """Whether two statements say the same about the same thing but for a changed entity, number or date.

    Cached per pair (a recall compares the same memories again and again), emptied by erasures.

    The read-side twin of :class:`RuleReconciler`'s changed-key rule: a cue in either, or both a state of the
    speaker; two events are two events.

    Example:
        >>> near_duplicates("My office is on the 4th floor", "My office is on the 7th floor")
        True
        >>> near_duplicates("I went to Rome in May", "I went to Oslo in June")
        False
    """
    change = _key_change(a, b)  # the cheap test first: most pairs change no key
    if change is None or change[0] < threshold:
        return False
    # two people ("my daughter is 7" / "my son is 10"), or a question
    return not _other_subjects(a, b) and bool(asserting_text(a)) and bool(asserting_text(b))


def _same_attribute(key_a: str | None, key_b: str | None, a: str, b: str) -> bool:
    """Same slot key; for preferences only when one is stated as exclusive (see :class:`RuleReconciler`)."""
    if key_a is None or key_a != key_b:
        return False
    return ".preference." not in key_a or _exclusive(a) or _exclusive(b)


def newest_first(hits: Sequence[Any]) -> list[Any]:
    """Reorder recall hits so that, among memories competing for one attribute, the latest event comes first.

    Hits compete when they hold the same slot (stored or detected) or are near-duplicates (:func:`near_duplicates`).
    Within each group, members take the group's rank positions (and scores) newest ``valid_from`` first; everything
    else keeps its place. This holds before any update decision: two live values of one attribute never serve the
    older first.

    Args:
        hits: Ranked hits, best first; each has ``memory`` (with ``content``, ``slot``, ``valid_from``) and
            ``score`` (dataclass instances, replaced with :func:`dataclasses.replace`).

    Returns:
        The hits in their new order.
    """
    n = len(hits)
    if n < 2:
        return list(hits)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    keys = [competing_key(h.memory.content, h.memory.slot) for h in hits]
    for i in range(n):
        for j in range(i + 1, n):
            if _same_attribute(keys[i], keys[j], hits[i].memory.content, hits[j].memory.content) or near_duplicates(
                hits[i].memory.content, hits[j].memory.content
            ):
                parent[find(j)] = find(i)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    out = list(hits)
    for members in groups.values():
        if len(members) < 2:
            continue
        ordered = sorted(members, key=lambda i: (hits[i].memory.valid_from, hits[i].memory.recorded_at), reverse=True)
        for pos, src in zip(members, ordered):
            out[pos] = replace(hits[src], score=hits[pos].score) if pos != src else hits[src]
    return out
