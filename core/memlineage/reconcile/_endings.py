"""What a later message says of a state an older statement gave: that it ended, or that the speaker keeps it.

Both are read in the speaker's own words, without the query: "sold the jeep!!!" ends "paying $180 a month to park my
jeep downtown" (:func:`ends`); "Test drove a Model 3 today. Tempting, but the Outback is paid off so I'm keeping it"
keeps "I drive a 2018 Subaru Outback" (:func:`keeps`), though it names another car. The cue words are the language
tables' ``ending`` and ``staying`` lists; what ties the later message to the older statement is a word of the older
one, beyond the cue's own words.
"""

from __future__ import annotations

import re

from memlineage._forget import text_cache
from memlineage.extractors._patterns import tables_for
from memlineage.index.lexical import tokenize
from memlineage.reconcile._about import _topic_words
from memlineage.reconcile._signals import Clause, clauses_of
from memlineage.reconcile._text import _TIME_WORDS


def _clause_words(clause: Clause) -> frozenset[str]:
    """A clause's topic words and keys, without digits or words of when (they recur across topics)."""
    keys = {k for key in clause.keys for k in tokenize(key, dates=False) if not any(ch.isdigit() for ch in k)}
    return frozenset(w for w in _topic_words(clause.terms) | keys if not _TIME_WORDS.search(w))


def _own_words(match: re.Match[str]) -> frozenset[str]:
    """The words of a cue's match that are the cue's own ("put", "sleep"), not its ``obj`` ("Mochi")."""
    obj = match.groupdict().get("obj")
    return frozenset(tokenize(match.group(0), dates=False)) - frozenset(tokenize(obj or "", dates=False))


@text_cache(maxsize=16384)
def _said(older: str) -> frozenset[str]:
    """The words of ``older``'s stated clauses (:func:`_clause_words`), shared by :func:`ends` and :func:`keeps`."""
    return frozenset().union(*(_clause_words(c) for c in clauses_of(older) if not c.question))


@text_cache(maxsize=16384)
def ends(older: str, newer: str) -> bool:
    """Whether a newer message ends a thing an older statement said the speaker had or did.

    A clause of ``newer`` that says an ending (the ``ending`` table: "sold the jeep", "we had to put Mochi to sleep",
    "gave up on keto", 吉普卖了) and a word a stated clause of ``older`` holds, beyond the ending's own words:
    "paying $180 a month to park my jeep downtown" / "sold the jeep!!! doing a year carless". An ending is told as
    an event, in any tense; the clause comparison of :func:`~memlineage.reconcile._compete.competes` reads such a
    clause as the past and skips it. A clause asked, supposed or said of another person ends nothing here; whether
    the newer message is the same speaker's, and about the speaker, is the caller's check.
    """
    table = tables_for(newer)[0]
    said = _said(older)
    for c in clauses_of(newer):
        if c.asks or c.hypothetical or c.subject not in (None, "self"):
            continue  # "if I ever quit nursing ...", "should I quit ...?", "my sister sold hers"
        found = [m for p in table.ending for m in p.finditer(c.text)]
        if found and (_clause_words(c) - frozenset().union(*map(_own_words, found))) & said:
            return True
    return False


#: A turn of the message before a staying said on its own: something else was weighed ("Looked at switching to
#: Verizon, but ..., so I'm staying", "tempting, but", 不过).
_WEIGHED = re.compile(r"\b(?:but|though|although|however|tempting)\b|但是?|不过|可是", re.IGNORECASE)
#: Words that stand for the thing kept without naming it ("keeping it").
_PRONOUNS = frozenset("it them him her mine ours one".split())


@text_cache(maxsize=16384)
def keeps(older: str, newer: str) -> bool:
    """Whether a newer message says the speaker keeps what an older statement said: an option turned down.

    A clause of ``newer``, stated or supposed by the speaker, that says a staying (the ``staying`` table: "I'm
    keeping it", "sticking with", "staying put", 不换了) keeps the older statement when:

    - the thing it keeps is named and a stated clause of ``older`` holds its word ("Insurance denied the Ozempic, so
      I'm sticking with the metformin" keeps "I take metformin, 500 mg"; "keeping my job" after a move keeps the
      job, not the home);
    - or, in a message with no update cue (:meth:`~memlineage.extractors._patterns.LanguageTable.is_correction`:
      "Switched to oat milk, I'm sticking with it" keeps the new milk), the clause names a word of ``older`` beyond
      the cue's own ("the Outback is paid off so I'm keeping it"), or names no key after a turn that weighed
      something else ("Looked at switching to Verizon, but T-Mobile's offer to keep me was better, so I'm staying").

    Whether the newer message ends the older state (:func:`ends`) is the caller's check, made first.
    """
    table = tables_for(newer)[0]
    if not any(p.search(newer) for p in table.staying):
        return False  # most messages say no staying: nothing to read (recall asks per pair)
    said = _said(older)
    moved = table.is_correction(newer)
    for c in clauses_of(newer):
        if c.asks or c.past or c.subject not in (None, "self"):
            continue  # "should I stick with it?", "my sister is keeping hers"
        found = [m for p in table.staying for m in p.finditer(c.text)]
        if not found:
            continue
        named = frozenset(tokenize(" ".join(m.groupdict().get("obj") or "" for m in found), dates=False)) - _PRONOUNS
        if named:
            return bool(named & said)
        if moved:
            continue
        rest = _clause_words(c) - frozenset().union(*map(_own_words, found))
        at = newer.find(c.text)
        if rest & said or (not c.keys and _WEIGHED.search(newer[: max(at, 0) + found[0].start()])):
            return True
    return False
