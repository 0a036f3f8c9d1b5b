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

import re
from collections.abc import Sequence
from typing import Any

from memlineage.extractors._patterns import has_cjk, tables_for
from memlineage.extractors._rules import strip_transcript_prefix, transcript_speaker
from memlineage.index.lexical import tokenize
from memlineage.reconcile._about import _names_someone
from memlineage.reconcile._model import Action, Candidate, Statement, UpdateDecision
from memlineage.reconcile._numbers import bare_numbers, units_of
from memlineage.reconcile._signals import (
    _SENTENCE,
    Clause,
    clause_similarity,
    clauses_of,
    mentions,
    numbers_in,
    query_people,
    values_of,
)
from memlineage.reconcile._text import _naive, may_correct, rejected_values, repairs, spells
from memlineage.retrieval import is_request

__all__ = ["repair_update", "signal_update"]

#: Word similarity of two clauses for a confident update (with a changed value).
SAME_WORDS = 0.5
#: Word similarity of two clauses for a possible update.
CLOSE_WORDS = 0.3
#: Cosine similarity of two statements for a possible update when their words differ (English embedder only).
CLOSE_MEANING = 0.55


def _changed(ca: Clause, cb: Clause, rejected: frozenset[str] = frozenset()) -> tuple[list[str], list[str]] | None:
    """The values each clause names and the other does not (both non-empty), or None when no value changed.

    A value the new statement rules out (``rejected``: "$3,950 take-home, not 4,200") is none of its own; when the old
    clause names one, it is the old value ("4200", not the rent's "1500" said beside it).
    """
    keys = cb.keys - rejected
    old, new = ca.keys - keys, keys - ca.keys
    if not (old and new):
        na, nb = numbers_in(ca.text), numbers_in(cb.text) - rejected
        old, new = na - nb, nb - na
    if old & rejected:
        old = old & rejected
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
        if st.slot is not None and cand.slot is not None and st.slot != cand.slot and not cue:
            # the tables read two attributes ("I work the ER" / "my work email is ..."): shared words name the topic
            # of each, not one value replacing the other
            continue
        cjk = has_cjk(st.content + cand.content)
        for ca in clauses_of(cand.content):
            if ca.question or ca.hypothetical or ca.past:
                continue
            for cb in new_clauses:
                if ca.subject is None or cb.subject is None or ca.subject != cb.subject:
                    continue  # a statement about a known subject on both sides ("Wow, Caroline!" states nothing)
                if not (ca.substantive and cb.substantive):
                    continue
                changed = _changed(ca, cb, rejected)
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
    evidence: dict[str, Any] = {
        "old_clause": ca.text[:200], "new_clause": cb.text[:200], "old_values": old[:10], "new_values": new[:10],
        "words": round(clause_similarity(ca, cb), 3),
        "cosine": None if cand.similarity is None else round(float(cand.similarity), 3), "cue": cue,
    }  # fmt: skip
    if old[0] in rejected and _one_for_one(ca, cb, old, new):
        # the value ruled out by name is put right in the old statement; its other clauses stay as they were
        evidence.update(replaced=old[0], replacement=new[0])
    return UpdateDecision(
        action=Action.UPDATE,
        target=cand.id,
        reason=f"a later statement of the same speaker changes {'/'.join(old)[:40]} → {'/'.join(new)[:40]}",
        evidence=evidence,
        decided_by="signals",
        confidence=round(score, 3),
    )  # fmt: skip


def _one_for_one(ca: Clause, cb: Clause, old: Sequence[str], new: Sequence[str]) -> bool:
    """Whether one value replaces one, spelled in both clauses: the old statement can be written again put right."""
    return len(old) == 1 and len(new) == 1 and bool(spells(ca.text, old[0])) and bool(spells(cb.text, new[0]))


