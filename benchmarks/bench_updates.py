"""Knowledge updates written by people who never saw the detector: is the current value served, the stale one not?

Suites (``benchmarks/data/updates_<lang>_<split>.json``) were written by helpers who had not read MemLineage's code
or pattern tables: relocations, jobs, diets, pets, children, corrected numbers and dates, cancelled plans,
withdrawals, implicit updates with no cue word, updates buried in long messages or spread over two turns; look-alike
**non-updates** (a sibling's city, a second pet, "I used to live in X", a hypothetical, a friend's news, the same
attribute of another person); and questions about the **past** value. English (``en``) and Chinese with mixed
Chinese-English (``zh``). The ``dev`` suites are for development; the ``test`` suites are run once, at the end, and
their first-run figures are the honest ones (``--suites test``). Once a test suite has been run, later changes are
measured on a fresh one written the same way by a helper who read neither the code nor the other suites:
``test2`` (first run after the read-time contenders rule was tuned on ``dev``), ``test3`` (first run after its
precision was tuned on ``dev2``, a development suite heavy in look-alike non-updates), ``test4`` (first run after
the neighbours of a correction stopped counting questions and the code had been tuned on no suite since test3's
run), ``test5`` (first run after unmarked questions stopped contending, a change diagnosed on test4), ``test6``
(first run after an "instead of" contrast stopped carrying its ruled-out value over and generic words stopped
anchoring a replaced value, changes diagnosed on test5 and the surfaces benchmark), ``test7`` (first run after
one-offs, kin without a possessive, noun-phrase requests, 怎么 questions and dateless clauses stopped demoting
facts, changes diagnosed on test6), ``test8`` (first run after Chinese numerals became numbers, a person named as
company stopped making a statement someone else's, and a pronoun started carrying the person asked about, changes
diagnosed on dev), ``test9`` (first run after spelled-out numbers, e-mail addresses, a value said in the next
clause and a person named by name where the query names a role became signals, changes diagnosed on test8),
``test10`` (first run after the weakest contender rule stopped pairing unrelated statements and sentences started
ending at an emoji, changes diagnosed on test9), ``test11`` (first run after a name after a preposition of place
stopped counting as a person asked about, "my old ..." started asking about the past, and a query's context word
stopped excluding a newer statement that names no other time, changes diagnosed on test10), ``test12`` (first run
after a pronoun started carrying the person asked about by a changed value, a Chinese stay-for-a-while marker
started counting only next to the value, and a capitalised thing stopped counting as a person, changes diagnosed on
test11), ``test13`` (first run after a role named by another of its names (女儿 / 闺女, mom / mother), identifiers in
mixed Chinese text (CA4112 / 3U8882) and, for Chinese, a changed date, number or identifier in statements sharing a
less common character started tying two statements, changes diagnosed on test12 and all earlier suites),
``test14`` (first run after statements filling different slots stopped contending, an alternative question and
someone named without a possessive stopped stating the speaker's value, a statement said to be misremembered
started being withdrawn, 在X工作 got a slot of its own, and the same place with another number became a changed
value, changes diagnosed on all earlier suites), ``test15`` (first run after a question after a dash, "back in" a
range, a person who only reports a change, and a name said alone after a role and that name were read, changes
diagnosed on test14), ``test16`` (first run at the code of test15's changes plus the review after it, tuned on
no suite since), ``test17`` (first run after a person acting on the speaker or whose place is named stopped making
a statement someone else's and one number became a value to compare, changes diagnosed on test16), ``test18``
(first run after one Chinese seam bigram stopped counting as a word left out, a change diagnosed on test16).
``test19`` (first run at the code of session 9's review, tuned on no suite since test18's run), ``test20``
(first run after a value said in another sentence of the newer message, two values of one shape, the person asked
about no longer counting as a context left out, and a time or number needing a tie beyond its kind, changes
diagnosed on test19 and all earlier suites), ``test21`` (first run after qualifiers that pick another thing of a
kind, a name said to still be there, a state "before this", an offer turned down, Chinese measure words and past
markers read per comma part, changes diagnosed on test20 and all earlier suites), ``test22`` (first run after a
stay for a while started to be read from statements only, a person named only in a question or request stopped
making a statement someone else's, changes diagnosed on test20 and test21), ``test23`` (first run after a pet of
another kind stopped giving a new name, a change diagnosed on test22), ``test24`` (first run after the weakest
contender rule stopped pairing a newer message that never says the words of the query, digits of an identifier
stopped giving a date, and Chinese withdrawals started needing a content word, changes diagnosed on test23),
``test25`` (first run at the code of session 10's review, tuned on no suite since test24's run), ``test26`` (first
run after a newer message naming the older statement's name, the week an event happened being no stay, a person
named beside the value being a side detail, "getting used to" being no past, schedules being one answer and amounts
changed by a factor, changes diagnosed on test25 and all earlier suites), ``test27`` (first run after an older name
said in any clause, another day of the same month, another code of letters and digits, and something given up "too"
being no addition, changes diagnosed on the suites up to test25), ``test28`` (first run after a value put in place
of one the statement names, successors searched below the window and a replacing statement taking the older one's
place, changes diagnosed on the suites up to test27), ``test29`` (first run at the same code, moved into a module of
its own), ``test30`` (first run after a newer clause whose subject the query names stopped counting as someone
else's, a change diagnosed on test29), ``test31`` (first run at the code of session 12's review, tuned on no
suite since test30's run; its helper wrote the answer turns as quoted words, converted to turn indices before the
first scored run), ``test32`` (first run after someone else's belief about the speaker stopped filling a slot, a
fact asked about in the same sentence became a statement a correction revises, someone acting on the speaker made a
clause the speaker's own and a correction after a cue and a colon went on about the person it corrects, changes
diagnosed on test31), ``test33`` (first run after a slot value of another grain stopped replacing without a cue,
diagnosed on test32: the code at the end of session 13), ``test34`` (first run after a value of another owner or of
another thing picked by a noun phrase, numbers of different units, a name after an addition, a place said as a past
state and a person asked about named only after another's value stopped demoting a fact, changes diagnosed on all
earlier suites in session 14), ``test35`` (first run after "the user" in a query started to be read as the speaker and
a pet said to be gone stopped being joined by the one adopted, changes diagnosed on test34), ``test36`` (first run at
the code of session 14's end, after a name went with an addition only right after it; its questions mix the user's
own voice and an agent's "the user"), ``test37`` (first run after Chinese clauses with 哪些 or a closing 吗 started
asking, diagnosed on test36), ``test38`` (first run at the code of session 14's end, reviewed, in session 15; its
categories come from one fixed list), ``test39`` (first run after a repair in the same conversation started to
replace the value just said, diagnosed on all earlier suites in session 15), ``test40`` (first run in session 16,
after recall's caches and before any change to update handling; the code of test39's run otherwise), ``test41``
(first run after a question about the past started to find the speaker's statement before the one it names,
diagnosed on all earlier suites in session 16), ``test42`` (first run after a student stopped being read as an
employee, an extractor's slot stopped counting for a supposition, a place beside a replaced place went with it and
Chinese function characters stopped being BM25 terms, diagnosed on test41 and all earlier suites), ``test43``
(first run in session 17, at the code of session 16's end, before and after the write path's drafts became
frozen), ``test44`` (first run after a clause pointing back at another person and the first of two qualifiers
started to decide whom and what a statement is about, diagnosed on test43), ``test45`` (first run at the same
code, session 17's last; test44 was diagnosed, and the two changes tried on it were dropped), ``test46`` and
``test47`` (first run in session 18, after look-alikes diagnosed on test43–test45 and all earlier suites were told
apart: a pet added, a change weighed in a question, another owner's role, a person or pronoun nearest a Chinese
value, a Chinese name echoed, small numbers and words of when tying no topic, two phone numbers written in groups,
another value in a clause naming a word of the query), ``test48`` (first run after a changed Chinese place started
tying two statements when the two values share a character of their frame, 住朝阳 / 住通州, a change diagnosed on
the suites up to test45), ``test49`` (first run at the same code as test48, session 18's last; a change tried
after test48's run was dropped), ``test50`` and ``test51`` (first run in session 19 at session 18's last code;
changes tried on test50's failures and the earlier suites were all dropped, so both ran on the same code),
``test52`` (first run after a later statement that ends what an earlier one said started to replace it, a change
diagnosed on test50, test51 and all earlier suites), ``test53`` (first run at session 19's last code, the same
update handling as test52), ``test54`` (first run at session 20's last code), ``test55`` (first run after a request to
the assistant stopped asking about events and "what night" started asking for a time, changes diagnosed on test54),
``test56`` (first run after clock times stopped being numbers asked for, "back in college" started stating a past and
an implicit update close in meaning started contending at a third of the older statement's closeness to the query,
changes diagnosed on test55 and all earlier suites; a person the speaker gives something to stopped counting as someone
else the statement is about, dealt in with the older suites at the same code before its first run), ``test57`` (first
run after several earlier statements moved ahead of a later one for a question about the past kept their rank order, a
change diagnosed on test56), ``test58`` (first run after the weakest rule started pairing only two statements near each
other in meaning among the speaker's hits, a change diagnosed on every English suite through test57), ``test59``
(first run after the vector leg started weighing a quarter for a query in Chinese script with the English-only
default embedder, a change diagnosed on every Chinese suite through test58), ``test60`` (first run after a Chinese
message that types a space for a comma before its question started stating in the part before it, and a correction
that rules out a number written with separators ("not 4,200") started ruling out the whole value; diagnosed on the
suites through test59), ``test61`` (first run after a Chinese 一点 alone stopped being one o'clock, a title's period
stopped cutting an event from the week it happens in, and a thing the query names as the older statement's subject
started to be the speaker's own, changes diagnosed on every suite through test60), ``test62`` (first run after an
option weighed and turned down in the same message ("Tempting, but the Outback is paid off so I'm keeping it") stopped
replacing the older statement, a relative named without "my" ("Husband wears an 11") became a clause's subject, and a
stay said before a question in one sentence ("this week I'm in Boston for a conference, where should I eat?") became a
stay for a while; changes diagnosed on every suite through test58), ``test63`` (first run at the same code as
test62's, after test62's run; written by another helper who read no code), ``test64`` (first run after a question
about someone else (a child, a pet) started letting the speaker's two best answers compete when the older one names
them, two statements sharing a content word stopped counting as about different things when the newer one never
says the query's words, and two English clauses naming the query's words and sharing one became related without close
vectors; changes diagnosed on test63 and every suite through test58), ``test65`` (first run after "when I lived in …"
became a past state; written by a helper who read no code), ``test66`` (first run after a Chinese statement that gives
no value of the asked kind started needing a topic word shared with the older one or the query to replace the
speaker's other best answer, and a Chinese repair started opening with an interjection or an apology (啊打错了);
changes diagnosed on the Chinese suites through test58; written by a helper who read no code).
``make bench`` runs them all in one store (``--suites all``), so its per-suite figures differ slightly from
separate runs.

The scenarios are dealt to users (scenarios of one suite file per user, at most one per topic, so a user's facts
never conflict across scenarios; until session 8 a user could hold, say, a "relocation" scenario of one suite and a
"residence" one of another, and ``--suites all`` then counted a real update between them as a lost non-update; until
session 14 one suite's "address" and "relocation" scenarios could meet in one user, and "I just moved to Portland"
replacing the other scenario's home was counted a wrong decision),
each user's scenarios interleaved in time in one store, each turn at its day, a session per day; the
question comes a day after the user's last turn. Every system gets the same turns (user and assistant messages) and
the same MiniLM vectors (see ``_update_harness.py`` for the systems).

Metrics at k = 3, per suite and system: updates: ``stale@3`` (top 3 holds an outdated turn; lower is better),
``current@3`` (holds the current turn); non-updates: ``kept@3`` (the still-true fact is in the top 3) and
``withdrawn`` (an automatic decision superseded or retracted it); past questions: ``past@3`` (the earlier value is in
the top 3); ``leaks`` (another user's memory served; must be 0); automatic decisions: applied and how many were
right (an update or withdrawal of a stale turn by a later turn of the same scenario), and the possible updates
recorded. With more than one suite, a ``total`` row per system sums every suite (:func:`totals`, also in the JSON
as ``systems.<name>.totals``) and gives its stale count as a share of raw Chroma's.

Run: ``.venv/bin/python benchmarks/bench_updates.py [--suites dev|dev2|test|...|test60|all] [--lang en|zh]
[--systems ...] [--failures]``; writes ``benchmarks/results/bench_updates.json``. ``--lang`` deals the suites of one
language only, so its figures differ from those of a deal of both.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _update_harness import History, Message, System, make_systems, rank_of  # noqa: E402
from bench_stale import load_embedder  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
RESULTS = Path(__file__).resolve().parent / "results" / "bench_updates.json"
SYSTEMS = ("chroma", "chroma+recency", "ml-core", "ml-langchain")
BASE = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)
K = 3
#: Every suite, in the order they were written (``--suites all`` runs them in one store).
SPLITS = (
    "dev",
    "dev2",
    "test",
    "test2",
    "test3",
    "test4",
    "test5",
    "test6",
    "test7",
    "test8",
    "test9",
    "test10",
    "test11",
    "test12",
    "test13",
    "test14",
    "test15",
    "test16",
    "test17",
    "test18",
    "test19",
    "test20",
    "test21",
    "test22",
    "test23",
    "test24",
    "test25",
    "test26",
    "test27",
    "test28",
    "test29",
    "test30",
    "test31",
    "test32",
    "test33",
    "test34",
    "test35",
    "test36",
    "test37",
    "test38",
    "test39",
    "test40",
    "test41",
    "test42",
    "test43",
    "test44",
    "test45",
    "test46",
    "test47",
    "test48",
    "test49",
    "test50",
    "test51",
    "test52",
    "test53",
    "test54",
    "test55",
    "test56",
    "test57",
    "test58",
    "test59",
    "test60",
    "test61",
    "test62",
    "test63",
    "test64",
    "test65",
    "test66",
)


def load_suites(which: str, lang: str = "*") -> list[dict[str, Any]]:
    """The scenarios of one split (``dev``, ``dev2``, ``test``..., ``test4``) or ``all``, tagged by suite.

    ``lang`` (``en``, ``zh`` or ``*``) keeps the suites of one language.
    """
    splits = SPLITS if which == "all" else (which,)
    out = []
    for path in sorted(DATA.glob(f"updates_{lang}_*.json")):
        if path.stem.rsplit("_", 1)[1] not in splits:
            continue
        suite = json.loads(path.read_text(encoding="utf-8"))
        for sc in suite["scenarios"]:
            out.append({**sc, "suite": suite["suite"]})
    return out


#: Category names that suites use for one topic (a user holding two of them would hold two conflicting facts).
_SAME_TOPIC = {
    **dict.fromkeys(
        ("relocation", "move", "moving", "home", "address", "home address", "housing", "住址", "地址", "住房", "城市"),
        "residence",
    ),
    **dict.fromkeys(("work", "career", "workplace", "job title", "工作", "职场"), "job"),
}


def _topic(sc: dict[str, Any]) -> tuple[str, str, str]:
    """A scenario's suite, language and topic: a user holds scenarios of one suite file, one per topic.

    Suites written by different helpers name topics differently ("relocation", "residence"); two scenarios of one
    user from different suites could state conflicting facts ("I'm in Portland" / "we moved to Minneapolis"), so
    a user only ever holds scenarios of one suite file.
    """
    category = str(sc["category"]).casefold()
    topic = _SAME_TOPIC.get(category) or _SAME_TOPIC.get(category.removesuffix("s")) or category.removesuffix("s")
    return sc["suite"], sc["lang"], topic


def deal(scenarios: Sequence[dict[str, Any]], seed: int = 11) -> tuple[list[History], list[dict[str, Any]]]:
    """Users with interleaved scenarios (one suite file, one per topic per user) and the questions to ask them."""
    rng = random.Random(seed)
    order = list(scenarios)
    rng.shuffle(order)
    users: list[list[dict[str, Any]]] = []
    for sc in order:
        suite, lang, topic = _topic(sc)
        for u in users:
            if len(u) < 5 and all(_topic(o) != (suite, lang, topic) and _topic(o)[:2] == (suite, lang) for o in u):
                u.append(sc)
                break
        else:
            users.append([sc])
    histories, asks = [], []
    for n, group in enumerate(users):
        h = History(user=f"user{n:03d}")
        t0 = BASE + timedelta(days=n)
        for sc in group:
            start = t0 + timedelta(days=rng.uniform(0, 20), seconds=rng.randrange(3600))
            for i, turn in enumerate(sc["turns"]):
                at = start + timedelta(days=float(turn["day"]), seconds=i)
                session = f"{h.user}-d{(at - BASE).days}"
                h.messages.append(Message(f"{sc['id']}:{i}:u", "user", turn["user"], at, session))
                if turn.get("assistant"):
                    h.messages.append(
                        Message(
                            f"{sc['id']}:{i}:a", "assistant", turn["assistant"], at + timedelta(seconds=30), session
                        )
                    )
        h.messages.sort(key=lambda m: m.at)
        asked = h.messages[-1].at + timedelta(days=1)
        histories.append(h)
        for sc in group:
            asks.append({"history": h, "scenario": sc, "asked": asked})
    return histories, asks


def _labels(sc: dict[str, Any], field: str) -> set[str]:
    return {f"{sc['id']}:{i}:u" for i in sc.get(field) or ()}


def score(system: System, histories: Sequence[History], asks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Ask every scenario's question; count per suite (see the module docstring)."""
    suites: dict[str, dict[str, Any]] = {}
    decisions = {h.user: system.decisions(h) for h in histories}
    for a in asks:
        sc, h = a["scenario"], a["history"]
        row = suites.setdefault(
            sc["suite"],
            {"update": 0, "stale@3": 0, "current@3": 0, "with_current": 0, "non_update": 0, "kept@3": 0,
             "withdrawn": 0, "past": 0, "past@3": 0},
        )  # fmt: skip
        labels = system.ask(h, sc["question"], a["asked"], K)
        kind = sc["kind"]
        if kind == "update":
            row["update"] += 1
            row["stale@3"] += rank_of(labels, _labels(sc, "stale")) <= K
            if sc.get("current"):
                row["with_current"] += 1
                row["current@3"] += rank_of(labels, _labels(sc, "current")) <= K
        elif kind == "non_update":
            row["non_update"] += 1
            keep = _labels(sc, "keep") or _labels(sc, "current")
            row["kept@3"] += rank_of(labels, keep) <= K
            row["withdrawn"] += any(d["target"] in keep and d["outcome"] == "applied" for d in decisions[h.user])
        else:
            row["past"] += 1
            row["past@3"] += rank_of(labels, _labels(sc, "current")) <= K
    # automatic decisions: right = a stale turn of a scenario replaced / withdrawn by a later turn of the same one
    by_id = {a["scenario"]["id"]: a["scenario"] for a in asks}
    for h in histories:
        for d in decisions[h.user]:
            target, statement = d["target"] or "", d["statement"] or ""
            sid = target.split(":", 1)[0]
            sc = by_id.get(sid)
            suite = suites.get(sc["suite"] if sc else "", None)
            if suite is None:
                suite = suites.setdefault("(unlabelled)", {})
            key = "applied" if d["outcome"] == "applied" else "possible"
            suite[key] = suite.get(key, 0) + 1
            right = (
                sc is not None and sc["kind"] in ("update", "past") and target in (_labels(sc, "stale")
                | (_labels(sc, "current") if sc["kind"] == "past" else set()))
                and statement.split(":", 1)[0] == sid and int(statement.split(":")[1]) > int(target.split(":")[1])
            )  # fmt: skip
            suite[f"{key}_right"] = suite.get(f"{key}_right", 0) + bool(right)
    return {"suites": suites, "leaks": system.leaks}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suites", choices=(*SPLITS, "all"), default="dev")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--lang", choices=("en", "zh", "*"), default="*", help="the suites of one language only")
    ap.add_argument("--fake-embedder", action="store_true")
    ap.add_argument("--failures", action="store_true", help="print the scenarios each MemLineage row gets wrong")
    args = ap.parse_args(argv)
    scenarios = load_suites(args.suites, args.lang)
    if not scenarios:
        print(f"SKIP: no suites under {DATA}")
        return 0
    embedder, label = load_embedder(args.fake_embedder)
    histories, asks = deal(scenarios)
    report: dict[str, Any] = {"embedder": label, "suites": args.suites, "users": len(histories), "systems": {}}
    for system in make_systems(args.systems.split(","), embedder):
        t0 = time.perf_counter()
        system.write(histories)
        report["systems"][system.name] = score(system, histories, asks)
        report["systems"][system.name]["seconds"] = round(time.perf_counter() - t0, 1)
        if args.failures and system.name.startswith("ml"):
            _print_failures(system, asks)
        system.close()
    print(f"\nUpdates said the way people say them ({args.suites}; {len(histories)} users in one store, k={K})")
    header = f"{'suite':<9}{'system':<16}{'stale@3':>9}{'current@3':>11}{'kept@3':>8}{'withdrawn':>10}{'past@3':>8}"
    print(header + f"{'decisions right/applied':>25}{'possible':>10}")
    for suite in sorted({sc["suite"] for sc in scenarios}):
        for name, r in report["systems"].items():
            s = r["suites"].get(suite, {})
            dec = f"{s.get('applied_right', 0)}/{s.get('applied', 0)}" if name.startswith("ml") else "-"
            pos = f"{s.get('possible_right', 0)}/{s.get('possible', 0)}" if name.startswith("ml") else "-"
            print(
                f"{suite:<9}{name:<16}{s['stale@3']:>5}/{s['update']:<3}{s['current@3']:>7}/{s['with_current']:<3}"
                f"{s['kept@3']:>4}/{s['non_update']:<3}{s['withdrawn']:>10}{s['past@3']:>5}/{s['past']:<2}{dec:>25}"
                f"{pos:>10}"
            )
    for r in report["systems"].values():
        r["totals"] = totals(r["suites"])
    peer = report["systems"].get("chroma", {}).get("totals")
    if len({sc["suite"] for sc in scenarios}) > 1:
        for name, r in report["systems"].items():
            t = r["totals"]
            ratio = f"  stale {t['stale@3'] / peer['stale@3']:.0%} of chroma's" if peer and peer["stale@3"] else ""
            print(
                f"{'total':<9}{name:<16}{t['stale@3']:>5}/{t['update']:<5}{t['current@3']:>5}/{t['with_current']:<5}"
                f"{t['kept@3']:>4}/{t['non_update']:<5}{t['withdrawn']:>6}{t['past@3']:>5}/{t['past']:<4}"
                + (f"{t.get('applied_right', 0):>17}/{t.get('applied', 0)}" if name.startswith("ml") else "")
                + ratio
            )
    print("leaks: " + ", ".join(f"{n} {r['leaks']}" for n, r in report["systems"].items()))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1, default=str))
    return 0


def totals(suites: dict[str, dict[str, int]]) -> dict[str, int]:
    """Every count of the per-suite rows of :func:`score` summed: ``{"stale@3": 517, "update": 2028, ...}``."""
    out: dict[str, int] = {}
    for row in suites.values():
        for key, n in row.items():
            out[key] = out.get(key, 0) + int(n)
    return out


def _print_failures(system: System, asks: Sequence[dict[str, Any]]) -> None:
    for a in asks:
        sc, h = a["scenario"], a["history"]
        labels = system.ask(h, sc["question"], a["asked"], K)
        bad = (sc["kind"] == "update" and rank_of(labels, _labels(sc, "stale")) <= K) or (
            sc["kind"] != "update" and rank_of(labels, _labels(sc, "current") or _labels(sc, "keep")) > K
        )
        if bad:
            texts = {m.label: m.text for m in h.messages}
            print(f"--- {system.name} {sc['id']} ({sc['kind']}, {sc['category']}): {sc['question']}")
            for lab in labels:
                print(f"    {lab}: {texts.get(lab or '', '?')[:110]}")


if __name__ == "__main__":
    raise SystemExit(main())
