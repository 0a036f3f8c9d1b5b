"""What a text says that could be evidence: its distinctive words, or nothing at all (an acknowledgement).

Shared by the capture recorder (premises of answers) and the chat history (premises of assistant messages), so that
every surface attributes premises by the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memlineage.models import Memory

__all__ = ["argument_values", "contains", "is_filler", "is_filler_memory", "salient", "topic"]

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


def argument_values(arguments: Any) -> list[str]:
    """The leaf values of tool arguments that can be traced to a memory (strings of 2+ characters, numbers)."""
    out: list[str] = []
    if isinstance(arguments, Mapping):
        for v in arguments.values():
            out.extend(argument_values(v))
    elif isinstance(arguments, (list, tuple)):
        for v in arguments:
            out.extend(argument_values(v))
    elif isinstance(arguments, bool) or arguments is None:
        pass
    elif isinstance(arguments, (int, float)):
        out.append(str(arguments))
    elif isinstance(arguments, str) and len(arguments.strip()) >= 2:
        out.append(arguments.strip())
    return out


def contains(text: str, value: str) -> bool:
    """Whether ``value`` occurs in ``text`` as whole words (case-insensitive)."""
    pattern = r"(?<![\w])" + re.escape(value.lower()) + r"(?![\w])"
    return re.search(pattern, text.lower()) is not None


def topic(text: str) -> set[str]:
    """Topic words of a text: salient words split at underscores, a plural ``s`` dropped.

    ``search_flights`` and "flight" share the topic word ``flight``.
    """
    out = set()
    for w in salient(text):
        for part in w.split("_"):
            if len(part) >= 4 and not any(ch.isdigit() for ch in part):
                out.add(part[:-1] if part.endswith("s") and len(part) > 4 else part)
    return out


def is_filler_memory(mem: Memory) -> bool:
    """Whether a stored memory is an acknowledgement (marked when written, or an agent's filler text)."""
    return bool(mem.metadata.get("filler")) or (mem.source.kind.value == "agent" and is_filler(mem.content))
