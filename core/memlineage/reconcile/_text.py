"""Text signals of update detection: who may update whom, slots, revision and withdrawal cues, key tokens."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from datetime import datetime, timezone

from memlineage._forget import text_cache
from memlineage.extractors._patterns import LanguageTable, has_cjk, tables_for
from memlineage.extractors._rules import (
    _slug,
    content_terms,
    detect_slot,
    strip_transcript_prefix,
    transcript_speaker,
)
from memlineage.index.lexical import CJK_RANGES
from memlineage.models import SourceKind


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


def tool_slot(tool_source: str, arguments: object) -> str | None:
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
        text = arguments
        try:
            arguments = json.loads(text)
        except ValueError:
            arguments = " ".join(text.split()).casefold()
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"tool.{_slug(tool_source.split(':', 1)[1])}.{digest}"


#: Every slot rule speaks of the speaker, a possession or a superlative; text without any of these holds no slot.
_SLOT_TRIGGER = re.compile(r"\b(?:i|i'm|i've|i'd|my|me|we|we're|our|home|the best|the worst)\b|'s\b|我", re.IGNORECASE)


def points_at_child(text: str, people: frozenset[str]) -> bool:
    """Whether ``text`` names a child without its sex while ``people`` (the query's) holds a son or daughter.

    The words are the tables' ``any_child`` and ``child_roles`` ("孩子转到育才小学了" for "我儿子…", "the kid" for
    "my son").

    Example:
        >>> points_at_child("孩子转到育才小学了", frozenset({"儿子"})), points_at_child("孩子转学了", frozenset())
        (True, False)
        >>> points_at_child("给女儿买了个娃娃", frozenset({"女儿"}))  # a doll
        False
    """
    return any(
        people & table.child_roles and any(p.search(text) for p in table.any_child) for table in tables_for(text)
    )


@text_cache(maxsize=16384)
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
    """Whether ``text`` could update or withdraw a statement that holds no slot (cheap).

    True for a correction cue, a replacement, a withdrawal or negation, or a number or date in a statement about the
    speaker: the rules that need the nearest statements by vector. Everything else is matched by slot only, so bulk
    imports of plain records pay no vector query. The cheap tests run first; the full profile of the statement
    (:func:`_profile`, for its numbers and dates) only for a statement about the speaker.
    """
    table = tables_for(text)[0]
    body = strip_transcript_prefix(text)
    if table.is_correction(body) or withdraws(text) or table.any_of("replacement")(body) or swapped_values(body)[1]:
        return True
    return bool(_FIRST_PERSON.search(body)) and bool(_profile(text)[4])


#: A number or a weekday: what a repair gives ("415-555-0129", "the 19th", "Thursdays", 五月二十一).
_REPAIR_VALUE = re.compile(
    r"\d|[零一二三四五六七八九十两]|\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|周[一二三四五六日天]|星期",
    re.IGNORECASE,
)


def repairs(text: str) -> bool:
    """Whether ``text`` opens by taking back what was just said ("argh no, ...", 不对不对) and names a value.

    The value is a number, a time or an e-mail address.

    Such a statement is compared with the speaker's recent statements (``reconcile._generic.repair_update``).
    """
    body = strip_transcript_prefix(text)
    return bool(tables_for(body)[0].any_of("repair")(body)) and bool(_REPAIR_VALUE.search(body) or EMAIL.search(body))


def clauses(text: str) -> list[str]:
    """The clauses of a statement, split where its language's table (``clause_breaks``) says a new fact starts.

    ``"I'm planning a trip to Paris. I prefer aisle seats."`` → two clauses; ``"I am vegan and I love jazz"`` →
    ``["I am vegan", "I love jazz"]``; ``"salt and pepper"`` stays one (no new subject after "and").
    """
    parts = [text]
    for pattern in tables_for(text)[0].clause_breaks:
        parts = [piece for part in parts for piece in pattern.split(part)]
    out: list[str] = []
    for piece in (p.strip() for p in parts if p and p.strip()):
        if out and _WITH_ME.fullmatch(out[-1]) and f"{out[-1]} and {piece}" in text:
            # "My husband and I talked it over": one subject, the speaker among it
            out[-1] = f"{out[-1]} and {piece}"
        elif out and _APPOSED.fullmatch(out[-1]):
            # a name alone before a comma is no clause: "Luna, my cat, eats salmon" says one thing about Luna
            out[-1] = f"{out[-1]}, {piece}"
        else:
            out.append(piece)
    return out


#: Titles whose period ends no sentence ("Dr. Alvarez is out").
TITLES = ("Dr", "Mr", "Ms", "Mrs", "St", "vs")
#: "and I" right after someone named: the speaker is among the subject ("My wife and I moved", "with Sam and me").
AND_ME = re.compile(r"^\s*(?:and|&)\s+(?:i|me)\b", re.IGNORECASE)
#: Someone named alone before "and I" ("My husband", "Jake"): the two are one subject.
_WITH_ME = re.compile(r"(?:(?:[Mm]y|[Oo]ur)\s+[a-z][\w'’-]*(?:\s+[a-z][\w'’-]*)?|[A-Z][a-z]+)")


def with_me(text: str) -> bool:
    """Whether ``text`` opens with someone named alone and "and I" ("Jake and I split up"): the speaker's clause."""
    named = _WITH_ME.match(text)
    return named is not None and AND_ME.match(text[named.end() :]) is not None