#: Confidence of a repair (:func:`repair_update`): applied (:data:`~memlineage.reconcile._model.APPLY_CONFIDENCE`).
REPAIR_CONFIDENCE = 0.9
#: A thing named by a possessive or an article: "My flight is on the 12th", "the hotel is $180 a night" speak of a
#: thing of their own unless the statement taken back names it too ("my bad", "my mistake" name nothing).
_THING = re.compile(r"\b(?:my|our|the|his|her|their)\s+(?!(?:bad|mistake|fault)\b)([a-z][a-z'-]+)", re.IGNORECASE)
#: A Chinese possessor ("儿子的足球课"): another owner unless the statement taken back names it (我 / 你 are none).
_OWNER_ZH = re.compile(r"([\u4e00-\u9fff]{1,4}?)的")
_SELF_ZH = frozenset({"我", "我们", "你", "你们", "咱", "咱们"})


def _own_thing(ca: Clause, cb: Clause) -> bool:
    """Whether the repairing clause ``cb`` speaks of a person or thing that the clause ``ca`` does not name.

    "No, Tom's practice is at 6pm" after "Lily's soccer practice is at 5pm" names Tom; "ugh sorry, the hotel is $180
    a night" after "The car rental is $45 a day" names a hotel and nothing of the rental; 不对，儿子的足球课… after
    女儿的钢琴课… names the son. "they moved the class to Thursdays" after "My yoga class is Tuesdays" shares the class.
    """
    if any(not mentions(ca, frozenset({p})) for p in query_people(cb.text)):
        return True
    words = {w.casefold() for w in ca.terms} | {k.casefold() for k in ca.keys}
    things = [m.group(1).casefold() for m in _THING.finditer(cb.text)]
    # the clause's terms are stems: a thing is stemmed as they are ("confirmation" / "confirm", "flights" / "flight")
    if things and not any(t in words or not words.isdisjoint(tokenize(t, dates=False)) for t in things):
        return True
    owners = {m.group(1)[-2:] for m in _OWNER_ZH.finditer(cb.text)} - _SELF_ZH
    return any(o not in ca.text for o in owners)


def _digit_class(value: str) -> str:
    """``id`` for a value of seven digits or more (a phone number, an account), ``n`` for any other."""
    return "id" if sum(ch.isdigit() for ch in value) >= 7 else "n"


def _repaired(ca: Clause, cb: Clause) -> tuple[str, list[str], list[str]] | None:
    """The kind (``e-mail address``, ``time``, ``number``) and the values a repair clause changes in the clause.

    The clause is the one it takes back. Both give values of the kind and each names one the other does not (a value
    the repair rules out, "not 5", is none of its own); numbers also count the same thing (the same units, or a repair
    whose numbers carry none) and are of one class ("415-555-0192" / "415-555-0129", not "415-555-0192" / "2"). An
    address is compared whole ("wang.lei@163.com" / "wanglei_2021@163.com"), before its digits are read as numbers.
    """
    ruled_out = rejected_values(cb.text)  # "wait, 7.5 ml, not 5": 5 is the value taken back, not a new one
    # the clauses' keys hold their addresses, case-folded (reconcile._text._key_tokens)
    mails = ({k for k in ca.keys if "@" in k}, {k for k in cb.keys if "@" in k})
    old, new = mails[0] - mails[1], mails[1] - mails[0] - {v.casefold() for v in ruled_out}
    if old and new:
        return "e-mail address", sorted(old), sorted(new)
    # a repair that gives a time is about a time ("sorry, it's 9:45"): its digits are no number of anything else
    for kind in ("time",) if values_of(cb, "time") else ("time", "number"):
        va, vb = values_of(ca, kind), values_of(cb, kind) - ruled_out
        if not (va - vb and vb - va):
            continue
        units = (units_of(ca.text), units_of(cb.text))
        if kind == "number" and (
            (units[0] != units[1] and not bare_numbers(cb.text))  # a bare number (说错了，是5400) takes the unit
            or {_digit_class(v) for v in va} != {_digit_class(v) for v in vb}
        ):
            continue
        return kind, sorted(va - vb), sorted(vb - va)
    return None


