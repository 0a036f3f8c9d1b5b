"""After ``erase``, the erased words are nowhere: no table, lexical index or in-process structure (issue 27).

The words go in through every write path (tests/_erasure_probe.py); the search is generic: every column of every
ledger table, the lexical index of the running process, every object reachable in the process. A second user
writes the same kinds of data (with other words, or with the very same words) and keeps all of it.
File-level checks of the embedded store and PostgreSQL: tests/integration/test_erasure_everywhere.py.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from memlineage import MemoryManager, Scope, Status
from memlineage.testing import make_manager
from sqlalchemy import event

ALICE = Scope(user_id="alice", session_id="s1")
BOB = Scope(user_id="bob", session_id="s1")


@pytest.fixture
def store(erasure_probe: ModuleType) -> Any:
    mm = make_manager(embedder=erasure_probe.QuietEmbedder())
    yield mm
    mm.close()


def test_erase_scope_leaves_no_word_in_any_table_index_or_object(store: MemoryManager, erasure_probe: ModuleType):
    probe = erasure_probe
    mine, theirs = probe.ALICE_WORDS, probe.BOB_WORDS
    probe.check_words([*mine, *theirs])
    probe.write_everything(store, ALICE, mine)
    probe.write_everything(store, BOB, theirs)
    store.flush_index()
    before = {w for _, _, w in probe.ledger_hits(store, mine)}
    stored = {w for i, w in enumerate(mine) if i not in probe.NOT_STORED}
    assert before == stored, f"the probe must store every word first: {sorted(stored - before)} missing"
    assert probe.lexical_hits(store, "alice", mine), "the lexical index must hold the words first"

    receipt = store.erase(scope=Scope(user_id="alice"), reason="GDPR request")

    assert probe.heap_hits(mine, exclude=mine) == []  # first: the queries below put their words in caches again
    assert receipt.memory_ids and receipt.activities_redacted > 0
    assert probe.ledger_hits(store, mine) == []
    assert probe.lexical_hits(store, "alice", mine) == []
    assert store.recall(" ".join(mine), scope=Scope(user_id="alice"), k=10).hits == []
    assert store.verify().ok
    # the other user keeps every word, searchable
    assert {w for _, _, w in probe.ledger_hits(store, theirs)} == {
        w for i, w in enumerate(theirs) if i not in probe.NOT_STORED
    }
    assert probe.lexical_hits(store, "bob", [theirs[1], theirs[2]]) == [theirs[1], theirs[2]]


def test_erase_scope_keeps_every_row_of_another_user_with_the_same_words(
    store: MemoryManager, erasure_probe: ModuleType
) -> None:
    words = erasure_probe.ALICE_WORDS
    erasure_probe.write_everything(store, ALICE, words)
    erasure_probe.write_everything(store, BOB, words)
    store.flush_index()
    hits = {h.id for h in store.recall(f"I moved to {words[1]}", scope=Scope(user_id="bob"), k=5)}
    bob_before = erasure_probe.user_rows(store, "bob")  # after the recall: it counts uses
    assert sum(map(len, bob_before.values())) > 50

    store.erase(scope=Scope(user_id="alice"))

    assert erasure_probe.user_rows(store, "bob") == bob_before
    assert {h.id for h in store.recall(f"I moved to {words[1]}", scope=Scope(user_id="bob"), k=5)} == hits
    assert erasure_probe.lexical_hits(store, "bob", words[:3]) == words[:3]
    assert store.verify().ok


def test_erasing_a_session_drops_its_words_from_other_sessions_records_and_index(
    store: MemoryManager, erasure_probe: ModuleType
) -> None:
    """An update in session s2 quoted the value erased with s1 (decision evidence), and the lexical index found
    the s2 version by the s1 words it replaced; a withdrawal in s2 likewise kept the withdrawn s1 words."""
    s1, s2 = ALICE, Scope(user_id="alice", session_id="s2")
    store.remember("I live in Zorblax", scope=s1)
    moved = store.remember("Actually I moved to Quimbok", scope=s2)
    trip = store.remember("I'm planning a trip to Plonkett in May", scope=s1)
    cancel = store.remember("The Plonkett trip is cancelled.", scope=s2)
    assert store.require(trip.id, scope=s1).status is Status.RETRACTED
    store.recall("Zorblax", scope=s2, k=3)  # loads the user's lexical leg
    assert erasure_probe.lexical_hits(store, "alice", ["Zorblax"]) == ["Zorblax"]  # the s1 value, and s2's version

    store.erase(scope=s1)

    assert erasure_probe.ledger_hits(store, ["Zorblax", "Plonkett in May"]) == []
    assert erasure_probe.lexical_hits(store, "alice", ["Zorblax", "Quimbok"]) == ["Quimbok"]
    assert store.recall("Quimbok", scope=s2, k=3).ids[0] == moved.id
    assert store.require(cancel.id, scope=s2).content == "The Plonkett trip is cancelled."  # its own words stay
    assert store.require(moved.id, scope=s2).status is Status.ACTIVE
    assert store.verify().ok


def test_erasing_one_memory_redacts_what_recorded_it(store: MemoryManager, erasure_probe: ModuleType) -> None:
    """``erase(memory_id)``: the chat occurrence that stored the message (its list content block, the tool-call
    arguments) and the update decisions that quoted it are redacted with it."""
    from memlineage.history import ChatEntry, ChatHistory

    history = ChatHistory(store, scope=ALICE)
    ask, call, _ = history.append(
        [
            ChatEntry("user", "book the Snorkax suite",
                      payload={"type": "human", "data": {"content": [{"type": "text", "text": "the Snorkax suite"}]}}),
            ChatEntry("assistant", "called book(Tibbolt)", calls={"c1": {"ref": "Tibbolt"}}),
            ChatEntry("tool", "booked", name="book", call_id="c1"),
        ]
    )  # fmt: skip
    home = store.remember("I live in Zorblax", scope=ALICE)
    moved = store.remember("Actually I moved to Quimbok", scope=ALICE)
    assert moved.supersedes == home.id

    store.erase(ask.memory.id, scope=ALICE)
    store.erase(call.memory.id, scope=ALICE)
    store.erase(moved.id, scope=ALICE)  # with its revision chain: both values

    assert erasure_probe.ledger_hits(store, ["Snorkax", "Tibbolt", "Zorblax", "Quimbok"]) == []
    assert [t.text for t in history.turns()] == ["booked"]
    assert store.verify().ok


def test_erase_runs_a_bounded_number_of_statements_whatever_the_number_of_memories() -> None:
    """Set-based: erasing 400 memories runs no more SQL statements than erasing 40 (it ran ~10 per memory)."""

    def statements(n: int) -> int:
        mm = make_manager()
        mm.remember_many([{"content": f"note {i} about erasure", "scope": ALICE} for i in range(n)])
        mm.remember_many([{"content": f"note {i} of bob", "scope": BOB} for i in range(5)])
        mm.flush_index()
        count = [0]

        def tick(*_: Any) -> None:
            count[0] += 1

        event.listen(mm.ledger.engine, "before_cursor_execute", tick)
        receipt = mm.erase(scope=Scope(user_id="alice"))
        event.remove(mm.ledger.engine, "before_cursor_execute", tick)
        assert len(receipt.memory_ids) == n and mm.stats(BOB)["memories"] == 5
        mm.close()
        return count[0]

    small, large = statements(40), statements(400)
    assert large <= small, (small, large)


def test_erasing_a_scope_drops_its_open_runs_from_the_process(store: MemoryManager, erasure_probe: ModuleType) -> None:
    """The run recorder kept an open run's user turn and tool-call arguments in the process after the erasure."""
    from memlineage.capture import RunRecorder, ToolCallSpec

    rec = RunRecorder.of(store)
    run = rec.start_run(ALICE, "run-open", "tell me about Zorblax")
    rec.model_step(run, text="Checking.", tool_calls=[ToolCallSpec("tc-1", "weather", {"city": "Quimbok"})])
    kept = rec.start_run(BOB, "run-bob", "tell me about Brakkot")
    del run

    store.erase(scope=Scope(user_id="alice"))

    assert erasure_probe.heap_hits(["Zorblax", "Quimbok"], exclude=erasure_probe.ALICE_WORDS) == []
    assert rec.run(ALICE, "run-open") is None and rec.run(BOB, "run-bob") is kept
    again = rec.start_run(ALICE, "run-open", "a new turn")  # the framework's next callback starts afresh
    assert again.user_memory_id is not None and store.require(again.user_memory_id, scope=ALICE).content == "a new turn"


