"""Read-time conflict resolution: among memories that compete for one query, the later statement ranks first.

Update detection at write time can miss a correction (a wording no table knows, an update spread over two turns,
a value buried in a long message). Recall therefore checks the memories it is about to serve: two live memories of
the same speaker *compete* for a query when they answer it in the same way, i.e. their clauses that best match the
query say nearly the same about the same subject (word similarity of those clauses, see
:func:`~memlineage.reconcile._signals.clause_similarity`), or when update detection recorded the newer one as a
*possible update* of the older. The later one by event time then ranks first and the earlier is demoted: it goes
after every other hit of the window (it is served when nothing else relevant is left; its score is multiplied by
``older_weight`` and capped below the last hit ahead of it) and is marked with the newer one's id; nothing is
written.

*Contenders*: when the query asks the speaker about themselves ("Which city do I live in?", "我儿子现在几岁？"), two of
the speaker's :data:`CONTENDERS` best-ranked statements compete without shared words or close meaning, provided
something beyond ranking ties them (a shared key, a differing time, place or number, vectors not unrelated, the newer
message naming a name the older one gave: "the XPS is going in the donation box"; for Chinese a shared content bigram)
and the newer one gives a value the older does not (for Chinese, one that gives no value of the asked kind must share
a topic word with the older statement or the query: "我平时都用微信读书" never replaces "我平时在望京上班");
for English, one must also be among the other's
:data:`~memlineage.reconcile._successors.NEAREST` nearest statements of the speaker in meaning on its side of time
(:func:`~memlineage.reconcile._successors.nearest_pairs`). Implicit updates ("The skylight in our new Portland
apartment is loud") share nothing else with what they replace. A contender's *successor* contends with it too,
however the query ranks it: the speaker's later statement whose vector is nearest its own among the hits that share a
content word with it alone (:mod:`memlineage.reconcile._successors`; "我住在上海浦东" /
"来杭州之后房租省了一半，每周回上海开会": the query's words are in the older one only). Recall's
candidates below the window (``reserve``) are searched for it too, and a later statement that replaces one of the
answers served moves up into them (never above an answer ranked higher).
A later statement that *ends* what an older one said ("sold the jeep!!!", 吉普卖了: an ``ending`` cue of the tables and
a word of the older statement, :func:`~memlineage.reconcile._endings.ends`) replaces it, told in any tense.

What never competes: a clause that does not state the present (a question, a request, a supposition, a past state:
"I used to live in Phoenix"), an option weighed and turned down ("Tempting, but the Outback is paid off so I'm
keeping it": :func:`~memlineage.reconcile._endings.keeps`), an addition ("we also got a kitten"; a name of the older
statement said to still be: "We adopted a kitten! ... Rufus is confused"), a state for a while only ("this week",
"loaner", 临时), another thing of the kind a qualifier picks ("What's my personal number?" / "Work gave me a phone,
617-555-0190"; the table's ``contexts``), a question asking for several things ("What pets do we have?"), clauses
about different people ("my daughter is 7" / "my son is 10"; for a query about the speaker, a newer message naming
another person the older one does not, outside a question or request), an older clause that answers more of the
query than the newer one ("how old is my daughter?"), the value of another owner or of another thing ("reception's
extension is 4417" for the speaker's extension, "Toured a 2-bed for $2,100" for the rent), a number of another unit
("500mg" / "two days"), the name of a pet just added ("a hamster too. His name is Peanut"), a place said as a past
state ("I used to live in Minneapolis, so ... 55"), a newer statement from a source that may not update the older
(an agent never outranks what the user said; a tool's result only an earlier result of the same tool for the same
arguments). A query about the past ("where did I live before Minneapolis?", "what was the first quote?") turns the
rule round: the earlier statement of each competing pair ranks just ahead of the later one, which matched the
question's words best; memories that are a transcript of named speakers (``[8 May 2023] Caroline: ...``, a
conversation between other people kept as memory) are dialogue, reordered by recorded possible updates only; and for
a question about what happened ("When did I go…?", ``event_query`` cues) two events never compete. A query that
names "the user" (as an agent's memory tool writes it: "Where does the user live now?") asks about the speaker
(:func:`~memlineage.reconcile._query.as_speaker`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from memlineage.extractors._patterns import has_cjk, tables_for
from memlineage.extractors._rules import transcript_speaker
from memlineage.models import Memory, SourceKind
from memlineage.reconcile._about import (
    _another_thing,
    _answering,
    _echoes,
    _identifiers,
    _moved,
    _names_someone,
    _new_kind,
    _refers_back,
    _same_name,
    _shapes,
    _share_char,
    _someone_in,
    _still_there,
    _topic_words,
    _tying,
    _value_names_someone,
    _words,
    added_before,
    continued_subject,
    for_a_while_at_value,
    named_before_value,
    number_of_another_thing,
    owned_by_another,
    said_in,
    weighs,
)
from memlineage.reconcile._endings import ends, keeps
from memlineage.reconcile._numbers import units_of
from memlineage.reconcile._placing import Conflict, _earlier_first, _served_newer
from memlineage.reconcile._query import as_speaker
from memlineage.reconcile._signals import (
    Clause,
    _any,
    answer_type,
    asks_about_events,
    asks_about_past,
    asks_about_speaker,
    asks_for_many,
    clause_similarity,
    clauses_of,
    focus,
    for_a_while,
    key_terms,
    mentions,
    numbers_in,
    present_values,
    query_people,
    query_terms,
    times_in,
    values_around,
    values_of,
    values_of_query,
)
from memlineage.reconcile._successors import (
    CONTENDERS,
    _closeness,
    _predecessors,
    _successors,
    _when,
    nearest_pairs,
    speaker,
    speaker_ranks,
)
from memlineage.reconcile._text import codes, with_digits
from memlineage.retrieval import RecallHit

__all__ = ["Conflict", "competes", "resolve_conflicts"]

#: Clause similarity at or above which two statements of one speaker answer a query in the same way (with a changed
#: value), and at or above which they restate each other (without one).
COMPETE_SIMILARITY = 0.3
RESTATED = 0.6
#: Cosine similarity of the two memories' vectors at or above which they answer a query in the same way although
#: their words differ ("Our beagle Biscuit is 9" / "We adopted a retired greyhound named Comet").
COMPETE_COSINE = 0.5
#: Cosine at or above which two statements compete when the newer one names a word of the query or a key of the
#: older one (the query anchors what they are about; their subjects need not be named).
ANCHOR_COSINE = 0.4
#: Cosine below which two English statements are about unrelated things: the weakest rule (contenders) never pairs
#: them. With MiniLM, implicit updates lie at 0.16-0.5 ("renting in Denver" / "unpacked in our new Portland
#: apartment" 0.26; the few below 0.2 are lost) and other topics of one user mostly below 0.2.
UNRELATED_COSINE = 0.2
#: Cosine at or above which the weakest rule lets a newer statement contend although it is less than half as close to
#: the query as the older one (but a third at least): an implicit update is said in other words than the query's.
IMPLICIT_COSINE = 0.3


def _may_outrank(newer: Memory, older: Memory) -> bool:
    """Whether ``newer``'s source may stand for a later value of what ``older`` said (see the module docstring)."""
    new_kind, old_kind = newer.source.kind, older.source.kind
    if transcript_speaker(newer.content) != transcript_speaker(older.content):
        return False
    if new_kind is SourceKind.USER:
        return old_kind in (SourceKind.USER, SourceKind.AGENT)
    if new_kind is SourceKind.TOOL:
        return str(newer.source) == str(older.source) and newer.slot is not None and newer.slot == older.slot
    # an agent's or model's later text restates, explains or answers; it never stands for a new value of a fact
    return False


