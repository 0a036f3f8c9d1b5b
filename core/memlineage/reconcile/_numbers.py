"""Numbers a statement names, read for update detection: digits, English number words and ordinals, Chinese numerals.

Split from :mod:`memlineage.reconcile._signals` (which re-exports :func:`numbers_in`) to keep each module short.
"""

from __future__ import annotations

import re

from memlineage._forget import text_cache
from memlineage.reconcile._text import EMAIL, with_digits

__all__ = ["DIGITS", "numbers_in", "units_of"]

DIGITS = re.compile(r"\d+(?:[.,:/-]\d+)*")
#: Number words from two on ("one" is as often a pronoun: "I've tried that one").
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "_ _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
_ORDINALS = {
    w: i
    for i, w in enumerate(
        "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
        "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split()
    )
}
_WORD = re.compile(r"[a-z]+")
_CJK_NUMBER = re.compile(
    r"[零一二两三四五六七八九十百千万]+(?=[岁个只辆口次年位瓶杯斤层楼块元万点号月日天周届级套间片粒颗支盒张本件台节遍趟顿碗克]|$)"
)
_CJK_DIGIT = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


#: A run of Chinese numerals with a magnitude (十, 百, 千, 万, 亿) that reads as one number: "二十五万", "两万一",
#: "六千五". It starts with a digit or 十, so 万一 ("in case") and 千万 ("by all means") are no numbers.
_CJK_MAGNITUDE = re.compile(r"[零一二两三四五六七八九十][零一二两三四五六七八九十百千万亿]+")


def _cjk_number(text: str) -> int | None:
    """A Chinese numeral's value (``"两万一"`` → 21000), or None when it does not read as one number.

    Parsed by ``cn2an`` (Chinese numerals to Arabic, MIT), imported on the first Chinese numeral only: it takes about
    half a second to load.
    """
    if all(ch in _CJK_DIGIT for ch in text):
        return int("".join(str(_CJK_DIGIT[ch]) for ch in text))
    import cn2an  # deferred: only Chinese text with a numeral needs it

    try:
        value = cn2an.cn2an(text, "smart")
    except ValueError:  # not a well-formed numeral ("十万一千万")
        return None
    return int(value) if float(value).is_integer() else None


@text_cache(maxsize=32768)
def numbers_in(text: str) -> frozenset[str]:
    """The numbers a text names, normalised: digits, number words, ordinals ("fifth" → 5), Chinese numerals.

    Spelled-out English numbers ("one hundred and five" → 105) are read by
    :func:`~memlineage.reconcile._text.with_digits`.
    """
    spelled = EMAIL.sub(" ", with_digits(text))
    out = {n.replace(",", "") for n in DIGITS.findall(spelled)}
    for w in _WORD.findall(spelled.casefold()):
        if w in _NUMBER_WORDS and w != "_":
            out.add(str(_NUMBER_WORDS[w]))
        elif w in _ORDINALS:
            out.add(str(_ORDINALS[w]))
    spans = [m.span() for m in _CJK_MAGNITUDE.finditer(text) if any(ch in "十百千万亿" for ch in m.group(0))]
    runs = {text[a:b] for a, b in spans}
    # a numeral before a measure word ("七岁"), unless it is part of a longer number ("二十五" in "二十五万")
    runs |= {m.group(0) for m in _CJK_NUMBER.finditer(text) if not any(a <= m.start() < b for a, b in spans)}
    for run in runs:
        n = _cjk_number(run)
        if n is not None:
            out.add(str(n))
    return frozenset(out)


