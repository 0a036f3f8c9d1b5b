"""Rule-based feature extraction for English and Chinese (offline, deterministic).

The rules follow the feature list of seed 004 (§3.1: entities, directive intensity, emotional valence,
relation to the goal, information type) and the rule-based slot extraction of seed 002 (§3.1 "规则抽取": a
user's
name, a preference, a date go straight into structured slots). They are deliberately small and readable: a
lexicon and a handful of regular expressions per feature, each documented where it is defined.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from memlineage.extractors._base import GoalRelation, InfoType, MemoryFeatures
from memlineage.extractors._patterns import LanguageTable, SlotRule, tables, tables_for

__all__ = [
    "RuleBasedExtractor",
    "content_terms",
    "detect_slot",
    "is_forcing_directive",
    "strip_transcript_prefix",
    "transcript_speaker",
]

_CJK = r"\u4e00-\u9fff"

# ------------------------------------------------------------------------------------------------------------
# Directives (salience; "remember ..." forces storage). Intensity in [0, 1] = the seed's 0-10 scale / 10.
# ------------------------------------------------------------------------------------------------------------
# A forcing directive must be in imperative position: at the start of a sentence, optionally after a softener
# ("please", "hey,", "and", "请", "你要", "一定要"). "I don't remember where I parked" does not force
# anything.
_SENT_START = r"(?:^|[.!?;。！？；\n]\s*)"
_EN_SOFT = r"(?:(?:please|pls|hey|ok|okay|and|also|so|oh)[,!]?\s+)*"
_FORCE_EN = re.compile(
    _SENT_START + _EN_SOFT + r"(?:remember|don'?t\s+forget|do\s+not\s+forget|never\s+forget|keep\s+in\s+mind|"
    r"make\s+a\s+note|note\s+(?:that|down)|memori[sz]e)\b",
    re.IGNORECASE,
)
_FORCE_ZH = re.compile(
    _SENT_START + r"(?:请|你要|你得|一定要|务必)?\s*(?:记住|记得|记下|切记|牢记|别忘了?|不要忘[记了]?|千万别忘)"
)
_DIRECTIVE_EN: tuple[tuple[re.Pattern[str], float], ...] = (
    (
        re.compile(r"\b(?:very\s+important|extremely\s+important|critical|crucial|vital|top\s+priority)\b", re.I),
        0.9,
    ),
    (
        re.compile(r"\b(?:important|must|make\s+sure|be\s+sure\s+to|never|always|essential|urgent)\b", re.I),
        0.7,
    ),
    (re.compile(r"\b(?:please|should|need\s+to|have\s+to)\b", re.I), 0.3),
)
_DIRECTIVE_ZH: tuple[tuple[re.Pattern[str], float], ...] = (
    (re.compile(r"切记|牢记"), 1.0),
    (re.compile(r"非常重要|特别重要|十分重要|关键|紧急"), 0.9),
    (re.compile(r"重要|务必|一定要|千万|必须|永远不要|绝对不要|总是|每次都"), 0.7),
    (re.compile(r"请|需要|应该"), 0.3),
)
_NEGATED_MEMORY_ZH = re.compile(r"(?:记不住|没记住|记不得|不记得)")


def is_forcing_directive(text: str) -> bool:
    """Whether ``text`` opens a sentence with an explicit storage directive ('remember ...', '记住...').

    Example:
        >>> is_forcing_directive("Please remember that my passport expires in May")
        True
        >>> is_forcing_directive("I don't remember where I parked")
        False
    """
    if _FORCE_EN.search(text):
        return True
    return bool(_FORCE_ZH.search(text)) and not _NEGATED_MEMORY_ZH.search(text)


#: Directive intensity of an explicit correction ("actually, ...", "更正：..."): as strong as "important".
CORRECTION_INTENSITY = 0.7


def _directive_intensity(text: str) -> float:
    # "remember" counts only in imperative position ("I don't remember..." is no directive): see above.
    best = 1.0 if is_forcing_directive(text) else 0.0
    if any(t.is_correction(text) for t in tables_for(text)):
        best = max(best, CORRECTION_INTENSITY)
    for pattern, weight in _DIRECTIVE_EN:
        if pattern.search(text):
            best = max(best, weight)
    zh = _NEGATED_MEMORY_ZH.sub("", text)
    for pattern, weight in _DIRECTIVE_ZH:
        if pattern.search(zh):
            best = max(best, weight)
    return best


# ------------------------------------------------------------------------------------------------------------
# Emotion (salience). Strong positive or negative emotion raises salience (seed 004 §3.2 F_salience).
# ------------------------------------------------------------------------------------------------------------
_NEG_EN = re.compile(
    r"\b(?:angry|furious|frustrat\w*|terrible|awful|horrible|hate|hated|disappoint\w*|upset|worst|annoy\w*|"
    r"unacceptable|ridiculous|scared|afraid|worried|anxious|sad|devastat\w*|heartbroken|stressed|miserable|"
    r"broken|fed\s+up|sick\s+of|furious|outraged|panic\w*|lost)\b",
    re.I,
)
_POS_EN = re.compile(
    r"\b(?:love|loved|amazing|wonderful|thrilled|excited|exciting|fantastic|awesome|happy|delighted|grateful|"
    r"thankful|proud|overjoyed|ecstatic|brilliant|incredible|blessed|stoked|so\s+glad)\b",
    re.I,
)
_NEG_ZH = re.compile(
    r"生气|愤怒|气死|失望|糟糕|太差|讨厌|烦死|崩溃|难过|伤心|担心|害怕|焦虑|郁闷|受不了|投诉|差劲|恶心"
)
_POS_ZH = re.compile(r"开心|高兴|太棒|太好了|激动|兴奋|满意|感动|幸福|骄傲|喜出望外|爱死")
_INTENS_EN = re.compile(r"\b(?:very|really|so|extremely|totally|absolutely|incredibly|super)\b", re.I)
_INTENS_ZH = re.compile(r"非常|特别|太|超级|极其|十分|真的")


def _emotion(text: str) -> tuple[str, float]:
    neg = len(_NEG_EN.findall(text)) + len(_NEG_ZH.findall(text))
    pos = len(_POS_EN.findall(text)) + len(_POS_ZH.findall(text))
    exclaim = text.count("!") + text.count("！")
    intens = len(_INTENS_EN.findall(text)) + len(_INTENS_ZH.findall(text))
    if neg == pos == 0:
        # Exclamation marks alone are weak evidence ("Hi!"): a little intensity, neutral valence.
        return "neutral", min(0.2, 0.1 * exclaim)
    valence = "negative" if neg >= pos else "positive"
    hits = neg + pos
    intensity = min(1.0, 0.45 * hits + 0.15 * min(intens, 2) + 0.1 * min(exclaim, 2))
    return valence, round(intensity, 4)


# ------------------------------------------------------------------------------------------------------------
# Key entities (salience): product names, error codes, dates, amounts
# (seed 004 §2.2 "关键实体如产品名、错误代码").
# ------------------------------------------------------------------------------------------------------------
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|jun(?:e)?|jul(?:y)?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_ENTITY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("error", re.compile(r"\b0x[0-9a-f]{4,}\b", re.I)),
    ("error", re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]{2,}\b")),
    ("error", re.compile(r"\b(?:E|ERR|ERROR|EC)[-_]?\d{2,}\b")),
    ("error", re.compile(r"(?:\berror(?:\s+code)?|\bcode|\bHTTP|错误码?|错误代码)\s*[:#：]?\s*\d{3,}", re.I)),
    ("date", re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b")),
    ("date", re.compile(r"\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b")),
    (
        "date",
        re.compile(
            rf"\b{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?"
            rf"{_MONTHS}\b",
            re.I,
        ),
    ),
    (
        "date",
        re.compile(
            r"\b(?:tomorrow|yesterday|tonight|next\s+(?:week|month|year|monday|tuesday|wednesday|"
            r"thursday|friday|saturday|sunday)|last\s+(?:week|month|year)|on\s+(?:monday|tuesday|"
            r"wednesday|thursday|friday|saturday|sunday)s?)\b",
            re.I,
        ),
    ),
    (
        "date",
        re.compile(
            r"\d{2,4}年(?:\d{1,2}月)?(?:\d{1,2}[日号])?|\d{1,2}月\d{1,2}[日号]?|\d{1,2}[日号]|"
            r"明天|后天|昨天|前天|下周[一二三四五六日天]?|上周[一二三四五六日天]?|"
            r"(?:周|星期|礼拜)[一二三四五六日天]"
        ),
    ),
    ("amount", re.compile(r"[$€£¥￥]\s?\d[\d,]{0,24}(?:\.\d{1,8})?(?:\s?[kKmM]\b)?")),
    (
        "amount",
        re.compile(
            r"\b\d[\d,]{0,24}(?:\.\d{1,8})?\s?(?:dollars?|usd|eur|euros?|rmb|yuan|gbp|%|percent|kg|km|"
            r"miles?|hours?|minutes?|mins?|nights?|days?)\b",
            re.I,
        ),
    ),
    (
        "amount",
        re.compile(
            r"(?<![\d,.])\d[\d,]{0,24}(?:\.\d{1,8})?\s?(?:元|块钱?|万元?|美元|人民币|英镑|欧元|公里|公斤|%|小时|分钟|天|晚)"
        ),
    ),
    (
        "product",
        re.compile(r"\b[a-z]{0,2}[A-Z][a-z]+[A-Z][A-Za-z]*\b|\bi[A-Z][a-z]+\b"),
    ),  # iPhone, MacBook, PowerPoint
    ("product", re.compile(r"\b[A-Z][A-Za-z]+[- ]?\d{1,4}[A-Za-z]{0,3}\b")),  # XPS-13, GPT-4, Pixel 8, UA123
)
_NAME_AFTER = re.compile(r"\b(?:my name is|i am called|i'm called|call me|named)\s+([A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)")


def _entities(text: str) -> tuple[str, ...]:
    found: list[str] = []
    covered = bytearray(len(text) + 1)  # characters inside an earlier match: linear, whatever the match count
    for label, pattern in _ENTITY_PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if covered[start] or covered[max(start, end - 1)]:
                continue  # already covered by an earlier, more specific pattern
            covered[start:end] = b"\x01" * (end - start)
            found.append(f"{label}:{match.group(0).strip()}")
    for match in _NAME_AFTER.finditer(text):
        found.append(f"name:{match.group(1)}")
    return tuple(dict.fromkeys(found))


# ------------------------------------------------------------------------------------------------------------
# Semantic slots (seed 002 §3.1 rule extraction, §3.3 "合并覆盖"): same subject + attribute = same slot. The rules
# are data: the per-language tables in patterns/*.yaml (memlineage.extractors._patterns).
# ------------------------------------------------------------------------------------------------------------
_EAT_PREFIX = re.compile(r"^(?:吃|to eat\s+|eating\s+)", re.I)
_FILLER = re.compile(r"^(?:the|a|an|to|my|some)\s+", re.I)


def _slug(value: str) -> str:
    value = unicodedata.normalize("NFKC", value).casefold().strip()
    value = re.sub(r"[^\w\u4e00-\u9fff]+", "_", value).strip("_")
    return value[:32] or "other"


#: Objects that name nothing by themselves ("I love it!"): no slot, or unrelated statements would collide.
_PRONOUN_OBJECT = re.compile(
    r"^(?:it|this|that|these|those|them|you|him|her|us|one|that one|this one|everything|all of (?:it|them)"
    r"|它|这个|那个|这些|那些|你|他|她|他们|她们|一切)\W*$",
    re.IGNORECASE,
)


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _category(obj: str, table: LanguageTable) -> str:
    for t in (table, *tables()):
        for name, pattern in t.categories:
            if pattern.search(obj):
                return name
    words = re.findall(r"[A-Za-z]+", obj)
    if words:
        return _singular(words[-1].lower())
    return _slug(obj[-2:]) if obj else "other"


def _diet_key(obj: str) -> str:
    obj = re.sub(r"(?:了|的|食物|东西|food|dishes)$", "", obj.strip(), flags=re.I).strip()
    obj = re.sub(r"^(?:spicy|辣|辛辣).*$", "spicy", obj, flags=re.I)
    obj = re.sub(r"^(?:meat|肉).*$", "meat", obj, flags=re.I)
    return _slug(obj)


def _attr_key(attr: str) -> str:
    attr = re.sub(r"^(?:new|current)\s+", "", attr.strip(), flags=re.I)
    attr = re.sub(r"\s+(?:now|again|too|actually|these days|anymore)$", "", attr, flags=re.I)
    return "_".join(_singular(w) for w in _slug(attr).split("_")) or "other"


def _single_valued(attr: str, table: LanguageTable) -> bool:
    """Whether the attribute, or its head noun ("usual morning drink" → "drink"), holds one value at a time."""
    words = attr.casefold().split()
    return any(" ".join(words[i:]) in table.single_valued for i in range(len(words))) or attr in table.single_valued


def _fill(rule: SlotRule, match: re.Match[str], table: LanguageTable) -> tuple[str | None, str | None]:
    """The slot key and value of one matched rule, or ``(None, None)`` when the match names no slot."""
    groups = match.groupdict()
    value = (groups.get("v") or groups.get("obj") or "").strip(" ，。！,.!")
    if not value:
        return None, None
    fields: dict[str, str] = {}
    if rule.kind == "diet":
        fields["obj"] = _diet_key(value)
    if "attr" in groups and groups["attr"]:
        attr = groups["attr"].strip()
        if rule.kind in ("attribute", "possessive") and not _single_valued(attr, table):
            return None, None  # "my family is great" names no single-valued attribute
        fields["attr"] = _attr_key(attr)
    if "obj" in groups and groups["obj"] and rule.kind == "superlative":
        fields["obj"] = _attr_key(groups["obj"])
    if "subject" in groups and groups["subject"]:
        fields["subject"] = _slug(groups["subject"])
    if rule.kind == "preference":
        obj = _FILLER.sub("", value)
        if _PRONOUN_OBJECT.match(obj.strip()):
            return None, None
        if _EAT_PREFIX.match(obj):
            return f"user.diet.{_diet_key(_EAT_PREFIX.sub('', obj))}", value
        fields["category"] = _category(obj, table)
    try:
        return rule.key.format(**fields), value
    except KeyError:  # a template field the pattern did not fill: the table is inconsistent, skip the rule
        return None, None


def detect_slot(text: str) -> tuple[str | None, str | None]:
    """Detect a semantic slot and its value ("I live in Paris" → ``("user.residence", "Paris")``).

    Slots are ``subject.attribute`` keys, never keyed by the value: residence, employer, job title, diet, name,
    favourite X (``user.favourite.restaurant``), names of pets and relatives (``user.dog.name``), dates of a trip
    or appointment (``user.trip.date``), a person's single-valued attribute (``emma.birthday``), "my <attribute>
    is ..." for single-valued attributes (``user.phone_number``) and preferences keyed by the category of their
    object (``user.preference.seat``). Liking something edible ("我喜欢吃辣") shares the diet slot with "我不吃辣",
    so a change of mind supersedes the old statement (seed 002 §3.3). The rules are the per-language tables in
    ``memlineage/extractors/patterns/``.

    Args:
        text: The candidate memory text.

    Returns:
        ``(slot, value)``, or ``(None, None)`` when no rule matches.

    Example:
        >>> detect_slot("I prefer aisle seats on long flights")
        ('user.preference.seat', 'aisle seats on long flights')
        >>> detect_slot("我住在上海")
        ('user.residence', '上海')
        >>> detect_slot("My favourite restaurant is Haidilao")
        ('user.favourite.restaurant', 'Haidilao')
    """
    for table in tables_for(text):
        for rule in table.slots:
            for pattern in rule.patterns:
                for match in pattern.finditer(text):
                    if "{" not in rule.key and any(p.match(text, match.start()) for p in table.people):
                        continue  # "我姐姐刚搬到柏林": a fixed user slot, said of another person
                    if _reported(text, match.start(), table.reported):
                        continue  # "my mom keeps telling her friends I work at Apple": a belief, not the value
                    slot, value = _fill(rule, match, table)
                    if slot is not None:
                        return slot, value
    return None, None


#: Where a sentence ends: what is said before it belongs to another sentence.
_SENTENCE_END = re.compile(r"[.!?;。！？；\n]")


def _reported(text: str, start: int, patterns: Sequence[re.Pattern[str]]) -> bool:
    """Whether the sentence before ``start`` ends in a belief or a report of someone else's (table ``reported``)."""
    if not patterns or start == 0:
        return False
    before = text[:start]
    ends = [m.end() for m in _SENTENCE_END.finditer(before)]
    sentence = before[ends[-1] :] if ends else before
    sentence = sentence.rstrip(" ,，")
    return any(p.search(sentence) for p in patterns)


