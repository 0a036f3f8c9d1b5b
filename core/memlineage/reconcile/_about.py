"""What a statement is about: the people it names, the thing a qualifier picks, the values it gives and their shape.

Helpers of read-time conflict resolution (:mod:`memlineage.reconcile._compete`): whether a newer statement names
someone else than the older one ("my sister moved to Rome"), speaks of the same person through a pronoun, names the
same thing, picks another thing of a kind by a qualifier ("personal" / "work" number), says that an older name is
still there (a second pet), which of its clauses may answer a query, and the shapes of the values it gives (two
e-mail addresses, two model names). None of them writes anything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memlineage._forget import text_cache
from memlineage.extractors._patterns import has_cjk, tables_for
from memlineage.index.lexical import STOPWORDS, tokenize
from memlineage.reconcile._numbers import DIGITS
from memlineage.reconcile._signals import (
    _ASKER,
    _CJK_SEGMENT,
    _SENTENCE,
    THIRD_PERSON,
    Clause,
    clauses_of,
    focus,
    for_a_while,
    mentions,
    numbers_in,
    person_owned,
    times_in,
    values_of,
)
from memlineage.reconcile._text import _TIME_WORDS, AND_ME, TITLES, points_at_child
from memlineage.retrieval import is_question

#: Characters that make a Chinese bigram a grammatical seam rather than a word ("我儿", "的婚").
_SEAM = frozenset("我你他她它们的了在是和也都就还又很")


def _words(terms: frozenset[str]) -> frozenset[str]:
    """``terms`` without Chinese bigrams across a pronoun or particle (a seam of the bigram tokenizer, no word)."""
    return frozenset(t for t in terms if t.isascii() or not (_SEAM & set(t)))


#: Chinese words of when and how often, and connectives: two statements saying them share no topic ("我在银行当柜员，
#: 每天数钱" / "我每天早上空腹吃一片优甲乐").
_NO_TOPIC_ZH = frozenset(
    "每天 每周 每月 每年 每次 今天 昨天 明天 今年 去年 现在 最近 平时 早上 晚上 上午 下午 中午 "
    "时候 已经 一直 一下 感觉 因为 所以 但是 可以 觉得 真的 其实 然后 还是 一般 有点 比较 一点 "
    "好像 终于 开始".split()
)


def _topic_words(terms: frozenset[str]) -> frozenset[str]:
    """:func:`_words` without the Chinese words that name no topic (:data:`_NO_TOPIC_ZH`)."""
    return _words(terms) - _NO_TOPIC_ZH


def _moved(kind: str | None, values: tuple[frozenset[str], frozenset[str]] | None) -> bool:
    """Whether two Chinese statements' values of the asked ``kind`` changed in a way that can tie them.

    A date, number or identifier that changed ("5月15号" / "5月底", "CA4112" / "3U8882"); a place only when the two
    values share a character of their frame ("住朝阳" / "住通州"): places read off Chinese text are loose, and two
    unrelated places of one speaker are common.
    """
    if values is None:
        return False
    if kind in ("time", "number") or _identifiers(values):
        return True
    old, new = ({ch for v in side for ch in v if has_cjk(ch)} for side in values)
    return kind == "place" and bool(old & new)


def _shared_keys(ca: Clause, cb: Clause) -> frozenset[str]:
    """The keys two clauses share; a key of one said among the other's words counts ("Mate 40" / "Mate 40掉了")."""
    return ca.keys & (cb.keys | cb.terms) | (ca.keys | ca.terms) & cb.keys


def _tying(ca: Clause, cb: Clause) -> bool:
    """Whether two clauses share a key beyond bare numbers of one or two digits.

    A small number alone recurs everywhere ("10号线" / "每月10号" share 10 and no topic).
    """
    return any(not (k.isdigit() and len(k) <= 2) for k in _shared_keys(ca, cb))


#: What stands just before a person named as company, not as the one a statement is about: "with my wife",
#: "跟老婆商量了", "陪我妈"; and just after: "my wife and I".
_COMPANY_BEFORE = re.compile(
    r"(?:\bwith|\balong with|\btogether with|[跟和与同陪])\s*(?:我的|我们|我)?\s*$", re.IGNORECASE
)
_COMPANY_AFTER = re.compile(rf"{AND_ME.pattern}|^一起", re.IGNORECASE)