#: A unit of measure right after a number ("500mg", "two days", "45 minutes", "3.1%", 20毫克, 三天) or a currency
#: around it ("$1,400", "300元"): what it counts.
#: Plural and singular are one unit; a bare number has none.
_UNIT = re.compile(
    rf"(?:(?<![\d.,])\d+(?:[.,]\d+)*|\b(?:{'|'.join(w for w in _NUMBER_WORDS if w != '_')}))\s*-?\s*"
    r"(?P<unit>%|(?:mg|mcg|ml|kg|g|lbs?|pounds?|oz|ounces?|percent|km|miles?|mi|mph|mbps|gb|tb|days?|nights?|weeks?|"
    r"months?|years?|yrs?|hours?|hrs?|minutes?|mins?|seconds?|secs?|times?|floors?|stor(?:y|ies)|pills?|tablets?|"
    r"cups?|servings?|reps?|sets?|steps?|calories|kcal|bedrooms?|beds?)\b)"
    r"|(?<![零一二两三四五六七八九十百千万\d])[零一二两三四五六七八九十百千万\d]+\s*(?P<cjk>毫克|克|公斤|斤|毫升|升|公里|天|周|个月|年|小时|分钟|秒|次|层|片|粒|杯)"
    r"|(?P<money>[$€£¥]\s*\d|\d\s*(?:元|块)|\d\s*(?:dollars?|bucks|euros?|usd|eur|rmb)\b)",
    re.IGNORECASE,
)
_SAME_UNIT = {
    "mi": "mile", "yr": "year", "hr": "hour", "min": "minute", "sec": "second", "percent": "%", "lb": "pound",
    "stories": "story", "mbps": "mbps", "calories": "calory",
}  # fmt: skip


@text_cache(maxsize=16384)
def units_of(text: str) -> frozenset[str]:
    """The units of measure the numbers of a text carry, normalised ("500mg", "two days" → ``{"mg", "day"}``).

    Two statements whose numbers count different things ("metformin 500mg" / "skip it two days") give no changed
    number. Empty when some number carries none ("Ethan is 9"; "145 over 92 ... doubled it to 20 ... in six weeks").
    """
    out = set()
    found = list(_UNIT.finditer(text))
    if len(found) < len(numbers_in(text)):
        return frozenset()
    for m in found:
        if m.group("money"):
            out.add("money")
            continue
        unit = (m.group("unit") or m.group("cjk")).casefold()
        if unit not in _SAME_UNIT and unit.isascii() and len(unit) > 2:
            unit = unit.removesuffix("s")  # "days" and "day" are one unit
        out.add(_SAME_UNIT.get(unit, unit))
    return frozenset(out)


def bare_numbers(text: str) -> bool:
    """Whether ``text`` names numbers and none of them carries a unit ("说错了，是5400", "no, 4417")."""
    return bool(numbers_in(text)) and _UNIT.search(text) is None


#: A clock time ("6pm", "7:30 a.m.", "18:45").
_CLOCK_TIME = r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b"
CLOCK = re.compile(_CLOCK_TIME, re.IGNORECASE)
#: A time or date ("6pm", "June 14", "Mondays", "the 5th", 周三, 凌晨一点, 五月二十号).
TIME = re.compile(
    _CLOCK_TIME + r"|\b(?:jan(?:uary)?|feb(?:ruary)?|march|april|may|"
    r"june|july|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b(?:\s+\d{1,2}(?:st|nd|rd|th)?)?|"
    r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\b\d{4}-\d{2}-\d{2}\b|\bthe\s+\d{1,2}(?:st|nd|rd|th)\b|"
    # 一点 alone is "a bit" (一点都不, 便宜一点, 一点时间) unless a time of day or minutes go with it (凌晨一点, 一点半)
    r"(?:周|星期|礼拜)[一二三四五六日天]|(?:(?<=[晨午上里夜])一点(?![都也儿些])|一点(?=[半钟多分零]|左右)|"
    r"[零一二两三四五六七八九十\d]{1,3}(?<!(?<![零一二两三四五六七八九十\d])一)点)(?:半|[零一二三四五六七八九十\d]{1,3}分?)?|"
    r"[零一二两三四五六七八九十\d]{1,3}(?:月(?:[零一二三四五六七八九十\d]{1,3}[日号])?|[日号])",
    re.IGNORECASE,
)
