"""Update detection: does a new statement update, repeat or withdraw something already remembered?

Real agents never call ``supersede`` or ``retract``: the user says "actually, I moved to Munich" in passing. Before a
memory is stored, :class:`~memlineage.MemoryManager` gathers what it may update in the same scope (the live holder
of the same slot, the nearest statements by vector, recent statements by words) and asks a *reconciler* for one
decision per statement:

- ``new``: nothing to do, store it;
- ``duplicate``: same meaning as a live memory; nothing new is stored (a ``seen_again`` or corroboration);
- ``update``: a new value of the same attribute of the same subject; the old memory is ``superseded`` (it keeps its
  history, its dependants become suspect through the lineage cascade) and the new one records ``wasRevisionOf``;
- ``contradict``: the statement withdraws or denies a live fact without replacing it; that fact is ``retracted``.

Every automatic decision is recorded as an activity (kind ``update_detection``) with its reason and evidence,
shown by :meth:`~memlineage.MemoryManager.explain` and reversible with :meth:`~memlineage.MemoryManager.undo`.
Sources matter and are enforced before any reconciler sees a candidate (:func:`may_update`): a user statement may
update anything but a tool's result for other arguments; a tool result updates only an earlier result of the same
tool for the same arguments; model reasoning and agent text never update or withdraw what the user said.

Two reconcilers ship:

- :class:`RuleReconciler` (the offline default): slots keyed by subject and attribute from the per-language tables
  (``memlineage/extractors/patterns/*.yaml``, English and Chinese), withdrawal and negation patterns, and a generic
  rule for statements that match an older one closely but change a key entity, number or date (seed 002 §3.3
  "合并覆盖": same subject + attribute = same slot, the newer value wins).
- :class:`LLMReconciler`: any LangChain chat model or LlamaIndex LLM decides from the candidate ids, with pydantic-
  validated structured output, batching, a timeout and a per-statement fallback to the rules (the mem0
  ADD/UPDATE/DELETE/NOOP idea, mapped onto supersede/retract with lineage, never a hard delete).
"""

from __future__ import annotations

from memlineage.reconcile._compete import Conflict, competes, resolve_conflicts
from memlineage.reconcile._context import active_reconciler, using_reconciler
from memlineage.reconcile._llm import LLMReconciler
from memlineage.reconcile._model import (
    APPLY_CONFIDENCE,
    POSSIBLE_CONFIDENCE,
    Action,
    Candidate,
    Reconciler,
    Statement,
    UpdateDecision,
)
from memlineage.reconcile._rules import RuleReconciler
from memlineage.reconcile._serve import competing_key, near_duplicates, newest_first
from memlineage.reconcile._signals import asks_about_history, asks_about_past, gives_answer
from memlineage.reconcile._text import may_revise, may_update, repairs, slot_of, tool_slot, withdraws

__all__ = [
    "APPLY_CONFIDENCE",
    "POSSIBLE_CONFIDENCE",
    "Action",
    "Candidate",
    "Conflict",
    "UpdateDecision",
    "LLMReconciler",
    "Reconciler",
    "RuleReconciler",
    "Statement",
    "active_reconciler",
    "asks_about_history",
    "asks_about_past",
    "competes",
    "gives_answer",
    "competing_key",
    "may_revise",
    "repairs",
    "may_update",
    "near_duplicates",
    "newest_first",
    "resolve_conflicts",
    "slot_of",
    "tool_slot",
    "using_reconciler",
    "withdraws",
]


def __getattr__(name: str) -> object:
    """``Decision``: the old name of :class:`UpdateDecision`, with a ``DeprecationWarning``.

    ``memlineage.Decision`` is a policy decision; the two shared a name.
    """
    if name == "Decision":
        import warnings

        warnings.warn(
            "memlineage.reconcile.Decision is now UpdateDecision (memlineage.Decision is a policy decision)",
            DeprecationWarning,
            stacklevel=2,
        )
        return UpdateDecision
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
