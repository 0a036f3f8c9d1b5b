"""Export, import and backup of a store (issue 28): SQLite -> PostgreSQL -> SQLite round trips with counts and
per-table hashes equal, one-user exports, refused tampered files and busy targets, backups under a live writer."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from memlineage import Activity, MemoryManager, Scope
from memlineage.cli import app
from memlineage.errors import ConfigurationError, InvalidInputError, StoreLockedError
from memlineage.index import InMemoryIndex
from memlineage.testing import FakeEmbedder, make_manager
from memlineage.transfer import (
    ImportConflictError,
    TransferIntegrityError,
    export_store,
    import_store,
    read_header,
)
from typer.testing import CliRunner

from tests.integration.conftest import PgSchema

pytestmark = pytest.mark.integration

ALICE = Scope(user_id="alice", agent_id="planner", session_id="s1")
BOB = Scope(user_id="bob")
QUERIES = ("where does alice live", "which hotel", "flight price", "tea")


def _fill(mm: MemoryManager) -> dict[str, str]:
    """A store with every kind of row: versions in several statuses, derivations, corroboration, activities."""
    run = mm.record_activity(Activity(id="run-1", kind="agent_run", name="planner", scope=ALICE))
    city = mm.remember("Alice lives in Paris", scope=ALICE, source="user", activity_id=run.id)
    flight = mm.remember("Flight to Paris costs 120 EUR", scope=ALICE, source="tool:flight_api", activity_id=run.id)
    hotel = mm.remember(
        "Book Hotel Lumiere near the Louvre", scope=ALICE, source="reasoning", derived_from=[city.id, flight.id]
    )
    budget = mm.remember("Trip budget is 900 EUR", scope=ALICE, source="reasoning", derived_from=[flight.id])
    mm.end_activity(run.id, scope=ALICE, outcome="success")
    mm.remember("Alice likes green tea", scope=ALICE, source="user")
    dropped = mm.remember("Alice owns a red car", scope=ALICE, source="user")
    mm.retract(dropped.id, scope=ALICE, reason="wrong")
    mm.remember("Bob lives in Oslo", scope=BOB, source="user")
    bob_tea = mm.remember("Bob drinks black tea", scope=BOB, source="user")
    mm.remember("Bob should visit a tea house", scope=BOB, source="reasoning", derived_from=[bob_tea.id])
    moved = mm.supersede(city.id, "Alice lives in Berlin", scope=ALICE)  # hotel becomes suspect
    return {"city": city.id, "flight": flight.id, "hotel": hotel.id, "budget": budget.id, "berlin": moved.memory.id}


def _hits(mm: MemoryManager) -> list[list[str]]:
    out = []
    for q in QUERIES:
        for scope in (ALICE, BOB):
            out.append([h.id for h in mm.recall(q, scope=scope, k=3, include_suspect=True, reinforce=False)])
    return out


def _lineage(mm: MemoryManager, ids: dict[str, str]) -> list[Any]:
    out: list[Any] = []
    for mid in ids.values():
        ex = mm.explain(mid, scope=ALICE)
        out.append(
            (
                [(m.id, m.status.value, m.content, m.trust) for m in ex.memories],
                sorted(ex.edges),
                sorted(a.id for a in ex.activities),
                sorted(m.id for m in mm.descendants(mid, scope=ALICE)),
            )
        )
    return out


def _open_sqlite(path: Path) -> MemoryManager:
    return MemoryManager.open(path, embedder=FakeEmbedder())


def test_sqlite_postgresql_sqlite_round_trip(tmp_path: Path, pg_schema: PgSchema) -> None:
    src = _open_sqlite(tmp_path / "src")
    ids = _fill(src)
    first = src.export(tmp_path / "one.jsonl")
    expected_hits, expected_lineage = _hits(src), _lineage(src, ids)
    src.close()

    pg = MemoryManager.open(ledger_url=pg_schema.url, index=InMemoryIndex(), embedder=FakeEmbedder())
    try:
        report = pg.import_file(tmp_path / "one.jsonl")
        assert report.verified == "hashes" and report.users == ["alice", "bob"]
        assert report.reindexed == first.tables["ml_memories"]["count"]
        second = pg.export(tmp_path / "two.jsonl")
        assert _hits(pg) == expected_hits
        assert _lineage(pg, ids) == expected_lineage
    finally:
        pg.close()

    back = _open_sqlite(tmp_path / "back")
    try:
        back.import_file(tmp_path / "two.jsonl")
        third = back.export(tmp_path / "three.jsonl")
        assert back.verify().ok  # the embedded Chroma index was rebuilt from the imported vectors
        assert _hits(back) == expected_hits
        assert _lineage(back, ids) == expected_lineage
        # a correction after the import still cascades through the imported lineage
        cascade = back.retract(ids["flight"], scope=ALICE, reason="price was wrong")
        assert set(cascade.suspect) == {ids["budget"]}  # the hotel was suspect already (Paris was superseded)
        assert back.get(ids["budget"], scope=ALICE).status.value == "suspect"
        newer = back.remember("Flight to Berlin costs 90 EUR", scope=ALICE, source="tool:flight_api")
        assert newer.id not in ids.values()
    finally:
        back.close()

    for summary in (second, third):
        assert summary.tables == first.tables  # counts and content hashes of every table
    assert set(first.tables) == {
        "ml_memories",
        "ml_embeddings",
        "ml_edges",
        "ml_supports",
        "ml_activities",
        "ml_events",
    }
    assert all(first.tables[t]["count"] > 0 for t in first.tables)
    lines = (tmp_path / "one.jsonl").read_text().splitlines()[1:]
    statuses = {json.loads(line)["row"].get("status") for line in lines}
    assert {"active", "suspect", "superseded", "retracted"} <= statuses


def test_postgresql_target_keeps_writing_after_import(tmp_path: Path, pg_schema: PgSchema) -> None:
    """Rows imported with their own integer keys move PostgreSQL's sequences past them."""
    src = make_manager()
    ids = _fill(src)
    src.export(tmp_path / "s.jsonl")
    pg = MemoryManager.open(ledger_url=pg_schema.url, index=InMemoryIndex(), embedder=FakeEmbedder())
    try:
        pg.import_file(tmp_path / "s.jsonl")
        report = pg.retract(ids["flight"], scope=ALICE, reason="wrong price")  # new events and edges
        assert set(report.suspect) == {ids["budget"]}
        pg.remember("Alice plans a day in Potsdam", scope=ALICE, source="reasoning", derived_from=[ids["berlin"]])
    finally:
        pg.close()


