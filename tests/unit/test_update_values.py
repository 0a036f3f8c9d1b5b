"""Issue 24: the values a correction changes, read without a pattern: spelled-out numbers, e-mail addresses, a value
said in the clause next to the one that matches, a person named by name where the query names a role, a role by
another of its names, identifiers in mixed Chinese text."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from memlineage import Memory, MemoryManager, Scope
from memlineage.reconcile import Conflict, resolve_conflicts
from memlineage.reconcile._about import (
    _new_kind,
    _someone_in,
    added_before,
    for_a_while_at_value,
    named_before_value,
    number_of_another_thing,
    owned_by_another,
)
from memlineage.reconcile._numbers import units_of
from memlineage.reconcile._signals import (
    asks_unmarked,
    clauses_of,
    focus,
    numbers_in,
    present_values,
    query_people,
    query_terms,
    values_around,
    values_of,
)
from memlineage.retrieval import RecallHit, RecallResult
from memlineage.testing import make_manager

T0 = datetime(2025, 1, 1, 9, tzinfo=timezone.utc)


class Clock:
    """The store's clock, set by each statement's day."""

    now = T0

    def __call__(self) -> datetime:
        return self.now


def test_spelled_out_numbers_are_numbers() -> None:
    assert numbers_in("after the cuts we're down to one hundred and twelve") == {"112"}
    assert numbers_in("we can go up to forty-five thousand, no more") == {"45000"}
    assert numbers_in("I need two tickets") == {"2"}  # an isolated small number word is read as before
    assert numbers_in("I have tried that one") == frozenset()
    assert numbers_in("我们订了二十二桌") == {"22"}  # Chinese numerals unchanged


def test_an_email_address_is_one_key_and_no_number() -> None:
    (clause,) = clauses_of("Send it to j.ortiz2@northwind.dev from now on.")
    assert "j.ortiz2@northwind.dev" in clause.keys and "2" not in clause.keys
    assert numbers_in("mail j.ortiz2@northwind.dev") == frozenset()


def test_a_start_date_is_no_stay_for_a_while() -> None:
    (renewal,) = clauses_of("The lease renews at $2,300 a month starting next month.")
    (one_off,) = clauses_of("The standup is at 10 this week.")
    assert not renewal.temporary and one_off.temporary
    (leaving,) = clauses_of("I'm leaving Acme at the end of this week, so use my personal address")
    assert not leaving.temporary  # when a change happens, not how long a state lasts


def test_a_clause_opening_with_a_name_in_the_possessive_is_about_that_person() -> None:
    assert [c.subject for c in clauses_of("Priya's birthday is April 21.")] == ["priya"]
    assert [c.subject for c in clauses_of("It's raining again.")] == [None]


def test_a_role_is_asked_about_by_each_of_its_names() -> None:
    assert query_people("我女儿上几年级？") == {"女儿", "闺女"}
    assert {"mom", "mother"} <= query_people("Where does my mom live?")
    assert query_people("What's my boss's name?") >= {"boss", "manager"}  # "boss" is no plural of "bos"
    assert query_people("What do my kids eat?") == {"kid", "child"}


def test_identifiers_in_mixed_chinese_text_are_keys_and_time_words_no_places() -> None:
    (flight,) = clauses_of("改签到21号早上的3U8882了")
    assert {"3u8882", "21"} <= flight.keys
    (booked,) = clauses_of("订了国航CA4112，早上8点的")
    assert "ca4112" in booked.keys
    assert values_of(booked, "entity") == {"ca4112"}  # 早上 is a time, not the thing asked for
    (units,) = clauses_of("Meet me on the 21st at 5pm, bring the 256GB drive")
    assert not any(ch.isalpha() for k in units.keys for ch in k if k[0].isdigit())  # 5pm, 21st: no identifiers


def test_a_person_said_in_passing_later_in_the_first_sentence_is_a_side_detail() -> None:
    deferred = "I've moved the driving test to June 2nd, too much going on with my mum in hospital"
    assert not _someone_in("I've moved the driving test to June 2nd", deferred)
    # the sentence opens with them (past an interjection): what follows may be theirs
    moved = "My brother just moved to Perth, so I'll be flying to Australia a lot"
    assert _someone_in("so I'll be flying to Australia a lot", moved)
    assert _someone_in("her third is due in May", "Big news, my cousin is pregnant again, her third is due in May")


def test_a_time_word_is_nobody_the_query_asks_about() -> None:
    assert query_people("我早上习惯喝什么？") == frozenset()
    assert query_people("How old is my daughter Ava?") == {"ava", "daughter"}
    # a thing written in capitals is no person, nor a place after a preposition
    assert query_people("What's the guest Wi-Fi password?") == frozenset()
    assert query_people("What size TV did I get?") == frozenset()
    assert query_people("When is my train to Glasgow?") == frozenset()
    assert query_people("When are Lily's piano lessons?") == {"lily"}


def test_a_clause_too_short_to_compare_goes_on_in_the_next_one() -> None:
    texts = [c.text for c in focus("Got a puppy! Called him Biscuit. Is kibble ok?", query_terms("puppy name"))]
    assert texts == ["Got a puppy!", "Called him Biscuit."]
    # values said next to the matching clause, never in a question or about someone else
    text = "new phone, finally. it's 917-555-0110 now. My sister's is 917-555-0199."
    assert values_around(text, "number", "self") == {"917-555-0110"}


def test_sentences_end_at_an_emoji_but_not_after_a_title() -> None:
    texts = [c.text for c in clauses_of("down to 74 at today's weigh-in 🎉 should I eat more protein?")]
    assert texts == ["down to 74 at today's weigh-in 🎉", "should I eat more protein?"]
    (moved,) = [c for c in clauses_of("Clinic rang, Dr. Osei is away so I'm on the 19th now.") if not c.question]
    assert "19" in moved.keys and "osei" in moved.keys


def test_a_question_is_never_the_clause_compared() -> None:
    text = "I'm based in Porto, three years now. Any tips for quiet cafes in the city?"
    # the question shares "city" with the query, the statement nothing: the statement is still compared
    assert "I'm based in Porto, three years now." in [
        c.text for c in focus(text, query_terms("Which city do I live in?"))
    ]


def test_a_supposition_gives_no_value_around() -> None:
    text = "If I took the Phoenix contract for 13 weeks, would taxes change? Just exploring."
    assert values_around(text, "place", None) == frozenset()


def test_my_old_value_asks_about_the_past_and_a_buddy_is_someone_else() -> None:
    from memlineage.reconcile._about import _names_someone
    from memlineage.reconcile._signals import asks_about_past

    assert asks_about_past("What was my old phone number?") and not asks_about_past("How old is my son?")
    assert _names_someone("My buddy Kofi just got hired at Shopify, so proud.")


@pytest.fixture
def mm() -> tuple[MemoryManager, Clock]:
    from memlineage.index import OnnxMiniLMEmbedder, default_model_dir

    if not (default_model_dir() / "model.onnx").is_file():
        pytest.skip("embedding model files not available offline")
    clock = Clock()
    return make_manager(clock=clock, embedder=OnnxMiniLMEmbedder(default_model_dir())), clock


def _say(mm: MemoryManager, clock: Clock, text: str, days: float) -> str:
    clock.now = T0 + timedelta(days=days)
    return mm.remember(text, scope=Scope(user_id="alice", session_id=f"d{days}")).id


def _old_then_new(mm: tuple[MemoryManager, Clock], old: str, new: str, query: str) -> tuple[str, str, RecallResult]:
    """``old`` on day 0, an unrelated turn on day 4, ``new`` on day 30, then ``query`` traced: both ids and the hits."""
    manager, clock = mm
    old_id = _say(manager, clock, old, 0)
    _say(manager, clock, "Any tips for keeping basil alive indoors?", 4)
    new_id = _say(manager, clock, new, 30)
    return old_id, new_id, manager.recall(query, scope="alice", k=3, trace=True)


@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        (
            "We've invited 160 people to the reunion, help me price the venue?",
            "Update on the reunion: a few families dropped out, so it's ninety-eight now.",
            "How many people are coming to the reunion?",
        ),
        (
            "Text my appointment reminders to 312-555-0148 please.",
            "got a new phone plan, couldn't keep the old line. it's 872-555-0193 now",
            "Which number should reminders go to?",
        ),
        (
            "My personal email is r.mendes@fastmail.com, use it for receipts.",
            "please switch to rmendes.home@proton.me for everything from today",
            "Which email should receipts go to?",
        ),
        (
            "We brought home a rescue dog! Named him Rocket. What should he eat?",
            "we ended up calling the dog Pretzel, Rocket never stuck and he ignores it",
            "What's my dog called?",
        ),
        (
            "My train to Glasgow leaves on May 9th at 7:10am.",
            "The operator cancelled it, so they moved me to the May tenth service, 9:45 departure.",
            "When is my train to Glasgow?",
        ),
        (
            "体检约在4月2号上午十点，记得提醒我。",
            "医院说主任那周出差，体检从2号改到9号了，时间不变。",
            "我的体检约在哪天？",
        ),
        (
            "My daughter is 9. Any chapter books she'd like?",
            "She turned ten on Sunday and wants a telescope now 🔭 any beginner picks?",
            "How old is my daughter?",
        ),
        # a question after a dash leaves the statement before it standing; the later one names the pet
        (
            "Our cat Miso is 8 lbs — is that a healthy weight for her size?",
            "The vet weighed Miso at 10 lbs today, so she's going on a diet.",
            "How much does Miso weigh?",
        ),
        # the role and the name first, the name alone later: one person
        (
            "My wife Ana teaches chemistry at Lincoln High.",
            "Ana got poached by Roosevelt Academy! Starts Monday, way better pay.",
            "Where does my wife work?",
        ),
        # the same street with another number: the address changed
        (
            "Ship the samples to 412 Alder Lane, Eugene OR 97401.",
            "small typo earlier, it's 421 Alder Lane",
            "What address should the samples go to?",
        ),
        # the newer clause's subject is the thing the query names: the speaker's appointment still
        (
            "My dermatologist appointment is March 3rd at 11.",
            "Dermatologist's office called, they pushed me to the 10th, same time.",
            "When is my dermatologist appointment?",
        ),
        # a role by another of its names: 女儿 / 闺女, mom / mother
        ("我女儿今年上三年级，数学有点跟不上。", "闺女升四年级了，换了个新班主任，人挺好。", "我女儿上几年级？"),
        (
            "My mom lives in Tucson, near the university.",
            "Mother finally sold the Tucson house and bought a condo in Phoenix.",
            "Where does my mom live?",
        ),
        # Chinese: a date or identifier that changed ties two statements that share no word
        ("开题报告的截止日期是3月20号，还有好多没写。", "老师通融了，可以推到3月底再交。", "我的开题报告什么时候交？"),
        (
            "订了周五去西安的高铁，G87，下午两点出发。",
            "G87停运了，改成周六上午的G651，行李还没收拾。",
            "我去西安坐哪个车次？",
        ),
        # asked about someone else (a child, a pet): the speaker's two best answers, the older one naming them
        (
            "Ava goes to Hillcrest Primary and loves her teacher there.",
            "first week at St Mary's went fine, Ava already made a friend called Noor. the drop-off queue is awful",
            "What school does Ava go to?",
        ),
        (
            "Nursery pickup for Mia is at 4:30, so keep my calls before four.",
            "Mia's nursery changed its hours, I have to be there by a quarter past five now.",
            "When do I pick up my daughter?",
        ),
    ],
)
def test_the_later_value_ranks_first_and_the_older_is_marked(
    mm: tuple[MemoryManager, Clock], old: str, new: str, query: str
) -> None:
    manager, _ = mm
    old_id, new_id, result = _old_then_new(mm, old, new, query)
    assert result.ids[0] == new_id
    demoted = [h for h in result if h.memory.id == old_id]
    assert not demoted or demoted[0].newer == new_id
    assert any(c.older == old_id and c.newer == new_id for c in result.trace.conflicts)
    # nothing is written: the older statement is still active, and a question about the past finds it
    assert manager.require(old_id, scope="alice").status.value == "active"


@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        # the newer message never says "work", but it speaks of the older one's canal: one topic, not a stray
        (
            "I walk to work by the canal, about 25 minutes each way. good waterproof shoes?",
            "they fenced off the canal path for a year of repairs, so I'm on the number 12 bus in the mornings. is a "
            "monthly pass worth it?",
            "How do I get to work these days?",
        ),
        # both name the query's "work" and share it: related although their vectors are not close
        (
            "I catch the 7 bus to work, it takes about 35 minutes. any good podcasts?",
            "bought a road bike!! I get to work in 20 min now and I'm way less cranky",
            "How do I get to work now?",
        ),
    ],
)
def test_a_newer_statement_sharing_a_content_word_competes_without_close_vectors(
    mm: tuple[MemoryManager, Clock], old: str, new: str, query: str
) -> None:
    old_id, new_id, result = _old_then_new(mm, old, new, query)
    assert result[result.ids.index(old_id)].newer == new_id
    assert result.ids.index(new_id) < result.ids.index(old_id)


@pytest.mark.parametrize(
    ("kept", "later", "query"),
    [
        (
            "My mobile is 07700 900411 if you need it.",
            "Please also save my husband Dev's number: 07700 900977.",
            "What's my phone number?",
        ),
        (
            "Our budget for the bathroom is $12,000.",
            "My neighbour spent twenty thousand on hers, which seems crazy.",
            "What's our bathroom budget?",
        ),
        ("我早上一定要喝一杯美式。", "我老婆最近改成晚上跑步了，说早上起不来。", "我早上习惯喝什么？"),
        (
            "My birthday's April 8, thinking of a quiet dinner.",
            "Priya's birthday is April 21. Help me plan a picnic for her?",
            "When is my birthday?",
        ),
        (
            "I have porridge every morning before work.",
            "In the evenings I usually eat pasta.",
            "What do I eat in the morning?",
        ),
        # the same employer named of someone else
        (
            "My husband works at Boeing as a structural engineer.",
            "My brother just started at Boeing too, in the Renton plant.",
            "Where does my husband work?",
        ),
        # two Chinese statements with numbers and nothing else in common: a number that differs ties nothing
        ("我身高175，最近想练练腿。", "我吃素已经五年了。", "我身高多少？"),
        (
            # unrelated topics of one user, each with a value of the asked kind: the weakest rule pairs neither
            "I work at a hospital in Leeds as a radiographer. How do I ask for a shift swap?",
            "oops, I meant Bristol. Bath is where I grew up, my brain is mush. same question though?",
            "Where do I work?",
        ),
    ],
)
def test_someone_elses_value_demotes_nothing(
    mm: tuple[MemoryManager, Clock], kept: str, later: str, query: str
) -> None:
    manager, clock = mm
    kept_id = _say(manager, clock, kept, 0)
    _say(manager, clock, later, 20)
    result = manager.recall(query, scope="alice", k=3, trace=True)
    assert kept_id in result.ids[:2] and result[result.ids.index(kept_id)].newer is None
    assert not [c for c in result.trace.conflicts if c.older == kept_id]


def test_a_contrast_replaces_nothing_the_older_message_only_asked() -> None:
    """A question of the older message ("worth it?") is nothing that "not worth it" replaces."""
    clock = Clock()
    manager = make_manager(clock=clock)
    _say(manager, clock, "I'm on Fios and my upload at home is awful, why?", 0)
    offer = _say(manager, clock, "Comcast is offering $300 to switch, worth it?", 3)
    _say(manager, clock, "read the fine print, not worth it. staying with Fios and getting a mesh router", 5)
    assert manager.require(offer, scope="alice").status.value == "active"
    # a value the older message states is still replaced by the same contrast
    trip = _say(manager, clock, "I'm flying to Porto on the 3rd, what should I pack?", 10)
    _say(manager, clock, "Actually I'm flying to Faro, not Porto.", 12)
    assert manager.require(trip, scope="alice").status.value == "superseded"


def test_a_contrast_about_someone_else_replaces_nothing_of_the_speaker() -> None:
    clock = Clock()
    manager = make_manager(clock=clock)
    mine = _say(manager, clock, "I'm allergic to shellfish, so flag any recipes with prawns.", 0)
    _say(manager, clock, "My son's allergy test came back: peanuts, not shellfish like me.", 12)
    assert manager.require(mine, scope="alice").status.value == "active"
    applied = [
        a for a in manager.activities(Scope(user_id="alice"), kinds=["update_detection"]) if a.outcome == "applied"
    ]
    assert applied == []
    # the speaker's own contrast still replaces
    trip = _say(manager, clock, "I'm flying to Porto on the 3rd for the conference.", 20)
    _say(manager, clock, "Actually I'm flying to Faro, not Porto.", 25)
    assert manager.require(trip, scope="alice").status.value == "superseded"


@pytest.mark.parametrize(
    ("said", "withdrawn"),
    [
        ("我对花生过敏，做菜别放花生。", "之前说花生过敏是我记错了，过敏的是我表哥，我自己吃花生没问题。"),
        ("记一下，我对头孢过敏。", "刚才那条头孢过敏的你删了吧，是我爸过敏，不是我。"),
        (
            "I'm allergic to shellfish, keep that in mind for recipes.",
            "Scratch the shellfish allergy thing, I mixed it up with my sister. I eat shrimp all the time.",
        ),
        ("My blood type is O negative.", "What I said about my blood type was wrong, I haven't actually been tested."),
    ],
)
def test_a_statement_said_to_be_misremembered_is_withdrawn(said: str, withdrawn: str) -> None:
    clock = Clock()
    manager = make_manager(clock=clock)
    old = _say(manager, clock, said, 0)
    _say(manager, clock, withdrawn, 3)
    assert manager.require(old, scope="alice").status.value == "retracted"
    # ... and what merely says something else was wrong withdraws nothing it does not name
    kept = _say(manager, clock, "我养了一只猫叫花卷。", 5)
    _say(manager, clock, "之前说的搬家那个不对，还没定。", 8)
    assert manager.require(kept, scope="alice").status.value == "active"


def test_an_alternative_question_and_an_indefinite_person_state_nothing_of_the_speaker() -> None:
    (alternative,) = clauses_of("Would stretching to $1,200 get me much more, or is it not worth it?")
    assert alternative.question and not alternative.asserts_present
    assert [c.subject for c in clauses_of("A friend keeps raving about Porto.")] == ["friend"]
    assert [c.subject for c in clauses_of("I have a friend in Denver.")] == ["self"]


def test_a_question_after_a_dash_and_back_in_a_range_state_the_present() -> None:
    statement, question = clauses_of("My daughter is 9 — what's a good first bike?")
    assert statement.asserts_present and question.question
    (lab,) = clauses_of("Got my results: cholesterol is 180 now, back in the healthy range!")
    assert lab.asserts_present and not lab.past
    assert clauses_of("Back in my twenties I waited tables.")[0].past
    assert clauses_of("back in college i ran 50+ miles a week for xc")[0].past


def test_a_clock_time_is_no_number_asked_for() -> None:
    from memlineage.reconcile._compete import competes

    (yoga,) = clauses_of("i do yoga mondays at 6pm")
    assert values_of(yoga, "number") == frozenset() and values_of(yoga, "time") == {"mondays", "6pm"}
    (dose,) = clauses_of("Dose went up to 40mg at 7:30 every night")
    assert values_of(dose, "number") == {"40"}
    clock = Clock()
    manager = make_manager(clock=clock)
    old = manager.require(
        _say(manager, clock, "I take 10mg of melatonin at night, can I skip it on weekends?", 0), scope="alice"
    )
    new = manager.require(
        _say(manager, clock, "i do spin class tuesdays at 6pm, should i eat before", 20), scope="alice"
    )
    # both among the speaker's best matches and close in meaning: still, 6pm is no other dose than 10mg
    assert (
        competes("What dose of melatonin do I take?", old, new, cosine=0.44, relevance=(0.6, 0.2), contenders=True)
        is None
    )


def test_someone_who_only_reports_a_change_is_not_what_it_is_about() -> None:
    from memlineage.reconcile._about import _names_someone

    assert not _names_someone("例会改到周四了，经理说周二会议室不够用。")
    # whom the speaker gives something to, or does something for: the thing was or is the speaker's
    assert not _names_someone("Sold the Civic to my neighbor's kid last weekend.")
    assert not _names_someone("Finally caved and got an iPhone 15 so I can FaceTime my mom.")
    assert _names_someone("Bought a used Civic for my son, he starts driving in May.")
    assert _names_someone("My sister just moved to Austin, so I'll be flying to Texas a lot.")
    assert not _names_someone("My doctor said the follow-up moved to June 3.")
    assert _names_someone("我妈下个月搬去杭州。") and _names_someone("My sister moved to Rome.")


def test_a_city_one_works_in_is_no_employer() -> None:
    from memlineage.extractors import detect_slot

    assert detect_slot("我在北京工作五年了")[0] == "user.workplace"
    assert detect_slot("我在字节做产品经理")[0] == "user.employer"
    clock = Clock()
    manager = make_manager(clock=clock)
    city = _say(manager, clock, "我在北京工作五年了，还是不太习惯这里的干燥。", 0)
    _say(manager, clock, "我在字节做产品经理，最近OKR压力好大。", 30)
    assert manager.require(city, scope="alice").status.value == "active"


def test_two_statements_filling_different_slots_are_no_contenders(mm: tuple[MemoryManager, Clock]) -> None:
    manager, clock = mm
    home = _say(manager, clock, "I live in Minneapolis, in the North Loop.", 0)
    _say(manager, clock, "I'm a nurse in the ICU at Mass General.", 20)
    result = manager.recall("What city do I live in?", scope="alice", k=3, trace=True)
    assert result.ids[0] == home and not result.trace.conflicts


def test_a_statement_before_a_question_is_no_mere_question() -> None:
    from memlineage.retrieval import is_question

    assert not is_question("I make $78k. How much should I put in my 401k?")
    assert not is_question("我住北京。有什么好吃的？")
    assert is_question("Hi there. Where is the nearest gym?") and is_question("你好。附近有什么好吃的？")


def test_a_question_about_the_past_ranks_the_replaced_statement_first(mm: tuple[MemoryManager, Clock]) -> None:
    manager, clock = mm
    before = _say(manager, clock, "I'm in Tucson and it's 112 degrees today. Indoor things to do?", 0)
    _say(manager, clock, "What's a good beginner sourdough recipe?", 20)
    after = _say(manager, clock, "We moved to Seattle last month. The rain is a lot, send help.", 90)
    result = manager.recall("Where did I live before Seattle?", scope="alice", k=3, trace=True)
    assert result.ids[:2] == [before, after]
    assert "earlier" in result[0].flags and result[0].newer is None
    assert any(c.older == before and c.newer == after for c in result.trace.conflicts)
    # asked about the present, the later one ranks first as before
    assert manager.recall("Where do I live?", scope="alice", k=3).ids[0] == after


def test_a_trip_home_and_a_pronoun_seam_replace_nothing() -> None:
    from memlineage.extractors import detect_slot

    assert detect_slot("Flight home is December 20th.") == (None, None)
    assert detect_slot("Home is Columbus, Ohio.")[0] == "user.residence"
    clock = Clock()
    manager = make_manager(clock=clock)
    home = _say(manager, clock, "我现在在上海工作，住在徐汇。", 0)
    _say(manager, clock, "瑜伽馆换了老师，课表也调了，我现在改成周一和周五早上七点去。", 30)
    berlin = _say(manager, clock, "I live in Berlin, in Kreuzberg.", 40)
    _say(manager, clock, "Flight home is December 20th.", 60)
    assert manager.require(home, scope="alice").status.value == "active"
    assert manager.require(berlin, scope="alice").status.value == "active"


def test_someone_who_acts_on_the_speaker_or_whose_place_it_is_is_not_what_it_is_about(
    mm: tuple[MemoryManager, Clock],
) -> None:
    from memlineage.reconcile._about import _names_someone

    assert not _names_someone("The cough wouldn't quit, so my doctor took me off the lisinopril.")
    assert not _names_someone("Dropped my phone in the lake at my cousin's place.")
    assert not _names_someone("医生给我换了药。") and not _names_someone("花卷送我妈那儿去了。")
    # the person is what it is about
    assert _names_someone("My sister just had twins!") and _names_someone("Green was my sister's pick.")
    assert _names_someone("My son is taller than me.") and _names_someone("My cousin helped me move. She's great.")
    manager, clock = mm
    old = _say(manager, clock, "If you ever draft texts for me, my cell is 415-555-0182.", 0)
    _say(manager, clock, "What's the capital of Australia?", 20)
    new = _say(
        manager, clock, "Dropped my phone in the lake at my cousin's place. The carrier gave me a fresh SIM with "
        "415-555-0947, so use that.", 60,
    )  # fmt: skip
    result = manager.recall("What number should people use to reach me?", scope="alice", k=3, trace=True)
    assert any(c.older == old and c.newer == new for c in result.trace.conflicts)
    assert new in result.ids
    assert old not in result.ids or result.ids.index(new) < result.ids.index(old)


def test_one_number_is_a_value_to_compare() -> None:
    salary, ask = clauses_of("Got the promotion! I'm on £44,500 now")[1], clauses_of("By the way")[0]
    assert salary.substantive and not ask.substantive
    assert clauses_of("My son is 7")[0].substantive


def test_one_chinese_seam_bigram_is_no_word_left_out(mm: tuple[MemoryManager, Clock]) -> None:
    manager, clock = mm
    old = _say(manager, clock, "我儿子乐乐在小区里的阳光幼儿园上中班。", 0)
    _say(manager, clock, "小孩晚上老踢被子怎么办？", 20)
    new = _say(manager, clock, "乐乐在启明双语幼儿园的第一天居然没哭，回来还说喜欢外教老师。", 60)
    result = manager.recall("乐乐在哪个幼儿园上学？", scope="alice", k=3, trace=True)
    assert any(c.older == old and c.newer == new for c in result.trace.conflicts)
    assert result.ids[0] == new


def test_a_product_name_with_an_inner_capital_is_a_name() -> None:
    (clause,) = clauses_of("Mine is the iPad Air my sister handed down.")
    assert "ipad" in clause.keys and "air" in clause.keys


def test_a_name_before_an_apposition_is_no_clause_and_a_consequence_is_one() -> None:
    (cat,) = clauses_of("Mochi, my rabbit, eats timothy hay.")
    assert "mochi" in cat.terms and "hay" in cat.terms
    reason, result = clauses_of("Ben's garage flooded, so we've been rehearsing at the church hall.")
    assert reason.subject == "ben" and result.subject == "self"


def test_a_question_for_the_date_of_something_asks_for_a_time() -> None:
    from memlineage.reconcile._signals import answer_type

    assert answer_type("What's the date of our housewarming?") == "time"
    assert answer_type("What is my dentist appointment time?") == "time"
    assert answer_type("What's my time zone?") == "entity"
    # ... and so does one for the night or weekday of a standing event
    assert answer_type("what night is my pottery class?") == answer_type("Which evenings is choir?") == "time"


def test_a_request_to_the_assistant_asks_what_holds_now() -> None:
    from memlineage.reconcile._signals import asks_about_events

    # "would you" / "could u" ask the assistant to do something; "would she" asks what would happen
    assert not asks_about_events("how would you describe the way I eat now?")
    assert not asks_about_events("Could u remind me where I live?")
    assert asks_about_events("What would she pursue?") and asks_about_events("When did Caroline go?")


def test_a_stay_for_a_while_counts_only_where_a_value_is_stated() -> None:
    # the new date is stated for good; "this week" is about printing
    assert not for_a_while_at_value("They could do March 9th instead, so we took it. Cards go out this week.")
    # no sentence states a value with digits: the marker counts wherever it is
    assert for_a_while_at_value("No piano this week, the teacher is away. Back to normal next Monday.")
    # a question's digits state nothing
    assert for_a_while_at_value("This week I'm swimming at night instead. Is 9pm too late to eat?")


@pytest.mark.parametrize(
    ("old", "filler", "new", "query"),
    [
        pytest.param(
            "Put my mobile as 312-555-0188 on anything you fill in.",
            "Any good podcasts about history?",
            "Lost the old SIM and couldn't keep my number, ugh. I'm on 312-555-0421 now.",
            "What number should go down as my mobile?",
            id="a value said in another sentence",
        ),
        pytest.param(
            "When you write to clients for me, my email is sam.lee@outlook.com.",
            "Best way to learn touch typing?",
            "Closing the Outlook account, too much spam. Use sam.lee.design@proton.me from now on.",
            "Which email do I want on client letters?",
            id="an address after the words of the query",
        ),
        pytest.param(
            "我女儿每周日下午学画画，一次两百。",
            "孩子不爱吃青菜怎么办？",
            "画画她坐不住，剩下的课退了，周日下午改去学游泳了。",
            "我女儿周日下午学什么？",
            id="the person asked about is no context left out",
        ),
        pytest.param(
            "家里路由器管理密码是 blue7788，帮我记着",
            "空气炸锅能烤红薯吗？",
            "路由器密码被我改成 Tree@5512 了，隔壁邻居老来蹭网",
            "路由器管理密码是多少？",
            id="a correction whose value part names nobody is the speaker's",
        ),
        pytest.param(
            "Daycare drop-off is 8:15, right before my shift.",
            "Any quick breakfast ideas?",
            "From next term the daycare opens later, so drop-off is 8:45 now. Need to rejig my mornings.",
            "What time do I drop my son off at daycare?",
            id="a person asked about whom neither statement names",
        ),
        pytest.param(
            "I'm a staff nurse on the cardiac ward.",
            "Any quick breakfast ideas?",
            "Made charge nurse!! Can you help me write a thank-you card to my mentor?",
            "What's my role at the hospital?",
            id="a person named only in a request",
        ),
        pytest.param(
            "Car insurance is with Allstate, 130 a month.",
            "Is it worth learning Rust this year?",
            "Switched to Lemonade last week, the Allstate renewal was a joke.",
            "Who insures my car?",
            id="a newer message that names the older value, not the query's words",
        ),
        pytest.param(
            "I take 20 mg of atorvastatin at night for cholesterol.",
            "Any tips for sleeping better?",
            "My cholesterol barely moved, so the doctor doubled the atorvastatin.",
            "What dose of atorvastatin am I on?",
            id="an amount changed by a factor",
        ),
        pytest.param(
            "Dr. Reyes, my allergist, wants a new skin panel done.",
            "Any tips for sleeping better?",
            "Got a letter that Dr. Reyes retired. The clinic moved me to Dr. Lindqvist, first visit in May.",
            "Who is my allergist?",
            id="the older name said in an apposition, named again",
        ),
        pytest.param(
            "Our hotel confirmation number is HB72KQ.",
            "Any tips for sleeping better?",
            "misread it before, the confirmation number is HB72KO",
            "What's our hotel confirmation number?",
            id="another code of letters and digits",
        ),
        pytest.param(
            "The christening is on 9 May, can you help me plan the lunch?",
            "How do I get rid of fruit flies?",
            "The church had a clash, so the christening is moving to 16 May. Invitations again.",
            "When is the christening?",
            id="another day of the same month",
        ),
        pytest.param(
            "Our rent is $1,650 for the one-bedroom.",
            "Any tips for a stiff neck?",
            "Landlord sent the new lease: $1,790 from April, sigh.",
            "How much is our rent?",
            id="a new value after a colon",
        ),
        pytest.param(
            "My doctor put me on 10mg of lisinopril.",
            "Any tips for a stiff neck?",
            "bp was 150/95 at the checkup so she raised it to 20mg",
            "What dose of lisinopril am I on?",
            id="a new value after 'to', beside a number of no unit",
        ),
    ],
)
def test_an_update_said_beside_other_things_replaces_the_value_asked_for(
    mm: tuple[MemoryManager, Clock], old: str, filler: str, new: str, query: str
) -> None:
    manager, clock = mm
    before = _say(manager, clock, old, 0)
    _say(manager, clock, filler, 20)
    after = _say(manager, clock, new, 60)
    result = manager.recall(query, scope="alice", k=3, trace=True)
    assert any(c.older == before and c.newer == after for c in result.trace.conflicts)
    assert result.ids[0] == after


def test_two_values_of_one_shape_fill_one_slot(mm: tuple[MemoryManager, Clock]) -> None:
    manager, clock = mm
    old = _say(manager, clock, "I'm using a Galaxy S21, so Android steps please.", 0)
    _say(manager, clock, "How do I free up storage on my laptop?", 20)
    new = _say(
        manager, clock, "How do I set up Face ID? It's the iPhone 16 I got on sale and I'm still learning it.", 60
    )
    result = manager.recall("What phone do I have?", scope="alice", k=3, trace=True)
    assert any(c.older == old and c.newer == new for c in result.trace.conflicts)
    # a model of someone else's is no value of the speaker's
    _say(manager, clock, "Got my teenager a Pixel 9 for her exams, she's over the moon.", 90)
    again = manager.recall("What phone do I have?", scope="alice", k=3, trace=True)
    assert again.ids[0] == new


def test_two_times_of_unrelated_things_do_not_compete(mm: tuple[MemoryManager, Clock]) -> None:
    manager, clock = mm
    choir = _say(manager, clock, "Choir practice is every Tuesday at 8pm, I love it.", 0)
    _say(manager, clock, "My dental cleaning is booked for October 12th.", 30)
    result = manager.recall("When is my choir practice?", scope="alice", k=3, trace=True)
    assert result.ids[0] == choir and not result.trace.conflicts


@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        pytest.param(
            "My personal mobile is 555-201-3344, use it for the school forms.",
            "The firm gave me a work phone last week, 555-201-9000. Strictly for office calls.",
            "What's my personal mobile number?",
            id="a qualifier picks another thing of the kind",
        ),
        pytest.param(
            "Our main home is in Dayton, on Wyoming Street.",
            "Heading up to our lake cabin in Wisconsin for the long weekend.",
            "Where is our main home?",
            id="a cabin is no main home",
        ),
        pytest.param(
            "Our tabby Miso is eleven and still rules the house.",
            "We adopted a puppy! His name is Bolt. Miso is not impressed but tolerates him.",
            "What's my cat's name?",
            id="the older name is still there",
        ),
        pytest.param(
            "I live in Tucson, near the university.",
            "Monsoon season is wild. I lived in Phoenix for six years before this and it was worse.",
            "Where do I live?",
            id="a state before this one",
        ),
        pytest.param(
            "My salary is 82k at the agency.",
            "Got a 105k offer from a startup but said no, the commute is brutal.",
            "What's my salary?",
            id="an offer turned down",
        ),
        pytest.param(
            "We're in apartment 12C at 40 Elm Street.",
            "The super changed the mailbox code to 5518 yesterday.",
            "What's my apartment number?",
            id="another attribute of the same place, words of the query never said",
        ),
        pytest.param(
            "My train to Leeds leaves on June 9th.",
            "Got moved to coach B, seat 42F, on the Leeds train!",
            "What date does my train to Leeds leave?",
            id="digits of a seat are no new date",
        ),
        pytest.param(
            "My checking account is at Wells Fargo.",
            "Opened a savings account at Ally for the house fund.",
            "Where's my checking account?",
            id="savings is another account than checking",
        ),
        pytest.param(
            "I have a gecko named Ziggy, how warm should his tank be?",
            "picked up a hamster today, calling him Pepper. will Ziggy mind the noise?",
            "what's my gecko called?",
            id="the older name said again in a question",
        ),
        pytest.param(
            "The cat's vet visit is Friday at 3pm, shots are due.",
            "Tennis with Jo moved to Fridays at 7am, before work.",
            "When is the cat's vet visit?",
            id="a day said again by an unrelated plan",
        ),
        pytest.param(
            "My desk phone extension is 3382.",
            "lol the IT helpdesk's extension is 3328, I keep dialing it",
            "What's my desk extension?",
            id="another owner's extension",
        ),
        pytest.param(
            "Our rent is $1,650 for the one-bedroom.",
            "Viewed a 2-bed near the park today for $2,300. Tempting. Thoughts?",
            "How much is our rent?",
            id="a flat only viewed",
        ),
        pytest.param(
            "I'm on 50mg of sertraline every morning.",
            "The dentist says to skip it for two days after the extraction.",
            "What's my sertraline dose?",
            id="a number of another unit",
        ),
        pytest.param(
            "We have a border collie called Skye.",
            "Kids begged, so we got a rabbit too. His name is Mochi.",
            "What's our dog called?",
            id="the name of a pet just added",
        ),
        pytest.param(
            "I live in Lisbon, in Alfama.",
            "I used to live in Porto, so the hills here are nothing, but 35 degrees in July is a lot.",
            "Where do I live?",
            id="a place said as a past state beside a number",
        ),
        pytest.param(
            "My son Noah is 9 and wants a phone.",
            "My niece Ada is 11 and has one already, so Noah keeps asking.",
            "How old is Noah?",
            id="the person asked about named after another's age",
        ),
        pytest.param(
            "We live in Victoria now, right by the harbour.",
            "When we lived in Calgary the snow was a whole other level, minus 30 every January.",
            "Where do we live?",
            id="a place said as a past state after 'when we lived'",
        ),
        pytest.param(
            "Ceramics class is every Wednesday at 6pm, it's my favourite hour of the week.",
            "This Wednesday only, the studio moved ceramics to 8pm for a kiln repair. Back to normal next week.",
            "When is my ceramics class?",
            id="this weekday only",
        ),
    ],
)
def test_look_alikes_of_an_update_keep_the_standing_fact_first(
    mm: tuple[MemoryManager, Clock], old: str, new: str, query: str
) -> None:
    manager, clock = mm
    standing = _say(manager, clock, old, 0)
    _say(manager, clock, "Any tips for sleeping better?", 20)
    later = _say(manager, clock, new, 60)
    result = manager.recall(query, scope="alice", k=3, trace=True)
    assert not any(c.older == standing and c.newer == later for c in result.trace.conflicts)
    assert standing in result.ids[:2]
    assert manager.require(standing, scope="alice").status.value == "active"


def test_a_renamed_pet_is_no_name_still_there() -> None:
    from memlineage.reconcile._about import _still_there

    assert not _still_there("Our dog is called Biscuit.", "Biscuit is now Waffles, the kids voted.")
    assert not _still_there("It's a 2012 Civic.", "It is a Mazda now.")  # "It" is no name
    assert _still_there("Rufus is our beagle.", "We got a kitten! Rufus is curious about her.")


def test_chinese_measure_words_of_doses_and_things_count_numbers() -> None:
    assert numbers_in("维生素D一天吃两粒") == {"1", "2"} and numbers_in("每次一片") == {"1"}
    assert numbers_in("提前还了一部分") == frozenset()  # 一部分 is "a part", no number


def _newer_wins(mm: tuple[MemoryManager, Clock], said: tuple[str, str, str], days: float, query: str) -> None:
    """An earlier statement, a filler a day later, a later statement ``days`` after: the later one wins ``query``."""
    manager, clock = mm
    old = _say(manager, clock, said[0], 0)
    _say(manager, clock, said[1], 1)
    new = _say(manager, clock, said[2], days)
    result = manager.recall(query, scope="alice", k=3, trace=True)
    assert any(c.older == old and c.newer == new for c in result.trace.conflicts)
    assert result.ids.index(new) < (result.ids.index(old) if old in result.ids else 99)


def test_a_correction_that_names_nobody_goes_on_with_the_person_asked_about(mm: tuple[MemoryManager, Clock]) -> None:
    said = ("我爸生日是8月3号，记得提醒我订蛋糕", "蛋糕店推荐一家", "不对不对，记错了，是8月13号，我老是记混")
    _newer_wins(mm, said, 15, "我爸生日是几号？")


def test_a_chinese_clause_is_past_only_where_its_values_are() -> None:
    (new_number,) = clauses_of("换卡了，新号码 137 2468 1357，旧的那个下周停用。")
    assert new_number.asserts_present and not new_number.past
    (moved,) = clauses_of("以前住在成都，现在搬到重庆了")
    assert not moved.past
    assert clauses_of("我以前在成都上班")[0].past


def test_a_clause_without_a_value_of_the_asked_kind_joins_no_comparison() -> None:
    from memlineage.reconcile._about import _answering

    text = "I've been meaning to visit the castle. The flat is 3 stops from work and I love it."
    wanted = query_terms("How many stops is my flat from work?")
    extra = [c.text for c in _answering(text, wanted, "number")]
    assert "I've been meaning to visit the castle." not in extra


def test_a_stay_is_stated_by_a_statement_not_by_a_question_or_a_lasting_change() -> None:
    assert not for_a_while_at_value(
        "Dr. Lin left, so the practice moved me to Dr. Ruiz. First visit next week, what to bring?"
    )
    assert not for_a_while_at_value("Our HOA fee went up to $340 this month. Can they do that?")
    assert for_a_while_at_value("Crashing at my brother's in Austin this week.")
    # the week an event happened or starts in says when, not for how long
    assert not for_a_while_at_value("Noah started at Lakeview Middle this week, he already likes it.")
    assert not for_a_while_at_value("Starting at the Denver office next week, desk on the 3rd floor.")
    # a title's period ends no sentence: the event and its week are one
    assert not for_a_while_at_value("Clinic assigned me to Dr. Osei, my first visit is next week. What should I bring?")
    assert for_a_while_at_value("This week I'm working out of the Denver office, back in Boston on the 14th.")


def test_a_pet_of_another_kind_is_no_new_name_and_a_rename_is(mm: tuple[MemoryManager, Clock]) -> None:
    from memlineage.reconcile._about import _new_kind

    assert _new_kind(frozenset({"dog"}), "We rescued a kitten! Her name is Fig and she already bullies Bruno.")
    assert not _new_kind(frozenset({"dog"}), "We got a new dog bed for Bruno.")  # the dog is still named
    assert not _new_kind(frozenset({"cat"}), "The kids voted and we renamed her Mochi.")  # nothing acquired
    manager, clock = mm
    dog = _say(manager, clock, "Our dog Bruno is a six-year-old boxer who snores like a tractor.", 0)
    _say(manager, clock, "How often should I wash a dog bed?", 20)
    kitten = _say(manager, clock, "We rescued a kitten! Her name is Fig and she already bullies Bruno.", 60)
    result = manager.recall("What's our dog called?", scope="alice", k=3, trace=True)
    assert not any(c.older == dog and c.newer == kitten for c in result.trace.conflicts)
    assert dog in result.ids[:2]


def test_automatic_decisions_need_a_named_thing_and_a_fact() -> None:
    from memlineage.extractors import detect_slot

    clock = Clock()
    manager = make_manager(clock=clock)
    nanny = _say(manager, clock, "保姆说过年回来要涨到六千，想想还是答应了，靠谱的不好找", 0)
    name = _say(manager, clock, "以后叫我Amy吧，公司同事都这么叫", 5)
    trip = _say(manager, clock, "厦门有啥小众景点", 10)
    _say(manager, clock, "想了想还是不去了，现在的组挺好的", 20)  # a particle phrase withdraws nothing
    _say(manager, clock, "游泳课调了，以后改成周六上午10点", 25)  # 以后 says when, it replaces nothing
    _say(manager, clock, "厦门不去了，五一要值班", 30)  # a question holds no fact to withdraw
    for mid in (nanny, name, trip):
        assert manager.require(mid, scope="alice").status.value == "active"
    # an e-mail address is no home address
    assert detect_slot("my address is now amy.lee@corp.example which is a mouthful")[0] != "user.residence"


def test_a_person_named_beside_the_value_is_a_side_detail() -> None:
    from memlineage.reconcile._about import _someone_in

    message = "Busy month at work. I quit keto, back to bread and rice. My brother got engaged too!"
    assert not _someone_in("I quit keto, back to bread and rice.", message)
    # ... unless the clause names them, the message opens with them, or the clause's sentence is about them
    assert _someone_in(
        "so I'll be flying to Texas a lot", "My sister just moved to Austin, so I'll be flying to Texas a lot"
    )
    assert _someone_in("we're doing a rom-com", "Movie night! She hates horror, so we're doing a rom-com.")
    assert _someone_in("my son starts at Lakeview", "Big news: my son starts at Lakeview in the fall.")


def test_an_old_thing_named_beside_a_new_value_is_no_past_state() -> None:
    # "getting used to" is no "used to"; a comma part with the new digits states the present
    assert not clauses_of("Moved to a Galaxy S24 last month, still getting used to it.")[0].past
    assert not clauses_of("Had to drop my old number, so it's 415-555-0199 from today.")[0].past
    assert clauses_of("I used to live in Tucson.")[0].past
    assert clauses_of("Back when I lived in Reno the summers were worse, honestly Tacoma feels mild.")[0].past


def test_something_given_up_too_is_no_addition() -> None:
    assert not clauses_of("hulu is gone too, it's only netflix now")[0].additive
    assert not clauses_of("I've cut out gluten as well, so fully paleo now")[0].additive
    assert clauses_of("We also got a second cat, Pumpkin")[0].additive


def test_a_role_asked_about_goes_on_with_the_name_said_again() -> None:
    from memlineage.reconcile._compete import competes

    clock = Clock()
    manager = make_manager(clock=clock)

    def said(text: str, days: int) -> Memory:
        return manager.require(_say(manager, clock, text, days), scope="alice")

    old = said("my manager is Agnes Moreau, she leaves us alone", 0)
    new = said("agnes moved up to director so I report to Kofi Mensah now", 60)
    # the query names a role; the newer message names the older one's name and gives another name
    assert competes("who's my manager", old, new, cosine=0.35, relevance=(0.4, 0.3), contenders=True) is not None


@pytest.mark.parametrize(
    ("old", "new", "query", "put_right"),
    [
        ("save my work number for the form pls: 415-555-0182", "oops typo, it ends in 0128 not 0182",
         "whats my work number", "save my work number for the form pls: 415-555-0128"),
        ("My address for the invoice is 88 Harbor Rd, Portsmouth NH 03801.", "ugh typo, its 86 Harbor Rd not 88.",
         "What address should go on my invoice?", "My address for the invoice is 86 Harbor Rd, Portsmouth NH 03801."),
        ("Our flight confirmation number is QX7HTR.", "typo earlier, the confirmation code is QX7HTP not QX7HTR",
         "What's our flight confirmation code?", "Our flight confirmation number is QX7HTP."),
        ("My flight to Oslo lands at 9:40 on Friday.", "The flight lands at 10:40 not 9:40",
         "When does my flight land?", "My flight to Oslo lands at 10:40 on Friday."),  # a clock time is one value
    ],
)  # fmt: skip
def test_a_value_put_in_place_of_the_one_it_names_supersedes_it_in_one_conversation(
    mm: tuple[MemoryManager, Clock], old: str, new: str, query: str, put_right: str
) -> None:
    """ "X not Y" names the replaced value: no cue word and no slot are needed, within one conversation too.

    The old statement is superseded and written again put right (the other details it gave are kept).
    """
    manager, clock = mm
    before = manager.remember(old, scope={"user_id": "alice", "session_id": "s1"}, valid_from=clock.now)
    clock.now += timedelta(minutes=2)
    after = manager.remember(new, scope={"user_id": "alice", "session_id": "s1"}, valid_from=clock.now)
    assert manager.require(before.id, scope="alice").status.value == "superseded"
    (decision,) = manager.activities(Scope(user_id="alice"), kinds=["update_detection"])
    assert decision.outcome == "applied" and (decision.metadata or {})["statement"] == after.id
    assert (decision.metadata or {})["reason"].startswith("names the value it replaces")
    result = manager.recall(query, scope="alice", k=3)
    assert {h.memory.content for h in result[:2]} == {put_right, new}
    assert before.id not in result.ids


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My brother lives in Boulder.", "My sister lives in Denver not Boulder."),  # another person
        ("Should we book the table for 5 or 6?", "Table for 5 not 6."),  # the older one names both: options
        ("I'm not sure about 88 Harbor Rd, the reviews are mixed.", "We toured 12 Oak St, not bad at all."),
        ("My flat is at 88 Harbor Rd.", "The cafe I like is not far from 88 Harbor Rd."),  # no value replaced
        ("I have 6 cats and a very patient husband.", "Meet me at 5 not 6."),  # a short number, nothing else shared
    ],
)
def test_not_before_a_value_supersedes_nothing_it_does_not_name(
    mm: tuple[MemoryManager, Clock], old: str, new: str
) -> None:
    manager, clock = mm
    before = manager.remember(old, scope={"user_id": "alice", "session_id": "s1"}, valid_from=clock.now)
    clock.now += timedelta(days=3)
    manager.remember(new, scope={"user_id": "alice", "session_id": "s2"}, valid_from=clock.now)
    assert manager.require(before.id, scope="alice").status.value == "active"


def test_swapped_values_reads_a_value_then_not_and_another_of_its_shape() -> None:
    from memlineage.reconcile._text import rejected_values, substituted, swapped_values

    assert swapped_values("ugh typo, its 86 Harbor Rd not 88.") == ({"86"}, {"88"})
    assert swapped_values("the confirmation code is QX7HTP not QX7HTR") == ({"qx7htp"}, {"qx7htr"})
    assert swapped_values("I'm going to Lyon not Paris") == ({"lyon"}, {"paris"})
    # a number written with separators is one value ("4,200" is not "4")
    assert swapped_values("it's $3,950 take-home, not 4,200.") == ({"3950"}, {"4200"})
    assert rejected_values("it's $3,950 take-home, not 4,200.") == {"4200"}
    for text in (
        "I'm not sure about 88 Harbor Rd",
        "It is not 88.",
        "I have 3 kids not counting Sam",
        "住北京不是上海",
        "One thing: any tips for staying alert on my commute, since I'm not a morning person?",  # words, no values
    ):
        assert swapped_values(text) == (frozenset(), frozenset())
    fixed = substituted("Call 415-555-0182 after 5", "it ends in 0128 not 0182", "0182", "0128")
    assert fixed == "Call 415-555-0128 after 5"
    assert substituted("Code QX7HTR", "it's QX7HTP not QX7HTR", "qx7htr", "qx7htp") == "Code QX7HTP"
    assert substituted("Code QX7HTR", "no value here", "qx7htr", "qx7htp") is None
    fixed = substituted("I take home $4,200 a month.", "$3,950, not 4,200", "4200", "3950")
    assert fixed == "I take home $3,950 a month."
    assert substituted("Serial 14,2001", "it's 3,950", "4200", "3950") is None  # inside another number
    assert substituted("Worth 4,200,000 now", "it's 3,950", "4200", "3950") is None  # a group of a longer number
    assert substituted("Paid 4,200 in May", "it's 300", "200", "300") is None
    assert substituted("We fly Paris,Lyon", "it's Nice", "lyon", "nice") == "We fly Paris,Nice"  # a word after a comma


def test_a_correction_with_a_question_after_it_keeps_its_clauses_apart(mm: tuple[MemoryManager, Clock]) -> None:
    """What a statement asserts, its question left out, is cut into the same clauses as the statement was.

    Joined without the comma, "it's the 14th not the 12th" and "I just double-checked the invitation" read as one
    clause that names a thing of its own (the invitation), and the correction was taken for another thing's date.
    """
    from memlineage.reconcile._signals import asserting_text

    new = (
        "sorry, it's the 14th not the 12th, I just double-checked the invitation. "
        "Does a 3-minute toast sound about right?"
    )
    assert asserting_text(new) == "sorry, it's the 14th not the 12th, I just double-checked the invitation."
    said = "我老公生日是5月12号，想给他准备个惊喜，有什么点子？"
    assert asserting_text(said) == "我老公生日是5月12号，想给他准备个惊喜"
    manager, clock = mm
    old = "My sister's wedding is on June 12th and I'm the maid of honor. Can you help me outline a toast?"
    before = manager.remember(old, scope={"user_id": "alice", "session_id": "d3"}, valid_from=clock.now)
    clock.now += timedelta(days=1)
    manager.remember(new, scope={"user_id": "alice", "session_id": "d4"}, valid_from=clock.now)
    assert manager.require(before.id, scope="alice").status.value == "superseded"
    (decision,) = manager.activities(Scope(user_id="alice"), kinds=["update_detection"])
    assert (decision.metadata or {})["reason"].startswith("names the value it replaces: 12 → 14")


def test_a_correction_ruling_out_a_number_changes_that_number_and_keeps_the_rest(
    mm: tuple[MemoryManager, Clock],
) -> None:
    """ "…it's $3,950 take-home, not 4,200" replaces the take-home pay, not the rent said beside it."""
    manager, clock = mm
    scope = {"user_id": "alice", "session_id": "s1"}
    before = manager.remember("Help me build a budget. I take home $4,200 a month and rent is $1,500.", scope=scope)
    clock.now += timedelta(minutes=3)
    manager.remember(
        "Actually scratch that, I looked at my last paystub and after the new withholding it's $3,950 take-home, "
        "not 4,200.",
        scope=scope,
    )
    assert manager.require(before.id, scope="alice").status.value == "superseded"
    (decision,) = manager.activities(Scope(user_id="alice"), kinds=["update_detection"])
    assert "4200 → 3950" in (decision.metadata or {})["reason"]
    served = {h.memory.content for h in manager.recall("What's my monthly take-home pay?", scope="alice", k=3)}
    assert "Help me build a budget. I take home $3,950 a month and rent is $1,500." in served


_FILLERS_ZH = ("我在哪里可以买到便宜的机票？", "我住的小区停车位太少了", "我哪天有空去看电影？")


def test_the_nearest_later_statement_contends_however_low_the_query_ranks_it(mm: tuple[MemoryManager, Clock]) -> None:
    """The query's words are all in the older statement; the later one, nearest to it and sharing 上海, replaces it.

    The later one moves up into the hits served.
    """
    manager, clock = mm
    for n, text in enumerate(_FILLERS_ZH):
        _say(manager, clock, text, n)
    old = _say(manager, clock, "我住在上海浦东张江这边，周末有什么好去处推荐吗？", 5)
    new = _say(manager, clock, "来杭州之后房租直接省了一半，就是每周回上海开会要坐高铁，还好就一个小时", 40)
    wide = manager.recall("我住在哪个城市？", scope="alice", k=5, trace=True)
    assert wide.ids.index(new) < wide.ids.index(old)
    (demoted,) = [h for h in wide if h.memory.id == old]
    assert demoted.newer == new and "older" in demoted.flags
    # with k = 3 the newer one ranked fourth: it moves up into the hits served, the older one is not served
    result = manager.recall("我住在哪个城市？", scope="alice", k=3, trace=True)
    assert new in result.ids and old not in result.ids
    assert [h for h in result if h.memory.id == new][0].scores.get("newer") == 1.0


def _resolve_with_reserve(
    manager: MemoryManager,
    query: str,
    head: list[str],
    scores: tuple[float, ...],
    reserve: str,
    *,
    cosine: float,
    reserve_score: float,
) -> tuple[list[str], list[RecallHit], list[Conflict]]:
    """:func:`resolve_conflicts` of ``head`` (scored ``scores``) with one ``reserve`` hit below the window.

    The head's vectors are orthogonal; the reserve's has ``cosine`` with the first head hit and nothing else near.
    Returns the ranked ids, the ranked hits and the conflicts.
    """
    basis = np.eye(8, dtype=np.float32)
    vectors = {m: basis[n] for n, m in enumerate(head)}
    vectors[reserve] = cosine * basis[0] + float(np.sqrt(1 - cosine**2)) * basis[7]
    ranked, conflicts = resolve_conflicts(
        query,
        [RecallHit(memory=manager.require(m, scope="alice"), score=s) for m, s in zip(head, scores, strict=True)],
        vectors=vectors,
        reserve=[RecallHit(memory=manager.require(reserve, scope="alice"), score=reserve_score)],
        served=3,
    )
    return [h.memory.id for h in ranked], ranked, conflicts


@pytest.mark.parametrize(
    ("fillers", "replaced"),
    [
        # 上海 ties the two statements: no other candidate says it
        (("我在哪里可以买到便宜的机票？", "我住的小区停车位太少了", "我哪天有空去看电影？"), True),
        # ... a word other candidates say too ties nothing
        (("上海哪里可以买到便宜的机票？", "上海的小区停车位太少了", "我哪天有空去看电影？"), False),
    ],
)
def test_a_successor_below_the_window_replaces_a_contender(
    mm: tuple[MemoryManager, Clock], fillers: tuple[str, ...], replaced: bool
) -> None:
    """Recall's candidates below the window are searched for a contender's successor, which takes its place."""
    manager, clock = mm
    before = [_say(manager, clock, text, n) for n, text in enumerate(fillers)]
    old = _say(manager, clock, "我住在上海浦东张江这边，周末有什么好去处推荐吗？", 5)
    new = _say(manager, clock, "来杭州之后房租直接省了一半，就是每周回上海开会要坐高铁", 40)
    # cosine 0.8 with the older statement, nothing else near
    ids, ranked, conflicts = _resolve_with_reserve(
        manager, "我住在哪个城市？", [old, *before], (0.9, 0.8, 0.7, 0.6), new, cosine=0.8, reserve_score=0.35
    )
    if replaced:
        assert [(c.older, c.newer) for c in conflicts] == [(old, new)]
        # the newer one moves up to the last place served (k = 3), ahead of the hit it displaces, with its score
        assert ids == [*before[:2], new, before[2], old] and ranked[2].score == pytest.approx(0.6)
    else:
        assert not [c for c in conflicts if c.older == old] and new not in ids and ids[0] == old


# A question about the past finds what the speaker said before the statement that names the later value (session
# 16): "What did I drive before the Maverick?" matches "Traded in the Jeep for a Ford Maverick hybrid" best; the
# answer is the earlier "My Jeep Wrangler's soft top leaks", which shares "Jeep" with it and no word of the query.
# Read-time resolution pulls that *predecessor* from recall's candidates below the window and ranks it just ahead
# of the statement it preceded (reconcile._successors._predecessors).
_JEEP = "My Jeep Wrangler's soft top leaks. Any fix?"
_MAVERICK = "Traded in the Jeep for a Ford Maverick hybrid. Mileage is amazing."
_CAR_FILLERS = (
    "Quick chicken marinade for tonight?", "How do I fix a squeaky door hinge?", "Best podcast for a long run?",
)  # fmt: skip


def _resolve_past(
    query: str, *, fillers: tuple[str, ...] = _CAR_FILLERS, cosine: float = 0.3
) -> tuple[list[str], list[RecallHit], list[str], str, str]:
    """The statement naming the later value heads the hits; the earlier one waits below the window."""
    clock = Clock()
    manager = make_manager(clock=clock)
    old = _say(manager, clock, _JEEP, 0)
    others = [_say(manager, clock, text, 10 + n) for n, text in enumerate(fillers)]
    new = _say(manager, clock, _MAVERICK, 40)
    ids, ranked, conflicts = _resolve_with_reserve(
        manager, query, [new, *others], (0.9, 0.5, 0.4, 0.3), old, cosine=cosine, reserve_score=0.2
    )
    return ids, ranked, [c.older for c in conflicts], old, new


def test_the_statement_before_the_one_a_past_question_names_ranks_just_ahead_of_it() -> None:
    ids, ranked, older, old, new = _resolve_past("What did I drive before the Maverick?")
    assert ids[:2] == [old, new]
    assert "earlier" in ranked[0].flags and ranked[0].score == pytest.approx(0.9)
    assert older == [old]


@pytest.mark.parametrize(
    ("query", "fillers", "cosine"),
    [
        ("What do I drive now?", _CAR_FILLERS, 0.3),  # not a question about the past: the earlier statement stays out
        ("What did I drive before the Maverick?", _CAR_FILLERS, 0.1),  # sharing a word, but far apart in meaning
        # "Jeep" said by another hit too ties nothing
        ("What did I drive before the Maverick?", ("Jeep or Bronco for off-road?", *_CAR_FILLERS[1:]), 0.3),
    ],
)
def test_no_predecessor_without_a_past_question_a_shared_word_alone_and_some_closeness(
    query: str, fillers: tuple[str, ...], cosine: float
) -> None:
    ids, _ranked, older, old, _new = _resolve_past(query, fillers=fillers, cosine=cosine)
    assert old not in ids and old not in older


def test_recall_answers_what_came_before_the_value_a_past_question_names(mm: tuple[MemoryManager, Clock]) -> None:
    """End to end on the default embedder: the Jeep statement, ranked below the served hits by the query alone."""
    manager, clock = mm
    old = _say(manager, clock, _JEEP, 0)
    for n, text in enumerate(
        (
            "Consistent bedtime, cool room, no screens 30 minutes before: any other sleep tips?",
            "I work out Monday, Wednesday and Friday at 6 a.m. before work.",
            "What should I eat before a long run?",
            "Which tires are best before winter?",
        )
    ):
        _say(manager, clock, text, 5 + n)
    new = _say(manager, clock, _MAVERICK, 40)
    result = manager.recall("What did I drive before the Maverick?", scope="alice", k=3)
    assert result.ids[:2] == [old, new]


# Session 14: look-alikes of an update (another owner, another thing, another unit, a pet just added, a past state,
# a friend of the person asked about) and updates said the same ways that must still replace the older value.


def test_units_of_numbers_name_what_they_count() -> None:
    assert units_of("I take 250mg of it twice a day") == {"mg"}
    assert units_of("skip it for three days before the scan") == {"day"}
    assert units_of("the fixed rate is 4.2%") == {"%"} and units_of("rent is $1,900") == {"money"}
    assert units_of("she's 6 years old") == {"year"} and units_of("房租涨到3200元") == {"money"}
    assert units_of("Theo is 9") == frozenset()  # a bare number carries none
    assert units_of("bp 150 over 90, so she doubled it to 20mg") == frozenset()  # not every number has one


def test_a_value_said_as_a_past_state_is_no_present_value() -> None:
    (clause,) = clauses_of("I used to live in Boston, so a 40 degree morning here feels balmy")
    assert not clause.past  # the part with digits states the present ...
    assert "boston" not in present_values(clause, "place")  # ... but the place is the one left behind


def test_a_possessive_of_someone_else_owns_the_attribute_asked_for() -> None:
    wanted = query_terms("What's my extension at the office?")
    assert owned_by_another("Ha, the front desk's extension is 2210 and I keep calling it", wanted)
    assert not owned_by_another("that's my extension now, 2290", wanted)  # a contraction owns nothing
    assert not owned_by_another("my brother's hosting the office party", query_terms("Where is the party?"))
    assert not owned_by_another("this morning's weigh-in said 71", query_terms("How much do I weigh?"))


def test_a_person_named_after_the_value_is_not_whose_value_it_is() -> None:
    (nephew,) = clauses_of("My niece Ada is 11 and has a laptop, so Noah keeps asking for one")
    assert not named_before_value(nephew, frozenset({"noah"}), "number")
    (friend, _rest) = clauses_of("Noah's best friend turned 12 yesterday, we baked all day")
    assert friend.subject == "friend"
    assert not named_before_value(friend, frozenset({"noah"}), "number")
    (mom,) = clauses_of("My brother Sam reminded me mom's birthday is the 16th")
    assert named_before_value(mom, frozenset({"mom"}), "time")


def test_a_name_after_an_addition_belongs_to_the_one_added() -> None:
    message = "We caved and got a guinea pig too. Her name is Clover."
    added, name = clauses_of(message)
    assert added.additive and added_before(name, message)
    message = "Moved to Leeds in May. Her name is on the lease too."
    assert not added_before(clauses_of(message)[0], message)
    message = "Also, I might get a cleaning kit, any picks? By the way, I wore them again, six times now."
    assert not added_before(clauses_of(message)[-1], message)  # not right after the addition
    assert not _new_kind(frozenset({"dog", "name"}), "Scout died in March, so we adopted a collie named Bean.")
    assert _new_kind(frozenset({"dog", "name"}), "We adopted a kitten! Her name is Fig.")


def test_a_number_of_another_thing_is_no_new_value_of_the_one_asked_for() -> None:
    wanted = query_terms("How much is my rent?")
    assert number_of_another_thing(clauses_of("Viewed a 3-bed on Friday for $2,450.")[0], wanted)
    assert number_of_another_thing(clauses_of("The unit next door is listed at $2,300.")[0], wanted)
    assert not number_of_another_thing(clauses_of("Rent goes up to $2,050 in March.")[0], wanted)
    assert not number_of_another_thing(clauses_of("The lease renewal came: $2,050 from March.")[0], wanted)
    assert not number_of_another_thing(clauses_of("I pay $2,050 now.")[0], wanted)


def test_a_thing_wanted_said_as_a_noun_phrase_asks() -> None:
    assert asks_unmarked("best way to store fresh basil")
    assert asks_unmarked("good high protein snacks for work")
    assert not asks_unmarked("best friend moved to Ohio last week")
    assert not asks_unmarked("Good news for everyone: I got the job")
    assert asks_unmarked("成都必去的地方有哪些") and asks_unmarked("这个药能停吗")
    assert not asks_unmarked("我在成都上班")


def test_the_user_named_in_the_third_person_is_the_speaker() -> None:
    from memlineage.reconcile._query import as_speaker
    from memlineage.reconcile._signals import asks_about_speaker

    assert as_speaker("What is the user's current job?") == "What is my current job?"
    assert asks_about_speaker(as_speaker("Which city does the user live in now?"))
    assert as_speaker("用户现在住在哪个城市？") == "我现在住在哪个城市？"
    assert as_speaker("How do I add a user to the team?") == "How do I add a user to the team?"  # no speaker named


def test_an_implicit_update_close_in_meaning_contends_though_less_close_to_the_query() -> None:
    from memlineage.reconcile._compete import competes

    clock = Clock()
    manager = make_manager(clock=clock)
    old = manager.require(_say(manager, clock, "I'm a junior data analyst at an insurance company.", 0), scope="alice")
    text = "They made me team lead for the analytics group last month, so I manage four people now."
    new = manager.require(_say(manager, clock, text, 40), scope="alice")
    query = "What's my role at work?"
    # a third as close to the query as the older one, but close in meaning to it: it contends
    assert competes(query, old, new, cosine=0.42, relevance=(0.64, 0.23), contenders=True) is not None
    # ... not when it is far less close to the query (another topic of the same user)
    assert competes(query, old, new, cosine=0.42, relevance=(0.64, 0.15), contenders=True) is None
    assert competes(query, old, new, cosine=0.22, relevance=(0.64, 0.23), contenders=True) is None


def test_several_earlier_statements_of_one_later_one_keep_their_order_ahead_of_it() -> None:
    from memlineage.reconcile._placing import Conflict, _earlier_first

    clock = Clock()
    manager = make_manager(clock=clock)
    texts = [
        "cholesterol didn't drop enough so now I'm on 40 of the atorvastatin",
        "started atorvastatin 20mg today, any foods to avoid?",
        "my landlord wants another $100 a month",
        "tore my calf, had to drop out of the half marathon",
    ]
    hits = [
        RecallHit(memory=manager.require(_say(manager, clock, t, d), scope="alice"), score=s)
        for t, d, s in zip(texts, (40, 0, 10, 20), (0.8, 0.6, 0.3, 0.2), strict=True)
    ]
    ids = [h.memory.id for h in hits]
    # "what dose was I on originally?": the dose started with and, loosely, two other topics are earlier than the
    # dose now; the best ranked of them ends first
    rivals = {i: Conflict(ids[i], ids[0], "earlier") for i in (3, 1, 2)}
    order = [h.memory.id for h in _earlier_first(hits, rivals)]
    assert order == [ids[1], ids[2], ids[3], ids[0]]


def test_a_value_put_in_place_for_another_thing_replaces_nothing(mm: tuple[MemoryManager, Clock]) -> None:
    manager, clock = mm
    scope = {"user_id": "alice", "session_id": "s1"}
    flight = manager.remember("booked my flight to Boise for the 9th, any rental car tips?", scope=scope)
    clock.now += timedelta(minutes=2)
    manager.remember(
        "wait actually the hotel is the 10th not the 9th, so I need a place for the first night", scope=scope
    )
    assert manager.require(flight.id, scope="alice").status.value == "active"
    applied = [
        a for a in manager.activities(Scope(user_id="alice"), kinds=["update_detection"]) if a.outcome == "applied"
    ]
    assert not applied


def test_a_chain_of_earlier_statements_keeps_the_order_monotone_in_score() -> None:
    from memlineage.reconcile._placing import Conflict, _earlier_first

    clock = Clock()
    manager = make_manager(clock=clock)
    texts = ["I drive a Tesla Model 3 now", "my old car was a Prius", "before the Prius I had a Civic"]
    hits = [
        RecallHit(memory=manager.require(_say(manager, clock, t, d), scope="alice"), score=s)
        for t, d, s in zip(texts, (60, 30, 0), (0.9, 0.5, 0.2), strict=True)
    ]
    ids = [h.memory.id for h in hits]
    # the Prius statement is earlier than the Tesla one, the Civic statement earlier than the Prius one
    rivals = {1: Conflict(ids[1], ids[0], "earlier"), 2: Conflict(ids[2], ids[1], "earlier")}
    out = _earlier_first(hits, rivals)
    assert [h.memory.id for h in out] == [ids[2], ids[1], ids[0]]
    assert [h.score for h in out] == [0.9, 0.9, 0.9] and all("earlier" in h.flags for h in out[:2])


def _unit(*parts: float) -> np.ndarray:
    """A unit vector in 8 dimensions from its first coordinates."""
    v = np.zeros(8, dtype=np.float32)
    v[: len(parts)] = parts
    return v / np.linalg.norm(v)


def test_nearest_pairs_keeps_each_statements_nearest_later_and_earlier_ones_of_its_speaker() -> None:
    from memlineage.reconcile._successors import nearest_pairs

    clock = Clock()
    manager = make_manager(clock=clock)
    ids = [_say(manager, clock, f"statement number {n}", 10 * n) for n in range(4)]
    clock.now = T0 + timedelta(days=50)
    agent = manager.remember("an answer of the assistant", scope=Scope(user_id="alice"), source="agent").id
    hits = [RecallHit(memory=manager.require(m, scope="alice"), score=0.5) for m in [*ids, agent]]
    # cosines: 0-3 0.98, 1-3 0.61, 0-1 0.45, 1-2 0.09, 2-3 0.02, 0-2 0; the agent's statement is nearest to 0 of all
    unit = {
        ids[0]: _unit(1.0),
        ids[1]: _unit(0.5, 1.0),
        ids[2]: _unit(0.0, 0.1, 1.0),
        ids[3]: _unit(1.0, 0.2),
        agent: _unit(1.0, 0.01),
    }
    # each statement with its nearest later one (0-3, 1-3, 2-3) and its nearest earlier one (0-1, 1-2, 0-3); the
    # agent's statement is another speaker's: it pairs with none
    assert nearest_pairs(hits, unit, k=1) == {(0, 3), (1, 3), (2, 3), (0, 1), (1, 2)}
    # 2 is far from 0 on both sides; with two neighbours per side 0 is among 2's two nearest earlier statements
    assert nearest_pairs(hits, unit, k=2) == {(0, 3), (1, 3), (2, 3), (0, 1), (1, 2), (0, 2)}


def test_the_weakest_rule_pairs_statements_near_each_other_among_the_speakers_hits() -> None:
    """Two statements that are a user's best answers only for want of others compete only if near in meaning."""
    from memlineage.reconcile._compete import competes

    clock = Clock()
    manager = make_manager(clock=clock)
    old = _say(manager, clock, "I'm a junior data analyst at an insurance company.", 0)
    others = [
        _say(manager, clock, "My cat knocked a plant off the shelf again last night.", 10),
        _say(manager, clock, "Thinking about repainting the kitchen a pale green this spring.", 20),
    ]
    text = "They made me team lead for the analytics group last month, so I manage four people now."
    new = _say(manager, clock, text, 40)
    query = "What's my role at work?"
    assert competes(
        query, manager.require(old, scope="alice"), manager.require(new, scope="alice"), cosine=0.42,
        relevance=(0.64, 0.23), contenders=True, nearest=False,
    ) is None  # fmt: skip

    def conflicts_of(ids: list[str], unit: dict[str, np.ndarray]) -> set[tuple[str, str]]:
        rel = {old: 0.64, new: 0.23}
        hits = [
            RecallHit(
                memory=manager.require(m, scope="alice"), score=0.9 - 0.1 * n,
                scores={"vector": (1 + rel.get(m, 0.1)) / 2, "vector_rank": float(n + 1)},
            )
            for n, m in enumerate(ids)
        ]  # fmt: skip
        _, found = resolve_conflicts(query, hits, vectors=unit)
        return {(c.older, c.newer) for c in found}

    unit = {old: _unit(1.0), new: _unit(0.42, float(np.sqrt(1 - 0.42**2)))}
    # the user's only two statements near the question: the later one replaces the earlier
    assert (old, new) in conflicts_of([old, new], unit)
    # two statements said between them are nearer each of the two (cosine 0.6 with the older, 0.66 with the newer):
    # neither is among the other's two nearest on its side of time, so they do not compete
    unit[others[0]] = _unit(0.6, 0.45, 0.661)
    unit[others[1]] = _unit(0.6, 0.45, 0.0, 0.661)
    assert (old, new) not in conflicts_of([old, new, *others], unit)