# ------------------------------------------------------------------------------------------------------------
# Information type (utility) and goal relation.
# ------------------------------------------------------------------------------------------------------------
_CHITCHAT_WORD = (
    r"(?:hi+|hello|hey+|yo|thanks?(?: you)?(?: so much| a lot)?|thx|ty|ok(?:ay)?|k|cool|nice|great|"
    r"lol|lmao|"
    r"haha+|hmm+|bye|good ?(?:night|morning|afternoon|evening)|see you|sure|yes|yeah|yep|no|nope|got it|"
    r"sounds good|how are you|how's it going|what's up|wow|awesome|np|no problem|you too|same here|"
    r"你好|您好|嗨|哈+|嗯+|好的?|谢谢(?:你|您)?|多谢|拜拜|再见|晚安|早上好|早安|哦+|噢+|行|可以|没问题|收到|好吧)"
)
#: Content-free small talk: one or more greeting / thanks / acknowledgement words ("ok thanks", "好的谢谢"),
#: optionally addressed to someone ("Thanks, Mel!").
_CHITCHAT = re.compile(
    r"^\W*" + _CHITCHAT_WORD + r"(?:[\s,，.!！?？~～:)(]*(?:" + _CHITCHAT_WORD[3:-1] + r"|hi+|hello|hey|there|mate|"
    r"buddy|friend|man|guys?|everyone|all|(?-i:[A-Z][a-z]+)|你|您|啊|呀|哦|啦|了|吧|呢))*\W*$",
    re.I,
)
_INSTRUCTION_EN = re.compile(
    r"(?:^|[.!?]\s*)(?:please\s+)?(?:always|never|don'?t|do not|make sure|be sure to|from now on|"
    r"in the future|going forward|you should|you must|remember to|next time|use|send|reply|answer|write|"
    r"book|call|remind)\b",
    re.I,
)
_INSTRUCTION_ZH = re.compile(
    r"^(?:请|以后|今后|每次|下次|务必|一定要|不要|别|记得|总是|永远|帮我|给我)|请(?:你|您)?(?:以后|每次|总是|务必|不要|用)"
)
_PREFERENCE_EN = re.compile(
    r"\bi (?:really |much |strongly |would )?(?:like|love|prefer|enjoy|hate|dislike|don'?t like|do not like|"
    r"can'?t stand|rather)\b|\bmy fav(?:ou)?rite\b|\bi'?m (?:a )?(?:vegetarian|vegan)\b|\bi don'?t eat\b",
    re.I,
)
_PREFERENCE_ZH = re.compile(r"我(?:比较|更|最|很|特别|非常)?(?:喜欢|爱|偏好|讨厌|不喜欢|不吃|吃素)|最爱|偏爱")
_FEEDBACK = re.compile(
    r"\b(?:thanks?(?: you)?,? (?:that|this|it)|(?:that|this|it)(?:'s| is| was) "
    r"(?:wrong|right|correct|helpful|"
    r"useless|perfect|not (?:right|what i (?:asked|wanted)))|good (?:job|answer)|well done|not helpful|"
    r"you(?:'re| are) (?:wrong|right)|wrong answer)\b"
    r"|回答得?(?:很好|不错|不对|错了)|不对|说错了|很有帮助|没用|答非所问|干得好",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|mine|me|we|our)\b|我", re.I)