def test_one_user_export_holds_nothing_of_another(tmp_path: Path) -> None:
    mm = make_manager()
    ids = _fill(mm)
    bob_ids = {m.id for m in mm.find(scope=BOB)}
    assert len(bob_ids) == 3
    summary = mm.export(tmp_path / "alice.jsonl", scope="alice")
    text = (tmp_path / "alice.jsonl").read_text()
    assert "Bob" not in text and "bob" not in text
    assert all(i not in text for i in bob_ids)
    rows = [json.loads(line) for line in text.splitlines()[1:]]
    alice_ids = {r["row"]["id"] for r in rows if r["type"] == "memory"}
    assert ids["hotel"] in alice_ids
    for r in rows:
        row = r["row"]
        assert row.get("user_id", "alice") == "alice"
        if "memory_id" in row and row["memory_id"] is not None and r["type"] != "event":
            assert row["memory_id"] in alice_ids
    assert summary.user_id == "alice" and read_header(tmp_path / "alice.jsonl")["user_id"] == "alice"

    # a store holding only other users takes it without merge; one holding alice refuses it unless merge
    other = make_manager()
    other.remember("Carol likes jazz", scope=Scope(user_id="carol"), source="user")
    report = other.import_file(tmp_path / "alice.jsonl")
    assert report.verified == "counts" and report.users == ["alice"]
    assert set(report.renumbered) == {"ml_events", "ml_supports"}
    assert other.get(ids["hotel"], scope=ALICE) is not None
    assert [h.memory.content for h in other.recall("music", scope=Scope(user_id="carol"), reinforce=False)]
    with pytest.raises(ImportConflictError, match="already holds user"):
        other.import_file(tmp_path / "alice.jsonl")
    with pytest.raises(ImportConflictError, match="same id"):  # ids are kept, so the same rows cannot land twice
        other.import_file(tmp_path / "alice.jsonl", merge=True)
    assert other.stats(ALICE)["memories"] == summary.tables["ml_memories"]["count"]

    with pytest.raises(InvalidInputError, match="whole users"):
        mm.export(tmp_path / "x.jsonl", scope=ALICE)  # an agent/session scope would cut lineage edges


def test_merge_adds_a_users_rows_to_theirs(tmp_path: Path) -> None:
    a = make_manager()
    a.remember("Alice lives in Paris", scope=ALICE, source="user")
    a.export(tmp_path / "a.jsonl")
    b = make_manager()
    own = b.remember("Alice speaks French", scope=ALICE, source="user")
    with pytest.raises(ImportConflictError):
        b.import_file(tmp_path / "a.jsonl")
    assert b.stats(ALICE)["memories"] == 1  # nothing was written
    report = b.import_file(tmp_path / "a.jsonl", merge=True)
    assert report.verified == "counts"
    contents = {h.memory.content for h in b.recall("alice", scope=ALICE, k=5, reinforce=False)}
    assert contents == {"Alice lives in Paris", own.content}