def test_a_child_named_without_its_sex_is_the_son_or_daughter_asked_about(mm: tuple[MemoryManager, Clock]) -> None:
    # 孩子 points back at 女儿 as 她 would (points_at_child)
    said = (
        "我女儿在滨江第一小学上四年级，英语老跟不上",
        "周末带娃去哪玩比较好",
        "孩子转去外国语小学了，离家近多了，早上能多睡半小时",
    )
    _newer_wins(mm, said, 30, "我女儿现在在哪个小学上学？")


@pytest.mark.parametrize(
    ("text", "times"),
    [
        ("以前我一点都不爱做饭", set()),  # "not at all"
        ("这家便宜一点，就是远", set()),  # "a bit cheaper"
        ("给自己一点时间", set()),  # "a little time"
        ("有一点贵", set()),
        ("凌晨一点才睡", {"一点"}),  # a time of day goes with it
        ("一点半开会", {"一点半"}),  # minutes go with it
        ("每天加班到十一点", {"十一点"}),  # 一 after another numeral
        ("下午1点见", {"1点"}),
        ("婚礼定在五月二十号", {"五月二十号"}),
    ],
)
def test_yi_dian_alone_is_a_bit_not_one_oclock(text: str, times: set[str]) -> None:
    assert {v for c in clauses_of(text) for v in values_of(c, "time")} == times