#: A name of one or two words alone before a break at a comma ("Luna", "Aunt May"): an apposition, no clause.
_APPOSED = re.compile(r"[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)?")


def untouched_clauses(
    old: str, new: str, *, slot: str | None = None, withdrawn: str | None = None, replaced: str | None = None
) -> str | None:
    """What of the statement ``old`` still stands after ``new`` updates or withdraws one fact in it.

    A clause is touched when it holds ``slot`` (the attribute the update replaces), names the ``withdrawn`` or
    replaced words, or, when neither identifies a clause, shares a content word with ``new``. The untouched clauses
    stand as they were. With ``replaced`` (an update, not a withdrawal), a touched clause also keeps its other
    details without the one value the update replaced: "I'm planning a trip to Rome from 10 to 14 June." corrected
    by "Actually, I'm going to Naples." keeps "I'm planning a trip from 10 to 14 June." (see :func:`_kept_details`).
    The result is one statement (with ``old``'s transcript prefix), its parts in their order.

    Args:
        old: The statement updated or withdrawn.
        new: The statement that does it.
        slot: The attribute the update replaces, if known.
        withdrawn: Words the statement withdraws or replaces (from the decision's evidence).
        replaced: For an update: the replaced value when the decision names it, else ``""`` (then the value of the
            touched clause that the update's new value stands for is found by kind: a name for a name, a number or
            date for a number or date). ``None`` for a withdrawal: a touched clause goes whole.

    Returns:
        The parts that still stand, or None when nothing stands apart from what was corrected (one clause and no
        detail left, every clause touched, or none that can be told apart).
    """
    body = strip_transcript_prefix(old)
    prefix = old[: len(old) - len(body)]
    parts = clauses(body)
    flags = [True] * len(parts)
    if len(parts) > 1:
        named = content_terms(withdrawn) if withdrawn else set()
        flags = [
            (slot is not None and slot_of(prefix + part)[0] == slot) or bool(named & content_terms(part))
            for part in parts
        ]
        if not any(flags):
            said = content_terms(strip_transcript_prefix(new))
            flags = [bool(said & content_terms(part)) for part in parts]
        if not any(flags):
            return None
    kept = [
        (_as_sentence(part) if _says_something(part) else None)
        if not hit
        else (_kept_details(part, new, replaced) if replaced is not None else None)
        for part, hit in zip(parts, flags, strict=True)
    ]
    if not any(kept):
        return None
    return prefix + " ".join(k for k in kept if k)


