"""A repair said in the same conversation ("argh no, 415-555-0129. swapped the last two") replaces the value just said.

The repair rarely repeats the words it corrects and names no subject of its own, so neither the rule tables nor the
generic signals pair it with the statement it takes back (``reconcile._generic.repair_update``).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from memlineage import Scope, Status
from memlineage.reconcile import Candidate, Statement, repairs
from memlineage.reconcile._generic import repair_update
from memlineage.testing import make_manager

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


def _said(first: str, then: str, *, gap: timedelta = timedelta(minutes=2), same_session: bool = True) -> tuple:
    now = [T0]
    mm = make_manager(clock=lambda: now[0])
    scope = Scope(user_id="alice", session_id="s1")
    old = mm.remember(first, scope=scope, source="user", valid_from=T0)
    now[0] = T0 + gap
    later = scope if same_session else Scope(user_id="alice", session_id="s2")
    new = mm.remember(then, scope=later, source="user", valid_from=now[0])
    status = mm.get(old.id, scope=scope).status
    decisions = mm.activities(Scope(user_id="alice"), kinds=["update_detection"], limit=10)
    mm.close()
    return status, new, decisions


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("new number: 415-555-0192", "argh no, 415-555-0129. swapped the last two"),
        (
            "Our rent is $2,150 a month, is that reasonable for a two-bedroom?",
            "Wait, I misremembered, it went to $2,350",
        ),
        ("My yoga class is Tuesdays at 6pm", "Wait, I just checked the app, they moved the class to Thursdays"),
        ("I'm flying to Denver on the 9th", "no wait, it's the 19th"),
        ("I take 20mg of lisinopril", "Oops, I mean 10mg"),
        ("Dinner with the Parks is at 7pm", "oh my bad, 7:30pm"),  # "my bad" owns nothing
        ("The building gate code is 4471.", "hang on, it's 4417"),
        ("新房子的房租每月4500元。", "说错了，是5400"),  # a bare number takes the unit it corrects
        ("我妈生日是5月12号", "不对不对 我记错了 是5月21"),
        # an interjection or an apology may open the repair, as "ugh, no" does in English
        ("帮我记一下我手机号 139 0012 3456", "啊打错了，是139 0012 3465"),
        ("老公生日是5月12号，帮我记着", "哎不对，我刚才说错了，他生日是5月21号"),
        ("房租每月4500", "不好意思打错了，是5400"),
        # an e-mail address is compared whole (its digits are no number of anything)
        ("帮我写个求职邮件的落款，邮箱写 wang.lei@163.com", "不好意思打错了，是 wanglei_2021@163.com，中间没有点"),
    ],
)
def test_a_repair_in_the_same_conversation_replaces_the_value_just_said(first: str, then: str) -> None:
    status, _new, decisions = _said(first, then)
    assert status is Status.SUPERSEDED
    assert [d.name for d in decisions] == ["update"]
    assert "a repair in the same conversation" in (decisions[0].metadata or {}).get("reason", "")


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("My hotel check-in is on the 9th", "No, thanks. My flight is on the 12th"),  # a thing of its own
        ("My daughter is 7", "No, my son is 10"),  # another person
        ("I walk 5 miles a day", "Wait, how many steps is 5 miles?"),  # a question
        ("The meeting is at 3pm", "sorry, what about lunch at 1pm? my sister Ana is coming"),
        ("I run 3 times a week", "No worries, I'll do 5 on Saturday"),  # no repair marker
        ("My phone number is 415-555-0192", "Nope, 2 of them"),  # a count is no phone number
        ("I run 3 times a week", "Tomorrow I run at 6am"),  # no repair marker, no correction cue
        # the repair takes back its own message's question, nothing said before it
        ("My mom lands on the 15th", "Brunch spot for Sunday? Oh scratch that, Saturday. Sunday's booked."),
        # a repair that gives a time is about a time: its digits are no new password or house number
        ("The guest wifi password is sunflower-4421", "sorry, it's 9:45 - 9:15 was before the daylight saving shift"),
        ("我住浦东张江那边，碧云路88弄", "不对不对，我记错了，是6月21号！！"),
        ("Max's vet appointment is at 10am on Monday.", "Sorry for the slow reply! The plumber is coming at 2pm."),
        ("Lily's soccer practice is at 5pm on Wednesdays.", "No, Tom's practice is at 6pm, Lily's is the early one."),
        ("The car rental is $45 a day.", "ugh sorry, the hotel is $180 a night."),  # a thing of its own
        ("The kids' dentist visit is at 11:00 on the 5th.", "no, sorry, I can't talk now. I'll be back at 4."),
        ("女儿的钢琴课在周六上午九点。", "不对，儿子的足球课是周六上午十点。"),  # another owner
        ("Put dana.k@lumenhealth.com on the form", "no wait, cc dana.k@lumenhealth.com too"),  # the same address
        ("Put dana.k@lumenhealth.com on the form", "No, my husband's is sam.k@lumenhealth.com"),  # another person's
        # "actually" opens talk as often as a repair (LongMemEval: "Actually, I've been thinking about a 16-35mm")
        ("I'll go with the Urban Disguise 40L bag.", "Actually, I've been thinking about a 16-35mm lens."),
        # a correction cue later in the message is no repair (LongMemEval: a 5K time, then a tennis tournament)
        ("My 5K personal best is 25:50", "I'm actually getting ready for a tennis tournament on May 6th"),
    ],
)
def test_what_only_looks_like_a_repair_replaces_nothing(first: str, then: str) -> None:
    status, _new, decisions = _said(first, then)
    assert status is Status.ACTIVE
    assert not [d for d in decisions if d.outcome == "applied"]


def test_a_repair_in_another_conversation_is_left_to_the_other_rules() -> None:
    status, _new, _decisions = _said(
        "new number: 415-555-0192", "argh no, 415-555-0129", gap=timedelta(days=3), same_session=False
    )
    assert status is Status.ACTIVE


def test_only_the_latest_statement_with_a_value_of_the_kind_is_taken_back() -> None:
    when = T0
    st = Statement(content="no wait, it's the 19th", source="user", valid_from=when, session="s1")
    older = Candidate(
        id="a", content="The dentist is on the 2nd", source="user", valid_from=when - timedelta(minutes=9), session="s1"
    )
    latest = Candidate(
        id="b", content="I fly out on the 9th", source="user", valid_from=when - timedelta(minutes=1), session="s1"
    )
    found = repair_update(st, [older, latest])
    assert found is not None and found.target == "b"
    # the latest statement giving a time gives the same time: nothing earlier is taken back
    same = Candidate(
        id="c", content="I fly out on the 19th", source="user", valid_from=when - timedelta(minutes=1), session="s1"
    )
    assert repair_update(st, [older, same]) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("argh no, 415-555-0129", True),
        ("Wait, they moved it to Thursdays", True),
        ("不对不对 是5月21", True),
        ("啊打错了，是139 0012 3465", True),
        ("哎我刚说错了，是3号", True),
        ("啊这家店不错，是5号开的", False),  # an interjection alone takes nothing back
        ("oops, typo: dana.kim@lumenhealth.com", True),  # an address is a value a repair gives
        ("嗯嗯好的，是3点对吧", False),
        ("No worries, see you at 5", False),
        ("No, I cancelled it", False),  # no number or day: the withdrawal rules read it
        ("I moved it to the 19th", False),  # no repair opening (the correction cue rules read it)
    ],
)
def test_repairs_tells_which_statements_read_the_recent_ones(text: str, expected: bool) -> None:
    assert repairs(text) is expected


@pytest.mark.parametrize(
    ("first", "then", "kept"),
    [
        # one value for one: the statement taken back is written again put right, its other facts with it
        (
            "My dentist appointment is on the 17th. I prefer morning slots.",
            "no wait, it's the 19th",
            "My dentist appointment is on the 19th. I prefer morning slots.",
        ),
        (
            "The pediatrician wants her on 5 ml of the syrup.",
            "wait, 7.5 ml, not 5",
            "The pediatrician wants her on 7.5 ml of the syrup.",
        ),
    ],
)
def test_a_repair_puts_the_statement_right_and_keeps_its_other_facts(first: str, then: str, kept: str) -> None:
    now = [T0]
    mm = make_manager(clock=lambda: now[0])
    scope = Scope(user_id="alice", session_id="s1")
    old = mm.remember(first, scope=scope, source="user", valid_from=T0)
    now[0] = T0 + timedelta(minutes=2)
    mm.remember(then, scope=scope, source="user", valid_from=now[0])
    assert mm.get(old.id, scope=scope).status is Status.SUPERSEDED
    live = [m.content for m in mm.find(scope=scope, include_suspect=False)]
    assert kept in live and first not in live
    mm.close()
