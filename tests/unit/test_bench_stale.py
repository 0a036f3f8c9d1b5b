"""The stale-memory benchmark: its scenarios, its plain-mode adapters' paths, its scoring and its oracle row.

Runs on FakeEmbedder with in-memory stores (``make_manager`` with the built-in policies, as ``open()`` has) and a
few users, so it is fast; the real figures come from ``benchmarks/bench_stale.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from memlineage import MemoryManager, Status
from memlineage.testing import make_manager

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stale.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_stale", _BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_stale", module)  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


bench = _load()
USERS = bench.generate()
SCENARIOS = bench.all_scenarios(USERS)


def _user(name: str):  # noqa: ANN202 - a bench.UserHistory
    return next(u for u in USERS if u.user == name)


def _open(clock, **options):  # noqa: ANN001, ANN202 - the bench's opener signature
    """What MemoryManager.open() gives (policies, value model, update detection) on in-memory parts."""
    return make_manager(clock=clock, **{**MemoryManager.default_options(), **options})


def test_scenarios_cover_every_kind_language_and_split() -> None:
    main = [s for s in SCENARIOS if s.split == "main"]
    held = [s for s in SCENARIOS if s.split == "heldout"]
    fresh = [s for s in SCENARIOS if s.split == "fresh"]
    assert len(main) >= 36 and len(held) >= 12 and len(fresh) >= 12
    cats = {"relocation", "job", "preference", "correction", "tool_price", "premise_withdrawn"}
    for split in (main, held, fresh):
        assert {s.category for s in split} == cats
        assert {s.lang for s in split} == {"en", "zh"}
    templates = [{s.template for s in split} for split in (main, held, fresh)]
    assert not (templates[0] & templates[1] or templates[0] & templates[2] or templates[1] & templates[2])
    assert len({s.user for s in main}) >= 4
    for uh in USERS:  # one topic per user, so the scenarios of a user never answer each other's question
        assert len({s.template for s in uh.scenarios}) == len(uh.scenarios)
    assert bench.generate() == USERS  # fixed seed, deterministic


def test_plain_turns_carry_no_verbs_or_labels_into_the_plain_rows() -> None:
    """The plain runners only see text: the oracle's op/target fields are never read by them."""
    source = _BENCH.read_text(encoding="utf-8")
    for cls in ("PlainLangChainRunner", "PlainLlamaIndexRunner"):
        body = source.split(f"class {cls}")[1].split("\nclass ")[0]
        for forbidden in ("supersede", "retract", "slot=", ".op", ".target", "derived_from", "answer_key"):
            assert forbidden not in body, f"{cls} uses {forbidden!r}"


def test_labeller_finds_keys_and_foreign_owners() -> None:
    lab = bench.Labeller(USERS)
    a, b = USERS[0], USERS[1]
    sc = a.scenarios[0]
    old = sc.text_of(sc.stale[0])
    served = lab.served(a.user, f"input: {old}\noutput: Noted.")
    assert sc.stale[0] in served.keys and served.owner == a.user
    foreign = lab.served(a.user, b.scenarios[0].text_of(b.scenarios[0].current[0]))
    assert foreign.owner == b.user and not foreign.keys


@pytest.mark.parametrize("runner", ["PlainLangChainRunner", "PlainLlamaIndexRunner"])
def test_plain_runners_write_through_the_adapters(runner: str) -> None:
    """Every turn reaches the store as user / agent / tool memories; the question is read back through the adapter."""
    uh = _user("main-en-u4")  # has a price refresh and a withdrawn premise
    clock = bench.Clock()
    mm = _open(clock)
    r = getattr(bench, runner)(mm, clock, bench.Labeller(USERS))
    try:
        r.play(uh)
        mems = mm.find(scope=r.scope(uh, bench.ASK_AT))
        sources = {str(m.source) for m in mems}
        assert {"user", "agent", "tool:flight_search"} <= sources
        sc = next(s for s in uh.scenarios if s.category == "tool_price")
        served = r.ask(uh, sc.question, bench.K)
        assert 0 < len(served) <= bench.K and all(s.owner == uh.user for s in served)
        tool_mem = next(m for m in mems if str(m.source) == "tool:flight_search")
        assert tool_mem.lineage.activity_id  # the tool call is an activity (its call id) in both adapters
    finally:
        r.close()  # closes the manager too


def test_oracle_row_serves_no_stale_memory_and_cascades() -> None:
    users = [_user("main-en-u4"), _user("main-zh-u2")]
    emb, _ = bench.load_embedder(fake=True)
    built = bench.factories(emb, bench.Labeller(users), Path("/nonexistent"), open_manager=_open)
    res = bench.run_system("oracle", "ml-oracle", built["ml-oracle"], users)
    assert res.status == "ok"
    scs = bench.all_scenarios(users)
    m = res.metrics(scs)
    assert m["stale"] == 0 and m["leaks"] == 0 and m["n"] == len(scs)


def test_oracle_statuses() -> None:
    uh = _user("main-en-u4")
    clock = bench.Clock()
    mm = _open(clock, reconciler=None)
    try:
        r = bench.OracleRunner(mm, clock, bench.Labeller(USERS))
        r.play(uh)
        scope = r.scope(uh, bench.ASK_AT)
        ids = r.ids[uh.user]

        def status(key: str) -> Status:
            return mm.require(ids[key], scope=scope).status

        trip = next(s for s in uh.scenarios if s.category == "premise_withdrawn")
        assert status(trip.stale[0]) is Status.RETRACTED
        assert status(trip.stale[1]) is Status.SUSPECT
        price = next(s for s in uh.scenarios if s.category == "tool_price")
        assert status(price.stale[0]) is Status.SUPERSEDED
        assert status(price.stale[1]) is Status.SUSPECT  # the answer built on the old fare
    finally:
        mm.close()