_EN_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the and or but if of to in on at for with from by is are was were be been am do does did have has "
    "had "
    "i me my we our you your he she it they them this that these those what which who how when where why can "
    "could would should will shall may might just so very really about into over than then there here not no "
    "yes please her his its their hers theirs".split()
)
#: What is left of "it's", "we'll", "they're", "I've" once split at the apostrophe.
_CONTRACTION_TAILS = frozenset({"ll", "re", "ve"})


def content_terms(text: str) -> set[str]:
    """Content words (stop words dropped, crude plural folding) and CJK bigrams of ``text``, case-folded."""
    text = unicodedata.normalize("NFKC", text).casefold()
    words = {
        w[:-1] if len(w) > 3 and w.endswith("s") else w
        for w in _EN_WORD.findall(text)
        if w not in _STOP and (len(w) > 1 or w.isdigit()) and w not in _CONTRACTION_TAILS
    }
    cjk = re.findall(rf"[{_CJK}]+", text)
    bigrams = {run[i : i + 2] for run in cjk for i in range(max(1, len(run) - 1))}
    return words | bigrams


def _info_type(text: str, slot: str | None) -> InfoType:
    stripped = text.strip()
    if _CHITCHAT.match(stripped):
        return InfoType.CHITCHAT
    if _INSTRUCTION_EN.search(stripped) or _INSTRUCTION_ZH.search(stripped):
        if not _PREFERENCE_EN.search(stripped) or re.match(r"\W*(?:please|always|never)\b", stripped, re.I):
            return InfoType.INSTRUCTION
    if (
        _PREFERENCE_EN.search(stripped)
        or _PREFERENCE_ZH.search(stripped)
        or (slot is not None and slot.startswith(("user.preference", "user.diet")))
    ):
        return InfoType.PREFERENCE
    if _FEEDBACK.search(stripped):
        return InfoType.FEEDBACK
    if len(content_terms(stripped)) <= 1 and not _entities(stripped):
        return InfoType.CHITCHAT  # nothing to remember: "lol", "😂", "...", "Oh!"
    return InfoType.FACT