@text_cache(maxsize=16384)
def _names_someone(text: str) -> bool:
    """Whether ``text`` names another person it may be about; cached: recall asks per pair.

    The table's ``others``, or any role of its ``people`` ("my cousin", "our landlord"). A person named as company
    ("we decided with my wife", "跟老婆商量了两个晚上", "my wife and I"), as the source of what is said
    ("领导说周一大家都太忙", "my doctor said ..."), as someone acting on the speaker ("my doctor took me off it"),
    as whose place it is ("at my cousin's place") or as whom the speaker gives something to or does something for
    ("sold the car to my nephew", "so I can FaceTime my mom") does not count, unless a third-person pronoun follows
    ("with my girlfriend. She hates horror"): the statement is still the speaker's own.
    """
    table = tables_for(text)[0]
    for pattern in (*table.others, *table.people):
        for m in pattern.finditer(text):
            before, after = text[: m.start()], text[m.end() :]
            # company, the source of what is said ("领导说周一大家都太忙", "my doctor said I'm prediabetic"), someone
            # acting on the speaker, or whose place it is
            company = (
                _COMPANY_BEFORE.search(before)
                or _COMPANY_AFTER.search(after)
                or _SAYS.search(after)
                or _ACTS_ON_ME.search(after)
                or (_PLACE_BEFORE.search(before) and _PLACE_AFTER.search(after))
                or _GIVEN_TO.search(before)
            )
            # ... unless the text goes on about them ("with my girlfriend. She hates horror")
            if not company or THIRD_PERSON.search(after):
                return True
    return False


#: What follows a person who only reports something ("领导说…", "my doctor said…"): the statement is not about them.
_SAYS = re.compile(
    r"^\s*(?:说|讲|觉得|认为|表示|让我|叫我|告诉我|建议我)"
    r"|^\s+(?:said|says|told me|tells me|thinks|reckons|wants me|asked me)\b",
    re.IGNORECASE,
)


#: What follows a person who acts on the speaker ("my doctor took me off it", "医生给我换了药"): the speaker's own.
_ACTS_ON_ME = re.compile(r"^\s+(?:[a-z]+\s+){1,2}(?:me|us)\b|^\s*[帮给替带把]我", re.IGNORECASE)
#: A person whose place is named ("at my cousin's place", "送我妈那儿去了"): a place, not whom it is about.
_PLACE_BEFORE = re.compile(r"\b(?:at|to|from|in|near|by)\s+$|[在去到送回]\s*$", re.IGNORECASE)
#: A person the speaker hands something to or does something for ("sold the car to my nephew", "got an iPhone so I
#: can FaceTime my mom"): the thing was, or is, the speaker's.
_GIVEN_TO = re.compile(
    r"\b(?:sold|gave|given|lent|handed|passed|donated|sent)\b[^.!?;]*\bto\s+(?:(?:my|our)\s+)?$"
    r"|\bso (?:that )?(?:i|we) can \w+\s+(?:(?:my|our)\s+)?$",
    re.IGNORECASE,
)
_PLACE_AFTER = re.compile(r"^(?:'|’)s\b|^(?:那儿|那里|那边|家|的)")


def _refers_back(
    ca: Clause, cb: Clause, people: frozenset[str], kind: str | None = None, message: str | None = None
) -> bool:
    """Whether ``cb`` speaks of the person ``ca`` names through a pronoun, about the same thing.

    The older clause names one of ``people``, the newer one a third-person pronoun and names no other person, and
    the two share a content word ("My sister's wedding is June 14" / "They moved the wedding to September 6") or
    both give a value of the asked ``kind`` ("My son is 7" / "He turned eight yesterday", asked "How old is my
    son?"). A Chinese clause ends at a comma: the pronoun and the shared word may stand in another clause of the
    newer ``message`` ("钢琴停了，他死活要学架子鼓" after "儿子在学钢琴").
    """
    said = message if message is not None and has_cjk(message) else cb.text
    if _names_someone(said):  # "My brother's wedding: they moved it" is about the brother
        return False
    if not mentions(ca, people) or not (THIRD_PERSON.search(said) or points_at_child(said, people)):
        return False
    if _words(ca.terms & frozenset().union(*(c.terms for c in clauses_of(said)))):
        return True
    return kind is not None and bool(values_of(ca, kind)) and bool(values_of(cb, kind))


def _same_name(ca: Clause, cb: Clause) -> bool:
    """Whether two clauses name a person or thing by the same name (a shared key that is no number or time).

    A name the older clause gives as a key may open the newer one, where a capital says nothing ("My wife Ana ..." /
    "Ana got poached by ..."): a word of the newer clause counts then.
    """
    return any(not any(ch.isdigit() for ch in k) and not _TIME_WORDS.fullmatch(k) for k in _shared_keys(ca, cb))