def _says_something(clause: str) -> bool:
    """Whether a clause holds a content word besides cues ("Actually," alone says nothing)."""
    return bool(content_terms(_without_cues(clause, tables_for(clause)[0])))


def rejected_values(text: str) -> frozenset[str]:
    """Key tokens a statement rejects by contrast ("120 stars, not 300" → ``{"300"}``; the table's ``contrast``).

    A statement that rejects a value corrects a memory that names it, and only such a memory (see
    :func:`may_correct`).
    """
    table = tables_for(text)[0]
    contrasted = frozenset(k for p in table.contrast for m in p.finditer(text) for k in _key_tokens(m.group(0)))
    return contrasted | swapped_values(text)[1]


def may_correct(rejected: frozenset[str], content: str) -> bool:
    """Whether a memory of ``content`` may be what a statement rejecting ``rejected`` corrects (it names one)."""
    return not rejected or bool(rejected & _key_parts(_key_tokens(strip_transcript_prefix(content))))


def key_parts(text: str) -> frozenset[str]:
    """The key tokens of ``text`` and the digit groups inside them (see :func:`_key_parts`)."""
    return frozenset(_key_parts(_key_tokens(text)))


def _key_parts(keys: set[str]) -> set[str]:
    """Keys and the digit groups inside them: "it ends in 0128 not 0182" names a part of "415-555-0182"."""
    return keys | {part for k in keys if any(c.isdigit() for c in k) for part in _GROUPS.split(k) if part}


_GROUPS = re.compile(r"[-./:,\s]+")
#: "not" before a value: "86 Harbor Rd not 88", "QX7HTP not QX7HTR", "it's the 14th not the 12th"; a number with
#: separators is one value ("not 4,200", "not 9:40").
_NOT_VALUE = re.compile(
    r"\bnot\s+(?:the\s+|a\s+|an\s+)?(?P<old>[$€£]?\d+(?:[.,:]\d+)+|[^\s,.;:!?]+(?:\s+[A-Z][^\s,.;:!?]*)?)",
    re.IGNORECASE,
)
#: Where a clause of a sentence starts, looking back from a "not" (a sentence end or a semicolon).
_CLAUSE_START = re.compile(r"[.;!?\n](?:\s|$)")


def _shape(key: str, text: str) -> str:
    """A key's shape for value swaps.

    "digits" (a number, a code, a phone), "email", "name" (written capitalised in ``text``), or "word" (a spelled
    number, a time word: "I'm not a morning person" swaps nothing).
    """
    if "@" in key:
        return "email"
    if any(c.isdigit() for c in key):
        return "digits"
    written = re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", text, re.IGNORECASE)
    return "name" if written is not None and written.group(0)[:1].isupper() else "word"


