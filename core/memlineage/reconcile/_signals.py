"""Generic signals of update detection: clauses, their terms and keys, who they are about, what they assert.

Update detection must work without the statement matching a pattern (issue 24). What it compares instead is
language-neutral: the clauses of two statements, their content terms (stemmed English words, CJK bigrams), their
key tokens (entities, numbers, dates), who each clause is about (the speaker, another person, unknown) and whether
a clause asserts the present at all (not a question, a supposition, a past state or an addition). The pattern tables
supply only high-precision cues for the last two (``hypothetical``, ``past_markers``, ``additive``, ``people``,
``self_subject``, ``past_query`` in ``extractors/patterns/*.yaml``); a clause they say nothing about is compared on
its words alone.

Everything here is a pure function of the text, cached (memories are immutable).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memlineage._evidence import has_bounded
from memlineage._forget import text_cache
from memlineage.extractors._patterns import LanguageTable, has_cjk, tables_for
from memlineage.extractors._rules import strip_transcript_prefix
from memlineage.index.lexical import STOPWORDS, tokenize
from memlineage.reconcile._numbers import CLOCK, DIGITS, TIME, numbers_in
from memlineage.reconcile._text import _TIME_WORDS, AND_ME, TITLES, _key_tokens, clauses, codes, with_me
from memlineage.retrieval import is_question, is_request

__all__ = [
    "Clause",
    "answer_type",
    "asserting_text",
    "asks_about_past",
    "asks_about_speaker",
    "asks_unmarked",
    "clause_similarity",
    "clauses_of",
    "focus",
    "key_terms",
    "numbers_in",
    "query_terms",
    "substantive_terms",
    "times_in",
    "values_around",
    "values_of",
]

#: Words that carry no subject matter of their own in a comparison of two statements (cues, fillers, time adverbs).
_GENERIC = frozenset(
    """actual actually now current currently new just still again today yesterday tomorrow week weekend month year
    day days got get gets getting go going went thing things really realli pretty bit lot lots like think know want
    need said say tell told thank thanks okay ok yeah yes hey hi oh well sure good great also anyway btw""".split()
)
#: A Chinese bigram across a pronoun ("我现" in 我现在) is a seam of the bigram tokenizer, not a word.
_CJK_PRONOUNS = frozenset("我你他她它")
_CJK_GENERIC = frozenset(
    "现在 其实 已经 刚刚 最近 一下 一个 这个 那个 我们 你们 他们 就是 还是 不是 没有 可以 觉得 知道".split()
)
#: Sentence ends: punctuation (not after a title: "Dr. Alvarez"), CJK punctuation, a line break, or an emoji that
#: closes a statement ("down to 77 this morning 🎉 should I adjust calories?").
_SENTENCE = re.compile(
    r"(?<=[.!?;])" + "".join(rf"(?<!\b{t}\.)" for t in TITLES) + r"\s+|(?<=[。！？；])\s*|\n+"
    r"|(?<=[\U0001F300-\U0001FAFF\u2600-\u27BF])\s+"
)


@dataclass(frozen=True)
class Clause:
    """One clause of a statement and what update detection reads from it.

    Attributes:
        text: The clause.
        terms: Content terms (stemmed English words, CJK bigrams), without key tokens and generic words.
        keys: Key tokens: entities, numbers and dates, case-folded (what a correction changes).
        subject: ``"self"`` (the speaker), another person's role (``"sister"``, ``"女儿"``) or None (unknown).
        asks: A question (also one typed without a question mark) or a request: it asserts nothing new.
        question: A question (a request may still name a value: "the password is X, put it in the manual please").
        hypothetical: A supposition, a plan weighed, a wish.
        past: A state that held before ("used to", 以前).
        additive: An addition ("also", "another", 还有).
        temporary: A state for a while only ("this week", "for now", 临时): no standing value.
    """

    text: str
    terms: frozenset[str]
    keys: frozenset[str]
    subject: str | None
    asks: bool
    question: bool
    hypothetical: bool
    past: bool
    additive: bool
    temporary: bool = False

    @property
    def substantive(self) -> bool:
        """Whether the clause says enough to compare: two content terms, keys or numbers at least.

        "By the way" does not; "My son is 7" and "I'm on £44,500 now" do (one number is a value, whether a key or
        not: a one-digit number is no key).
        """
        said = len(self.terms | self.keys)
        return said >= 2 or (said == 1 and bool(numbers_in(self.text)))

    @property
    def asserts_present(self) -> bool:
        """Whether the clause states something as true now (it can hold a current value)."""
        return not (self.asks or self.hypothetical or self.past)


def _terms(text: str, keys: frozenset[str]) -> frozenset[str]:
    folded_keys = {k for key in keys for k in tokenize(key, dates=False)}
    out = set()
    for t in tokenize(text, dates=False):
        if t in folded_keys or t.isdigit() or t in _GENERIC or t in _CJK_GENERIC:
            continue
        if not t.isascii() and len(t) < 2:
            continue  # CJK unigrams: the bigrams carry the words
        out.add(t)
    return frozenset(out)


_FIRST_WORD = re.compile(r"^\W*([A-Za-z][\w'’-]*)")


def _clean_keys(text: str, keys: set[str]) -> frozenset[str]:
    """Key tokens without possessive endings, stop words, and a capitalised first word that is not a name.

    A sentence's first word is capitalised whatever it is ("By the way", "Speaking of shoes"): it counts as an
    entity only when the text also writes it capitalised elsewhere, or it holds a digit.
    """
    first = _FIRST_WORD.match(text)
    head = first.group(1).casefold() if first else None
    out = set()
    for k in keys:
        k = k[:-2] if k.endswith(("'s", "’s")) else k
        if len(k) < 2 or k in STOPWORDS or k in _GENERIC:
            continue
        if k == head and not any(ch.isdigit() for ch in k):
            rest = text[first.end() :] if first else ""
            if not has_bounded(rest, first.group(1)):  # type: ignore[union-attr]
                continue
        out.add(k)
    return frozenset(out)


#: A clause that opens with someone's name in the possessive is about them.
_POSSESSIVE_NAME = re.compile(r"([A-Z][a-z]+)['’]s\b")
#: Words that open a clause with "'s" and name no one ("It's", "Here's", "Let's").
_NOT_NAMES = STOPWORDS | _GENERIC | {"here", "let", "there", "that", "what", "who", "where", "everyone", "nobody"}


#: Someone acting on the speaker right after being named ("My doctor just put me on 10mg", "我老板给我涨了工资"): the
#: clause states the speaker's own state, unless it goes on about that person ("took me to her new place").
_ON_ME = re.compile(r"^\s+(?:[a-z]+\s+){1,2}(?:me|us)\b|^\s*[帮给替带把]我", re.IGNORECASE)
#: A third-person pronoun standing for someone named elsewhere ("They moved the wedding", "his birthday", "他生日").
THIRD_PERSON = re.compile(r"\b(?:he|she|they|him|her|them|his|their|hers|theirs)\b|[他她]们?", re.IGNORECASE)


def _subject(table: LanguageTable, text: str) -> str | None:
    head = text.lstrip(" \t\"'“‘([-—–*•")
    for pattern in table.people:
        m = pattern.match(head)
        if m:
            rest = head[m.end() :]
            if (_ON_ME.match(rest) and not THIRD_PERSON.search(rest)) or AND_ME.match(rest):
                return "self"  # acting on the speaker, or the speaker among the subject ("My wife and I ...")
            return str(m.group("who")).casefold().rstrip("s") if table.language == "en" else str(m.group("who"))
    for pattern in table.self_subject:
        if pattern.match(head):
            return "self"
    if with_me(head):
        return "self"  # "Jake and I split up": the speaker among the subject
    named = _POSSESSIVE_NAME.match(head)  # "Dan's birthday is May 19", "Jake's landlord raised his rent"
    # ... unless what follows is a person of theirs: "Leo's best friend turned 10" is about the friend
    theirs = person_owned(table, head[named.end() :]) if named else None
    if theirs is not None:
        return theirs
    who = named.group(1).casefold() if named else None
    return who if who is not None and who not in _NOT_NAMES else None


def person_owned(table: LanguageTable, rest: str) -> str | None:
    """The person (a role of the table's ``people``) that ``rest`` names right after a possessive, or None.

    ``rest`` follows "Leo's" or "小明的": " best friend turned 10" → ``"friend"``, "同学" → ``"同学"``.
    """
    said = ("我的" if table.language == "zh" else "my") + rest
    for pattern in table.people:
        m = pattern.match(said)
        if m:
            who = str(m.group("who"))
            return who.casefold().rstrip("s") if table.language == "en" else who
    return None


def _any(patterns: tuple[re.Pattern[str], ...], text: str) -> bool:
    return any(p.search(text) for p in patterns)


def _past(table: LanguageTable, part: str) -> bool:
    """Whether a clause states a past state (the table's ``past_markers``).

    A Chinese clause runs over commas ("换号了，新号码 139 8765 4321，旧的那个已经停机了"): it is past only when every
    comma-separated part that gives a value (a number, a time, a place) is, so the old one named beside the new
    value does not make the new one past.
    """
    if not _any(table.past_markers, part):
        return False
    if not has_cjk(part):
        # ... and an English one only when every comma part with digits is: "couldn't port my old number, so it's
        # 628-555-0147 now" states the new number (a name is no such sign: "Back when I lived in Minneapolis the
        # winters were worse, honestly Chicago feels mild" states no home)
        parts = [seg for seg in _EN_PARTS.split(part) if seg and DIGITS.search(seg)]
        return all(_any(table.past_markers, seg) for seg in parts) if parts else True
    valued = [
        seg
        for seg in _CJK_SEGMENT.split(part)
        if seg and (numbers_in(seg) or times_in(seg) or DIGITS.search(seg) or _CJK_PLACE.search(seg))
    ]
    return all(_any(table.past_markers, seg) for seg in valued) if valued else True


#: The comma parts of an English clause.
_EN_PARTS = re.compile(r"[,;:]\s+|\s+(?:so|but)\s+")


@text_cache(maxsize=32768)
def clauses_of(text: str) -> tuple[Clause, ...]:
    """The clauses of a statement with their signals (sentences, then the table's ``clause_breaks``).

    Example:
        >>> [c.subject for c in clauses_of("I live in Paris. My sister lives in Rome.")]
        ['self', 'sister']
    """
    body = strip_transcript_prefix(text)
    out: list[Clause] = []
    for whole in (s for s in _SENTENCE.split(body) if s and s.strip()):
        for sentence, asking in _statement_then_question(whole):
            out.extend(_sentence_clauses(sentence, asking))
    return tuple(out)


#: How the question after a sentence's last comma opens ("I'm on 50mg sertraline, is it ok to take ibuprofen?",
#: "我现在月薪一万二，想存钱买房，怎么做 budget 比较合理"): the part before that comma states, the rest asks.
_QUESTION_OPENER = re.compile(
    r"(?:so\s+|and\s+|but\s+)?(?:is|are|am|was|were|do|does|did|can|could|should|would|will|shall|what|what's|which|"
    r"who|where|when|why|how|any)\b",
    re.IGNORECASE,
)
#: Where a sentence's question may start: its last comma, a dash ("My son is 11 — what's a good first phone?"), or a
#: space between Chinese characters, which chat messages type for a comma ("工资卡是招行的 跨行取钱收手续费吗").
_ASK_SEAM = re.compile(r"[,，]|\s[—–-]\s|—|(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])")
#: The second half of an alternative question ("..., or is it not worth it?", "……，还是再等等？").
_ALTERNATIVE = re.compile(r"or\b|还是", re.IGNORECASE)
#: A Chinese question word, or a verb asked as "V not V" (会不会, 能不能, 可不可以, 有没有, 值不值得).
_CJK_QUESTION_WORD = re.compile(r"怎么|什么|哪|吗|呢|多少|几|如何|为什么|啥|咋|([\u4e00-\u9fff])[不没]\1")


def _statement_then_question(sentence: str) -> list[tuple[str, bool | None]]:
    """A sentence that states something and then asks after a comma or dash, as its two parts; else the sentence whole.

    Each part comes with whether it asks (``True`` for the question part) or ``None`` (decided from its own words).
    The split is made only when the sentence asks and the part before the comma does not.

    Example:
        >>> _statement_then_question("I'm on 50mg sertraline, is it ok to take ibuprofen with it?")
        [("I'm on 50mg sertraline", None), ('is it ok to take ibuprofen with it?', True)]
        >>> _statement_then_question("If I move to Berlin, what are the taxes?")[0]
        ('If I move to Berlin', None)
        >>> _statement_then_question("Do I live in Berlin now, or in Paris?")
        [('Do I live in Berlin now, or in Paris?', True)]
        >>> _statement_then_question("Would $1,200 get me much more, or is it not worth it?")
        [('Would $1,200 get me much more, or is it not worth it?', True)]
    """
    seams = list(_ASK_SEAM.finditer(sentence))
    if not seams:
        return [(sentence, None)]
    last = seams[-1]
    head, tail = sentence[: last.start()].strip(), sentence[last.end() :].strip()
    if _ALTERNATIVE.match(tail) and is_question(sentence):
        return [(sentence, True)]  # "Would $1,200 get me much more, or is it not worth it?": one question
    if not (_QUESTION_OPENER.match(tail) or _CJK_QUESTION_WORD.search(tail) or is_request(tail)):
        return [(sentence, None)]  # ("help me price the venue?" asks as much as "what would the venue cost?")
    asks = is_question(sentence) or is_request(sentence) or asks_unmarked(tail)
    if not head or not tail or not asks or is_question(head) or is_request(head) or asks_unmarked(head):
        return [(sentence, None)]
    return [(head, None), (tail, True)]


def _sentence_clauses(sentence: str, asking: bool | None) -> list[Clause]:
    """The clauses of one sentence (``asking``: whether it asks, None = read from its words)."""
    table = tables_for(sentence)[0]
    sentence_question = is_question(sentence) if asking is None else asking
    sentence_asks = sentence_question or (asking is None and is_request(sentence))
    out: list[Clause] = []
    for part in clauses(sentence):
        keys = _clean_keys(part, _key_tokens(part))
        out.append(
            Clause(
                text=part,
                terms=_terms(part, keys),
                keys=keys,
                subject=_subject(table, part),
                asks=sentence_asks or asks_unmarked(part),  # a question typed without "?" asserts nothing
                question=sentence_question,
                hypothetical=_any(table.hypothetical, part),
                past=_past(table, part),
                # "netflix is gone too" is a further change, not a thing added
                additive=_any(table.additive, part) and not _any(table.removal, part),
                temporary=_any(table.temporary, part),
            )
        )
    return out


@text_cache(maxsize=4096)
def query_terms(query: str) -> frozenset[str]:
    """The content terms of a query, as :class:`Clause` ``terms`` (keys included: a query names what it wants)."""
    out = set()
    for t in tokenize(query, dates=False):
        if t in _GENERIC or t in _CJK_GENERIC or (not t.isascii() and len(t) < 2):
            continue
        out.add(t)
    return frozenset(out)


_WRITTEN_AS_NAME = re.compile(r"(?<![\w-])[A-Z][a-z]+(?![\w-])")
_AFTER_PLACE_PREPOSITION = re.compile(r"\b(?:to|in|at|from|near|into)\s+([A-Za-z][\w'’-]*)", re.IGNORECASE)


@text_cache(maxsize=4096)
def query_people(query: str) -> frozenset[str]:
    """Who a query asks about besides the asker: people it names by role ("my daughter", 我大女儿) or by name.

    Names are the query's entity keys that are not times or numbers ("Ava" in "How old is Ava?"), written like a
    name (not "TV", "Wi-Fi") and not after a preposition of place ("my train to Glasgow"); roles come from the
    table's ``people`` patterns, found anywhere in the query, each with the other names of its role (the table's
    ``same_person``: "mom" / "mother", 女儿 / 闺女). Case-folded for English.

    Example:
        >>> sorted(query_people("How old is my daughter Ava?"))
        ['ava', 'daughter']
    """
    table = tables_for(query)[0]
    out: set[str] = set()
    for pattern in table.people:
        for m in pattern.finditer(query):
            who = str(m.group("who"))
            # ... by any of its names ("my mom" asks about "my mother", 女儿 about 闺女)
            if table.language == "en":
                who = who.casefold()
                who = who[:-1] if who.endswith("s") and not who.endswith("ss") else who  # "kids", not "boss"
            out |= table.synonyms(who)
    roles = set(out)
    for c in clauses_of(query):
        out |= {
            k[:-2] if k.endswith(("'s", "’s")) else k
            for k in c.keys
            if not DIGITS.search(k) and not TIME.fullmatch(k) and not _TIME_WORDS.fullmatch(k)  # 早上 is no one
        }
    # a name is written like one ("Ava", "Lily's"; not "TV", "Wi-Fi"), and one after a preposition of place is a
    # place ("my train to Glasgow", "the flat in Porto")
    names = {m.group(0).casefold() for m in _WRITTEN_AS_NAME.finditer(query)}
    places = {m.group(1).casefold() for m in _AFTER_PLACE_PREPOSITION.finditer(query)}
    return frozenset(p for p in out - places if not p.isascii() or p in names or p in roles)


def mentions(clause: Clause, people: frozenset[str]) -> bool:
    """Whether ``clause`` names one of ``people`` (as :func:`query_people` gives them), as a whole word."""
    text = clause.text.casefold()
    return any(has_bounded(text, p) or (not p.isascii() and p in text) or p in clause.keys for p in people)


@text_cache(maxsize=4096)
def asks_about_events(query: str) -> bool:
    """Whether a query asks what happened or would happen ("When did…", "What would…") rather than what holds now."""
    return any(p.search(query) for p in tables_for(query)[0].event_query)


_ASKER = re.compile(r"\b(?:i|i'm|i've|i'd|my|me|mine|we|we're|our|us)\b|我|咱", re.IGNORECASE)


@text_cache(maxsize=4096)
def asks_about_speaker(query: str) -> bool:
    """Whether a query asks about the asker ("Where do I live?", "我住哪儿？") rather than about someone else."""
    return bool(_ASKER.search(query))


@text_cache(maxsize=4096)
def asks_for_many(query: str) -> bool:
    """Whether a query asks for several things at once ("What pets do we have?", "Any allergies?", 哪些)."""
    return any(_any(t.many_query, query) for t in tables_for(query)[:1])


@text_cache(maxsize=4096)
def asks_about_past(query: str) -> bool:
    """Whether a query asks for an earlier value ("before", "originally", "at first", 以前, 一开始...)."""
    return any(_any(t.past_query, query) for t in tables_for(query)[:1])


def asks_about_history(query: str) -> bool:
    """Whether a query asks what was said or found on an earlier day ("what did you recommend yesterday?", 上次).

    Such a read is served expired tool results and what was built on them, flagged (expiry is about decisions).
    """
    return any(_any(t.history_query, query) for t in tables_for(query)[:1])


def focus(text: str, wanted: frozenset[str]) -> tuple[Clause, ...]:
    """The clauses of ``text`` that share the most ``wanted`` terms (all clauses when none shares any).

    Example:
        >>> [c.text for c in focus("We bought a car. I live in Oslo.", query_terms("where do I live"))]
        ['I live in Oslo.']
    """
    parts = clauses_of(text)
    best, out = 0, []
    for i, c in enumerate(parts):
        if c.question and not all(p.question for p in parts):
            continue  # a question holds no fact: "I'm based in Lisbon. Any tips for spaces in the city?"
        n = len(c.terms & wanted) + len(c.keys & wanted)
        if n > best:
            best, out = n, [i]
        elif n == best and n > 0:
            out.append(i)
    if best == 0:
        return parts
    # a clause too short to compare goes on in the next one ("We got a kitten! Named her Sushi.")
    more = [i + 1 for i in out if not parts[i].substantive and i + 1 < len(parts) and not parts[i + 1].question]
    return tuple(parts[i] for i in sorted(set(out) | set(more)))


def clause_similarity(a: Clause, b: Clause) -> float:
    """Word similarity of two clauses in [0, 1]: the larger of Jaccard and 0.75 × the overlap coefficient.

    Terms and the key tokens both clauses name count; a key only one of them names (the changed value) does not
    count against them. The overlap coefficient (shared terms over the smaller set) lets a short restatement match a
    longer clause; it is discounted, and needs two shared terms, so that two clauses sharing one word of two are not
    taken for the same statement.
    """
    shared_keys = a.keys & b.keys
    ta, tb = a.terms | shared_keys, b.terms | shared_keys
    if not ta or not tb:
        return 0.0
    shared = len(ta & tb)
    if shared == 0:
        return 0.0
    jaccard = shared / len(ta | tb)
    overlap = shared / min(len(ta), len(tb))
    return max(jaccard, 0.75 * overlap if shared >= 2 else 0.0)


# ------------------------------------------------------------------------------------------------------------
# What a question asks for, and the values of that kind a clause gives
# ------------------------------------------------------------------------------------------------------------
@text_cache(maxsize=4096)
def answer_type(query: str) -> str | None:
    """The kind of value a question asks for: ``time``, ``place``, ``number``, ``entity`` or None.

    From the table's ``answer_types`` (tried in order: "when" before "what"). A question that asks for no value
    ("Am I still vegan?") has none.

    Example:
        >>> answer_type("How much is our rent?"), answer_type("Where do we live now?"), answer_type("Am I vegan?")
        ('number', 'place', None)
    """
    table = tables_for(query)[0]
    for name, pattern in table.answer_types:
        if pattern.search(query):
            return name
    return None


_CJK_PLACE = re.compile(
    r"(?:在|到|去|回|住|搬到|搬去|调到|定居)([\u4e00-\u9fff]{2,4}?)(?=市|省|区|县|了|的|，|。|工作|上班|住|生活|定居|买|租|$)"
)


@text_cache(maxsize=32768)
def values_of(clause: Clause, kind: str) -> frozenset[str]:
    """The values of one kind a clause gives (``time``, ``place``, ``number``, ``entity``), normalised.

    Numbers include number words and ordinals ("fifth" → 5) and Chinese numerals; times include clock times,
    weekdays, months and dates; places and entities are the clause's named entities (for Chinese, the place after
    在/到/去/搬到...); an entity may also be a number or an identifier ("lanternfish-0930").

    Example:
        >>> values_of(clauses_of("Theo's fifth birthday was yesterday")[0], "number")
        frozenset({'5'})
    """
    text = clause.text
    if kind == "time":
        return frozenset(m.group(0).casefold() for m in TIME.finditer(text))
    if kind == "number":  # a clock time counts nothing ("yoga mondays at 6pm" gives no dose)
        return numbers_in(CLOCK.sub(" ", text))
    # a time word ("早上", "Monday") is a time, never the place or thing asked for
    named = {
        k for k in clause.keys if not DIGITS.fullmatch(k) and not TIME.fullmatch(k) and not _TIME_WORDS.fullmatch(k)
    }
    named = {k[:-2] if k.endswith(("'s", "’s")) else k for k in named}
    named |= {m.group(1) for m in _CJK_PLACE.finditer(text)}
    if kind == "entity":  # identifiers with letters and digits ("lanternfish-0930"), not bare numbers
        named |= codes(clause.keys)
    return frozenset(named)


def present_values(clause: Clause, kind: str) -> frozenset[str]:
    """The values of one kind an English clause gives outside its comma parts that state a past.

    "I used to live in Minneapolis, so hearing people here complain when it hits 55 is hilarious" states the present
    in its second part (it has digits, so the clause is not past as a whole), but its place is the one it left.
    Chinese clauses are read whole (:func:`~memlineage.reconcile._signals._past` already reads them per part).
    """
    values = values_of(clause, kind)
    if not values or has_cjk(clause.text):
        return values
    table = tables_for(clause.text)[0]
    parts = [p.casefold() for p in _EN_PARTS.split(clause.text) if p]
    past = [_any(table.past_markers, p) for p in parts]
    if not any(past):
        return values
    out = set()
    for v in values:
        held = [was for p, was in zip(parts, past, strict=True) if v in p]
        if not held or not all(held):
            out.add(v)
    return frozenset(out)


def values_around(text: str, kind: str, subject: str | None) -> frozenset[str]:
    """The values of one kind that the clauses of ``text`` stating something about ``subject`` give.

    For a clause that matches a query but holds no value itself, the value often sits in the next clause of the
    same message ("new number btw, switched carriers. its 628-555-0147 now", "We got a kitten! Named her Sushi").
    Only clauses that assert the present count (not a question, a supposition or a past state: "If I took a contract
    in Phoenix"), and none about another person than ``subject`` (unknown subjects count as the same).
    """
    return frozenset(
        v
        for c in clauses_of(text)
        if c.asserts_present and (c.subject is None or subject is None or c.subject == subject)
        for v in present_values(c, kind)
    )


def values_of_query(query: str, kind: str) -> frozenset[str]:
    """The values of one kind a question names itself (``"Theo"`` in "How old is Theo?"): never its answer."""
    return frozenset(v for c in clauses_of(query) for v in values_of(c, kind))


#: A question asked without a question mark, as chat often is: an English clause that opens with an inverted
#: auxiliary or a question word ("is matcha healthier than coffee", "should I get a Pixel"), "any tips/ideas...";
#: a Chinese one that opens with a question phrase or asks which/what to choose ("有什么适合冬天喝的茶",
#: "牙齿敏感用什么牙膏好", "是不是租得有点贵"). A statement that merely holds 什么 ("我现在什么肉都不吃") is none.
_UNMARKED_QUESTION = re.compile(
    r"^(?:(?:so|ok(?:ay)?|hey|hi|btw|also|and|but|lol|hmm+|quick question|random question|question)[,:!.\s-]+)*"
    r"(?:(?:is|are|am|does|do|did)\s+\w"
    r"|(?:can|could|should|would|will|shall)\s+(?:i|you|we|it|they|he|she|my|our|this|that|there|someone|anyone)\b"
    r"|(?:what|which|who|how|why)\b(?!\s+(?:i|we)\s+(?:meant|mean|said|wrote)\b)"
    r"|any\s+(?:tips|ideas|advice|suggestions|recommendations|thoughts)\b"
    # a request said as a bare noun phrase: "tips to keep standups short", "ideas for a 5 year old's party"
    r"|(?:tips|ideas|advice|suggestions|recommendations|recipes?)\s+(?:for|to|on|about)\b"
    # ... or a thing wanted: "best way to brew loose leaf earl grey", "good vegan protein for lunch"
    r"|(?:best|good)\s+(?:ways?\s+to|(?!news\b)(?:[a-z-]+\s+){1,3}?for)\b)"
    r"|^(?:那|请问|所以)?(?:有什么|有没有|有哪些|哪里|哪儿|哪个|哪家|哪款|怎么|为什么|如何|什么)"
    r"|(?:是不是|能不能|可不可以|要不要|用什么|买什么|选什么|吃什么|喝什么|穿什么|推荐什么|哪个好|哪款好|哪家好)"
    # 怎么 + a verb anywhere asks how ("地铁卡怎么买"), unless 不怎么 ("not much") or 怎么也/都 ("no matter how")
    r"|(?<!不)怎么(?![也都])"
    # colloquial question words: "厦门有啥小众景点", "为啥", "咋办"
    r"|有啥|为啥|咋(?:办|样|弄|整|回事)"
    # "which ones" anywhere ("成都必去的地方有哪些"), a yes/no particle closing the sentence ("这个药能停吗")
    r"|哪些|吗\s*[?？]?\s*$",
    re.IGNORECASE,
)


def substantive_terms(terms: Iterable[str]) -> frozenset[str]:
    """``terms`` without the generic ones (cues, fillers, light verbs such as "get": no subject matter of their own).

    Example:
        >>> sorted(substantive_terms({"get", "climbed", "over"}))
        ['climbed', 'over']
        >>> sorted(substantive_terms({"我现", "现在", "瑜伽"}))
        ['瑜伽']
    """
    return frozenset(
        t
        for t in terms
        if t not in _GENERIC and t not in _CJK_GENERIC and not (not t.isascii() and _CJK_PRONOUNS & set(t))
    )


@text_cache(maxsize=16384)
def for_a_while(text: str) -> bool:
    """Whether a clause of ``text`` states something for a while only (``Clause.temporary``).

    "this week", "just this once", 这周三: such a statement neither replaces nor withdraws a standing fact.

    Example:
        >>> for_a_while("这周三不去了 要加班"), for_a_while("I play badminton every Wednesday")
        (True, False)
    """
    return any(c.temporary for c in clauses_of(text))


#: An English word ending in "s", for the plural of a time word ("In the evenings", "on Mondays").
_PLURAL = re.compile(r"\b[A-Za-z]+s\b")


@text_cache(maxsize=16384)
def times_in(text: str) -> frozenset[str]:
    """The times of day, weekdays and months ``text`` names (key-token time words), case-folded and singular."""
    out = {m.group(0).casefold() for m in _TIME_WORDS.finditer(text)}
    return frozenset(out | {w.casefold()[:-1] for w in _PLURAL.findall(text) if _TIME_WORDS.fullmatch(w[:-1])})


_CJK_SEGMENT = re.compile(r"[，,。！？；!?;\s]+")


@text_cache(maxsize=16384)
def asks_unmarked(text: str) -> bool:
    """Whether a clause is a question asked without a question mark ("is oat milk better than almond milk").

    Example:
        >>> asks_unmarked("is matcha actually healthier than coffee or is that marketing")
        True
        >>> asks_unmarked("I drink my coffee black"), asks_unmarked("what I meant is Lyon, not Lille")
        (False, False)
        >>> asks_unmarked("牙齿敏感用什么牙膏好"), asks_unmarked("我现在什么肉都不吃了")
        (True, False)
    """
    return bool(_UNMARKED_QUESTION.search(strip_transcript_prefix(text).strip()))


#: A clause that ends a sentence or a part of one.
_CLAUSE_END = re.compile(r"[.!?;:。！？；：，,]\s*$")


@text_cache(maxsize=16384)
def asserting_text(text: str) -> str:
    """``text`` without its clauses that assert nothing about the present.

    Questions, requests, suppositions and past states are left out; ``""`` when no clause asserts anything, the
    text itself when every clause does (the common case).

    Update detection reads only this part: "If I moved to Lisbon, what would rent be?" holds no new residence, and
    "Switched carriers, my new number is 628-555-0147. Can you redo the form?" still holds the new number.

    Example:
        >>> asserting_text("My new number is 628-555-0147. Can you redo the form?")
        'My new number is 628-555-0147.'
        >>> asserting_text("Hypothetically, if I relocated to Vancouver, how much more would rent be?")
        ''
    """
    parts = clauses_of(text)
    keep = [c for c in parts if c.asserts_present]
    if len(keep) == len(parts):
        return text
    if not keep:
        return ""
    body = strip_transcript_prefix(text)
    prefix = text[: len(text) - len(body)]
    # clauses cut at a comma keep it ("it's the 14th not the 12th, I just checked"): read again, they are two clauses
    cut = [c.text if _CLAUSE_END.search(c.text) else c.text + ("，" if has_cjk(c.text) else ",") for c in keep[:-1]]
    return prefix + " ".join([*cut, keep[-1].text])


@text_cache(maxsize=32768)
def key_terms(clause: Clause) -> frozenset[str]:
    """A clause's key tokens as query terms (stemmed like :func:`query_terms`); cached, emptied by erasures."""
    return frozenset(t for k in clause.keys for t in tokenize(k, dates=False))


@text_cache(maxsize=16384)
def gives_answer(text: str, query: str) -> bool:
    """Whether ``text`` asserts a value of the kind ``query`` asks for that the query does not name itself.

    "Actually, I'm going to Rotterdam, not Prague." gives a place for "What's the weather where I'm going?"; the
    earlier request "Check the weather where I'm going next month." gives none (it asserts nothing).

    Example:
        >>> gives_answer("I moved to Lisbon in May.", "Where do I live now?")
        True
        >>> gives_answer("Find me a flat where I live.", "Where do I live now?")
        False
    """
    kind = answer_type(query)
    if kind is None:
        return False
    named = values_of_query(query, kind)
    return any(values_of(c, kind) - named for c in clauses_of(text) if c.asserts_present)