def test_plain_vector_memory_serves_stale_and_metrics_count_it() -> None:
    """The LangChain baseline on plain text serves old values: the metric is able to see staleness."""
    emb, _ = bench.load_embedder(fake=True)
    users = USERS[:2]
    res = bench.run_system("lc", "langchain", lambda: bench.LangChainRunner(emb, bench.Labeller(users), 5), users)
    assert res.status == "ok"
    m = res.metrics(bench.all_scenarios(users))
    assert m["stale"] >= m["n"] // 2 and m["leaks"] == 0
    assert bench.failures(res, bench.all_scenarios(users))


def test_leaks_are_counted() -> None:
    a, b = USERS[0], USERS[1]
    res = bench.SystemResult("x", "x")
    sc = a.scenarios[0]
    res.top = {s.id: [] for s in a.scenarios}
    res.top[sc.id] = [bench.Served(frozenset(), b.user), bench.Served(frozenset({sc.current[0]}), a.user)]
    m = res.metrics(a.scenarios)
    assert m["leaks"] == 1 and m["current"] == 1 and m["stale"] == 0


def test_reconciler_row_is_built_and_reports_when_it_cannot_be() -> None:
    from memlineage.reconcile import LLMReconciler

    make = bench.reconciler_factory()
    assert make is not None and isinstance(make(), LLMReconciler)
    res = bench.run_system("r", "ml-reconciler", lambda: None, USERS[:1])  # what the row shows without the module
    assert res.status.startswith("n/a: not built")


def test_scripted_reconciler_answers_the_llm_reconcilers_prompt() -> None:
    """Through the real LLMReconciler: its prompt in, validated decisions out (decided_by llm, not the fallback)."""
    from memlineage.reconcile import Action, Candidate, LLMReconciler, Statement

    rec = LLMReconciler(bench.ScriptedReconcilerModel(), fallback=None)
    old_fav = Candidate(id="m-fav", content="My favourite restaurant is Din Tai Fung.", source="user")
    sister = Candidate(id="m-sis", content="My sister lives in Toronto with her two kids.", source="user")
    home = Candidate(id="m-home", content="I live in Berlin, in a flat near the old town.", source="user")
    trip = Candidate(id="m-trip", content="I'm flying to Lisbon for a robotics conference on June 12.", source="user")
    fare = Candidate(id="m-fare", content="Lufthansa LH1234 Frankfurt to Lisbon on June 12: EUR 412.", source="tool:x")
    items = [
        (Statement(content="My favourite restaurant is Haidilao.", source="user"), [old_fav, sister]),
        (Statement(content="Actually I moved to Munich last month.", source="user"), [sister, home]),
        (Statement(content="Forget what I said about the Lisbon trip.", source="user"), [home, trip]),
        (Statement(content="Lufthansa LH1234 Frankfurt to Lisbon on June 12: EUR 468.", source="tool:x"), [fare]),
        (Statement(content="I started a pottery class.", source="user"), [sister]),
    ]
    out = rec.decide(items)
    assert [(d.action, d.target) for d in out] == [
        (Action.UPDATE, "m-fav"),
        (Action.UPDATE, "m-home"),
        (Action.CONTRADICT, "m-trip"),
        (Action.UPDATE, "m-fare"),
        (Action.NEW, None),
    ]
    assert {d.decided_by for d in out[:4]} == {"llm"} and rec.fallbacks == 0


def test_plain_rows_open_the_store_with_defaults_only(tmp_path: Path) -> None:
    """The plain rows pass no option to MemoryManager.open (the harness's embedder and clock aside)."""
    seen: list[dict[str, object]] = []

    def opener(clock, **options):  # noqa: ANN001, ANN202
        seen.append(options)
        return _open(clock)

    emb, _ = bench.load_embedder(fake=True)
    built = bench.factories(emb, bench.Labeller(USERS), tmp_path, open_manager=opener)
    for key in ("ml-langchain", "ml-llamaindex", "ml-oracle"):
        runner = built[key]()
        runner.close()
    assert seen == [{}, {}, {"reconciler": None}]  # the oracle: explicit verbs only
    assert [k for k, _ in bench.SYSTEMS][0] == "ml-langchain"  # the headline row


@pytest.mark.parametrize("runner", ["PlainLangChainRunner", "PlainLlamaIndexRunner"])
def test_a_turn_the_adapter_refuses_is_counted_not_fatal(runner: str) -> None:
    from memlineage import InvalidInputError

    uh = _user("main-en-u4")
    clock = bench.Clock()
    mm = _open(clock)
    bad = uh.turns[3].user
    writes = mm.services.writes  # the write path under both remember and remember_many
    real = writes.write

    def refuse(drafts, **kwargs):  # noqa: ANN001, ANN003, ANN202
        if any(d.content == bad for d in drafts):
            raise InvalidInputError("refused for the test")
        return real(drafts, **kwargs)

    writes.write = refuse  # type: ignore[method-assign]
    r = getattr(bench, runner)(mm, clock, bench.Labeller(USERS))
    try:
        r.play(uh)  # the adapter never raises into the agent: the refusal is counted by the store, the play goes on
        assert r.errors == [] and sum(mm.stats()["adapter_errors"].values()) == 1
        assert len({m.content for m in mm.find(scope=r.scope(uh, bench.ASK_AT))}) > 5  # the other turns were written
    finally:
        r.close()  # closes the manager too