@text_cache(maxsize=16384)
def swapped_values(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The values a statement puts in place of others it names: ``(new, old)`` keys, case-folded, or two empties.

    A value followed in its clause by "not" and another value of the same shape (both with digits, both e-mail
    addresses, or both names): "ugh typo, its 86 Harbor Rd not 88" → ``({"86"}, {"88"})``; "the code is QX7HTP not
    QX7HTR"; "it ends in 0128 not 0182". No pattern of cue words is needed: naming the replaced value beside its
    replacement is the correction. "not" before a word that is no value ("not sure", "not far from 88 Harbor Rd"
    with no value before it) swaps nothing.
    """
    if has_cjk(text):
        return frozenset(), frozenset()
    new: set[str] = set()
    old: set[str] = set()
    for m in _NOT_VALUE.finditer(text):
        rejected = _key_tokens(m.group("old"))
        if not rejected:
            continue
        starts = [c.end() for c in _CLAUSE_START.finditer(text, 0, m.start())]
        before = _key_tokens(text[starts[-1] if starts else 0 : m.start()]) - rejected
        shapes = {_shape(k, text) for k in rejected} - {"word"}
        given = {k for k in before if _shape(k, text) in shapes}
        if given:
            new |= given
            old |= rejected
    # a number read inside a code ("7" of "QX7HTR") is part of that value, not a value of its own
    return _outermost(new), _outermost(old)


def substituted(old: str, new: str, replaced: str, replacement: str) -> str | None:
    """``old`` with the value ``replaced`` put right as ``new`` gives it (``replacement``, case-folded), or None.

    "My address for the invoice is 88 Harbor Rd, Portsmouth NH 03801." corrected by "its 86 Harbor Rd not 88" →
    "My address for the invoice is 86 Harbor Rd, Portsmouth NH 03801."; a digit group is replaced inside its value
    ("415-555-0182", "ends in 0128 not 0182" → "415-555-0128"). The replacement is written as ``new`` spells it.
    None when ``old`` does not name ``replaced`` as a whole value or ``new`` does not spell ``replacement``.
    """
    spelled = spells(new, replacement)
    pattern = _whole_value(replaced)
    if spelled is None or not pattern.search(old):
        return None
    return pattern.sub(lambda _: spelled.group(0), old)


def spells(text: str, value: str) -> re.Match[str] | None:
    """Where ``text`` spells ``value`` as a whole value (not inside a longer word or number), case-insensitively."""
    return _whole_value(value).search(text)


def _whole_value(value: str) -> re.Pattern[str]:
    """``value`` as a whole value; a number also as written with thousands separators, never a group of another.

    "4200" is found in "$4,200" and neither "200" nor "4,200" inside "4,200,000".
    """
    if not value.isdigit():
        return re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", re.IGNORECASE)
    head = len(value) % 3 or 3
    grouped = ",".join([value[:head]] + [value[i : i + 3] for i in range(head, len(value), 3)])
    return re.compile(rf"(?<![A-Za-z0-9])(?<!\d,)(?:{value}|{grouped})(?![A-Za-z0-9])(?!,\d)")


def codes(keys: frozenset[str]) -> frozenset[str]:
    """The keys that mix letters and digits (a booking code, a plate, a model number: "qx7htr", "lanternfish-0930")."""
    return frozenset(k for k in keys if any(c.isdigit() for c in k) and any(c.isalpha() for c in k))


def _outermost(keys: set[str]) -> frozenset[str]:
    return frozenset(k for k in keys if not any(k != other and k in other for other in keys))


#: A name after a preposition of place ("in Logan Square", "near Zilker Park"): English, capitalised.
_PLACE_NAME = re.compile(r"\b(?:in|near|at|by|off)\s+((?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*){0,3})", re.IGNORECASE)


def _kept_details(clause: str, new: str, replaced: str) -> str | None:
    """``clause`` without the one value ``new`` replaces, when other details (names, numbers, dates) remain.

    A place named beside a replaced place (after "in", "near", "at", "by", "off") goes with it: it was part of
    where the speaker said they were ("I live in Chicago, in Logan Square").

    None when the replaced value cannot be told (none, or several of the new value's kind), when no other detail
    is left, or when ``new`` restates them (then the correction holds them itself).
    """
    table = tables_for(new)[0]
    k_new = _key_tokens(_without_cues(strip_transcript_prefix(new), table))
    # the old clause's own cues and the value it negated ("Actually, ... Prague, not Bordeaux") are no details
    own = tables_for(clause)[0]
    for pattern in own.contrast:  # before the cues go: "instead of Bruges" is a contrast, "instead" also a cue
        clause = pattern.sub("", clause)
    clause = _without_cues(clause, own)
    clause = re.sub(r"^[\s,.;:!?，。；：！？]+", "", re.sub(r"\s{2,}", " ", clause)).strip()
    k_old = _key_tokens(clause)
    if replaced:
        gone = _key_tokens(replaced) & k_old or {t for t in content_terms(replaced) if t in k_old}
    else:
        added = k_new - k_old
        kinds = {_is_number_or_date(k) for k in added}
        if len(kinds) != 1:
            return None
        gone = {k for k in k_old - k_new if _is_number_or_date(k) in kinds}
    if len(gone) != 1:
        return None
    (value,) = gone
    rest = k_old - gone - k_new
    # a place named beside a replaced place is part of it: "I live in Chicago, in Logan Square" moved to Nashville
    # keeps no "in Logan Square" (a name after "with", a date, a number stay: "a trip to Paris with Anna", "in June")
    places = [_key_tokens(m.group(1)) for m in _PLACE_NAME.finditer(clause)]
    if any(value in p for p in places):
        rest -= {t for p in places for t in p if not _is_number_or_date(t)}
    # a detail of a kind the correction also gives anew was corrected too ("Naples in July" for "Rome in June")
    new_kinds = [_is_number_or_date(k) for k in k_new - k_old]
    if _is_number_or_date(value) in new_kinds:
        new_kinds.remove(_is_number_or_date(value))
    if not rest or any(_is_number_or_date(k) in new_kinds for k in rest):
        return None
    dropped = re.sub(
        r"(?:\b(?:to|in|at|for|from|with|of|the|a|an)\s+)*(?<!\w)" + re.escape(value) + r"(?!\w)",
        "",
        clause,
        count=1,
        flags=re.IGNORECASE,
    )
    dropped = re.sub(r"\s+([,.;!?])", r"\1", re.sub(r"\s{2,}", " ", dropped)).strip()
    return _as_sentence(dropped) if dropped and dropped != clause else None


def _is_number_or_date(key: str) -> bool:
    return bool(_NUMBER.fullmatch(key) or _TIME_WORDS.fullmatch(key))


def _as_sentence(clause: str) -> str:
    """A clause as a sentence of its own: first letter upper-case, closing punctuation added when missing."""
    clause = clause.rstrip(",;，、 ")
    if clause[:1].islower():
        clause = clause[0].upper() + clause[1:]
    if clause and clause[-1].isalnum():
        clause += "。" if _CJK.search(clause[-1]) else "."
    return clause


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


@text_cache(maxsize=4096)
def withdraws(text: str) -> bool:
    """Whether ``text`` matches a withdrawal or negation pattern of its language ("forget …", "…取消了").

    Cached per text: update detection asks twice per statement (may it revise? should recent statements be read?).
    """
    return tables_for(text)[0].any_of("withdrawal", "negation")(text)


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
#: A word character that is not Chinese, Japanese or Korean: in mixed text an English name or identifier ends where
#: the CJK text begins ("国航CA4112", "提了台Model 3").
_LATIN_WORD = f"[^\\W{CJK_RANGES}]"
_CAPITALISED = re.compile(rf"(?<!{_LATIN_WORD})[A-Z](?:{_LATIN_WORD}|['-])*{_LATIN_WORD}")
#: A name with a capital inside a lower-case word ("iPhone", "eBay", "macOS").
_CAMEL = re.compile(r"(?<![A-Za-z])[a-z]{1,4}[A-Z][A-Za-z]*")
#: An identifier mixing letters and digits, letters first or digits-letters-digits ("ua123", "3U8882", "b12"); not a
#: number with a unit or ordinal ("5pm", "21st", "256GB").
_IDENTIFIER = re.compile(r"(?<![A-Za-z0-9])(?:[A-Za-z]+\d|\d+[A-Za-z]+\d)[A-Za-z0-9]*(?![A-Za-z0-9])")
_TIME_WORDS = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|march|april|may|june|july|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|"
    r"nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday|thursday|friday|saturday|sunday|morning|afternoon|"
    r"evening|night|noon|midnight|weekdays?|weekends?)\b|上午|下午|晚上|早上|中午|周[一二三四五六日天]|星期[一二三四五六日天]",
    re.IGNORECASE,
)
_NOT_ENTITIES = frozenset(
    "i i'm i've i'd i'll my we our the a an it this that these those sorry correction actually please yes no oh ok "
    "and but so now from update hey hi well also just still then there here what when where which who how "
    "you your you're he she his her they their them its let".split()
)


#: English number words that start a spelled-out number text2num can read ("one hundred and five", "thirty-two
#: thousand", "a hundred"); text without any of them is never handed to it.
_SPELLED = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    r"seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million)\b",
    re.IGNORECASE,
)
#: An e-mail address: an identifier a correction changes like a number ("use dana.k@lumenhealth.com from now on").
EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")  # starts a run only: linear on "1111…"


@text_cache(maxsize=16384)
def with_digits(text: str) -> str:
    """``text`` with the numbers it spells out in English words written as digits ("one hundred and five" → "105").

    Converted by ``text2num`` (``alpha2digit``, MIT), which leaves an isolated small number word as it is ("that
    one", "two tickets"). Text without a number word, and non-ASCII text (Chinese has its own numerals), is returned
    unchanged without parsing.
    """
    if not text.isascii() or not _SPELLED.search(text):
        return text
    from text_to_num import alpha2digit  # deferred: most texts spell no number

    try:
        return str(alpha2digit(text, "en"))
    except (ValueError, TypeError, OverflowError):  # an input the parser cannot read: left as it is
        return text


def spelled_numbers(text: str) -> frozenset[str]:
    """The numbers ``text`` spells out in words, as digits (``"thirty-two thousand"`` → ``{"32000"}``)."""
    converted = with_digits(text)
    if converted is text:
        return frozenset()
    before = {n.replace(",", "") for n in _NUMBER.findall(text)}
    return frozenset(n.replace(",", "") for n in _NUMBER.findall(converted)) - before


def _key_tokens(text: str) -> set[str]:
    """Entities, numbers (digits or spelled out), e-mail addresses and dates in ``text``, case-folded."""
    keys = {m.group(0).casefold().rstrip(".") for m in EMAIL.finditer(text)}
    text = EMAIL.sub(" ", text)  # an address's digits and capitals are no number or name of their own
    keys |= {n.replace(",", "") for n in _NUMBER.findall(text)} | spelled_numbers(text)
    keys |= {m.group(0).casefold() for m in _TIME_WORDS.finditer(text)}
    # a product name written with an inner capital ("iPhone", "eBay") is a name as much as a capitalised word
    keys |= {m.group(0).casefold() for m in _CAMEL.finditer(text)}
    for match in _CAPITALISED.finditer(text):
        word = match.group(0)
        if word.casefold() not in _NOT_ENTITIES:
            keys.add(word.casefold())
    keys |= {m.group(0).casefold() for m in _IDENTIFIER.finditer(text)}
    return keys


def _without_cues(text: str, table: LanguageTable) -> str:
    if not table.any_of("correction_cues", "update_cues")(text):
        return text  # no cue anywhere: every substitution below would leave the text as it is
    for pattern in (*table.correction_cues, *table.update_cues):
        text = pattern.sub(" ", text)
    return text


def _terms_without_keys(text: str, keys: set[str]) -> set[str]:
    terms = content_terms(text)
    return {t for t in terms if t not in keys and not t.isdigit()}


def _overlap(needle: set[str], hay: set[str]) -> float:
    return len(needle & hay) / len(needle) if needle else 0.0


_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|my|we|we're|our)\b|我", re.IGNORECASE)


@text_cache(maxsize=8192)
def _profile(text: str) -> tuple[bool, bool, bool, frozenset[str], frozenset[str], frozenset[str], str | None]:
    """(event, correction cue, personal, key tokens, number/date keys, other terms, speaker) of a statement.

    Cached per text (memories are immutable; recall compares hits pairwise).
    """
    table = tables_for(text)[0]
    body = strip_transcript_prefix(text)
    base = _without_cues(body, table)
    keys = _key_tokens(base)
    numeric = {k for k in keys if _is_number_or_date(k)}
    return (
        table.is_event(body),
        table.is_correction(body),
        bool(_FIRST_PERSON.search(body)),
        frozenset(keys),
        frozenset(numeric),
        frozenset(_terms_without_keys(base, keys)),
        transcript_speaker(text),
    )