def test_a_bit_of_the_past_gives_no_time_that_replaces_a_date() -> None:
    """ "一点都不爱做饭" gave the time 一点 (one o'clock), which replaced the wedding anniversary's date."""
    from memlineage.reconcile._compete import competes

    said = _alice_on_a_clock()
    old = said("我们的结婚纪念日是6月8号，想订个餐厅", 0)
    new = said("以前我一点都不爱做饭，现在真是变了，天天下厨。有什么快手菜推荐？", 30)
    query = "我的结婚纪念日是哪天？"
    assert competes(query, old, new, relevance=(0.5, 0.3), contenders=True) is None


def _alice_on_a_clock() -> Callable[[str, int], Memory]:
    """A store with the fake embedder; the returned call has alice say ``text`` on day ``days``."""
    c = Clock()
    mm = make_manager(clock=c)

    def said(text: str, days: int) -> Memory:
        c.now = T0 + timedelta(days=days)
        return mm.remember(text, scope=Scope(user_id="alice", session_id=f"d{days}"))

    return said


def test_a_thing_the_query_names_as_subject_is_the_speakers_own() -> None:
    """ "Wedding's booked" reads the wedding as its subject: asked about "my wedding", the speaker's later slot replaces
    its date. Someone else's wedding stays someone else's."""
    from memlineage.reconcile._compete import competes

    said = _alice_on_a_clock()

    old = said("Wedding's booked: May 9 at the Riverside mill in Bend!", 0)
    new = said("We took their October 4 slot with a discount, so I have to redo all the invites.", 30)
    assert competes("What's the date of my wedding?", old, new, relevance=(0.5, 0.4), contenders=True) is not None
    sisters = said("My sister's wedding is May 9 in Bend.", 40)
    ours = said("We took the October 4 slot at the mill for our party.", 70)
    assert competes("When is my sister's wedding?", sisters, ours, relevance=(0.5, 0.4), contenders=True) is None


