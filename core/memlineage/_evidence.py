"""What a text says that could be evidence: its distinctive words, or nothing at all (an acknowledgement).

Shared by the capture recorder (premises of answers) and the chat history (premises of assistant messages), so that
every surface attributes premises by the same rule.
"""

from __future__ import annotations

import re

__all__ = ["is_filler", "salient"]

_WORD = re.compile(r"[\w'’-]+", re.UNICODE)
_FILLER_WORDS = frozenset(
    """noted ok okay sure got it i i'll ill i’ll will remember that this thanks thank you understood great alright
    all right done yes no problem glad to help happy of course anytime keep in mind sounds good perfect cool fine
    have saved note made a the and for let me know you're welcome youre welcome""".split()
)
_STOPWORDS = frozenset(
    """the a an and or of to in on at for from by with is are was were be been it its this that these those i you
    he she we they my your our their me him her us them what which who when where why how do does did have has had
    will would can could should may might must not no yes as if then than so too very just also about into over
    under after before there here some any all each more most other such only own same few both again further once
    please tell show find get give let make need want like know think see look go going book check""".split()
)


def is_filler(text: str) -> bool:
    """Whether ``text`` is an acknowledgement or filler that asserts nothing ("Noted. I'll remember that.").

    Args:
        text: Any text.

    Returns:
        ``True`` when every word is from a small acknowledgement vocabulary and there are at most 12 words.
    """
    words = [w.lower().strip("'’-") for w in _WORD.findall(text)]
    return bool(words) and len(words) <= 12 and all(w in _FILLER_WORDS for w in words)


def salient(text: str) -> set[str]:
    """Distinctive words of a text: numbers, identifiers and words of 4+ letters that are not stopwords."""
    out = set()
    for w in _WORD.findall(text):
        low = w.lower().strip("'’-")
        if any(ch.isdigit() for ch in low) or (len(low) >= 4 and low not in _STOPWORDS and low not in _FILLER_WORDS):
            out.add(low)
    return out