def _goal_relation(
    text: str, goal: str | None, info_type: InfoType, entities: Iterable[str], slot: str | None
) -> GoalRelation:
    personal = info_type in (InfoType.INSTRUCTION, InfoType.PREFERENCE) or slot is not None
    if goal is not None and goal.strip():
        goal_terms = content_terms(goal)
        shared = content_terms(text) & goal_terms
        if goal_terms and (len(shared) >= 2 or len(shared) / len(goal_terms) >= 0.33):
            return GoalRelation.DIRECT
        if shared or personal:
            return GoalRelation.INDIRECT
        return GoalRelation.NONE
    # No explicit goal: the standing goal of a personal agent is to serve this user, so what the user tells
    # about
    # themselves, their preferences and their instructions is directly relevant; other facts indirectly.
    if info_type is InfoType.CHITCHAT:
        return GoalRelation.NONE
    if personal:
        return GoalRelation.DIRECT
    if info_type is InfoType.FACT and (_FIRST_PERSON.search(text) or any(entities)):
        return GoalRelation.DIRECT
    return GoalRelation.INDIRECT


#: Transcript framing that is metadata, not content: a leading "[timestamp]" optionally followed by a speaker
#: label ("[8 May, 2023] Caroline: ..."), or a bare role label ("user: ...", "助手：...").
_TRANSCRIPT_PREFIX = re.compile(
    r"^\s*(?:\[[^\]\n]{1,60}\]\s*(?:[^\s:：\[\]][^:：\n]{0,30}[:：]\s*)?"
    r"|(?:user|assistant|human|ai|system|bot|用户|助手|客服)\s*[:：]\s*)",
    re.IGNORECASE,
)