_TOKEN = re.compile(r"[A-Za-z][\w&'-]*")


def _folded(word: str) -> str:
    """A word case-folded, without a possessive or a plural ``s`` ("Tuesdays" and "Tuesday" fold alike)."""
    w = word.casefold().removesuffix("'s").removesuffix("’s")
    return w[:-1] if len(w) > 3 and w.endswith("s") else w


def _echoes(older: Sequence[Clause], newer: str, wanted: frozenset[str]) -> bool:
    """Whether the newer message states something of a name the older clauses give.

    A later message that names the older value while it says something else ("the XPS is going in the donation box"
    after "All my coding happens on a Dell XPS 13", "Greg took a job at another company. I report to Lorraine now"
    after "My manager Greg ...") speaks of what the older statement said: the two are about one thing even when the
    newer one never repeats the query's words. A name said in a question ("can she share a tank with Spike?"), a
    number, a day or month (they recur across unrelated plans: "Dentist Thursday at 10am" / "I swim Mondays and
    Thursdays") and the query's own words do not count. Chinese names are not written apart: a run of three
    characters beyond the commonest ones that both say stands for one ("卡罗拉卖给我表弟了" after
    "我开的是一辆二手卡罗拉").
    """
    if has_cjk(newer) or any(has_cjk(c.text) for c in older):
        return bool(_runs(" ".join(c.text for c in older), wanted) & _runs(_stated(newer), wanted))
    named = {
        _folded(k)
        for c in older
        for k in c.keys
        if len(k) >= 3 and not any(ch.isdigit() for ch in k) and not _TIME_WORDS.search(k) and k not in wanted
    }
    return bool(named & _said_words(newer))


def _runs(text: str, wanted: frozenset[str]) -> frozenset[str]:
    """Runs of three Chinese characters of ``text``, none of them among the commonest, that hold no query term."""
    chars = [ch if has_cjk(ch) and ch not in _COMMON_CJK else " " for ch in text]
    runs = ("".join(chars[i : i + 3]) for i in range(len(chars) - 2))
    return frozenset(r for r in runs if " " not in r and not any(w in r for w in wanted))


@text_cache(maxsize=16384)
def _stated(text: str) -> str:
    """The clauses of a message that are no question, joined."""
    return " ".join(c.text for c in clauses_of(text) if not c.question)


@text_cache(maxsize=16384)
def _said_words(text: str) -> frozenset[str]:
    """The folded words of a message's clauses that are no question (see :func:`_echoes`)."""
    return frozenset(_folded(w) for w in _TOKEN.findall(_stated(text)))


#: Chinese characters too common to tie two statements to one topic (pronouns, particles, copulas, measure words).
_COMMON_CJK = _SEAM | frozenset("有没不这那个么什吗呢吧啊哦嗯一二三四五六七八九十两几多少要会能想说到去来上下")


def _share_char(texts: tuple[str, str], query: str) -> bool:
    """Whether the newer text shares a Chinese character beyond the commonest ones with the older text or the query."""
    older, newer = texts
    mine = {ch for ch in newer if has_cjk(ch)} - _COMMON_CJK
    return bool(mine & ({ch for ch in older + query if has_cjk(ch)} - _COMMON_CJK))


#: A name followed by a number: a model, a flight, a unit ("Pixel 6", "iPhone 15", "UA 588", "Apt 4").
_MODEL = re.compile(r"(?<![\w-])([A-Za-z][\w-]*)\s+#?\d{1,4}[A-Za-z]?\b")


#: Digits in groups, seven or more in all ("138 0013 4567", "555-013-4477").
_GROUPED_DIGITS = re.compile(r"(?<![\w.])\d{2,4}(?:[ -]\d{2,4}){1,3}(?![\w.])")


def _shapes(text: str, values: frozenset[str]) -> frozenset[str]:
    """The shapes of a clause's values: ``email``, ``phone`` (seven digits or more) or ``model`` (a name and a number).

    Two values of one shape that differ ("Pixel 6" / "iPhone 15", two addresses) fill one slot as surely as two
    cities do; two names alone ("Fastmail" / "Gmail") may be anything.
    """
    out = {"email" for v in values if "@" in v}
    out |= {"phone" for v in values if "@" not in v and sum(ch.isdigit() for ch in v) >= 7}
    # ... also one written in groups ("138 0013 4567", read as three values)
    out |= {
        "phone"
        for m in _GROUPED_DIGITS.finditer(text)
        if sum(ch.isdigit() for ch in m.group(0)) >= 7 and any(v in m.group(0) for v in values)
    }
    out |= {"model" for m in _MODEL.finditer(text) if m.group(1).casefold() in values}
    return frozenset(out)


