"""The per-language pattern tables of the rule extractor and the update detector.

The tables are data (``patterns/en.yaml``, ``patterns/zh.yaml``, one per language): slot rules keyed by subject and
attribute, update cues, withdrawal and negation patterns, event markers, single-valued attributes and preference
categories. This module only loads and compiles them; see ``en.yaml`` for the format. Adding a language is adding a
table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

from memlineage.errors import ConfigurationError

__all__ = ["AnyOf", "LanguageTable", "SlotRule", "has_cjk", "tables", "tables_for"]

_CJK_CHAR = re.compile(r"[\u4e00-\u9fff]")

#: Constructs whose meaning depends on group numbers or names (back-references, conditionals): a pattern holding
#: one (or what looks like one) is never merged into an alternation.
_GROUP_REFERENCE = re.compile(r"\(\?P=|\(\?\(|\\[1-9]|\\g<")


class AnyOf:
    """Whether any of several patterns occurs in a text, tested in one pass where that is exact.

    ``AnyOf(patterns)(text)`` is ``any(p.search(text) for p in patterns)``. The patterns without named groups and
    back-references (and with the same flags) are joined into one alternation ``(?:p1)|(?:p2)|...``, which matches
    somewhere exactly when one of them does; the others are tried one by one. One pass over the text instead of
    one per pattern makes the cue tables (twenty-odd patterns each) several times cheaper.

    Example:
        >>> cues = AnyOf([re.compile("actually", re.I), re.compile("no longer", re.I)])
        >>> cues("I no longer eat meat"), cues("I eat meat")
        (True, False)
    """

    __slots__ = ("_joined", "_rest", "patterns")

    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self.patterns = tuple(patterns)
        plain = [p for p in self.patterns if not p.groupindex and not _GROUP_REFERENCE.search(p.pattern)]
        joined: re.Pattern[str] | None = None
        if len(plain) > 1 and len({p.flags for p in plain}) == 1 and not plain[0].flags & re.VERBOSE:
            try:
                joined = re.compile("|".join(f"(?:{p.pattern})" for p in plain), plain[0].flags)
            except re.error:  # e.g. an inline global flag, allowed only at the start of a pattern
                joined = None
            if joined is not None and joined.groups != sum(p.groups for p in plain):
                joined = None
        self._joined = joined
        self._rest = tuple(p for p in self.patterns if joined is None or p not in plain)

    def __call__(self, text: str) -> bool:
        """Whether one of the patterns matches somewhere in ``text``."""
        if self._joined is not None and self._joined.search(text):
            return True
        for pattern in self._rest:  # a plain loop: no generator per call
            if pattern.search(text):
                return True
        return False


@dataclass(frozen=True)
class SlotRule:
    """One slot rule: a key template (``user.favourite.{attr}``) and the patterns that fill it.

    Attributes:
        key: Slot key template; ``{subject}``, ``{attr}``, ``{obj}`` come from named groups, ``{category}`` from
            the object's preference category.
        kind: How the key is completed: ``plain``, ``diet``, ``preference``, ``possessive`` or ``attribute``.
        patterns: Compiled patterns; group ``v`` is the value the statement assigns.
        plan: A plan (``plan: true`` in the table): one value per conversation; plans said in two conversations
            may both hold, so only a correction cue replaces one across conversations.
    """

    key: str
    kind: str
    patterns: tuple[re.Pattern[str], ...]
    plan: bool = False


@dataclass(frozen=True)
class LanguageTable:
    """The compiled table of one language (see the module docstring)."""

    language: str
    update_cues: tuple[re.Pattern[str], ...]
    correction_cues: tuple[re.Pattern[str], ...]
    exclusive_markers: tuple[re.Pattern[str], ...]
    replacement: tuple[re.Pattern[str], ...]
    withdrawal: tuple[re.Pattern[str], ...]
    negation: tuple[re.Pattern[str], ...]
    event_markers: tuple[re.Pattern[str], ...]
    clause_breaks: tuple[re.Pattern[str], ...]
    single_valued: frozenset[str]
    categories: tuple[tuple[str, re.Pattern[str]], ...]
    slots: tuple[SlotRule, ...]
    hypothetical: tuple[re.Pattern[str], ...] = ()
    past_markers: tuple[re.Pattern[str], ...] = ()
    additive: tuple[re.Pattern[str], ...] = ()
    past_query: tuple[re.Pattern[str], ...] = ()
    history_query: tuple[re.Pattern[str], ...] = ()
    contrast: tuple[re.Pattern[str], ...] = ()
    people: tuple[re.Pattern[str], ...] = ()
    others: tuple[re.Pattern[str], ...] = ()
    temporary: tuple[re.Pattern[str], ...] = ()
    many_query: tuple[re.Pattern[str], ...] = ()
    self_subject: tuple[re.Pattern[str], ...] = ()
    answer_types: tuple[tuple[str, re.Pattern[str]], ...] = ()
    event_query: tuple[re.Pattern[str], ...] = ()
    #: Groups of names of one role ("mom", "mother"; "女儿", "闺女"), case-folded.
    same_person: tuple[frozenset[str], ...] = ()
    #: Groups of qualifiers that pick one of several things of a kind ("personal" / "work" number, "main home" /
    #: "cabin"): each group is a tuple of sides, each side one pattern.
    contexts: tuple[tuple[re.Pattern[str], ...], ...] = ()
    #: An amount changed by a factor or a direction without a number ("doubled the dose", 减半): a new number.
    rescaled: tuple[re.Pattern[str], ...] = ()
    #: Something given up or gone ("netflix is gone too", 也戒了): an "also" then adds no new thing.
    removal: tuple[re.Pattern[str], ...] = ()
    #: What ends a thing the speaker had or did ("sold the jeep", 吉普卖了): read-time conflicts (``_endings.ends``).
    ending: tuple[re.Pattern[str], ...] = ()
    #: What says the speaker keeps a thing they have ("I'm keeping it", "sticking with", 不换了): an option
    #: weighed in the same message was turned down (read-time conflicts, ``reconcile._endings.keeps``).
    staying: tuple[re.Pattern[str], ...] = ()
    #: What someone believes or keeps telling others about the speaker, or what the speaker once thought ("my mom
    #: keeps telling her friends I work at Apple", "我奶奶逢人就说我在阿里上班", "I thought I was allergic"):
    #: searched at the end of the sentence before a slot's match, which then states no value of the speaker's.
    reported: tuple[re.Pattern[str], ...] = ()
    #: A message that opens by taking back what was just said ("argh no, 415-555-0129", "wait, it went to $2,350",
    #: 不对不对): within one conversation its new time or number replaces the one said last (reconcile._generic).
    repair: tuple[re.Pattern[str], ...] = ()
    #: A child named without its sex (孩子, 娃, "the kid"): it points back at a son or daughter a query asks about
    #: (:attr:`child_roles`), as a pronoun would (``reconcile._text.points_at_child``).
    any_child: tuple[re.Pattern[str], ...] = ()
    #: The roles of a child of one sex ("son", "daughter", 儿子, 闺女), case-folded.
    child_roles: frozenset[str] = frozenset()

    def synonyms(self, role: str) -> frozenset[str]:
        """``role`` and every name sharing a :attr:`same_person` group with it (case-folded)."""
        key = role.casefold()
        return frozenset({key}.union(*(g for g in self.same_person if key in g)))

    @property
    def plan_slots(self) -> frozenset[str]:
        """Keys of the slot rules marked ``plan`` (see :class:`SlotRule`)."""
        return frozenset(r.key for r in self.slots if r.plan)

    def any_of(self, *fields: str) -> AnyOf:
        """The patterns of the named pattern fields as one matcher, built once per table and tuple of fields.

        Example: ``table.any_of("withdrawal", "negation")(text)`` is whether any withdrawal or negation pattern
        occurs in ``text`` (see :class:`AnyOf`).
        """
        built: dict[tuple[str, ...], AnyOf] = self.__dict__.setdefault("_any_of", {})  # frozen: no setattr
        found = built.get(fields)
        if found is None:
            found = built[fields] = AnyOf([p for name in fields for p in getattr(self, name)])
        return found

    def cue(self, text: str) -> str | None:
        """The first update cue found in ``text`` (the matched words), or None."""
        if not self.any_of("update_cues")(text):
            return None
        for pattern in self.update_cues:
            match = pattern.search(text)
            if match:
                return match.group(0)
        return None

    def is_correction(self, text: str) -> bool:
        """Whether ``text`` carries an explicit correction or change ("actually", "correction", "更正", "搬到")."""
        return self.any_of("correction_cues")(text)

    def is_exclusive(self, text: str) -> bool:
        """Whether a preference is stated as exclusive ("prefer", "favourite", "only", "now", 更喜欢, 只...)."""
        return self.any_of("exclusive_markers")(text) or self.is_correction(text)

    def is_event(self, text: str) -> bool:
        """Whether ``text`` reports an event (past action or a dated happening) rather than a state."""
        return self.any_of("event_markers")(text)


def _compile(items: Iterable[object] | None, where: str) -> tuple[re.Pattern[str], ...]:
    try:
        return tuple(re.compile(str(p), re.IGNORECASE) for p in items or ())
    except re.error as exc:
        msg = f"bad regular expression in pattern table {where}: {exc}"
        raise ConfigurationError(msg) from exc


def _load(language: str) -> LanguageTable:
    text = resources.files("memlineage.extractors").joinpath(f"patterns/{language}.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    slots = tuple(
        SlotRule(
            key=str(rule["key"]),
            kind=str(rule.get("kind", "plain")),
            patterns=_compile(rule["patterns"], f"{language}:{rule['key']}"),
            plan=bool(rule.get("plan", False)),
        )
        for rule in data.get("slots", ())
    )
    return LanguageTable(
        language=language,
        update_cues=_compile(data.get("update_cues"), f"{language}:update_cues"),
        correction_cues=_compile(data.get("correction_cues"), f"{language}:correction_cues"),
        exclusive_markers=_compile(data.get("exclusive_markers"), f"{language}:exclusive_markers"),
        replacement=_compile(data.get("replacement"), f"{language}:replacement"),
        withdrawal=_compile(data.get("withdrawal"), f"{language}:withdrawal"),
        negation=_compile(data.get("negation"), f"{language}:negation"),
        event_markers=_compile(data.get("event_markers"), f"{language}:event_markers"),
        clause_breaks=_compile(data.get("clause_breaks"), f"{language}:clause_breaks"),
        single_valued=frozenset(str(a).casefold() for a in data.get("single_valued_attributes", ())),
        categories=tuple(
            (str(name), _compile([pattern], f"{language}:categories")[0])
            for name, pattern in (data.get("categories") or {}).items()
        ),
        slots=slots,
        hypothetical=_compile(data.get("hypothetical"), f"{language}:hypothetical"),
        past_markers=_compile(data.get("past_markers"), f"{language}:past_markers"),
        additive=_compile(data.get("additive"), f"{language}:additive"),
        past_query=_compile(data.get("past_query"), f"{language}:past_query"),
        history_query=_compile(data.get("history_query"), f"{language}:history_query"),
        contrast=_compile(data.get("contrast"), f"{language}:contrast"),
        people=_compile(data.get("people"), f"{language}:people"),
        others=_compile(data.get("others"), f"{language}:others"),
        temporary=_compile(data.get("temporary"), f"{language}:temporary"),
        many_query=_compile(data.get("many_query"), f"{language}:many_query"),
        self_subject=_compile(data.get("self_subject"), f"{language}:self_subject"),
        event_query=_compile(data.get("event_query"), f"{language}:event_query"),
        same_person=tuple(frozenset(str(w).casefold() for w in group) for group in data.get("same_person") or ()),
        contexts=tuple(_compile(list(group), f"{language}:contexts") for group in data.get("contexts") or ()),
        rescaled=_compile(data.get("rescaled"), f"{language}:rescaled"),
        removal=_compile(data.get("removal"), f"{language}:removal"),
        ending=_compile(data.get("ending"), f"{language}:ending"),
        staying=_compile(data.get("staying"), f"{language}:staying"),
        reported=_compile(data.get("reported"), f"{language}:reported"),
        repair=_compile(data.get("repair"), f"{language}:repair"),
        any_child=_compile(data.get("any_child"), f"{language}:any_child"),
        child_roles=frozenset(str(w).casefold() for w in data.get("child_roles") or ()),
        answer_types=tuple(
            (str(name), _compile([pattern], f"{language}:answer_types")[0])
            for name, pattern in (data.get("answer_types") or {}).items()
        ),
    )


@lru_cache(maxsize=1)
def tables() -> tuple[LanguageTable, ...]:
    """Every shipped table (English, Chinese), loaded once."""
    return tuple(_load(lang) for lang in ("en", "zh"))


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains CJK ideographs."""
    return bool(_CJK_CHAR.search(text))


def tables_for(text: str) -> tuple[LanguageTable, ...]:
    """The tables to try on ``text``, most likely language first (Chinese when it has CJK ideographs)."""
    en, zh = tables()
    return (zh, en) if has_cjk(text) else (en, zh)