def test_a_correction_cue_ties_a_number_said_in_other_words() -> None:
    """ "Scratch that number … capping it at $9,500" names none of the query's words: the cue and a number of the asked
    kind tie it to the budget it revises. Without the cue, a number far from the query stays another thing's."""
    from memlineage.reconcile._compete import competes

    said = _alice_on_a_clock()

    old = said("Our budget for the bathroom redo is $12,000. Is that enough for tile?", 0)
    corrected = said("Scratch that number. We talked it over and we're capping it at $9,500. Where do we start?", 20)
    other = said("We talked it over and we're capping the patio at $9,500. Where do we start?", 40)
    query = "What's my bathroom redo budget?"
    assert competes(query, old, corrected, cosine=0.29, relevance=(0.8, 0.3), contenders=True) is not None
    assert competes(query, old, other, cosine=0.29, relevance=(0.8, 0.3), contenders=True) is None
    # ... and a cue before a number of another unit revises that other thing ("14 it is": a screen size)
    laptop = said("My budget for a laptop is $1,200, mostly for schoolwork.", 50)
    size = said("Should I get the 14 inch or the 16? wait scratch that, the 16 is too heavy. 14 it is.", 60)
    laptop_query = "What's my laptop budget?"
    assert competes(laptop_query, laptop, size, cosine=0.25, relevance=(0.8, 0.3), contenders=True) is None