def _is_event(text: str) -> bool:
    return tables_for(text)[0].is_event(text)


def _one_conversation(a: Memory, b: Memory) -> bool:
    """Same session; or, without session ids, written within an hour of each other."""
    if a.scope.session_id is not None or b.scope.session_id is not None:
        return a.scope.session_id == b.scope.session_id
    return abs((_when(a) - _when(b)).total_seconds()) < 3600.0


#: A number standing alone or as an ordinal or a time ("5th", "10:30", "$1,975"), not inside an identifier ("2A").
_NUMBER_TOKEN = re.compile(r"(?<![A-Za-z0-9])\d+(?:[.,:]\d+)*(?:st|nd|rd|th|am|pm|k)?(?![A-Za-z0-9])", re.IGNORECASE)
#: A question for what something is called ("What's our dog called?", "my cat's name").
_ASKS_NAME = re.compile(r"\b(?:called|name|named)\b", re.IGNORECASE)


def competes(
    query: str,
    older: Memory,
    newer: Memory,
    *,
    cosine: float | None = None,
    relevance: tuple[float, float] | None = None,
    linked: bool = False,
    contenders: bool = False,
    nearest: bool = True,
) -> tuple[str, float] | None:
    """Whether ``newer`` answers ``query`` the way ``older`` does, as a later statement of the same speaker.

    Args:
        query: The recall query.
        older: The earlier memory (by event time).
        newer: The later memory.
        cosine: Cosine similarity of the two memories' vectors in [-1, 1], when known: close meaning counts like
            shared words (at :data:`COMPETE_COSINE`, or 0.3 when the older one weighed options).
        relevance: ``(older, newer)`` closeness to the query in [0, 1] (cosine), when known; the newer one must
            reach a fifth of the older one's for a changed value, half for closeness in meaning (a third for
            Chinese text, which the default English embedder reads loosely).
        linked: Update detection recorded ``newer`` as a possible update of ``older``: they compete when the
            clauses pass every check but similarity.
        contenders: Both are among the :data:`CONTENDERS` statements of their speaker that best match the query
            (as recall ranked them): the query itself says what they are about. When the query asks the speaker
            about themselves, or about someone the older statement names ("How old is Leo now?"), and the clauses
            pass every check, they compete without shared words or close meaning.
        nearest: For English text, that weakest rule also asks that one be among the other's nearest statements
            of the speaker in meaning on its side of time, among the hits
            (:func:`~memlineage.reconcile._successors.nearest_pairs`); False when neither is. Default True (no hits
            to compare with; also passed when either has no vector).

    Returns:
        ``(reason, similarity)`` when they compete, else None. Similarity is in [0, 1], higher = closer.
    """
    if not _when(older) < _when(newer) or not _may_outrank(newer, older):
        return None
    query = as_speaker(query)
    if not linked and _one_conversation(older, newer):
        # Within one conversation later turns go on with the topic; a correction said there carries a cue or the
        # same words, which update detection reads when it is written.
        return None
    # both statements fill a known slot and the slots differ ("I live in Minneapolis" / "I'm a nurse at Mass
    # General"): two attributes of the speaker, which the weakest rule never pairs
    other_slot = older.slot is not None and newer.slot is not None and older.slot != newer.slot
    if not linked and asks_for_many(query):
        return None  # several answers hold at once ("What pets do we have?"): a later one replaces none
    wanted = query_terms(query)
    kind = answer_type(query)
    cue = tables_for(newer.content)[0].is_correction(newer.content)
    events = asks_about_events(query)
    best: tuple[float, Clause, Clause] | None = None
    eligible = False  # some pair of clauses passed every check but similarity
    settles = False  # the older clause weighed options ("leaning toward the red one"), the newer one states
    same_subject = False  # some eligible pair names the same subject on both sides
    anchored = False  # some eligible pair's newer clause names a word of the query or a key of the older clause
    paired = False  # some eligible pair shares a content word or key, and both clauses name a word of the query
    keyed = False  # some eligible pair shares a key (an entity, number or date)
    kin = False  # some eligible pair shares a content word or key
    both_asked = False  # some eligible pair's older clause names the person the query asks about (the newer goes on)
    novel = False  # some eligible pair's newer clause gives a value of the asked kind the older does not, or none
    fresh = False  # ... gives a value of the asked kind the older does not (not merely none to compare)
    topical = False  # some eligible pair's newer clause names a word of the query that names a topic (not 平时, 现在)
    asked_about = query_people(query)
    # a question that names nobody asks the speaker about their own world ("How many guests are coming to the
    # wedding?" is the speaker's wedding): it is about the speaker as much as "my wedding" would be
    about_me = asks_about_speaker(query) or not asked_about
    other_value: tuple[frozenset[str], frozenset[str]] | None = None  # (older, newer) values of the asked kind
    changed_pair = ("", "")  # the (older, newer) clauses that gave other_value
    ided = False  # other_value's two sides are identifiers
    gave = kind is None  # some eligible newer clause gives a value of the asked kind (or a number, for a time)
    shaped = False  # other_value's two sides have one shape (two addresses, two phone numbers, "Pixel 6" / "iPhone 15")
    temporary = for_a_while_at_value(newer.content) and not for_a_while(older.content)
    same_speaker = newer.source.kind is older.source.kind
    # ... a person named only in a question or request ("Can you help me write a note to my manager?") is whom the
    # speaker asks about, not whom the statement is about
    stating = " ".join(c.text for c in clauses_of(newer.content) if not c.asks) or newer.content
    others = _names_someone(stating) and not _names_someone(older.content)
    # the newer message names a name the older statement gave, in any clause ("the XPS is going in the donation box",
    # "卡罗拉卖给我表弟了"): it speaks of what the older one said, although it may never repeat the query's words
    echoes = _echoes([c for c in clauses_of(older.content) if not c.question], newer.content, wanted)
    if contenders and same_speaker and about_me and not others and ends(older.content, newer.content):
        return "a later statement of the same speaker ends what the earlier one said", round(cosine or 0.0, 3)
    if same_speaker and keeps(older.content, newer.content):
        return None  # "Test drove a Model 3. Tempting, but the Outback is paid off so I'm keeping it": turned down
    for cb in _answering(newer.content, wanted, kind):
        if not cb.asserts_present or cb.additive or not cb.substantive:
            continue  # a question (also one typed without "?": "is oat milk better"), a supposition, the past
        if temporary:
            continue  # for a while only ("this week the meeting moved to Tuesday"): the standing value holds
        if _another_thing(query, cb.text, newer.content):
            continue  # asked for the personal number, the newer clause gives the work phone's
        if not cue and added_before(cb, newer.content):
            continue  # "Kids talked me into a hamster too. His name is Peanut.": the added one's name
        if not has_cjk(cb.text) and owned_by_another(cb.text, wanted, asked_about):
            continue  # asked for the speaker's extension, the newer clause gives reception's
        if kind == "number" and not cue and number_of_another_thing(cb, wanted):
            continue  # asked for the rent, the newer clause gives the price of "a 2-bed" toured
        # the newer clause's values of the asked kind, without those of a past it names
        cb_values = present_values(cb, kind) if kind is not None else frozenset()
        if kind is not None and not cb_values and values_of(cb, kind):
            continue  # its value is one it had before ("I used to live in Minneapolis, so ...")
        # the newer message names another person the older does not, where it gives the value (see _someone_in)
        named = others and _someone_in(cb.text, newer.content)
        for ca in focus(older.content, wanted):
            if ca.question or not ca.substantive:
                continue  # nothing to replace
            if ca.hypothetical:
                settles = True  # a plan or option weighed before: a later statement on the topic settles it
            ca_asked = bool(asked_about) and mentions(ca, asked_about)  # it names whom the query asks about
            if ca.subject is not None and cb.subject is not None and ca.subject != cb.subject:
                # about different people, unless both name the one the query asks about ("My brother Sam pointed out
                # mom's birthday is the 16th" after "My mom's birthday is June 14", asked "When is Mom's birthday?"),
                # or the newer one's subject is the thing the query names and the older is the speaker's ("My
                # dermatologist appointment is March 3rd" / "Dermatologist's office called, they pushed me to the 10th")
                both = ca_asked and named_before_value(
                    cb, asked_about, kind, values_of(ca, kind) if kind else frozenset()
                )
                # ... or the newer one is the speaker's and the older one's subject is a thing the query names, asked
                # of nobody ("Wedding's booked: June 14" / "We took their September 20 slot", for "my wedding")
                thing = not asked_about and cb.subject == "self" and _names_asked(ca.subject, wanted)
                if not both and not thing and not (ca.subject == "self" and _names_asked(cb.subject, wanted)):
                    continue
            qa = wanted & (ca.terms | ca.keys | key_terms(ca))
            qb = wanted & (cb.terms | cb.keys | key_terms(cb))
            if (qa - qb) & key_terms(ca) and times_in(cb.text) - times_in(ca.text):
                # the query names a key only the older clause holds, and the newer one names another time ("in the
                # morning" / "in the evenings"): another context. Not restating it ("my flight to Denver" / "they
                # put me on the June fourth one") changes nothing.
                continue
            # a number on both sides that changed is a changed value too (Chinese numerals are no keys: "八千五")
            na, nb = numbers_in(ca.text), numbers_in(cb.text)
            # the person asked about is checked below (a pronoun may stand for them): no context left out
            left_out = frozenset(t for t in _words(qa - qb) if not any(p in t or t in p for p in asked_about))
            if has_cjk(ca.text + cb.text) and len(left_out) < 2:
                # Chinese terms are bigrams: a word left out shows as itself and its seam with a neighbour; one
                # bigram alone is a seam ("园上" of 幼儿园上中班 for 哪个幼儿园上学)
                left_out = frozenset()
            if not (ca.keys ^ cb.keys) and not (na and nb and na != nb) and qb and left_out and qb <= qa:
                # no entity, number or date changed, and the newer clause leaves out a word of the query the older
                # one answers: another context ("tea in the evening" for "what do I drink in the morning?")
                continue
            if (
                events
                and not cue
                and (tables_for(ca.text)[0].is_event(ca.text) or tables_for(cb.text)[0].is_event(cb.text))
            ):
                continue  # asked what happened: two events are two events
            if (
                ca_asked
                and not mentions(cb, asked_about)
                and not _refers_back(ca, cb, asked_about, kind, newer.content)
            ):
                # the query asks about someone ("How old is Ava?") the newer clause does not name; unless both
                # name the same person otherwise ("School pickup for Lena" / "Lena's school switched", asked about
                # "my daughter"; "My husband Jon works at Boeing" / "Jon landed at Blue Origin")
                # ... or the newer one corrects a value of the asked kind and names nobody ("不对不对 我记错了 是5月21"
                # after "我妈生日是5月12号": a correction goes on with what was said)
                corrects = cue and kind is not None and bool(values_of(cb, kind)) and not _names_someone(cb.text)
                # ... or the newer message names the older one's name and this clause gives another value ("My
                # manager is Ana Ruiz" / "Ana moved to the Denver office, so I report to Sam Cole now")
                succeeds = echoes and kind is not None and bool(values_of(cb, kind) - values_of(ca, kind))
                if not _same_name(ca, cb) and not corrects and not succeeds:
                    continue
            if (
                not asked_about
                and about_me
                and cb.subject not in (None, "self")
                and not _names_asked(cb.subject, wanted)
            ):
                # the query asks about the speaker; the newer clause is about someone else ("我老板…"), not about what
                # the query names ("Dentist's office called, had to move me to the 16th" for "my dentist appointment")
                continue
            if not asked_about and about_me and named and not (cue and not _value_names_someone(cb.text)):
                # ... or names another person the older clause does not ("给儿子办了生日会"); a correction whose new
                # value is said without them is still the speaker's ("密码被我改成 Mao@8866 了，楼下邻居一直在蹭")
                continue
            if _ASKS_NAME.search(query) and _new_kind(wanted - key_terms(ca), newer.content):
                continue  # asked about the dog, the newer message adopts a kitten: another animal, not a new name
            if _still_there(ca.text, newer.content):
                continue  # "We adopted a kitten! Her name is Pepper. Rufus is confused": Rufus is still there
            units = (units_of(ca.text), units_of(cb.text))
            if kind == "number" and units[0] and units[1] and not units[0] & units[1]:
                continue  # numbers of different things ("metformin 500mg" / "skip it two days after")
            eligible = True
            same_subject = same_subject or (ca.subject is not None and ca.subject == cb.subject)
            # Chinese clauses are whole sentences; one content word (bigram) they share anchors them ("羽毛球")
            shared = (tie := _tying(ca, cb)) or bool(_topic_words(ca.terms & cb.terms))
            keyed = keyed or tie
            kin = kin or shared
            both_asked = both_asked or ca_asked
            anchored = anchored or bool(_words(qb)) or shared
            topical = topical or bool(_topic_words(qb))
            paired = paired or (shared and bool(_words(qa)) and bool(_words(qb)))
            if kind is not None:
                # the values the question names itself ("How old is Theo?") are not its answer
                asked = wanted | {k.casefold() for k in values_of_query(query, kind)}
                va, vb = present_values(ca, kind) - asked, cb_values - asked
                # a clause that matches the query without its value: the value said next to it in the message
                va = va or values_around(older.content, kind, ca.subject) - asked
                vb = vb or values_around(newer.content, kind, continued_subject(cb, ca)) - asked
                if kind == "entity" and not va and not vb:
                    # "what" asks for anything, a number included ("What's the most we'll spend?")
                    va, vb = numbers_in(ca.text) - asked, numbers_in(cb.text) - asked
                # the first pair of differing values, or a later pair of identifiers ("Fastmail" / "jordan@..." is no
                # pair; the address in the next sentence is)
                if va and vb and va != vb and (other_value is None or (_identifiers((va, vb)) and not ided)):
                    other_value = (va, vb)
                    changed_pair = (ca.text, cb.text)
                    ided = _identifiers(other_value)
                    shaped = bool(_shapes(ca.text, va) & _shapes(cb.text, vb))
                # a new value of the asked kind, or none to compare; the same value again ("Denver winters are
                # brutal" after "I live in Denver") changes nothing. A time or a number is replaced only by a clause
                # with digits in it: one that has none ("cute anniversary card message") says nothing about it.
                # digits ("moved to the 5th") or a Chinese numeral ("提到了三十二万")
                loose = (
                    kind not in ("time", "number")
                    # a number, not digits inside an identifier ("seat 2A" gives no date)
                    or bool(_NUMBER_TOKEN.search(with_digits(cb.text)))  # "by a quarter to three"
                    or (has_cjk(cb.text) and bool(numbers_in(cb.text)))
                    # ... or an amount changed by a factor ("the doc doubled my lisinopril", 药量减半)
                    or (kind == "number" and _any(tables_for(cb.text)[0].rescaled, cb.text))
                )
                # ... or the same place or thing with another number ("86 Harbor Rd not 88": an address changed)
                # ... or a day ("14 June" / "21 June": the month is the same value)
                renumbered = (
                    kind in ("place", "entity", "time")
                    and bool(va & vb)
                    and bool(nb - na)
                    and bool(na - nb)
                    and not (units[0] and units[1] and not units[0] & units[1])  # "300 Mbps" / "$10 more"
                )
                # ... or another code of letters and digits ("QX7HTR" / "QX7HTP" for a confirmation number)
                recoded = bool(codes(cb.keys) - codes(ca.keys)) and bool(codes(ca.keys))
                fresh = fresh or bool(vb and not vb <= va) or renumbered or recoded
                novel = novel or (not vb and loose) or fresh
                gave = gave or bool(vb) or loose
            else:
                novel = True
            sim = clause_similarity(ca, cb)
            if best is None or sim > best[0]:
                best = (sim, ca, cb)
    if linked and eligible:
        return "recorded as a possible update", round(best[0], 3) if best is not None else 0.0
    if best is None or best[0] < COMPETE_SIMILARITY:
        cjk = has_cjk(older.content + newer.content)  # the default embedder is English: no cosine for Chinese
        if other_value is not None and (relevance is None or relevance[1] >= 0.2 * relevance[0]):
            # both give a value of the kind the question asks for, and the values differ, and the two statements are
            # related in meaning or share words (more so for "what/which"), or the values have one shape (two phones)
            strict = kind == "entity"
            words = best[0] if best is not None else 0.0
            close = not cjk and cosine is not None and cosine >= (0.45 if strict else 0.35)
            if close or words >= (0.25 if strict else 0.15) or (shaped and ided):
                old_v, new_v = "/".join(sorted(other_value[0])[:2]), "/".join(sorted(other_value[1])[:2])
                score = cosine if cosine is not None else (best[0] if best is not None else 0.0)
                return f"a later statement of the same speaker gives another {kind}: {old_v} → {new_v}", round(
                    float(score), 3
                )
        # (the default embedder is English: a Chinese statement's closeness to the query says less, a third will do)
        relevant = relevance is None or relevance[1] >= (0.3 if cjk else 0.5) * relevance[0]
        # a value of the asked kind that differs (a city, a date, a number) lets a weaker match contend, as below
        # ... and so does an identifier that changed (an e-mail address, a phone number): no name is that specific
        valued = other_value is not None and (kind != "entity" or ided or shaped)
        # related beyond ranking: shared words with the query or the older clause; for English also values of the
        # asked kind on both sides, some closeness in meaning (Chinese vectors are too loose for it), or another
        # value in a clause that names a word of the query ("Traded in the old car ... a used Subaru": swapped)
        said_now = _words(wanted & said_in(newer.content))
        swapped = other_value is not None and bool(_words(wanted & said_in(changed_pair[1])))
        if cjk:
            # a shared word; or a value that moved (see _moved) in statements sharing a less common character
            moved = _moved(kind, other_value)
            related = anchored or echoes or (moved and _share_char(changed_pair, query))
        else:  # a query word alone is weak in English ("food" in "I can taste food again"): with some closeness only,
            # or where both clauses name the query's words and share one ("I catch the 7 bus to work" / "bought a road
            # bike, I get to work in 20 min now")
            near = cosine is not None and cosine >= ANCHOR_COSINE
            related = near or keyed or valued or echoes or swapped or paired or (anchored and (cosine or 0.0) >= 0.3)
        # a changed value lets a statement far less close to the query contend; a time or a number only when
        # something beyond the kind of value ties the two ("Yoga is every Wednesday at 7pm" / "My knee surgery is
        # booked for November 4th" are two times and nothing more; a city is specific, a time is everywhere)
        tied = (
            kind not in ("time", "number")
            or shaped
            # ... or the newer message says it corrects something and gives another value of the kind in the same
            # unit ("Scratch that number. … we're capping it at $18,000" after "Our budget … is $25,000"; not "scratch
            # that, … 14 it is" of a screen size after a budget)
            or (cue and other_value is not None and bool(units_of(older.content) & units_of(newer.content)))
            or anchored
            or cjk
            or (cosine is not None and cosine >= ANCHOR_COSINE)
        )
        # ... and so does a newer message that names the older value ("the XPS is going in the donation box"): it is
        # about what the older one said though its words are not the query's
        # ... and so does a newer statement close in meaning to the older one, if not far less close to the query: an
        # implicit update is said in other words than the query's ("They made me team lead for the analytics group"
        # for "What's my role at work?"); another topic of the same user is mostly below that closeness
        older_rel, newer_rel = relevance if relevance is not None else (0.0, 0.0)  # None: ``relevant`` holds
        valued_close = (valued and tied or echoes and novel) and newer_rel >= 0.2 * older_rel
        implicit = (cosine or 0.0) >= IMPLICIT_COSINE and newer_rel >= 0.3 * older_rel
        close_enough = relevant or valued_close or implicit
        # the weakest rule (the query alone says what both are about): one speaker's statements only, never an
        # answer of the assistant's demoted by what the user said later
        # ... nor when the older statement names words of the query the newer message says none of ("What's my unit
        # number?": "I'm in unit 4B" / "management changed the door code to 7741" is about something else), unless
        # a key, an identifier or a shared content word ties them (a new address says no "email"; "I walk to work by
        # the canal" / "they fenced off the canal path")
        said_before = _words(wanted & frozenset().union(*(c.terms | c.keys for c in focus(older.content, wanted))))
        strays = not cjk and bool(said_before) and not said_now and not (ided or shaped or keyed or echoes or kin)
        # ... and never two English statements whose vectors say they are about unrelated things ("I work at
        # Google" / "oops, meant Dallas, Austin's where I grew up"), unless they share a key or swap a value
        unrelated = not cjk and cosine is not None and cosine < UNRELATED_COSINE and not (keyed or swapped)
        # ... nor, in English, two statements that each have statements nearer in meaning on the other's side of time
        # ("I live in Montreal" / "i teach 8th grade science at Millbrook Middle": the user's only two answers)
        if (
            eligible
            and contenders
            and not strays
            and close_enough
            and related
            and novel
            and (about_me or both_asked)
            and same_speaker
            and not unrelated
            and (nearest or cjk)
            # ... and, for Chinese (the default embedder says nothing of it), a newer statement that gives no value
            # of the asked kind replaces one only when it shares a topic word with the older one or the query ("住南京"
            # is not replaced by "我和小李分了"; "药已经停了" is about 过敏药); a question about the past names the
            # newer value itself ("搬到大连之前住在哪儿？")
            and (not cjk or kind is None or fresh or kin or topical or echoes or asks_about_past(query))
            and not other_slot
            and not weighs(newer.content, kind)
        ):
            return "the later of the speaker's two statements that best answer the query", round(
                best[0] if best is not None else 0.0, 3
            )
        if eligible and cjk and paired and relevant:
            # the default embedder is English: for Chinese, the query anchors what the two statements are about
            return "a later statement of the same speaker answers the query's words", round(
                best[0] if best is not None else 0.0, 3
            )
        # the English embedder says nothing about Chinese text; closeness in meaning replaces nothing the question
        # asks of a kind the newer statement gives no value of ("cute anniversary card message" for a date)
        if eligible and not cjk and cosine is not None and novel:
            if settles and cosine >= 0.3:
                return "a later statement of the same speaker settles an option weighed before", round(cosine, 3)
            if relevant and cosine >= COMPETE_COSINE and same_subject:
                return "a later statement of the same speaker is close in meaning", round(cosine, 3)
            if relevant and cosine >= ANCHOR_COSINE and anchored:
                return "a later statement of the same speaker on what the query asks is close in meaning", round(
                    cosine, 3
                )
        return None
    sim, ca, cb = best
    if not novel and not (cue and gave):
        # the newer statement gives no value of the kind asked (no digits for a date): nothing replaced, even after
        # a cue ("Got moved to coach B, seat 42F" moves the seat, not the date)
        return None
    changed = sorted((cb.keys - ca.keys) | (ca.keys - cb.keys))
    if not changed and numbers_in(ca.text) == numbers_in(cb.text) and sim < RESTATED:
        cjk = has_cjk(older.content + newer.content)
        # Chinese clauses are whole sentences: the shared words name the topic ("羽毛球"), the rest the change. In
        # English a value need not be a name ("almond milk" / "oat milk", "aisle" / "window"): each side then says
        # a word the other does not, and the two statements are close in meaning.
        swapped = bool(_words(cb.terms - ca.terms - wanted)) and bool(_words(ca.terms - cb.terms - wanted))
        close = cosine is not None and cosine >= ANCHOR_COSINE
        if (
            contenders
            and about_me
            and novel
            and same_speaker
            and _words(cb.terms - ca.terms)
            and (cjk or (swapped and close))
        ):
            return "the later of the speaker's two statements that best answer the query", round(sim, 3)
        return None  # the same topic, no value changed: two facts about it, both may hold
    reason = "a later statement of the same speaker says the same about it"
    if changed:
        reason += f" with {'/'.join(changed[:4])[:60]} changed"
    return reason, round(sim, 3)


