"""What a text says that could be evidence: its distinctive words, or nothing at all (an acknowledgement).

Shared by the capture recorder (premises of answers) and the chat history (premises of assistant messages), so that
every surface attributes premises by the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from memlineage.models import Memory

__all__ = [
    "argument_values",
    "asks",
    "contains",
    "has_bounded",
    "content_premises",
    "holders",
    "is_filler",
    "is_filler_memory",
    "names",
    "salient",
    "topic",
]

_WORD = re.compile(r"[\w'’-]+", re.UNICODE)
_ARG_NAME = re.compile(r"\b\w+=(?=[\s'\"\d\[{(-])")
_ASKS = re.compile(r"[?？]")
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

#: Discourse words (apologies, politeness, time fillers, correction cues): no subject matter, so never evidence that a
#: text rests on a memory ("Sorry, the service is down" does not rest on "Sorry, I meant Berlin").
_DISCOURSE = frozenset(
    """sorry apologies unfortunately please later right now again currently moment actually meant instead okay
    really still already maybe perhaps soon""".split()
)


def is_filler(text: str) -> bool:
    """Whether ``text`` is an acknowledgement or filler that asserts nothing ("Noted. I'll remember that.").

    Args:
        text: The text, in any language.

    Returns:
        ``True`` when every word is from a small acknowledgement vocabulary and there are at most 12 words.
    """
    words = [w.lower().strip("'’-") for w in _WORD.findall(text)]
    return bool(words) and len(words) <= 12 and all(w in _FILLER_WORDS for w in words)


def salient(text: str) -> set[str]:
    """Distinctive words of a text: numbers, identifiers, codes (``CHF``, ``NYC``) and 4+ letter non-stopwords."""
    out = set()
    for w in _WORD.findall(text):
        low = w.lower().strip("'’-")
        code = len(w) >= 2 and w.isupper() and w.isalpha() and low not in _STOPWORDS and w != "OK"
        if (
            any(ch.isdigit() for ch in low)
            or code
            or (len(low) >= 4 and low not in _STOPWORDS and low not in _FILLER_WORDS and low not in _DISCOURSE)
        ):
            out.add(low)
    return out


def argument_values(arguments: object) -> list[str]:
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
    r"""Whether ``value`` occurs in ``text`` as whole words (case-insensitive).

    The same test as ``(?<![\w])value(?![\w])`` on the lower-cased texts, without a regular expression: ``re``
    caches the patterns it compiles, and a pattern made of a memory's words would stay in the process after an
    erasure.
    """
    hay, needle = text.lower(), value.lower()
    return _occurs(hay, needle, lambda i, j: not _word_at(hay, i - 1) and not _word_at(hay, j))


def has_bounded(text: str, word: str) -> bool:
    r"""Whether ``word`` occurs in ``text`` between word boundaries, as ``re.search(rf"\b{re.escape(word)}\b", text)``.

    Case-sensitive; no regular expression (see :func:`contains`).
    """
    return _occurs(
        text,
        word,
        lambda i, j: _word_at(text, i - 1) != _word_at(text, i) and _word_at(text, j - 1) != _word_at(text, j),
    )


def _word_at(text: str, i: int) -> bool:
    r"""Whether ``text[i]`` is a word character of ``re``'s ``\w`` (alphanumeric or ``_``); False outside."""
    if i < 0 or i >= len(text):
        return False
    ch = text[i]
    return ch.isalnum() or ch == "_"


def _occurs(hay: str, needle: str, bounded: Callable[[int, int], bool]) -> bool:
    """Whether ``needle`` occurs in ``hay`` at some ``[i, j)`` where ``bounded(i, j)`` holds."""
    i = hay.find(needle)
    while i != -1:
        if bounded(i, i + len(needle)):
            return True
        i = hay.find(needle, i + 1)
    return False


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


def holders(pool: Sequence[Memory], values: Iterable[str], holds: Callable[[Memory, str], bool]) -> list[str]:
    """For each value, the ids of the most original memories holding it: the user's words, else a tool result.

    Else any holder: an answer or a tool argument repeating a value rests on what the user said or the tool found.

    Args:
        pool: Candidate memories.
        values: Values looked for, in order.
        holds: Whether a memory holds a value (e.g. :func:`contains` on its content).

    Returns:
        Memory ids, each once, in the order found.
    """
    found: list[str] = []
    for value in values:
        having = [m for m in pool if holds(m, value)]
        for kinds in (("user",), ("tool",), None):
            chosen = [m.id for m in having if kinds is None or m.source.kind.value in kinds]
            if chosen:
                found.extend(i for i in chosen if i not in found)
                break
    return found


def names(text: str) -> set[str]:
    """Lower-cased capitalised words that do not open a sentence ("Rome", "LX939"): what a question can name."""
    out = set()
    for m in _WORD.finditer(text):
        before = text[: m.start()].rstrip()
        if m.group()[0].isupper() and before and before[-1] not in ".!?。！？:;\"'“‘(":
            out.add(m.group().lower().strip("'’-"))
    return out


def content_premises(text: str, asked: str, pool: Sequence[Memory], *, names_only: bool = False) -> list[str]:
    """The memories of ``pool`` a text rests on by repeating what only they said (the ``"content"`` rule).

    The distinctive words of ``text`` that the question ``asked`` did not say are evidence; numbers and identifiers
    first, then words (the first class with a holder decides). When several memories hold a word, those about what
    the exchange is about (sharing its topic words) win; without a difference, the most original holder does (see
    :func:`holders`). A reply of the agent's that asks something back supplies no fact, so it is never a holder.

    Args:
        text: An answer.
        asked: The user's turn it answers (its words are not evidence); may be empty.
        pool: Memories it may rest on (the user turn itself left out by the caller).
        names_only: Only numbers, identifiers and names (:func:`names`) are evidence, not plain words: for a
            text that asks back ("Which city are you going to?" rests on no city guide that says "city").

    Returns:
        Memory ids, possibly empty.
    """
    pool = [m for m in pool if m.source.kind.value != "agent" or not asks(m.content)]
    words = salient(text) - salient(asked)
    if names_only:
        words = {w for w in words if any(ch.isdigit() for ch in w) or w in names(text)}
    # a tool result's argument names ("city=") are the tool's vocabulary, not something it said
    held = {m.id: salient(_ARG_NAME.sub(" ", m.content) if m.source.kind.value == "tool" else m.content) for m in pool}
    about_turn = topic(f"{text} {asked}")
    for group in ({w for w in words if any(ch.isdigit() for ch in w)}, words):
        found: list[str] = []
        for word in sorted(group):
            having = [m for m in pool if word in held[m.id]]
            about = {m.id: len((topic(m.content) - topic(word)) & about_turn) for m in having}
            best = max(about.values(), default=0)
            if best > 0:
                having = [m for m in having if about[m.id] == best]
            found.extend(i for i in holders(having, [word], lambda m, w: True) if i not in found)
        if found:
            return found
    return []


def asks(text: str) -> bool:
    """Whether a text asks something back (a question mark anywhere): a clarifying reply rests on no memory."""
    return bool(_ASKS.search(text))