@pytest.mark.parametrize(
    ("older", "newer", "kept"),
    [
        # an option weighed and turned down, the kept thing named or said on its own after a turn
        (
            "I drive a 2018 Subaru Outback.",
            "Test drove a Model 3. Tempting, but the Outback is paid off so I'm keeping it.",
            True,
        ),  # noqa: E501
        (
            "I'm on T-Mobile, unlimited plan.",
            "Looked at switching to Verizon, but their offer to keep me won, so I'm staying.",
            True,
        ),  # noqa: E501
        (
            "I take metformin, 500 mg twice a day.",
            "Insurance denied the Ozempic, so I'm sticking with the metformin.",
            True,
        ),  # noqa: E501
        (
            "I make 92k as a civil engineer.",
            "Got an offer for 105k but the commute is 75 min. I'm probably turning it down.",
            True,
        ),  # noqa: E501
        ("My number is 555-0143.", "Switched to Verizon but keeping my number.", True),
        ("我开的是卡罗拉", "看了一圈特斯拉，还是觉得卡罗拉省心，不换了", True),
        ("我用的是招行的卡", "工行利率高一点，不过我不打算换", True),
        # ... not a staying of another thing, nor a staying after a change the message makes
        ("I live in Austin.", "Moved to Denver last week! Keeping my job remotely though.", False),
        ("I use Verizon.", "Switched to T-Mobile, kept my number.", False),
        ("I drink almond milk.", "Switched to oat milk, I'm sticking with it.", False),
        ("我住在上海浦东", "搬到杭州了，工作还是继续用上海的", False),
        # "还是用" often turns back, "留着" keeps a thing for another use: the value changed
        ("以后回答我用繁体字吧", "算了，还是用简体吧，繁体看着太累了。", False),
        ("我工资卡是招行的。", "公司统一要求办建行的卡发工资，招行那张就留着还信用卡了。", False),
        ("I drive a Civic.", "Should I stick with the Civic or get a Model 3?", False),
        ("I drive a Civic.", "My sister is keeping her Civic, I got a Model 3.", False),
    ],
)
def test_keeps_reads_an_option_turned_down(older: str, newer: str, kept: bool) -> None:
    """A later message that says the speaker keeps what they have keeps the older statement, whatever else it names."""
    from memlineage.reconcile._endings import keeps

    assert keeps(older, newer) is kept


