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

import concurrent.futures
import hashlib
import json
import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memlineage.errors import ConfigurationError
from memlineage.extractors._llm import _json_object, call_model, check_model
from memlineage.extractors._patterns import LanguageTable, tables_for
from memlineage.extractors._rules import (
    _slug,
    content_terms,
    detect_slot,
    strip_transcript_prefix,
    transcript_speaker,
)
from memlineage.models import SourceKind, StrEnum
from memlineage.retrieval import is_question

__all__ = [
    "Action",
    "Candidate",
    "Decision",
    "LLMReconciler",
    "Reconciler",
    "RuleReconciler",
    "Statement",
    "competing_key",
    "may_revise",
    "may_update",
    "near_duplicates",
    "newest_first",
    "slot_of",
    "tool_slot",
    "withdraws",
]

logger = logging.getLogger(__name__)


class Action(StrEnum):
    """What an update decision does to the ledger."""

    NEW = "new"
    DUPLICATE = "duplicate"
    UPDATE = "update"
    CONTRADICT = "contradict"


class Statement(BaseModel):
    """A statement about to be stored, as a reconciler sees it.

    Attributes:
        content: The text.
        source: ``user``, ``tool:<name>``, ``agent``...
        slot: Slot key (given by the caller or detected), or None.
        slot_value: The value the statement assigns to ``slot`` (detected), or None.
        valid_from: Event time of the statement (UTC).
    """

    model_config = ConfigDict(frozen=True)

    content: str
    source: str
    slot: str | None = None
    slot_value: str | None = None
    valid_from: datetime | None = None