_SPEAKER = re.compile(r"^\s*\[[^\]\n]{1,60}\]\s*(?P<who>[^\s:：\[\]][^:：\n]{0,30})[:：]")
_ROLE_LABELS = {"user", "human", "用户"}


def transcript_speaker(text: str) -> str | None:
    """The speaker named by a ``[timestamp] speaker:`` prefix (None without one, or for a generic user label).

    Example:
        >>> transcript_speaker("[8 May, 2023] Caroline: I love art")
        'Caroline'
    """
    match = _SPEAKER.match(text)
    if not match:
        return None
    who = match.group("who").strip()
    return None if who.lower() in _ROLE_LABELS else who


def strip_transcript_prefix(text: str) -> str:
    """Drop a leading ``[timestamp] speaker:`` or ``role:`` label (kept when nothing would remain).

    Example:
        >>> strip_transcript_prefix("[8 May, 2023] Caroline: Hey Mel!")
        'Hey Mel!'
        >>> strip_transcript_prefix("Important: the gate code is 4471")
        'Important: the gate code is 4471'
    """
    stripped = _TRANSCRIPT_PREFIX.sub("", text, count=1)
    return stripped if stripped.strip() else text


class RuleBasedExtractor:
    """Deterministic, offline feature extractor for English and Chinese text (the default extractor).

    Setup:
        Nothing to install; no model, no network.

    Instantiate:
        >>> extractor = RuleBasedExtractor()

    Use:
        >>> f = extractor.extract("切记：我对花生过敏")
        >>> f.forced, f.directive_intensity
        (True, 1.0)
        >>> extractor.extract("thanks!").info_type.value
        'chitchat'

    What it detects (see the module for the exact rules): information type (instruction, preference, fact,
    feedback, chit-chat), relation to the goal (term overlap with the goal; without a goal, what the user says
    about themselves counts as direct), directive intensity in [0, 1], emotional valence and intensity in [0,
    1], key entities (product names, error codes, dates, amounts, names), a forcing "remember ..." directive,
    and a semantic slot.
    """

    name = "rules"

    def extract(self, text: str, *, goal: str | None = None) -> MemoryFeatures:
        """Extract features of ``text`` relative to ``goal``.

        Args:
            text: Candidate memory text (the caller has checked it is non-empty).
            goal: The agent's current goal in words; None = the standing goal of serving the user.

        Returns:
            The features, with ``extractor="rules"``. A transcript prefix (``[timestamp] speaker:``, ``user:``)
            is ignored: it frames the content and is not part of it.
        """
        speaker = transcript_speaker(text)
        text = strip_transcript_prefix(text)
        slot, slot_value = detect_slot(text)
        if slot is not None and speaker is not None:
            # In a multi-party transcript "I" is the speaker: Caroline's and Melanie's preferences are two slots.
            slot = f"{_slug(speaker)}.{slot.split('.', 1)[1]}"
        info_type = _info_type(text, slot)
        entities = _entities(text)
        if slot_value and not any(e.endswith(f":{slot_value}") for e in entities):
            # The value of a user-profile slot (a name, a city, an employer) is itself a key entity.
            entities = (*entities, f"{slot.rsplit('.', 1)[-1] if slot else 'slot'}:{slot_value}")
        valence, intensity = _emotion(text)
        return MemoryFeatures(
            info_type=info_type,
            goal_relation=_goal_relation(text, goal, info_type, entities, slot),
            directive_intensity=_directive_intensity(text),
            emotion_valence=valence,  # type: ignore[arg-type]
            emotion_intensity=intensity,
            entities=entities,
            forced=is_forcing_directive(text),
            slot=slot,
            slot_value=slot_value,
            extractor=self.name,
        )