def test_an_option_turned_down_replaces_nothing_at_read_time() -> None:
    """The car test-driven and not bought never outranks the car kept; the car bought does."""
    from memlineage.reconcile._compete import competes

    said = _alice_on_a_clock()
    old = said("I drive a 2018 Subaru Outback.", 0)
    kept = said("Test drove a Model 3 today. Tempting, but the Outback is paid off so I'm keeping it.", 30)
    bought = said("Traded the Outback in, picked up a Model 3 today!", 60)
    query = "What car do I drive?"
    assert competes(query, old, kept, cosine=0.45, relevance=(0.6, 0.5), contenders=True) is None
    assert competes(query, old, bought, cosine=0.45, relevance=(0.6, 0.5), contenders=True) is not None


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("Husband wears an 11, want to get him running shoes.", "husband"),
        ("The kids named the puppy Juniper, so she's Juniper now.", None),
        ("my gf is vegan and coming over for dinner", "gf"),
        ("My in-laws are in Columbus, Ohio.", "in-law"),
        ("my twin wants to do a joint celebration", "twin"),
        ("my twin brother lives in Denver", "brother"),
        ("Baby number three arrived Tuesday!", None),
        ("I live in Denver", "self"),
    ],
)
def test_family_said_without_my_is_the_subject(text: str, subject: str | None) -> None:
    """Casual chat drops the "my" ("Husband wears an 11"): the clause is about them. "The kids" and "baby" are as often
    the household the speaker speaks for."""
    from memlineage.reconcile._signals import clauses_of

    assert clauses_of(text)[0].subject == subject