def _names_asked(subject: str | None, wanted: frozenset[str]) -> bool:
    """Whether a clause's subject is a thing the query names ("dentist" for "When is my dentist appointment?")."""
    return subject is not None and bool(query_terms(subject) & wanted)


def resolve_conflicts(
    query: str,
    hits: Sequence[RecallHit],
    *,
    links: Mapping[tuple[str, str], str] | None = None,
    vectors: Mapping[str, np.ndarray] | None = None,
    older_weight: float = 0.5,
    reserve: Sequence[RecallHit] = (),
    served: int | None = None,
) -> tuple[list[RecallHit], list[Conflict]]:
    """Order competing hits newest first and demote the older ones (see the module docstring).

    Args:
        query: The recall query.
        hits: Ranked hits, best first.
        links: ``{(older_id, newer_id): decision_id}`` of recorded possible updates among the hits.
        vectors: The hits' stored vectors by memory id (numpy arrays), for closeness in meaning.
        older_weight: Multiplier in [0, 1] on a demoted hit's score.
        reserve: Hits ranked below ``hits`` (the rest of recall's candidates, already through every gate). One that
            is the nearest later statement of a contender (see the module docstring) joins the hits when it
            replaces that contender, or, for a query about the past, the nearest earlier one; the others stay out.
        served: How many of the hits recall serves (its ``k``), if known: a newer hit that replaces one of them but
            ranks below them moves up to the last place served (or the older one's place, if lower), ahead of the
            hit it displaces and with its score (``scores["newer"]``); it never overtakes a hit above that place.

    Returns:
        The hits in their new order (demoted ones with ``newer`` set, flag ``"older"`` and ``scores["older"]``),
        and the conflicts found. For a query about the past ("Where did I live before Minneapolis?") the earlier
        statement of each pair ranks just ahead of the later one instead (flag ``"earlier"``) and nothing is
        demoted; a reserve hit joins only as a top contender's predecessor (the speaker's earlier statement of the
        same thing, :func:`~memlineage.reconcile._successors._predecessors`), ranked just ahead of it.
    """
    if len(hits) < 2 and not reserve:
        return list(hits), []
    query = as_speaker(query)
    past = asks_about_past(query)
    links = links or {}
    unit = {}
    for mid, vec in (vectors or {}).items():
        norm = float(np.linalg.norm(vec))
        if norm > 0:
            unit[mid] = np.asarray(vec, dtype=np.float32) / norm
    head = list(hits)
    # each hit's successor, among the hits and the reserve; a reserve hit that is a top contender's joins as a
    # candidate (dropped again below unless it replaces it)
    pulled, successor = _successors(head, () if past else reserve, unit)
    before: dict[int, int] = {}
    if past:  # asked about the past: what the speaker said before a top contender, of the same thing, answers it
        pulled, before = _predecessors(head, reserve, unit)
    hits = head + pulled
    n = len(hits)
    if n < 2:
        return head, []
    order = sorted(range(n), key=lambda i: _when(hits[i].memory))
    # each hit's rank among the hits of its speaker, as recall ranked them (the pulled-in ones after the others)
    speaker_rank = speaker_ranks(hits)
    # ... and, for Chinese (the default embedder ranks it loosely) when the query asks for a time, place or number,
    # its rank among the speaker's hits that give one ("我的婚礼到底是哪天？": the statements naming a date contend)
    kind = answer_type(query)
    valued_rank: dict[int, int] = {}
    valued_seen: dict[tuple[Any, Any], int] = {}
    for i, h in enumerate(hits):
        if (
            kind in ("time", "place", "number")
            and has_cjk(h.memory.content)
            and values_around(h.memory.content, kind, None)
        ):
            who = speaker(h.memory)
            valued_rank[i] = valued_seen.get(who, 0)
            valued_seen[who] = valued_rank[i] + 1
    near: set[tuple[int, int]] | None = None  # computed at the first pair that reaches competes
    newest_rival: dict[int, Conflict] = {}
    for pos, i in enumerate(order):
        for j in order[pos + 1 :]:
            a, b = hits[i].memory, hits[j].memory
            decision = links.get((a.id, b.id))
            if decision is None and transcript_speaker(a.content) is not None:
                continue  # a transcript of named speakers' talk: dialogue, reordered by recorded decisions only
            va, vb = unit.get(a.id), unit.get(b.id)
            cosine = float(va @ vb) if va is not None and vb is not None and va.shape == vb.shape else None
            rel = (_closeness(hits[i]), _closeness(hits[j]))
            top = (
                (speaker_rank[i] < CONTENDERS and speaker_rank[j] < CONTENDERS)
                or (valued_rank.get(i, CONTENDERS) < CONTENDERS and valued_rank.get(j, CONTENDERS) < CONTENDERS)
                # ... and a top one's successor: where the newer one shares few words with the query ("我住在上海" /
                # "来杭州之后房租省了一半，每周回上海开会"), it is still what the speaker said of it next
                or (speaker_rank[i] < CONTENDERS and successor.get(a.id) == b.id)
            )
            if near is None:
                near = nearest_pairs(hits, unit)
            verdict = competes(
                query, a, b, cosine=cosine, relevance=rel, linked=decision is not None, contenders=top,
                nearest=(i, j) in near or cosine is None,
            )  # fmt: skip
            found = Conflict(a.id, b.id, verdict[0], verdict[1], decision) if verdict else None
            if found is not None:
                newest_rival[i] = found  # later j overwrite: the newest competitor wins
    for i, j in before.items():
        if j not in newest_rival:
            a, b = hits[j].memory, hits[i].memory
            va, vb = unit.get(a.id), unit.get(b.id)
            sim = round(float(va @ vb), 3) if va is not None and vb is not None else None
            newest_rival[j] = Conflict(a.id, b.id, "the speaker's earlier statement about what a later one names", sim)
    joined = {c.newer for c in newest_rival.values()}
    outside = {i for i in range(len(head), n) if hits[i].memory.id not in joined}  # pulled in, replacing nothing
    if not newest_rival:
        return head, []
    if past:
        return _earlier_first(hits, newest_rival), list(newest_rival.values())
    # The demoted go after every other hit (the older value is served when nothing else is left), newest rival
    # first; their scores are capped below the last hit kept ahead, so the order stays monotone in score.
    kept = [h for i, h in enumerate(hits) if i not in newest_rival and i not in outside]
    if served is not None:
        kept = _served_newer(kept, hits, newest_rival, served)
    floor = min((h.score for h in kept), default=1.0)
    demoted = []
    for i, c in newest_rival.items():
        h = hits[i]
        score = round(min(h.score * older_weight, floor * 0.999), 6)
        demoted.append(
            replace(
                h, score=score, scores={**h.scores, "older": 1.0, "final": score}, flags=(*h.flags, "older"),
                newer=c.newer,
            )
        )  # fmt: skip
    demoted.sort(key=lambda h: -h.score)
    return kept + demoted, list(newest_rival.values())
