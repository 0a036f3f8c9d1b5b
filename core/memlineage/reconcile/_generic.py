"""Update detection from generic signals, with a confidence: no pattern has to match the statement.

The rule tables catch the wordings they list. Everything else is compared on signals that hold in any wording
(:mod:`memlineage.reconcile._signals`): the clauses of the new statement that assert the present are aligned with the
clauses of each earlier statement of the same speaker, and a pair is an update when

- they are about the same known subject (the speaker, or the same other person; "my daughter is 7" / "my son is
  10" never pair up, and "Wow, Caroline, that sounds awesome!" is about no one),
- they say the same about it (word similarity of the clauses, or the statements' cosine similarity),
- a value changed: each names an entity, number or date the other does not ("54 cm" → "56 cm", "Shopify" →
  "Datadog"),
- and the new one is later, not a question, supposition, past state or addition.

The confidence grows with the word similarity and with an explicit correction cue; it reaches the apply threshold
only for the same words with another number or date (a state: "I've completed 20 videos" → "30 videos") or with a
cue, since the same words with another name may be a second thing. It drops for two events (two trips are two
trips), for a pair with no shared anchor, and there is none inside one conversation without a cue. At or above
:data:`~memlineage.reconcile._model.APPLY_CONFIDENCE` the update is carried out; between
:data:`~memlineage.reconcile._model.POSSIBLE_CONFIDENCE` and that, it is recorded as a *possible update*.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlineage.extractors._patterns import has_cjk, tables_for
from memlineage.extractors._rules import strip_transcript_prefix, transcript_speaker
from memlineage.reconcile._model import Action, Candidate, Statement, UpdateDecision
from memlineage.reconcile._signals import Clause, clause_similarity, clauses_of, numbers_in
from memlineage.reconcile._text import _naive, may_correct, rejected_values
from memlineage.retrieval import is_request

__all__ = ["signal_update"]

#: Word similarity of two clauses for a confident update (with a changed value).
SAME_WORDS = 0.5
#: Word similarity of two clauses for a possible update.
CLOSE_WORDS = 0.3
#: Cosine similarity of two statements for a possible update when their words differ (English embedder only).
CLOSE_MEANING = 0.55


def _changed(ca: Clause, cb: Clause) -> tuple[list[str], list[str]] | None:
    """The values each clause names and the other does not (both non-empty), or None when no value changed."""
    old, new = ca.keys - cb.keys, cb.keys - ca.keys
    if not (old and new):
        na, nb = numbers_in(ca.text), numbers_in(cb.text)
        old, new = na - nb, nb - na
    if old and new:
        return sorted(old), sorted(new)
    return None


def _score(ca: Clause, cb: Clause, cosine: float | None, *, cue: bool, event: bool, cjk: bool, numeric: bool) -> float:
    words = clause_similarity(ca, cb)
    if words >= SAME_WORDS:
        # the same words with another number or date, said of a known subject, is a new value of its state;
        # another name in the same words may be a second thing ("I want to try a White Negroni" / "... Pimm's"),
        # and numbered items of a list are items ("Fact 1 about parrots" / "Fact 2 ..."): possible only
        stated = ca.subject is not None and cb.subject is not None
        score = 0.9 if numeric and stated else 0.7
    elif words >= CLOSE_WORDS:
        score = 0.7
    elif cue and cosine is not None and cosine >= CLOSE_MEANING and not cjk:
        score = 0.6  # other words, close meaning: only a correction cue makes it a possible update
    else:
        return 0.0
    if cue:
        score += 0.1
    if not (ca.keys & cb.keys) and len(ca.keys) >= 2 and len(cb.keys) >= 2:
        score -= 0.2  # nothing anchors them: possibly two different things ("flight AA100 at 9" / "BA200 at 10")
    if event and not cue:
        score = min(score, 0.0)  # two similar events are two events
    return max(0.0, min(1.0, score))


#: Without session ids, statements this close in time count as one conversation (seconds).
CONVERSATION_GAP = 3600.0


def _same_conversation(st: Statement, cand: Candidate) -> bool:
    """Same session id; or, without session ids, less than :data:`CONVERSATION_GAP` apart (or of unknown time)."""
    if st.session is not None or cand.session is not None:
        return st.session == cand.session
    if st.valid_from is None or cand.valid_from is None:
        return True
    return abs((_naive(st.valid_from) - _naive(cand.valid_from)).total_seconds()) < CONVERSATION_GAP


def signal_update(st: Statement, cands: Sequence[Candidate]) -> UpdateDecision | None:
    """The most confident update of one candidate by the statement from generic signals, or None.

    Args:
        st: The new statement (its ``content`` is what it asserts; see ``asserting_text``).
        cands: Live memories of the same scope it may update (sources already filtered), with ``similarity`` (cosine
            to the statement) when known.

    Returns:
        An ``update`` decision with ``confidence`` in [0, 1] (``decided_by="signals"``), or None when no candidate
        pairs up.
    """
    new_clauses = [c for c in clauses_of(st.content) if c.asserts_present and not c.additive]
    if not new_clauses:
        return None
    table = tables_for(st.content)[0]
    body = strip_transcript_prefix(st.content)
    cue = table.is_correction(body)
    kind, who = st.source.split(":", 1)[0], transcript_speaker(st.content)
    best: tuple[float, Candidate, Clause, Clause, tuple[list[str], list[str]]] | None = None
    rejected = rejected_values(body)
    for cand in cands:
        if cand.source.split(":", 1)[0] != kind or transcript_speaker(cand.content) != who:
            continue
        if not may_correct(rejected, cand.content):
            continue  # "…, not 300": what it corrects names 300
        if is_request(cand.content):
            continue
        if st.valid_from and cand.valid_from and _naive(cand.valid_from) > _naive(st.valid_from):
            continue  # an earlier statement said later never replaces a later one
        if _same_conversation(st, cand) and not cue:
            continue  # within one conversation the topic goes on; a correction there carries a cue
        cjk = has_cjk(st.content + cand.content)
        for ca in clauses_of(cand.content):
            if ca.question or ca.hypothetical or ca.past:
                continue
            for cb in new_clauses:
                if ca.subject is None or cb.subject is None or ca.subject != cb.subject:
                    continue  # a statement about a known subject on both sides ("Wow, Caroline!" states nothing)
                if not (ca.substantive and cb.substantive):
                    continue
                changed = _changed(ca, cb)
                if changed is None:
                    continue
                event = table.is_event(ca.text) or table.is_event(cb.text)
                numeric = all(numbers_in(v) for v in (*changed[0], *changed[1]))
                score = _score(ca, cb, cand.similarity, cue=cue, event=event, cjk=cjk, numeric=numeric)
                if score > 0 and (best is None or score > best[0]):
                    best = (score, cand, ca, cb, changed)
    if best is None:
        return None
    score, cand, ca, cb, (old, new) = best
    return UpdateDecision(
        action=Action.UPDATE,
        target=cand.id,
        reason=f"a later statement of the same speaker changes {'/'.join(old)[:40]} → {'/'.join(new)[:40]}",
        evidence={
            "old_clause": ca.text[:200], "new_clause": cb.text[:200], "old_values": old[:10], "new_values": new[:10],
            "words": round(clause_similarity(ca, cb), 3),
            "cosine": None if cand.similarity is None else round(float(cand.similarity), 3), "cue": cue,
        },
        decided_by="signals",
        confidence=round(score, 3),
    )  # fmt: skip