def test_a_stay_stated_before_a_question_in_one_sentence_is_for_a_while() -> None:
    """ "this week I'm in Boston for a conference, where should I eat?" states a stay before it asks; a question with
    no value before it ("first appt next week, what should I bring?") and a move ("I moved to Boston this week") state
    none."""
    assert for_a_while_at_value("this week I'm in Boston for a conference, where should I eat near the seaport?")
    assert not for_a_while_at_value("first appt next week, what should I bring?")
    assert not for_a_while_at_value("I moved to Boston this week, where should I eat?")


def test_a_message_that_opens_with_a_stay_may_move_a_value_for_good() -> None:
    """ "这周真是忙疯了…对了，周会挪到周四上午十点了" opens with 这周 about the week, then moves the meeting for
    good: an opening marker frames no more than its own part (tried as a frame of the whole message: 7 Chinese
    updates and 2 English ones lost, "So this weekend was chaos. …")."""
    assert not for_a_while_at_value(
        "这周真的忙疯了：客户又改需求，晚上还得陪孩子写作业。对了，周会挪到周四上午十点了，因为新来的总监周三要飞上海。"
    )
    assert for_a_while_at_value("这周三的周会挪到周四上午十点了")
    assert not for_a_while_at_value(
        "So this weekend was chaos. My sister's dinner got moved. Anyway, I sold the Civic, I drive a RAV4 now."
    )