def _edit_records(line: str) -> str:
    header = json.loads(line)
    header["records"] += 74
    return json.dumps(header)


def _edit_header(line: str) -> str:
    header = json.loads(line)
    header["tables"]["ml_memories"]["count"] += 1
    return json.dumps(header)


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda lines: [lines[0], *(x.replace("Paris", "Rome") for x in lines[1:])], id="content"),
        pytest.param(lambda lines: lines[:-1], id="truncated"),
        pytest.param(lambda lines: [*lines, lines[-1]], id="duplicated-record"),
        pytest.param(lambda lines: [_edit_header(lines[0]), *lines[1:]], id="header-count"),
        pytest.param(lambda lines: [_edit_records(lines[0]), *lines[1:]], id="header-records"),
        pytest.param(
            lambda lines: [lines[0], *(x.replace('"use_count":0', '"use_count":7') for x in lines[1:])], id="number"
        ),
        pytest.param(lambda lines: [lines[0], *reversed(lines[1:])], id="reordered"),
    ],
)
def test_tampered_file_is_refused(tmp_path: Path, tamper: Any) -> None:
    src = make_manager()
    _fill(src)
    src.export(tmp_path / "s.jsonl")
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    changed = tamper(lines)
    assert changed != lines
    (tmp_path / "s.jsonl").write_text("\n".join(changed) + "\n")
    target = make_manager()
    with pytest.raises(TransferIntegrityError, match="does not match its header"):
        target.import_file(tmp_path / "s.jsonl")
    assert target.stats()["memories"] == 0 and target.stats()["events"] == 0


def test_forged_body_hash_is_caught_by_the_table_hashes_and_rolled_back(tmp_path: Path) -> None:
    """A file whose body_sha256 was recomputed after an edit still fails the per-table hashes; nothing stays."""
    src = make_manager()
    _fill(src)
    src.export(tmp_path / "s.jsonl")
    first, *rest = (tmp_path / "s.jsonl").read_text().splitlines(keepends=True)
    rest = [x.replace("Paris", "Rome") for x in rest]
    header = json.loads(first)
    header["body_sha256"] = hashlib.sha256("".join(rest).encode()).hexdigest()
    (tmp_path / "s.jsonl").write_text(json.dumps(header) + "\n" + "".join(rest))
    target = make_manager()
    with pytest.raises(TransferIntegrityError, match="rolled back: ml_memories: content hash differs"):
        target.import_file(tmp_path / "s.jsonl")
    assert target.stats()["memories"] == 0 and target.stats()["events"] == 0


def test_not_an_export_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text('{"type": "memory", "row": {}}\n')
    with pytest.raises(TransferIntegrityError, match="not a MemLineage export"):
        import_store(make_manager(), tmp_path / "x.jsonl")


def test_export_without_vectors_is_embedded_again_and_prov_bundle(tmp_path: Path) -> None:
    src = make_manager()
    ids = _fill(src)
    summary = export_store(src, tmp_path / "nv.jsonl", vectors=False)
    assert "ml_embeddings" not in summary.tables
    target = make_manager()
    target.import_file(tmp_path / "nv.jsonl")
    assert [h.id for h in target.recall("hotel", scope=ALICE, k=1, reinforce=False, include_suspect=True)] == [
        ids["hotel"]
    ]
    # the import embedded them again and kept the vectors: the dense leg serves them, not only the keyword leg
    every = [m.id for m in target.find(scope=ALICE)]
    assert every and set(target.ledger.vectors(every)) == set(every)
    assert target.recall("hotel", scope=ALICE, k=3, reinforce=False).trace.legs["vector"] > 0

    prov = src.export(tmp_path / "alice.json", scope="alice", format="prov")
    doc = json.loads((tmp_path / "alice.json").read_text())
    (bundle,) = doc["bundle"].values()
    assert len(bundle["entity"]) == prov.tables["ml_memories"]["count"]
    assert {e["ml:user_id"] for e in bundle["entity"].values()} == {"alice"}
    derived = {(d["prov:generatedEntity"], d["prov:usedEntity"]) for d in bundle["wasDerivedFrom"].values()}
    assert (f"ml:{ids['hotel']}", f"ml:{ids['city']}") in derived
    assert (f"ml:{ids['berlin']}", f"ml:{ids['city']}") in {
        (d["prov:generatedEntity"], d["prov:usedEntity"]) for d in bundle["wasRevisionOf"].values()
    }
    assert "ml:run-1" in bundle["activity"]
    assert "Bob" not in (tmp_path / "alice.json").read_text()