class Candidate(BaseModel):
    """A live memory the statement may update (same scope, compatible source).

    Attributes:
        id: Memory id.
        content: Its text.
        source: Its source.
        slot: Its slot key (stored or detected now), or None.
        slot_value: Its slot value as detected now, or None.
        valid_from: Its event time (UTC).
        similarity: Cosine similarity to the statement in [-1, 1], higher = closer; None when found by slot or words.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    content: str
    source: str
    slot: str | None = None
    slot_value: str | None = None
    valid_from: datetime | None = None
    similarity: float | None = None


class Decision(BaseModel):
    """One reconciler decision for one statement.

    Attributes:
        action: ``new``, ``duplicate``, ``update`` or ``contradict``.
        target: The candidate id the action applies to (None for ``new``).
        reason: Why, in words (kept on the decision activity and shown by ``explain``).
        evidence: What the decision rests on (slot, old and new value, cue, similarity, overlap...).
        decided_by: ``rules``, ``llm`` or ``rules(fallback)``.
    """

    model_config = ConfigDict(frozen=True)

    action: Action = Action.NEW
    target: str | None = None
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    decided_by: str = "rules"


@runtime_checkable
class Reconciler(Protocol):
    """Port for update detection: statements with their candidates in, one decision per statement out."""

    name: str

    def decide(self, items: Sequence[tuple[Statement, Sequence[Candidate]]]) -> list[Decision]:
        """One decision per ``(statement, candidates)`` pair, in order; a target must be one of its candidates."""
        ...


# ------------------------------------------------------------------------------------------------------------
# Sources and slots
# ------------------------------------------------------------------------------------------------------------
def may_update(new_source: str, old_source: str) -> bool:
    """Whether a statement from ``new_source`` may update or withdraw a memory from ``old_source``.

    A user statement may update anything but tool results (a tool result is refreshed by the tool); a tool result
    only an earlier result of the same tool (the arguments are in the slot key, see :func:`tool_slot`); agent,
    reasoning and every other source only memories of its own source, never the user's (seed 000 write
    protection: reasoning never silently overrides the user).

    Example:
        >>> may_update("user", "agent"), may_update("reasoning", "user"), may_update("tool:fares", "tool:fares")
        (True, False, True)
    """
    new_kind = new_source.split(":", 1)[0]
    old_kind = old_source.split(":", 1)[0]
    if new_kind == SourceKind.USER.value:
        return old_kind != SourceKind.TOOL.value
    if new_kind == SourceKind.TOOL.value:
        return new_source == old_source
    return new_source == old_source and old_kind != SourceKind.USER.value


def tool_slot(tool_source: str, arguments: Any) -> str | None:
    """The slot of a tool result: the tool and its arguments (a new fare for the same query replaces the old).

    Args:
        tool_source: ``tool:<name>``.
        arguments: The arguments the tool received (a dict, or a string as some frameworks record it); None when
            unknown.

    Returns:
        ``tool.<name>.<digest of the canonical arguments>``, or None without arguments.

    Example:
        >>> tool_slot("tool:fares", {"to": "Lyon", "from": "Paris"}) == tool_slot(
        ...     "tool:fares", {"from": "Paris", "to": "Lyon"}
        ... )
        True
    """
    if arguments is None or arguments == "" or not tool_source.startswith("tool:"):
        return None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = " ".join(arguments.split()).casefold()
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"tool.{_slug(tool_source.split(':', 1)[1])}.{digest}"


#: Every slot rule speaks of the speaker, a possession or a superlative; text without any of these holds no slot.
_SLOT_TRIGGER = re.compile(r"\b(?:i|i'm|i've|i'd|my|me|we|we're|our|home|the best|the worst)\b|'s\b|我", re.IGNORECASE)


@lru_cache(maxsize=16384)
def slot_of(text: str) -> tuple[str | None, str | None]:
    """Slot and value of a first-person statement, with a transcript speaker as the subject.

    ``"[8 May 2023] Caroline: I live in Boston"`` → ``("caroline.residence", "Boston")``; without a speaker prefix
    the subject is ``user``.
    """
    body = strip_transcript_prefix(text)
    if not _SLOT_TRIGGER.search(body):
        return None, None
    speaker = transcript_speaker(text)
    slot, value = detect_slot(body)
    if slot is not None and speaker is not None and slot.startswith("user."):
        slot = f"{_slug(speaker)}.{slot.split('.', 1)[1]}"
    return slot, value


def may_revise(text: str) -> bool:
    """Whether ``text`` could update or withdraw a statement that holds no slot (cheap; cached per text).

    True for a correction cue, a replacement, a withdrawal or negation, or a number or date in a statement about the
    speaker: the rules that need the nearest statements by vector. Everything else is matched by slot only, so bulk
    imports of plain records pay no vector query.
    """
    _, cue, personal, _, numeric, _, _ = _profile(text)
    if cue or (personal and numeric) or withdraws(text):
        return True
    table = tables_for(text)[0]
    return any(p.search(strip_transcript_prefix(text)) for p in table.replacement)


def withdraws(text: str) -> bool:
    """Whether ``text`` matches a withdrawal or negation pattern of its language ("forget …", "…取消了")."""
    table = tables_for(text)[0]
    return any(p.search(text) for p in (*table.withdrawal, *table.negation))


def _naive(value: datetime | None) -> datetime:
    """A comparable UTC timestamp (``datetime.min`` for unknown)."""
    if value is None:
        return datetime.min
    return (
        value.replace(tzinfo=None) if value.utcoffset() is None else value.astimezone(timezone.utc).replace(tzinfo=None)
    )


def _norm_value(value: str | None) -> str:
    if not value:
        return ""
    value = unicodedata.normalize("NFKC", value).casefold()
    value = re.sub(r"\b(?:now|actually|still|again|anymore|these days|instead)\b|现在|其实|了", " ", value)
    return " ".join(re.findall(r"[\w\u4e00-\u9fff]+", value))


# ------------------------------------------------------------------------------------------------------------
# Words: key tokens (entities, numbers, dates) and the terms around them
# ------------------------------------------------------------------------------------------------------------
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][\w'-]*[\w]")
_TIME_WORDS = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|march|april|may|june|july|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|"
    r"nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday|thursday|friday|saturday|sunday|morning|afternoon|"
    r"evening|night|noon|midnight|weekdays?|weekends?)\b|上午|下午|晚上|早上|中午|周[一二三四五六日天]|星期[一二三四五六日天]",
    re.IGNORECASE,
)
_NOT_ENTITIES = frozenset(
    "i i'm i've i'd i'll my we our the a an it this that these those sorry correction actually please yes no oh ok "
    "and but so now from update hey hi well also just still then there here what when where which who how".split()
)


def _key_tokens(text: str) -> set[str]:
    """Entities, numbers and dates in ``text`` (what a correction changes), case-folded."""
    keys = {n.replace(",", "") for n in _NUMBER.findall(text)}
    keys |= {m.group(0).casefold() for m in _TIME_WORDS.finditer(text)}
    for match in _CAPITALISED.finditer(text):
        word = match.group(0)
        if word.casefold() not in _NOT_ENTITIES:
            keys.add(word.casefold())
    return keys


def _without_cues(text: str, table: LanguageTable) -> str:
    for pattern in (*table.correction_cues, *table.update_cues):
        text = pattern.sub(" ", text)
    return text


def _terms_without_keys(text: str, keys: set[str]) -> set[str]:
    terms = content_terms(text)
    return {t for t in terms if t not in keys and not t.isdigit()}


def _overlap(needle: set[str], hay: set[str]) -> float:
    return len(needle & hay) / len(needle) if needle else 0.0


# ------------------------------------------------------------------------------------------------------------
# The offline reconciler
# ------------------------------------------------------------------------------------------------------------
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
       "travel note number 0".

    All rules compare statements of the same speaker (a transcript's ``[date] Name:`` prefix) and source kind.

    Args:
        near_jaccard: Word overlap (Jaccard of non-key content terms, in [0, 1]) for rule 5 (default 0.5).
        withdraw_overlap: Share of the withdrawn words a candidate must contain, in [0, 1] (default 0.5).
        negation_overlap: Share of the negated fact's words a candidate must contain, in [0, 1] (default 0.6).

    Example:
        >>> r = RuleReconciler()
        >>> old = Candidate(id="m1", content="I live in Paris", source="user", slot="user.residence")
        >>> new = Statement(content="Actually I moved to Munich", source="user", slot="user.residence")
        >>> r.decide([(new, [old])])[0].action.value
        'update'
    """

    name = "rules"

    def __init__(self, *, near_jaccard: float = 0.5, withdraw_overlap: float = 0.5, negation_overlap: float = 0.6):
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

    def decide(self, items: Sequence[tuple[Statement, Sequence[Candidate]]]) -> list[Decision]:
        """One decision per statement (see the class docstring for the rules)."""
        return [self._decide_one(st, list(cands)) for st, cands in items]

    def _decide_one(self, st: Statement, cands: list[Candidate]) -> Decision:
        if not cands:
            return Decision(reason="no live memory it could update")
        table = tables_for(st.content)[0]
        text = strip_transcript_prefix(st.content)
        cue = table.cue(text)
        for rule in (self._same_slot, self._replacement, self._withdrawal, self._negation, self._changed_key):
            decision = rule(st, text, cands, table, cue)
            if decision is not None:
                return decision
        return Decision(reason="no candidate about the same subject and attribute")

    def _same_slot(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> Decision | None:
        if not st.slot:
            return None
        holders = [c for c in cands if c.slot == st.slot]
        if not holders:
            return None
        if ".preference." in st.slot and not (table.is_exclusive(text) or any(_exclusive(c.content) for c in holders)):
            return None  # "I love jazz" and "I love rock" can both be true; "I now prefer rock" replaces
        # the newest holder; among equal event times the later candidate (candidates come oldest first)
        _, holder = max(enumerate(holders), key=lambda ic: (_naive(ic[1].valid_from), ic[0]))
        evidence = {"slot": st.slot, "old_value": holder.slot_value, "new_value": st.slot_value, "cue": cue}
        if st.slot_value and _norm_value(st.slot_value) == _norm_value(holder.slot_value):
            if _adds_words(st.content, holder.content):
                return Decision(reason=f"restates slot {st.slot} and says more: kept as its own memory")
            return Decision(
                action=Action.DUPLICATE,
                target=holder.id,
                reason=f"restates the value of slot {st.slot} held by {holder.id}",
                evidence=evidence,
            )
        if st.valid_from and holder.valid_from and _naive(st.valid_from) < _naive(holder.valid_from):
            return Decision(reason=f"older than the value of slot {st.slot} held by {holder.id}", evidence=evidence)
        return Decision(
            action=Action.UPDATE,
            target=holder.id,
            reason=f"new value of slot {st.slot}",
            evidence=evidence,
        )

    def _replacement(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> Decision | None:
        """Rule 2, "not an espresso but a matcha latte": the live statement naming the replaced value is updated."""
        who = transcript_speaker(st.content)
        kind = st.source.split(":", 1)[0]
        for pattern in table.replacement:
            match = pattern.search(text)
            if not match:
                continue
            old = content_terms(match.group("old"))
            if not old:
                continue
            best: tuple[float, datetime, int, Candidate] | None = None
            for n, c in enumerate(cands):
                if not _own_statement(c, kind, who):
                    continue
                share = _overlap(old, content_terms(strip_transcript_prefix(c.content)))
                if share >= self.withdraw_overlap and (best is None or (share, _naive(c.valid_from), n) > best[:3]):
                    best = (share, _naive(c.valid_from), n, c)
            if best is not None:
                return Decision(
                    action=Action.UPDATE,
                    target=best[3].id,
                    reason=f"replaces {match.group('old').strip()[:40]!r} with {match.group('new').strip()[:40]!r}",
                    evidence={"replaced": match.group("old").strip()[:200], "overlap": round(best[0], 3)},
                )
        return None

    def _withdrawal(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> Decision | None:
        return self._withdraw_by(st, table.withdrawal, text, cands, self.withdraw_overlap, "withdraws", 1)

    def _negation(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> Decision | None:
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
    ) -> Decision | None:
        source_kind, speaker = st.source.split(":", 1)[0], transcript_speaker(st.content)
        # Every pattern that matches proposes its object; the candidate covering the most withdrawn words wins
        # ("成都出差取消了" names more than "之前说的出差不算了").
        best: tuple[int, float, datetime, int, Candidate, str, str] | None = None
        for pattern in patterns:
            match = pattern.search(text)
            if not match:
                continue
            obj = (match.groupdict().get("obj") or "").strip()
            wanted = content_terms(obj)
            if len(wanted) < (1 if _STATE_CHANGE.search(match.group(0)) else min_terms):
                continue
            for n, c in enumerate(cands):
                if not _own_statement(c, source_kind, speaker):
                    continue  # one withdraws one's own statements; what derives from them turns suspect
                body = content_terms(strip_transcript_prefix(c.content))
                share = _overlap(wanted, body)
                if share < threshold or _negated(c.content) is not None:
                    continue
                key = (len(wanted & body), share, _naive(c.valid_from), n)
                if best is None or key > best[:4]:
                    best = (*key, c, obj, pattern.pattern)
        if best is None:
            return None
        _, share, _, _, target, obj, pattern_text = best
        return Decision(
            action=Action.CONTRADICT,
            target=target.id,
            reason=f"the statement {verb} {target.id}: {obj[:80]!r}",
            evidence={"withdrawn": obj[:200], "overlap": round(share, 3), "pattern": pattern_text[:80]},
        )

    def _changed_key(
        self, st: Statement, text: str, cands: list[Candidate], table: LanguageTable, cue: str | None
    ) -> Decision | None:
        best: tuple[float, Candidate, list[str], list[str]] | None = None
        for c in cands:
            if st.slot and c.slot and c.slot != st.slot:
                continue  # both name their attribute, and they differ
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
        return Decision(
            action=Action.UPDATE,
            target=c.id,
            reason=f"restates {c.id} with a changed {'/'.join(dropped)[:40]} → {'/'.join(added)[:40]}",
            evidence={"overlap": round(jaccard, 3), "old_keys": dropped[:10], "new_keys": added[:10], "cue": cue},
        )


#: Cosine similarity at which a restatement with a changed key counts even with few shared words (MiniLM).
NEAR_SIMILARITY = 0.7

_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|my|we|we're|our)\b|我", re.IGNORECASE)


@lru_cache(maxsize=8192)
def _profile(text: str) -> tuple[bool, bool, bool, frozenset[str], frozenset[str], frozenset[str], str | None]:
    """(event, correction cue, personal, key tokens, number/date keys, other terms, speaker) of a statement.

    Cached per text (memories are immutable; recall compares hits pairwise).
    """
    table = tables_for(text)[0]
    body = strip_transcript_prefix(text)
    base = _without_cues(body, table)
    keys = _key_tokens(base)
    numeric = {k for k in keys if _NUMBER.fullmatch(k) or _TIME_WORDS.fullmatch(k)}
    return (
        table.is_event(body),
        table.is_correction(body),
        bool(_FIRST_PERSON.search(body)),
        frozenset(keys),
        frozenset(numeric),
        frozenset(_terms_without_keys(base, keys)),
        transcript_speaker(text),
    )


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


#: Negations that state a change ("no longer", "anymore", 不再): one word of the old fact is enough.
_STATE_CHANGE = re.compile(r"no\s+longer|any\s?more|不再|已经不", re.IGNORECASE)


def _own_statement(c: Candidate, source_kind: str, speaker: str | None) -> bool:
    """Whether a candidate is a statement (not a question) by the same source kind and speaker."""
    return (
        c.source.split(":", 1)[0] == source_kind
        and transcript_speaker(c.content) == speaker
        and not is_question(c.content)
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


# ------------------------------------------------------------------------------------------------------------
# The LLM reconciler
# ------------------------------------------------------------------------------------------------------------
_PROMPT = """You maintain the long-term memory of an assistant for one user. For each NEW statement below, decide how \
it relates to the EXISTING memories listed under it (their ids are in brackets).

Actions:
- "update": the statement gives a new value of the same attribute of the same subject as one existing memory (that \
memory is now outdated). target = its id.
- "contradict": the statement withdraws or denies one existing memory without giving a replacement. target = its id.
- "duplicate": the statement says the same as one existing memory. target = its id.
- "new": anything else, including statements about something different. target = null.

{items}

Answer with ONE JSON object and nothing else:
{{"decisions": [{{"statement": 1, "action": "new", "target": null, "reason": "short reason"}}]}}
with exactly one decision per statement number."""


class _LLMDecision(BaseModel):
    model_config = ConfigDict(extra="ignore")

    statement: int = Field(ge=1)
    action: Action
    target: str | None = None
    reason: str = Field(default="", max_length=500)


class _LLMAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    decisions: list[_LLMDecision]


class LLMReconciler:
    """Update detection by an LLM, validated, batched, with a timeout and a fallback to the rules.

    Setup:
        Install the framework of the model you pass (``memlineage[langchain]`` or ``memlineage[llamaindex]``);
        MemLineage imports neither.

    Instantiate:
        >>> from langchain_core.language_models import FakeListChatModel  # doctest: +SKIP
        >>> mm = MemoryManager.open("./store", reconciler=LLMReconciler(chat_model))  # doctest: +SKIP

    The model sees each new statement with its candidate memories (ids, source, text) and answers one JSON object
    ``{"decisions": [{"statement": n, "action": ..., "target": id|null, "reason": ...}]}``. A statement whose
    decision is missing, names an id that was not among its candidates, or comes from an answer that is not valid
    JSON, fails validation or times out, gets the fallback reconciler's decision (``decided_by="rules(fallback)"``).
    Statements without candidates never reach the model.

    Args:
        model: LangChain chat model / runnable (``invoke``), LlamaIndex LLM (``complete``) or callable
            ``str -> str``.
        fallback: Reconciler used when the model's answer cannot be used; default :class:`RuleReconciler`.
        timeout: Seconds to wait for one model call, > 0 (default 20).
        batch_size: Statements per model call, ≥ 1 (default 8).

    Raises:
        ConfigurationError: unsupported model, or timeout / batch_size out of range.
    """

    name = "llm"
    #: The manager offers the nearest statements of every user statement (the rules get them only on a cue).
    wants_neighbours = True

    def __init__(
        self, model: Any, *, fallback: Reconciler | None = None, timeout: float = 20.0, batch_size: int = 8
    ) -> None:
        check_model(model)
        if not timeout > 0:
            msg = f"timeout must be > 0 seconds, got {timeout!r}"
            raise ConfigurationError(msg)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            msg = f"batch_size must be an int >= 1, got {batch_size!r}"
            raise ConfigurationError(msg)
        self.model = model
        self.fallback: Reconciler = fallback or RuleReconciler()
        self.timeout = float(timeout)
        self.batch_size = batch_size
        self.calls = 0
        self.fallbacks = 0
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlineage-llm")

    def decide(self, items: Sequence[tuple[Statement, Sequence[Candidate]]]) -> list[Decision]:
        """One decision per statement: the model's where valid, the fallback's otherwise."""
        out = self.fallback.decide(items)
        asked = [i for i, (_, cands) in enumerate(items) if cands]
        for start in range(0, len(asked), self.batch_size):
            batch = asked[start : start + self.batch_size]
            answers = self._ask([items[i] for i in batch])
            for n, i in enumerate(batch, start=1):
                decision = answers.get(n)
                if decision is None:
                    self.fallbacks += 1
                    out[i] = out[i].model_copy(update={"decided_by": f"{out[i].decided_by}(fallback)"})
                else:
                    out[i] = decision
        return out

    def _ask(self, batch: Sequence[tuple[Statement, Sequence[Candidate]]]) -> dict[int, Decision]:
        blocks = []
        for n, (st, cands) in enumerate(batch, start=1):
            lines = [f'NEW statement {n} (source {st.source}): "{st.content}"', "EXISTING:"]
            lines += [f'  [{c.id}] ({c.source}) "{c.content}"' for c in cands]
            blocks.append("\n".join(lines))
        prompt = _PROMPT.format(items="\n\n".join(blocks))
        self.calls += 1
        future = self._pool.submit(call_model, self.model, prompt)
        try:
            answer = future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            logger.warning("LLM reconciler: no answer within %.1f s; using the rules", self.timeout)
            return {}
        except Exception as exc:  # a failing model must never break the write path
            logger.warning("LLM reconciler call failed (%s); using the rules", type(exc).__name__)
            return {}
        try:
            parsed = _LLMAnswer.model_validate(_json_object(answer))
        except (ValueError, ValidationError) as exc:
            logger.info("LLM reconciler answer invalid (%s); using the rules", str(exc).splitlines()[0][:200])
            return {}
        out: dict[int, Decision] = {}
        for d in parsed.decisions:
            if not 1 <= d.statement <= len(batch) or d.statement in out:
                continue
            ids = {c.id for c in batch[d.statement - 1][1]}
            if d.action is not Action.NEW and d.target not in ids:
                logger.info(
                    "LLM reconciler named unknown id %r for statement %d; using the rules", d.target, d.statement
                )
                continue
            out[d.statement] = Decision(
                action=d.action,
                target=d.target if d.action is not Action.NEW else None,
                reason=d.reason or f"{d.action.value} (model)",
                evidence={"model_answer": d.model_dump(mode="json")},
                decided_by="llm",
            )
        return out

    def close(self) -> None:
        """Stop the worker thread (a call still running is abandoned)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


# ------------------------------------------------------------------------------------------------------------
# Read side: facts that compete for one attribute
# ------------------------------------------------------------------------------------------------------------
def competing_key(content: str, slot: str | None) -> str | None:
    """The key under which two live memories compete (same slot, stored or detected), or None."""
    return slot or slot_of(content)[0]


def near_duplicates(a: str, b: str, *, threshold: float = 0.5) -> bool:
    """Whether two statements say the same about the same thing but for a changed entity, number or date.

    The read-side twin of :class:`RuleReconciler`'s changed-key rule: a cue in either, or both a state of the
    speaker; two events are two events.

    Example:
        >>> near_duplicates("My office is on the 4th floor", "My office is on the 7th floor")
        True
        >>> near_duplicates("I went to Rome in May", "I went to Oslo in June")
        False
    """
    change = _key_change(a, b)
    return change is not None and change[0] >= threshold


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
