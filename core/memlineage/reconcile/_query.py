"""How a query names the speaker whose memories it searches (read-time conflict resolution).

An agent's memory tool writes "Where does the user live now?" where the user would ask "Where do I live?"; both ask
about the speaker (:func:`memlineage.reconcile._signals.asks_about_speaker`).
"""

from __future__ import annotations

import re

from memlineage._forget import text_cache

__all__ = ["as_speaker"]

#: The speaker named in the third person, as an agent's memory tool writes a query ("Where does the user live
#: now?", "the user's son", 用户现在住哪): the memories are the user's, so it is the speaker asked about.
_THE_USER = (
    (re.compile(r"\b(?:the|this|our|my) user['’]s\b", re.IGNORECASE), "my"),
    (re.compile(r"\b(?:the|this|our|my) user\b", re.IGNORECASE), "I"),
    (re.compile(r"用户的"), "我的"),
    (re.compile(r"用户"), "我"),
)


@text_cache(maxsize=4096)
def as_speaker(query: str) -> str:
    """A query with "the user" said as the speaker's own words ("What is the user's job?" → "What is my job?").

    Read-time resolution reads a query for whether it asks about the speaker
    (:func:`~memlineage.reconcile._signals.asks_about_speaker`) and which words it names; an agent's tools write
    "the user" where the user would say "I".
    """
    for pattern, repl in _THE_USER:
        query = pattern.sub(repl, query)
    return query