def _is_identifier(values: frozenset[str]) -> bool:
    """Whether some of ``values`` is an identifier (an e-mail address, something with digits), not a name."""
    return any("@" in v or any(ch.isdigit() for ch in v) for v in values)


def _identifiers(values: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether both sides of a changed value are identifiers (:func:`_is_identifier`)."""
    return all(_is_identifier(side) for side in values)


#: A sentence opened by a third person: "She hates horror, so we're doing a rom-com" is about her.
_THIRD_PERSON = re.compile(r"^\W*(?:(?:he|she|they|his|her|their)\b|[他她])", re.IGNORECASE)


#: Where a sentence's opening part ends: a comma, semicolon, colon or dash (Chinese ones too), or "so".
_HEAD_CUT = re.compile(r"[,;:\u2014\u2013\uff0c\uff1b\uff1a]|\s-\s|\bso\b", re.IGNORECASE)


def _opening(sentence: str) -> str:
    """The opening part of ``sentence``: up to its first comma, semicolon, colon, dash or "so" (:data:`_HEAD_CUT`).

    An interjection of one or two words is passed over ("Big news, my sister is pregnant" opens with "my sister is
    pregnant"); Chinese parts are taken as they are.
    """
    parts = _HEAD_CUT.split(sentence)
    for part in parts:
        if has_cjk(part) or len(part.split()) > 2:
            return part
    return sentence


def _someone_in(clause: str, message: str) -> bool:
    """Whether a clause of ``message`` is said of another person than the speaker.

    The clause names someone, the opening part of the message's first sentence does ("My sister just moved to Austin,
    so I'll be flying to Texas a lot"; :func:`_opening`), or the clause's sentence opens with a third person. A person
    named elsewhere in the message is a side detail ("Finally got an iPhone 15 so I can FaceTime my mom" is the
    speaker's phone; "提了辆比亚迪海豹！卡罗拉卖给我表弟了" is the speaker's car). A Chinese clause that gives a
    value is decided by the person nearest before it (:func:`_owner_of_value`).
    """
    if has_cjk(clause):
        owner = _owner_of_value(clause)
        if owner is not None:
            return owner
    if _names_someone(clause):
        return True
    sentences = [seg for seg in _SENTENCE.split(message) if seg and seg.strip()]
    # ... where the first sentence opens with them: a person said in passing later in it ("I've deferred the bar to
    # February, too much going on with my dad's surgery") is a side detail
    if sentences and _names_someone(_opening(sentences[0])):
        return True
    return any(clause in sent and _THIRD_PERSON.match(sent) for sent in sentences)


def _owner_of_value(clause: str) -> bool | None:
    """Whether the value a Chinese clause gives belongs to another person; None when it gives none.

    A Chinese sentence runs over commas and drops its subject: a value belongs to the nearest person named before it
    in the sentence, or to the speaker when the speaker is ("我爸腰不好住了几天院，然后我跟老婆商量了下，
    年底目标还是降到八万吧" is the speaker's target; "我妹妹搬到南京了，房租3500" the sister's rent) or nobody is.
    """
    parts = [p for p in _CJK_SEGMENT.split(clause) if p]
    valued = [i for i, p in enumerate(parts) if _gives_value(p)]
    if not valued:
        return None
    for v in valued:
        for part in reversed(parts[: v + 1]):
            if _names_someone(part) or THIRD_PERSON.search(part):  # "她在南京市鼓楼区中山北路 200 号"
                return True
            if "我" in part:
                break
    return False


def _value_names_someone(text: str) -> bool:
    """Whether the part of a clause that gives a value (digits, a Latin word, a Chinese number) names another person.

    A Chinese clause runs over commas: "wifi密码被我改成 Mao@8866 了，楼下邻居一直在蹭" gives its value in a part
    that names nobody. Text without such a part is read whole.
    """
    parts = _CJK_SEGMENT.split(text) if has_cjk(text) else [text]
    valued = [p for p in parts if _gives_value(p)]
    return any(_names_someone(p) for p in valued) if valued else _names_someone(text)


def _gives_value(part: str) -> bool:
    """Whether a comma part of a clause gives a value: digits, a Latin word or a Chinese number."""
    return bool(re.search(r"[0-9A-Za-z]", part) or numbers_in(part))


def _another_thing(query: str, clause: str, message: str) -> bool:
    """Whether the query picks one thing of a kind by a qualifier and the newer statement names another one.

    "What's my personal cell number?" / "Work handed me a phone for on-call, 617-555-0190": two phones, not a new
    number of one. The newer ``clause`` decides when it names a qualifier of the group; else its whole ``message``
    does ("... at our lake cabin in Michigan, our little escape."). The qualifiers come from the table's
    ``contexts`` groups (a high-precision cue; without one the statements are compared as they are).
    """
    groups = tables_for(query)[0].contexts
    for g, asked in _asked_contexts(query):
        said = _sides(groups[g], clause)
        said = _sides(groups[g], message) if said is None else said  # side 0 is a side: no `or` here
        if said is not None and said != asked:
            return True
    return False


def _sides(group: Sequence[re.Pattern[str]], text: str) -> int | None:
    """The side of a ``contexts`` group that ``text`` names; of several, the one named first.

    "For personal stuff use priya88@gmail.com — never put that on anything work related" gives the personal address:
    the qualifier that opens the statement says what it is about, a later one what it is kept from.
    """
    found = {i: m.start() for i, side in enumerate(group) if (m := side.search(text)) is not None}
    return min(found, key=lambda i: found[i]) if found else None


@text_cache(maxsize=4096)
def _asked_contexts(query: str) -> tuple[tuple[int, int], ...]:
    """``(group, side)`` of each ``contexts`` group of which the query names exactly one side (see above)."""
    out = []
    for g, group in enumerate(tables_for(query)[0].contexts):
        asked = [i for i, side in enumerate(group) if side.search(query)]
        if len(asked) == 1:
            out.append((g, asked[0]))
    return tuple(out)


#: A sentence that opens with a name and says how it is now ("Rufus is confused", "Luna is sniffing her").
_STILL = re.compile(r"^\W*(?P<name>[A-Za-z][\w'-]*)\s+(?:is|are|has|seems|looks|loves|keeps)\b(?P<rest>[^.!?]*)")
#: Something said to be gone for good ("passed in his sleep", "we had to rehome her").
_PASSED_WORDS = r"gone|dead|died|passed|rehomed|put down"
_PASSED = re.compile(rf"\b(?:{_PASSED_WORDS})\b", re.IGNORECASE)
#: ... unless it says the name is gone or renamed ("Biscuit is now Waffles", "Rex is gone").
_GONE = re.compile(
    rf"\b(?:{_PASSED_WORDS}|sold|over|cancell?ed|history|no longer|not (?:with us|around|here)|now|renamed|called|"
    r"named|actually)\b",
    re.IGNORECASE,
)


#: Something new of a kind acquired: "We adopted a kitten", "got a second bike", "brought home a puppy", "added a
#: puppy to the family".
_ACQUIRED = re.compile(
    r"\b(?:adopted|added|got|bought|brought home|picked up|rescued|welcomed|took in)\s+(?:a|an|another)\s+"
    r"(?:new\s+|second\s+|little\s+|baby\s+)?(?P<noun>[a-z]+)\b"
)


#: Words of a question for a name ("What's my dog's name?", "what is it called").
_NAMING = frozenset({"name", "named", "call", "called"})


def _new_kind(asked: frozenset[str], newer: str) -> bool:
    """Whether ``newer`` acquires something of another kind than the one a question for a name names.

    ``asked`` are the query's terms the older clause holds ("dog" of "What's our dog called?" and "Our dog Mango is
    a lab"). "We adopted a kitten!! Her name is Pepper" names none of them and acquires a kitten: a second pet, not
    a new name of the dog. A rename ("we renamed her Mochi") or a replacement of the same kind ("got a new car")
    acquires nothing else.
    """
    m = _ACQUIRED.search(newer)
    asked = asked - _NAMING  # "her name is Pepper" names a name, not the kind asked about
    if m is None or not asked or _PASSED.search(newer):
        return False  # ... and one that follows a pet gone ("Pilot passed ... so we adopted a lab") replaces it
    # the kind asked about named in a question only ("How do I introduce him to a cat?") is still there, not replaced
    said = {t for c in clauses_of(newer) if not c.question for t in c.terms}
    return not (asked & said) and m.group("noun") not in asked


#: A capitalised word inside a sentence: a name ("Dr. Okafor", "Mazda"); searched past the first character, so a
#: capital that opens the sentence does not count.
_NAME = re.compile(r"(?<![.!?]\s)\b[A-Z][a-z]+")


def _still_there(older: str, newer: str) -> bool:
    """Whether ``newer`` says that a name of the ``older`` clause still is (an addition, not a replacement).

    "We adopted a kitten! Her name is Pepper. Rufus is confused but gentle with her." names a second pet; the dog
    Rufus of "Rufus is our 4-year-old beagle" is still there; so is a name the newer message asks about ("will Ziggy
    mind the noise?"). A name said to be gone or renamed, a day or month ("a good Friday routine?"), or a word that is
    no name ("It is", "This is") does not count.
    """
    for clause in clauses_of(newer):
        if clause.question and any(
            n.casefold() not in _NOT_NAMES and not _TIME_WORDS.fullmatch(n) and re.search(rf"\b{re.escape(n)}\b", older)
            for n in _NAME.findall(clause.text[1:])
        ):
            return True  # asked about as one still there: "picked up a hamster today. will Ziggy mind the noise?"
        m = _STILL.match(clause.text)
        if m is None or clause.question or _GONE.search(m.group("rest")):
            continue
        name = m.group("name")
        if name[0].isupper() and name.casefold() not in _NOT_NAMES and re.search(rf"\b{re.escape(name)}\b", older):
            return True
    return False


#: Capitalised sentence openers that are no names.
_NOT_NAMES = frozenset(
    "i it he she they we you this that there here what who which my our his her their its the a an one "
    "everything everyone nothing someone something".split()
)


def _answering(text: str, wanted: frozenset[str], kind: str | None) -> tuple[Clause, ...]:
    """The clauses of a newer statement that may answer the query.

    Those that match it best (:func:`focus`), and those that state a value of the asked ``kind`` elsewhere in the
    message ("Switched carriers, couldn't port my old number. I'm on 628-555-0147 now": the number is in another
    sentence than the words of the query).

    A value in another clause counts when the clause is the speaker's own ("I'm on ...") or the value is an
    identifier (an e-mail address, digits: "Sign off with jr@gmail.com"), and for "what/which" only an identifier:
    a name or a general figure in another sentence ("Rates are around 7% now") is as often about something else.
    """
    best = focus(text, wanted)
    if kind is None:
        return best
    extra = []
    for c in clauses_of(text):
        values = values_of(c, kind)
        if c in best or not c.asserts_present or not values:
            continue
        ided = _is_identifier(values)
        if (c.subject == "self" or (c.subject is None and ided)) and (kind != "entity" or ided):
            extra.append(c)
    return best + tuple(extra)


@text_cache(maxsize=16384)
def for_a_while_at_value(text: str) -> bool:
    """Whether ``text`` states its value for a while only (see :func:`for_a_while`).

    A Chinese sentence is one clause, so a marker anywhere in it counted: "医生出差，给我挪到下周五上午十点了" (the
    doctor is away; my appointment moved to Friday) is no stay for a while. The marker counts only in a part that
    gives a value, when some part does: for Chinese a comma-separated part with a number or a time, for other text a
    sentence that states something with digits ("They offered September 20th and we took it. Invitations get
    reprinted this week.").
    """
    # Chinese: comma-separated parts; English: sentences ("They offered September 20th. Invitations get reprinted
    # this week." states the date). A marker the message opens with frames no more than its part: "这周真是忙疯了…
    # 对了，周会挪到周四上午十点了", "So this weekend was chaos. … the Civic is gone" change something for good.
    if has_cjk(text):
        valued = [seg for seg in _CJK_SEGMENT.split(text) if seg and (numbers_in(seg) or times_in(seg))]
        return any(for_a_while(seg) for seg in valued) if valued else for_a_while(text)
    # a question asks, it states no stay ("first appt next week, what should I bring?"), unless a value is stated
    # before it in the sentence ("this week I'm in Boston for a conference, where should I eat?"); a sentence states
    # a value with digits or a name ("No yoga this week. Back next Wednesday." states none: a weekday is no name)
    sentences = [seg for seg in _SENTENCE.split(text) if seg and seg.strip()]
    stated = [seg for seg in sentences if not is_question(seg)]
    asked = [c.text for s in sentences if is_question(s) for c in clauses_of(s) if not c.asks]
    valued = [s for s in stated + asked if DIGITS.search(s) or _NAME.search(_TIME_WORDS.sub(" ", s[1:]))]
    return any(_for_a_while_en(seg) for seg in (valued or stated))


#: A change of a price or a rank: "this month" after it says when it happened, not for how long ("rent went up to
#: $1,975 this month", "got promoted this week").
_LASTING = re.compile(
    r"\b(?:went up|went down|goes up|rose|increased|raised|dropped|got promoted|was promoted|renewed)\b", re.IGNORECASE
)


#: An event and then the week or month it happened or starts in: "Jamie started at Brookside this week", "picked
#: up a used Mazda this weekend", "Starting at the admissions office next week" say when, not for how long.
_HAPPENED = re.compile(
    r"\b(?:[a-z]{3,}ed|got|took|began|begun|bought|sold|found|made|went|came|brought|left|starting|starts?)\b"
    # (a title's period ends no sentence: "assigned me to Dr. Nguyen, first visit is next week")
    r"(?:[^.!?;]|" + "|".join(rf"(?<=\b{t})\." for t in TITLES) + r")*?"
    r"\b(?:this|next|last) (?:week|weekend|month)\b",
    re.IGNORECASE,
)


#: One time of a standing thing: "so this week's class is Wednesday" (after "studio's closed Tuesday").
_ONE_OFF = re.compile(r"\b(?:this|next) (?:week|weekend|month)[’']s\b", re.IGNORECASE)


def _for_a_while_en(sentence: str) -> bool:
    happened = _HAPPENED.search(sentence) and not _ONE_OFF.search(sentence)
    return for_a_while(sentence) and not _LASTING.search(sentence) and not happened


def added_before(clause: Clause, message: str) -> bool:
    """Whether ``clause`` goes on about a thing that an earlier clause of ``message`` adds.

    "Kids talked me into a hamster too. His name is Peanut.", "Adopted a second dog! Beagle mix, her name is Daisy":
    the name belongs to the one added, not to the pet the older statement named. The clause must come right after
    the addition and have no subject of its own, or speak of the added one by a pronoun.
    """
    said = clauses_of(message)
    at = said.index(clause) if clause in said else 0
    if at == 0 or not said[at - 1].additive:
        return False  # only right after the addition ("Also, I was thinking of a cleaning kit ... By the way, ...
        # that's six times now that I've worn them" goes on about something else)
    return clause.subject is None or bool(THIRD_PERSON.search(clause.text))


#: "X's <noun>" in English: a possessive (not a contraction: "it's", "that's", "what's").
_POSSESSED = re.compile(r"\b([a-z]+)['’]s\s+([a-z]+(?:\s+[a-z]+){0,2})", re.IGNORECASE)
_NO_OWNER = frozenset(
    "it that what there here he she who let where how this one everyone everybody nobody today tomorrow yesterday"
    " name morning afternoon evening night day week weekend month year season".split()
)


def owned_by_another(clause: str, wanted: frozenset[str], asked: frozenset[str] = frozenset()) -> bool:
    """Whether an English clause gives the asked attribute of someone or something else ("reception's extension").

    Asked "What's my work extension?", "Funny, reception's extension is 4417" names an extension of another owner:
    a possessive other than the speaker's right before a word of the query; asked "Who is my dentist?", "my wife's
    dentist is Dr. Romero" names another's dentist. A person the query asks about (``asked``: "mom's birthday" for
    "When is Mom's birthday?"), a contraction ("that's my extension", "my sister's hosting Thanksgiving") and a time
    ("this morning's weigh-in") own nothing.
    """
    for m in _POSSESSED.finditer(clause):
        owner, owned = m.group(1).casefold(), m.group(2).casefold()
        if owner in asked:
            continue
        first = owned.split()[0]
        if owner in _NO_OWNER or owner in STOPWORDS or first in STOPWORDS or first.endswith("ing"):
            # ... nor "is" ("my sister's hosting Thanksgiving")
            continue
        if set(tokenize(owned, dates=False)) & wanted:
            return True
    return False


def named_before_value(
    clause: Clause, people: frozenset[str], kind: str | None, known: frozenset[str] = frozenset()
) -> bool:
    """Whether ``clause`` names one of ``people`` before the value of ``kind`` it gives (or anywhere, without one).

    "My brother Sam pointed out mom's birthday is the 16th" names Mom before the date: the date is hers. "My nephew
    Owen is 12 and ... so now Ethan won't stop bringing it up" names Ethan after the age: the age is Owen's. The
    people themselves and the ``known`` values (the older statement's) are no value here ("Romano's double-booked
    the room, so we're doing Dad's party in our backyard").
    """
    if not mentions(clause, people):
        return False
    text = clause.text.casefold()
    values = (values_of(clause, kind) - known - people) if kind else frozenset()
    spots = [text.find(v.casefold()) for v in values]
    spots = [s for s in spots if s >= 0]
    if not spots:
        return True
    head = text[: min(spots)]
    return any(_names_as_themselves(head, p) for p in people)


def _names_as_themselves(text: str, person: str) -> bool:
    """Whether ``text`` names ``person`` other than as the owner of someone else ("Leo's best friend", 小明的同学)."""
    table = tables_for(text)[0]
    for m in re.finditer(re.escape(person), text):
        owner = re.match(r"['’]s\b|的", text[m.end() :])
        if owner is None or person_owned(table, text[m.end() + owner.end() :]) is None:
            return True
    return False


#: A noun phrase that picks a thing ("a 2-bed", "the place across the street", "new deals").
_PICKED = re.compile(r"\b(?:a|an|the|new|another|some)\s+[a-z0-9]", re.IGNORECASE)


#: A number said as the new value of what the clause names ("upped it to 20mg", "the renewal: $2,040", "the new one
#: is 628-555-0147", "— $16,200 now").
_NEW_VALUE_BEFORE = re.compile(r"(?:\bto|\bis|\bare|\bnow|:|—|–)\s*[$€£¥]?\s*$", re.IGNORECASE)


def number_of_another_thing(clause: Clause, wanted: frozenset[str]) -> bool:
    """Whether an English clause gives a number of some other thing than the one asked about.

    "Toured a 2-bed today for $2,100", "The place across the street is asking $2,600", "Seeing new deals at 3.6%",
    asked "How much is my rent?" / "What's my mortgage rate?": the clause names neither the speaker nor a word of
    the query, and its number follows a noun phrase that picks something ("a", "the", "new"...) without being said
    as that thing's new value ("the renewal: $2,040", "she upped it to 20mg"). "Rent went up to $1,550" names the
    query's word; "down to 77 this morning" picks nothing before its number.
    """
    text = clause.text
    if has_cjk(text) or clause.subject == "self" or _ASKER.search(text):
        return False
    if wanted & (clause.keys | set(tokenize(text, dates=False))):
        return False
    spots = [m.start() for m in DIGITS.finditer(text)]
    if not spots or _NEW_VALUE_BEFORE.search(text[: spots[-1]]):
        return False
    return bool(_PICKED.search(text[: spots[-1]]))


def continued_subject(newer: Clause, older: Clause) -> str | None:
    """Whom a newer clause is about when the values beside it are read (:func:`values_around`'s ``subject``).

    A clause with a subject of its own is about it. One that names nobody but points back at someone ("Weird not
    having him 15 minutes away" after "My brother just moved to Seattle") goes on about another person, so the
    older clause's subject picks the values and the brother's city is not the speaker's. One that points at no one
    ("Signed it anyway" after "Landlord's tacking on another $150 a month") reads every clause of its message.
    """
    if newer.subject is not None:
        return newer.subject
    return older.subject if THIRD_PERSON.search(newer.text) else None


@text_cache(maxsize=16384)
def said_in(message: str) -> frozenset[str]:
    """The terms and keys of every clause of ``message``, with the other names of each role it says.

    "Took my mother to the airport" says "mom" too (the table's ``same_person``). Cached: recall asks per pair.
    """
    table = tables_for(message)[0]
    words = frozenset().union(*(c.terms | c.keys for c in clauses_of(message)))
    return words.union(*(table.synonyms(w) for w in words))


def weighs(message: str, kind: str | None) -> bool:
    """Whether ``message`` names a value of ``kind`` only where it asks, stating none.

    "should I switch to Verizon? coverage at my new office is awful" weighs a change: the carrier the speaker has is
    still the one they have. A supposition inside a statement ("so it's a staycation, maybe a couple of day trips
    with Tom") still states. ``kind`` None (the query asks for no kind of value) weighs nothing.
    """
    if kind is None:
        return False
    clauses = clauses_of(message)
    return any(values_of(c, kind) for c in clauses if c.asks) and not any(
        values_of(c, kind) for c in clauses if not c.asks
    )
