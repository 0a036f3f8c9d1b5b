"""Numbers a statement names, read for update detection: digits, English number words and ordinals, Chinese numerals.

Split from :mod:`memlineage.reconcile._signals` (which re-exports :func:`numbers_in`) to keep each module short.
"""

from __future__ import annotations

import re

from memlineage._forget import text_cache
from memlineage.reconcile._text import EMAIL, with_digits

__all__ = ["DIGITS", "numbers_in"]

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