def test_erasing_one_memory_drops_the_open_runs_that_hold_it(store: MemoryManager) -> None:
    """An open run whose turn, context or result is an erased memory leaves the process with it."""
    from memlineage.capture import RunRecorder

    scope = Scope(user_id="alice", session_id="s1")
    recorder = RunRecorder.of(store)
    run = recorder.start_run(scope, "run-1", user_text="My account number is X1234567")
    assert run is not None and run.user_memory_id is not None
    other = recorder.start_run(Scope(user_id="alice", session_id="s2"), "run-2", user_text="Hello there")
    store.erase(run.user_memory_id, scope=scope, reason="one memory")
    assert recorder.run(scope, "run-1") is None  # the run that held it is gone
    assert other is not None and recorder.run(Scope(user_id="alice", session_id="s2"), "run-2") is other


def test_a_busy_log_defers_the_checkpoint_and_never_fails_the_erasure(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A reader holding SQLite's write-ahead log made ``erase`` raise after the redaction had committed."""
    from memlineage.ledger import Ledger
    from sqlalchemy.engine import Connection
    from sqlalchemy.exc import OperationalError

    mm = make_manager(ledger=Ledger(f"sqlite:///{tmp_path / 'ledger.db'}"))
    kept = mm.remember("Alice's public note", scope=ALICE)
    gone = mm.remember("Alice's erased secret", scope=ALICE)
    real = Connection.exec_driver_sql

    def busy(self: Connection, statement: str, *args: Any, **kwargs: Any) -> Any:
        if "wal_checkpoint" in statement:
            raise OperationalError(statement, {}, Exception("database table is locked"))
        return real(self, statement, *args, **kwargs)

    monkeypatch.setattr(Connection, "exec_driver_sql", busy)
    with caplog.at_level("WARNING", logger="memlineage.services.lifecycle"):
        mm.erase(gone.id, scope=ALICE)
    assert mm.require(gone.id, scope=ALICE).content == "" and mm.require(kept.id, scope=ALICE).content
    assert any("checkpoint deferred" in r.getMessage() for r in caplog.records)
    mm.close()
