"""The offline rule-based reconciler."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from memlineage.errors import ConfigurationError
from memlineage.extractors._patterns import LanguageTable, tables_for
from memlineage.extractors._rules import (
    content_terms,
    strip_transcript_prefix,
    transcript_speaker,
)
from memlineage.reconcile._about import _COMMON_CJK
from memlineage.reconcile._generic import _own_thing, repair_update, signal_update
from memlineage.reconcile._model import Action, Candidate, Statement, UpdateDecision
from memlineage.reconcile._signals import (
    THIRD_PERSON,
    asserting_text,
    clauses_of,
    for_a_while,
    substantive_terms,
)
from memlineage.reconcile._text import (
    _naive,
    _norm_value,
    _overlap,
    _profile,
    _without_cues,
    key_parts,
    may_correct,
    rejected_values,
    swapped_values,
)
from memlineage.retrieval import only_asks

# ------------------------------------------------------------------------------------------------------------
# The offline reconciler
# ------------------------------------------------------------------------------------------------------------
#: Slots whose value a change of another slot, said with a correction cue, replaces too: ``{new slot: (covered)}``.
_COVERS: dict[str, tuple[str, ...]] = {"user.employer": ("user.workplace",)}


#: Words that say when a change takes effect, never a value it replaces ("以后改成…", "from now on").
_WHEN_ONLY = re.compile(r"(?:以后|今后|往后|之后|以前|之前|现在|从此|后来|然后|从今天起|从下周起)")


class RuleReconciler:
    """Offline update detection from the per-language pattern tables (the default reconciler).

    Rules, in order (the first that applies decides):

    1. **Same slot** (subject + attribute, e.g. ``user.residence``, ``user.favourite.restaurant``, a tool and its
       arguments): the same value is a ``duplicate`` (unless the statement says more), another value from an
       event at or after the holder's is an ``update`` of the holder. Preferences stated with "like"/"love" can
       hold together; one stated as exclusive ("prefer", "favourite", "only", "now", 更喜欢, 只) replaces.
    2. **Replacement** ("not an espresso but a matcha latte", "X instead of Y", "不再喝绿茶了，改成喝牛奶"): the
       live statement that names the replaced value (at least ``withdraw_overlap`` of its words) is ``update``-d.
    3. **Withdrawal** ("forget what I said about the Lisbon trip", "the trip is cancelled", "别记…", "…取消了"):
       the live statement that covers at least ``withdraw_overlap`` of the withdrawn words is ``contradict``-ed.
    4. **Negation** ("I'm not allergic to cats anymore", "I'm no longer vegan", "我不再喝咖啡了"): the live
       statement that covers at least ``negation_overlap`` of the negated fact's words is ``contradict``-ed (two
       words at least, unless the negation states a change: "no longer", "anymore", 不再).
    5. **Changed key** (no slot): a statement sharing at least ``near_jaccard`` of its other words with a live one
       (or some words and a cosine similarity ≥ ``NEAR_SIMILARITY``) but naming another entity, number or date is
       an ``update`` of it, when either carries a correction cue ("actually", "correction", "oops", "I meant",
       其实, 更正…), or when both describe a state of the speaker and only a number or date changed ("I have 2
       kids" → "I have 3 kids"). Two similar events are two events, and "travel note number 1" does not correct
       "travel note number 0"; statements about different people ("my daughter…" / "my son…") never pair up.
    6. **Generic signals** (no table rule applied; :mod:`memlineage.reconcile._generic`): the same subject, the same
       words or meaning, a changed value, a later statement; with a confidence in [0, 1].

    Rules 1-5 are table cues of high precision (confidence 0.9-0.95); rule 6 is applied at confidence ≥ 0.85 and
    recorded as a possible update from 0.5.

    All rules compare statements of the same speaker (a transcript's ``[date] Name:`` prefix) and source kind.

    Args:
        near_jaccard: Word overlap (Jaccard of non-key content terms, in [0, 1]) for rule 5 (default 0.5).
        withdraw_overlap: Share of the withdrawn words a candidate must contain, in [0, 1] (default 0.5).
        negation_overlap: Share of the negated fact's words a candidate must contain, in [0, 1] (default 0.6).
        signals: After the table rules, compare on generic signals (:mod:`memlineage.reconcile._generic`): an update
            no table describes is applied when confident, else recorded as a possible update (default True).

    Example:
        >>> r = RuleReconciler()
        >>> old = Candidate(id="m1", content="I live in Paris", source="user", slot="user.residence")
        >>> new = Statement(content="Actually I moved to Munich", source="user", slot="user.residence")
        >>> r.decide([(new, [old])])[0].action.value
        'update'
    """

    name = "rules"

    @property
    def wants_neighbours(self) -> bool:
        """Generic signals compare every user statement with its nearest statements by vector."""
        return self.signals

    @property
    def wants_recent(self) -> bool:
        """... and with the scope's most recent statements (a value buried in a long message)."""
        return self.signals

    def __init__(
        self,
        *,
        near_jaccard: float = 0.5,
        withdraw_overlap: float = 0.5,
        negation_overlap: float = 0.6,
        signals: bool = True,
    ):
        for label, value in (
            ("near_jaccard", near_jaccard),
            ("withdraw_overlap", withdraw_overlap),
            ("negation_overlap", negation_overlap),
        ):
            if not 0.0 < value <= 1.0:
                msg = f"{label} must be in (0, 1], got {value!r}"
                raise ConfigurationError(msg)
        self.near_jaccard = near_jaccard
        self.withdraw_overlap = withdraw_overlap
        self.negation_overlap = negation_overlap
        self.signals = signals

    def decide(self, items: Sequence[tuple[Statement, Sequence[Candidate]]]) -> list[UpdateDecision]:
        """One decision per statement (see the class docstring for the rules)."""
        return [self._decide_one(st, list(cands)) for st, cands in items]

    def _decide_one(self, st: Statement, cands: list[Candidate]) -> UpdateDecision:
        if not cands:
            return UpdateDecision(reason="no live memory it could update")
        asserted = asserting_text(st.content)  # the write path passes this already; other callers may not
        if not asserted.strip():
            return UpdateDecision(reason="asserts nothing about the present (a question, request or supposition)")
        st = st if asserted == st.content else st.model_copy(update={"content": asserted})
        table = tables_for(st.content)[0]
        text = strip_transcript_prefix(st.content)
        cue = table.cue(text)
        for rule, confidence in (
            (self._same_slot, 0.95), (self._replacement, 0.95), (self._swap, 0.9), (self._withdrawal, 0.95),
            (self._negation, 0.9), (self._changed_key, 0.9),
        ):  # fmt: skip
            decision = rule(st, text, cands, table, cue)
            if decision is not None:
                if decision.action is Action.NEW:
                    return decision
                return _standing(st, cands, decision.model_copy(update={"confidence": confidence}))
        repair = repair_update(st, cands)  # "argh no, 415-555-0129": takes back what was just said, no words repeated
        if repair is not None:
            return _standing(st, cands, repair)
        if self.signals:
            found = signal_update(st, cands)
            if found is not None:
                return _standing(st, cands, found)
        return UpdateDecision(reason="no candidate about the same subject and attribute")

    def _same_slot(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> UpdateDecision | None:
        if not st.slot:
            return None
        # a change of employer said as one ("我跳槽到华为了": a correction cue, not merely "最近") also replaces
        # where one said one works ("我在腾讯工作", a slot of its own since its value may be a city)
        covered = {st.slot, *(_COVERS.get(st.slot, ()) if table.is_correction(text) else ())}
        holders = [c for c in cands if c.slot in covered]
        if not holders:
            return None
        if ".preference." in st.slot and not (table.is_exclusive(text) or any(_exclusive(c.content) for c in holders)):
            return None  # "I love jazz" and "I love rock" can both be true; "I now prefer rock" replaces
        # the newest holder; among equal event times the later candidate (candidates come oldest first)
        _, holder = max(enumerate(holders), key=lambda ic: (_naive(ic[1].valid_from), ic[0]))
        if st.slot in table.plan_slots and not cue and (st.session is None or st.session != holder.session):
            return None  # two plans said in two conversations may both hold; a cue says one replaces the other
        evidence = {"slot": st.slot, "old_value": holder.slot_value, "new_value": st.slot_value, "cue": cue}
        if not cue and _granularity(st.slot_value) != _granularity(holder.slot_value):
            # a street address and a city ("my address is 42 Maple Court" / "I live in Seattle"), a figure and a
            # word: two grains of the attribute, both may hold; a cue says the new one replaces the old
            return None
        if st.slot_value and _norm_value(st.slot_value) == _norm_value(holder.slot_value):
            if _adds_words(st.content, holder.content):
                return UpdateDecision(reason=f"restates slot {st.slot} and says more: kept as its own memory")
            return UpdateDecision(
                action=Action.DUPLICATE,
                target=holder.id,
                reason=f"restates the value of slot {st.slot} held by {holder.id}",
                evidence=evidence,
            )
        if st.valid_from and holder.valid_from and _naive(st.valid_from) < _naive(holder.valid_from):
            return UpdateDecision(
                reason=f"older than the value of slot {st.slot} held by {holder.id}", evidence=evidence
            )
        return UpdateDecision(
            action=Action.UPDATE,
            target=holder.id,
            reason=f"new value of slot {st.slot}",
            evidence=evidence,
        )

    def _replacement(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> UpdateDecision | None:
        """Rule 2, "not an espresso but a matcha latte": the live statement naming the replaced value is updated."""
        who = transcript_speaker(st.content)
        kind = st.source.split(":", 1)[0]
        for pattern in table.replacement:
            match = pattern.search(text)
            if not match:
                continue
            # a generic word is no value ("... and not get climbed over" names nothing said before)
            old = set(substantive_terms(content_terms(match.group("old"))))
            if not old or _WHEN_ONLY.fullmatch(match.group("old").strip()):
                continue  # "以后改成周日下午3点": 以后 says when, it is no replaced value
            best: tuple[float, datetime, int, Candidate] | None = None
            for n, c in enumerate(cands):
                if not _own_statement(c, kind, who):
                    continue
                if _other_subjects(st.content, c.content):
                    continue  # "My daughter's test: peanuts, not shellfish like me" corrects nothing of mine
                # what the candidate states, not what it asks ("Verizon is offering $500 to switch, worth it?" states
                # no "worth it" for "read the fine print, not worth it" to replace)
                said = strip_transcript_prefix(c.content)
                terms = content_terms(" ".join(cl.text for cl in clauses_of(said) if not cl.question))
                share = _overlap(old, terms)
                if len(old) > 1 and len(old & terms) < 2:
                    # one shared word of several ("going back to school" / "I teach high school chemistry") names
                    # another thing; a one-word value ("not an espresso") is named by that word
                    continue
                if share >= self.withdraw_overlap and (best is None or (share, _naive(c.valid_from), n) > best[:3]):
                    best = (share, _naive(c.valid_from), n, c)
            if best is not None:
                return UpdateDecision(
                    action=Action.UPDATE,
                    target=best[3].id,
                    reason=f"replaces {match.group('old').strip()[:40]!r} with {match.group('new').strip()[:40]!r}",
                    evidence={"replaced": match.group("old").strip()[:200], "overlap": round(best[0], 3)},
                )
        return None

    def _withdrawal(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> UpdateDecision | None:
        return self._withdraw_by(st, table.withdrawal, text, cands, self.withdraw_overlap, "withdraws", 1)

    def _negation(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> UpdateDecision | None:
        # a negation names its fact in at least two words ("not allergic to cats"): "I don't have a recipe" is
        # too thin to deny anything said before
        return self._withdraw_by(st, table.negation, text, cands, self.negation_overlap, "denies", 2)

    def _withdraw_by(
        self,
        st: Statement,
        patterns: Sequence[re.Pattern[str]],
        text: str,
        cands: list[Candidate],
        threshold: float,
        verb: str,
        min_terms: int,
    ) -> UpdateDecision | None:
        source_kind, speaker = st.source.split(":", 1)[0], transcript_speaker(st.content)
        # Every pattern that matches proposes its object; the candidate covering the most withdrawn words wins
        # ("成都出差取消了" names more than "之前说的出差不算了").
        best: tuple[int, float, datetime, int, Candidate, str, str] | None = None
        for pattern in patterns:
            match = pattern.search(text)
            if not match:
                continue
            obj = (match.groupdict().get("obj") or "").strip()
            # a Chinese bigram of particles and function characters names nothing ("想了想还是不去了": 想还, 还是)
            wanted = {t for t in content_terms(obj) if t.isascii() or not set(t) <= _COMMON_CJK}
            if len(wanted) < (1 if _STATE_CHANGE.search(match.group(0)) else min_terms):
                continue
            for n, c in enumerate(cands):
                if not _own_statement(c, source_kind, speaker):
                    continue  # one withdraws one's own statements; what derives from them turns suspect
                plain = strip_transcript_prefix(c.content)
                if all(clause.asks for clause in clauses_of(plain)):
                    continue  # a question holds no fact to withdraw ("大理有啥小众景点")
                body = content_terms(plain)
                share = _overlap(wanted, body)
                if share < threshold or _negated(c.content) is not None:
                    continue
                if verb == "denies" and _qualifies(wanted - body, plain):
                    continue  # "I don't eat fish on Fridays" narrows "I eat meat and fish"; it does not deny it
                key = (len(wanted & body), share, _naive(c.valid_from), n)
                if best is None or key > best[:4]:
                    best = (*key, c, obj, pattern.pattern)
        if best is None:
            return None
        _, share, _, _, target, obj, pattern_text = best
        return UpdateDecision(
            action=Action.CONTRADICT,
            target=target.id,
            reason=f"the statement {verb} {target.id}: {obj[:80]!r}",
            evidence={"withdrawn": obj[:200], "overlap": round(share, 3), "pattern": pattern_text[:80]},
        )

    def _swap(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> UpdateDecision | None:
        """A value put in place of another that the statement names ("its 86 Harbor Rd not 88").

        Its target is the latest own statement that names the replaced value (or a digit group of it: "ends in 0128
        not 0182") and not the new one.
        """
        new, old = swapped_values(text)
        if not old:
            return None
        kind, who = st.source.split(":", 1)[0], transcript_speaker(st.content)
        said = content_terms(text) - old - new  # words besides the values
        named_it: list[Candidate] = []
        for c in cands:
            if not _own_statement(c, kind, who) or _other_subjects(st.content, c.content):
                continue
            if st.valid_from and c.valid_from and _naive(c.valid_from) > _naive(st.valid_from):
                continue  # a later statement is not what this one corrects
            named = key_parts(strip_transcript_prefix(c.content))
            if not (old & named) or new <= named:
                continue  # names neither the replaced value, or names both (options weighed: "5 or 6?")
            # the correction names a thing the statement with the old value does not ("the hotel is the 10th not the
            # 9th" after "booked my flight for the 9th"): another thing's value
            ca = next((x for x in clauses_of(c.content) if key_parts(x.text) & old), None)
            cb = next((x for x in clauses_of(text) if key_parts(x.text) & new), None)
            if ca is not None and cb is not None and _own_thing(ca, cb):
                continue
            # a short number is everywhere ("Meet me at 5 not 6" corrects nothing in "I have 6 cats"): the two share
            # the conversation or a word besides the values, unless the replaced value is itself specific ("0182")
            specific = any(len(v) >= 4 for v in old & named)
            if not (
                specific or said & content_terms(c.content) or (st.session is not None and st.session == c.session)
            ):
                continue
            named_it.append(c)
        if not named_it:
            return None
        best = max(named_it, key=lambda c: _naive(c.valid_from))  # the latest (of unknown time: the earliest)
        return UpdateDecision(
            action=Action.UPDATE,
            target=best.id,
            reason=f"names the value it replaces: {'/'.join(sorted(old))[:40]} → {'/'.join(sorted(new))[:40]}",
            evidence={
                "old_keys": sorted(old)[:10], "new_keys": sorted(new)[:10], "cue": cue,
                # one value for one: the corrected statement can be written out whole (services._decisions)
                **({"replaced": next(iter(old)), "replacement": next(iter(new))} if len(old) == len(new) == 1 else {}),
            },
        )  # fmt: skip

    def _changed_key(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> UpdateDecision | None:
        best: tuple[float, Candidate, list[str], list[str]] | None = None
        kind, who = st.source.split(":", 1)[0], transcript_speaker(st.content)
        # the values the statement rejects ("120 stars, not 300"): only a memory that names one is what it corrects
        rejected = rejected_values(text)
        for c in cands:
            if not _own_statement(c, kind, who):
                continue  # one revises one's own statements; an answer built on them turns suspect by lineage
            if not may_correct(rejected, c.content):
                continue
            if st.slot and c.slot and c.slot != st.slot:
                continue  # both name their attribute, and they differ
            if _other_subjects(st.content, c.content):
                continue  # "my daughter is 7" / "my son is 10": two people, two facts
            change = _key_change(st.content, c.content)
            # same words (Jaccard), or close in meaning by vector with some words shared
            close = c.similarity is not None and c.similarity >= NEAR_SIMILARITY and change is not None
            if change is None or (change[0] < self.near_jaccard and not (close and change[0] >= 0.2)):
                continue
            if best is None or change[0] > best[0]:
                best = (change[0], c, change[1], change[2])
        if best is None:
            return None
        jaccard, c, added, dropped = best
        return UpdateDecision(
            action=Action.UPDATE,
            target=c.id,
            reason=f"restates {c.id} with a changed {'/'.join(dropped)[:40]} → {'/'.join(added)[:40]}",
            evidence={"overlap": round(jaccard, 3), "old_keys": dropped[:10], "new_keys": added[:10], "cue": cue},
        )


#: Cosine similarity at which a restatement with a changed key counts even with few shared words (MiniLM).
NEAR_SIMILARITY = 0.7


def _key_change(new: str, old: str) -> tuple[float, list[str], list[str]] | None:
    """``(word overlap, added keys, dropped keys)`` when ``new`` restates ``old`` with a changed key, else None.

    Both must come from the same speaker; the other words must overlap (at least one shared term; the Jaccard is
    returned for the caller's threshold) and each side must name a key the other does not. With an explicit
    correction cue ("actually", "correction", "I meant", 更正, 其实...) in either, any entity, number or date may
    change. Without one, only a number or date of a state of the speaker ("I have 2 kids" → "I have 3 kids"):
    two similar events are two events, greetings to different people are not corrections, and "travel note
    number 1" does not correct "travel note number 0".
    """
    ev_new, cue_new, me_new, k_new, n_new, t_new, who_new = _profile(new)
    ev_old, cue_old, me_old, k_old, n_old, t_old, who_old = _profile(old)
    if who_new != who_old:
        return None
    added, dropped = k_new - k_old, k_old - k_new
    if not added or not dropped:
        return None
    if not (cue_new or cue_old):
        if ev_new or ev_old or not (me_new and me_old):
            return None
        if not (added <= n_new and dropped <= n_old):
            return None
    shared, union = t_new & t_old, t_new | t_old
    if not shared:
        return None
    return len(shared) / len(union), sorted(added), sorted(dropped)


_COLON = re.compile(r"(?<=\w)[:：]\s*(?=\S)")


def _other_subjects(new: str, old: str) -> bool:
    """Whether ``new`` is about another person than ``old`` (the subject of ``old``'s first statement).

    It is when the opening clauses of the two name different people and none of ``new``'s statements (its clauses
    that state something) is about ``old``'s person, unless none names anyone or one speaks of someone by a
    pronoun before any of them names a person: "Sorry, I got that wrong: his birthday is May 21" may go on about "my
    husband"; "My son is 10 years old" is about another person than "My daughter is 7 years old", and so is
    "我老公生日是 7 月 28 号，他喜欢钓鱼" than "我生日是 7 月 20 号" (他 is the husband).
    """
    # a colon opens what a cue announces ("Sorry, I got that wrong: his birthday is May 21"): read apart here
    ca = [c for part in _COLON.split(new) for c in clauses_of(part)]
    cb = clauses_of(old)
    if not ca or not cb:
        return False
    if ca[0].subject is None or cb[0].subject is None or ca[0].subject == cb[0].subject:
        return False  # the opening clauses name no two people
    said = [c for c in cb if c.substantive and not c.asks] or cb
    subject = said[0].subject
    stating = [c for c in ca if c.substantive and not c.asks] or ca[:1]
    subjects = {c.subject for c in stating}
    if subject is None or subject in subjects or subjects == {None}:
        return False
    named = False  # a pronoun after a clause that names someone ("我老公生日是7月28号，他喜欢钓鱼") points back at them
    for c in stating:
        if c.subject is None and not named and THIRD_PERSON.search(c.text):
            return False
        named = named or c.subject not in (None, "self")
    return True


#: Negations that state a change ("no longer", "anymore", 不再): one word of the old fact is enough.
_STATE_CHANGE = re.compile(r"no\s+longer|any\s?more|不再|已经不", re.IGNORECASE)


#: Words a negation adds that only say the fact changed ("… any longer", "… these days"), not how far it holds.
_CHANGE_TERMS = frozenset({"longer", "anymore", "more", "now", "day", "these", "nowadays", "现在", "已经"})
#: Characters that CJK bigrams straddle without adding a word (aspect and mood particles).
_PARTICLES = frozenset("了的过吗呢吧啦啊呀")


def _qualifies(missing: set[str], old: str) -> bool:
    """Whether words of a negated fact the old statement lacks restrict it (a time, a place, a condition).

    A negation that names more than the old statement held ("not on Fridays", "周末不") denies only part of it, so it
    is no withdrawal. Change words and particles do not count; a CJK bigram counts when one of its characters is new.
    """
    for term in missing - _CHANGE_TERMS:
        if term.isascii():
            return True
        if any(ch not in old and ch not in _PARTICLES for ch in term):
            return True
    return False


def _granularity(value: str | None) -> bool | None:
    """Whether a slot value holds digits (a street address, a figure), or None when unknown."""
    return None if not value else any(ch.isdigit() for ch in value)


def _own_statement(c: Candidate, source_kind: str, speaker: str | None) -> bool:
    """Whether a candidate is a statement (not a question or request) by the same source kind and speaker."""
    return (
        c.source.split(":", 1)[0] == source_kind
        and transcript_speaker(c.content) == speaker
        and not only_asks(c.content)
    )


def _adds_words(new: str, old: str) -> bool:
    """Whether ``new`` says something ``old`` does not (a content word beyond cues and the old text's words)."""
    table = tables_for(new)[0]
    extra = content_terms(_without_cues(strip_transcript_prefix(new), table)) - content_terms(
        strip_transcript_prefix(old)
    )
    # verbs of the slot patterns that restate without adding ("living" for "live"), and contraction debris ("m")
    return any(len(t) > 1 and t not in _RESTATING for t in extra)


_RESTATING = frozenset({"live", "living", "lives", "based", "moved", "reside", "residing", "住在", "现在", "目前"})


def _exclusive(text: str) -> bool:
    """Whether a preference statement is exclusive ("prefer", "favourite", "only", "now", 更喜欢, 只, 改...)."""
    return tables_for(text)[0].is_exclusive(strip_transcript_prefix(text))


def _negated(text: str) -> str | None:
    for table in tables_for(text):
        for pattern in table.negation:
            match = pattern.search(text)
            if match:
                return match.group(0)
    return None


def _standing(st: Statement, cands: Sequence[Candidate], decision: UpdateDecision) -> UpdateDecision:
    """``decision``, unless the statement holds for a while only and its target is a standing fact.

    "这周三不去了" (not going this Wednesday) neither withdraws nor replaces "每周三晚上打羽毛球" (badminton every
    Wednesday); it may still correct another one-off ("this week the meeting is on Tuesday").
    """
    target = next((c for c in cands if c.id == decision.target), None)
    # st.content holds only what the statement asserts; a clause says something when it has content words or keys
    said = [c for c in clauses_of(st.content) if c.substantive or c.keys]
    once = bool(said) and all(c.temporary for c in said)  # "I'm in Berlin this week. I moved to Munich." still moves
    if target is None or not once or for_a_while(target.content):
        return decision
    return UpdateDecision(reason="holds for a while only (this week, this once): the standing fact it names stays")