@pytest.mark.parametrize(
    ("text", "supposed"),
    [
        ("almost switched to Apple Music for the free trial but nah, my playlists are too good", True),
        ("I was going to move to Denver but the job fell through.", True),
        ("We nearly bought the Tacoma, then the dealer added fees.", True),
        ("I almost never eat meat.", False),
        ("I switched to Apple Music last week.", False),
    ],
)
def test_a_change_that_almost_happened_is_supposed(text: str, supposed: bool) -> None:
    """ "almost switched", "was going to move": the change did not happen, so the clause states no new value."""
    from memlineage.reconcile._signals import clauses_of

    assert clauses_of(text)[0].hypothetical is supposed


def test_this_weeks_one_time_is_for_a_while_though_something_happened() -> None:
    """ "studio's closed Tuesday … so this week's class is Wednesday" moves one class; "Jamie started at Brookside this
    week" says when a lasting change happened."""
    assert for_a_while_at_value("studio's closed Tuesday for the holiday so this week's class is Wednesday")
    assert not for_a_while_at_value("Jamie started at Brookside this week")


def test_when_i_lived_there_is_a_past_state() -> None:
    (clause,) = clauses_of("When we lived in Calgary the snow was a whole other level.")
    assert clause.past and not clause.asserts_present
    (now,) = clauses_of("When I moved to Calgary the snow surprised me.")
    assert not now.past  # a move is no state that ended


@pytest.mark.parametrize(
    ("text", "one_off"),
    [
        ("This Saturday only, my teacher moved piano to 2pm because she has a recital.", True),
        ("Only this Friday the gym opens at 9, they're waxing the floors.", True),
        ("The pool opens at 7 today, back to normal from Monday.", True),
        ("Piano moved to Saturdays at 2pm for good, the teacher changed her schedule.", False),
        ("Things are back to normal at work, finally.", False),
    ],
)
def test_one_weekday_only_is_for_a_while(text: str, one_off: bool) -> None:
    assert for_a_while_at_value(text) is one_off


def test_a_chinese_statement_with_no_value_of_the_asked_kind_needs_a_shared_topic() -> None:
    """The default embedder is English: for Chinese, the speaker's two best answers to a question that asks for a
    kind of value compete only when the newer gives a value of that kind the older does not, or shares a topic word
    with it. "我平时都用微信读书" says nothing of where the speaker works; "日语先放一边了…现在每天下班啃德语" shares
    日语 and replaces it. A question about the past names the newer value itself ("搬到大连之前")."""
    from memlineage.reconcile._compete import competes

    said = _alice_on_a_clock()
    work = said("我平时在望京上班，离家四站地铁", 0)
    reading = said("我平时都用微信读书，书架都几百本了", 30)
    assert competes("我平时在哪儿上班？", work, reading, relevance=(0.5, 0.3), contenders=True) is None
    japanese = said("我在学日语，打算年底考N2。", 40)
    german = said("日语先放一边了，公司要派我去慕尼黑常驻，现在每天下班啃德语。", 70)
    assert competes("我现在在学什么语言？", japanese, german, relevance=(0.5, 0.3), contenders=True) is not None
    tianjin = said("我住在天津河西区，楼下就是煎饼果子摊。", 80)
    dalian = said("搬到大连一个月了，海鲜便宜得不像话。", 120)
    assert competes("我搬到大连之前住在哪儿？", tianjin, dalian, relevance=(0.5, 0.3), contenders=True) is not None