def repair_update(st: Statement, cands: Sequence[Candidate]) -> UpdateDecision | None:
    """A message that takes back what was just said in the same conversation, with the new time, number or address.

    "new number: 415-555-0192" then "argh no, 415-555-0129. swapped the last two"; "Our rent is $2,150 a month" then
    "Wait, I misremembered, it went to $2,350"; "我妈生日是5月12号" then "不对不对 我记错了 是5月21". The repair rarely
    repeats the words it corrects (the generic signals need them) and names no subject of its own. It opens with a
    repair marker (the table's ``repair`` list: a cue word later in the message is not enough, "I'm actually getting
    ready for a tennis tournament on May 6th" corrects nothing); it replaces the latest statement of the same
    speaker in the same conversation whose clause gives a time or number of the same kind that differs, when the
    repairing clause names no other person and no thing of its own ("No, thanks. My flight is on the 12th" after
    "My hotel check-in is on the 9th" replaces nothing).

    Args:
        st: The new statement.
        cands: Live memories of the same scope it may update (recent statements included).

    Returns:
        An applied ``update`` (confidence :data:`REPAIR_CONFIDENCE`, ``decided_by="signals"``), or None. Its
        evidence names ``replaced`` and ``replacement`` when one value replaces one (the write path writes the old
        statement again put right), else the old values as ``withdrawn`` (its other clauses are written again).
    """
    if not (st.repairs if st.repairs is not None else repairs(st.content)):
        return None  # a correction cue elsewhere ("I'm actually getting ready for ...") is for the other rules
    # the new value is said in the repair's own sentence ("no, sorry, I can't talk now. I'll be back at 4" repairs
    # nothing: its number comes later, about something else)
    first = next((seg for seg in _SENTENCE.split(st.content) if seg and seg.strip()), "")
    new_clauses = [c for c in clauses_of(first) if c.asserts_present and not c.additive and not c.question]
    kind, who = st.source.split(":", 1)[0], transcript_speaker(st.content)
    if st.valid_from is None:
        return None  # no time: what was "just said" is unknown
    now = _naive(st.valid_from)
    timed = [(_naive(c.valid_from), c) for c in cands if c.valid_from is not None]
    for at, cand in sorted(timed, key=lambda x: x[0], reverse=True):  # the latest first
        if cand.source.split(":", 1)[0] != kind or transcript_speaker(cand.content) != who:
            continue
        if at > now or not _same_conversation(st, cand):
            continue
        for ca in clauses_of(cand.content):  # a question in it ("..., is that reasonable?") asserts nothing
            if ca.question or ca.hypothetical or ca.past or not ca.substantive:
                continue
            for cb in new_clauses:
                if cb.subject not in (None, ca.subject) and not (cb.subject == "self" and ca.subject is None):
                    continue
                if (_names_someone(cb.text) and not _names_someone(ca.text)) or _own_thing(ca, cb):
                    continue  # "My flight is on the 12th", "No, Tom's practice is at 6pm": another's
                found = _repaired(ca, cb)
                if found is None:
                    continue
                what, old, new = found
                evidence: dict[str, Any] = {
                    "old_clause": ca.text[:200], "new_clause": cb.text[:200], "old_values": old[:10],
                    "new_values": new[:10], "repair": True,
                }  # fmt: skip
                # one value for one, spelled as in both texts: the statement taken back is put right with it
                # ("My dentist appointment is on the 19th. I prefer morning slots."); else the clause that held
                # the old values goes and the statement's other clauses stay (write path, carried over)
                if _one_for_one(ca, cb, old, new):
                    evidence.update(replaced=old[0], replacement=new[0])
                else:
                    evidence["withdrawn"] = " ".join(old)
                return UpdateDecision(
                    action=Action.UPDATE,
                    target=cand.id,
                    reason=f"a repair in the same conversation changes the {what} {'/'.join(old)[:40]} → "
                    f"{'/'.join(new)[:40]}",
                    evidence=evidence,
                    decided_by="signals",
                    confidence=REPAIR_CONFIDENCE,
                )
        # only the latest statement that gives a value of the kind is taken back: stop at the first one that has any
        if any(values_of(c, k) for c in clauses_of(cand.content) for k in ("time", "number")):
            return None
    return None