def test_backup_while_a_writer_holds_the_store(tmp_path: Path) -> None:
    home = tmp_path / "store"
    mm = _open_sqlite(home)
    ids = _fill(mm)
    stop = threading.Event()
    written: list[str] = []

    def write() -> None:
        n = 0
        while not stop.is_set():
            written.append(mm.remember(f"note number {n}", scope=BOB, source="user").id)
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with pytest.raises(StoreLockedError):
            MemoryManager.open(home, embedder=FakeEmbedder())  # the store is held
        result = CliRunner().invoke(app, ["backup", str(tmp_path / "cli-backup"), "--path", str(home)])
        assert result.exit_code == 0, result.output
        assert "backed up" in result.output
        report = mm.backup(tmp_path / "api-backup")
    finally:
        stop.set()
        writer.join()
    total = mm.stats()["memories"]
    mm.close()
    assert written and report.memories <= total
    for name in ("cli-backup", "api-backup"):
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == ["ledger.db"]
        copy = _open_sqlite(tmp_path / name)  # the index is rebuilt on open from the ledger's vectors
        try:
            assert copy.verify().ok
            assert copy.get(ids["hotel"], scope=ALICE) is not None
            hits = copy.recall("Hotel Lumiere near the Louvre", scope=ALICE, k=1, include_suspect=True)
            assert [h.id for h in hits] == [ids["hotel"]]
            stats = copy.stats()
            assert stats["index_pending"] == 0
            assert stats["memories"] <= total
        finally:
            copy.close()
    with pytest.raises(InvalidInputError, match="already holds a store"):
        make_manager_on_disk = _open_sqlite(tmp_path / "again")
        try:
            make_manager_on_disk.backup(tmp_path / "api-backup")
        finally:
            make_manager_on_disk.close()


def test_backup_refuses_a_server_ledger(pg_schema: PgSchema, tmp_path: Path) -> None:
    pg = MemoryManager.open(ledger_url=pg_schema.url, index=InMemoryIndex(), embedder=FakeEmbedder())
    try:
        with pytest.raises(ConfigurationError, match="export"):
            pg.backup(tmp_path / "b")
    finally:
        pg.close()


def test_cli_export_import_reindex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MEMLINEAGE_HOME", "MEMLINEAGE_LEDGER_URL", "MEMLINEAGE_CHROMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("MEMLINEAGE_EMBEDDING_MODEL_DIR", raising=False)
    monkeypatch.setattr("memlineage.cli._store._embedder", lambda settings: FakeEmbedder())
    src = _open_sqlite(tmp_path / "src")
    ids = _fill(src)  # held by this process while the CLI exports a snapshot
    runner = CliRunner()
    try:
        out = runner.invoke(app, ["export", str(tmp_path / "d.jsonl"), "--path", str(tmp_path / "src")])
        assert out.exit_code == 0, out.output
        out = runner.invoke(
            app,
            ["export", str(tmp_path / "b.json"), "--format", "prov", "--user", "bob", "--path", str(tmp_path / "src")],
        )
        assert out.exit_code == 0, out.output
    finally:
        src.close()
    out = runner.invoke(app, ["import", str(tmp_path / "d.jsonl"), "--path", str(tmp_path / "dst")])
    assert out.exit_code == 0, out.output
    assert "verified by hashes" in out.output
    out = runner.invoke(app, ["import", str(tmp_path / "d.jsonl"), "--path", str(tmp_path / "dst")])
    assert out.exit_code == 2 and "--merge" in out.output
    out = runner.invoke(app, ["reindex", "--path", str(tmp_path / "dst")])
    assert out.exit_code == 0 and "rebuilt" in out.output, out.output
    dst = _open_sqlite(tmp_path / "dst")
    try:
        assert dst.get(ids["hotel"], scope=ALICE) is not None and dst.verify().ok
    finally:
        dst.close()


def test_the_cli_refuses_a_tampered_file_before_it_makes_a_store(tmp_path: Path) -> None:
    """``memlineage import`` checks the file first: a refused import leaves no store behind."""
    from memlineage.cli import app
    from typer.testing import CliRunner

    src = make_manager()
    _fill(src)
    src.export(tmp_path / "s.jsonl")
    first, *rest = (tmp_path / "s.jsonl").read_text().splitlines()
    (tmp_path / "s.jsonl").write_text("\n".join([first, *rest[:-1]]) + "\n")
    out = CliRunner().invoke(app, ["import", str(tmp_path / "s.jsonl"), "--path", str(tmp_path / "dst")])
    assert out.exit_code == 2 and "does not match its header" in out.output, out.output
    assert not (tmp_path / "dst").exists()
