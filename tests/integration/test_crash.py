"""Crash safety: SIGKILL a writer at random points of an ingest, reopen, and check nothing acknowledged was lost.

The writer (``scripts/crash_ingest.py``) prints ``ACK <i> <id>`` after each ``remember()`` returns. After each
kill the store is reopened without the automatic repair so that the test can see the backlog, then:

* ``repair()`` reports exactly the unfinished index writes it found, and finishes them;
* ``verify()`` finds the index and the ledger in agreement (no index entry the ledger lacks);
* every acknowledged memory is in the ledger with its content and is found by ``recall``.

The writer then resumes where the acknowledgements stop (re-sent items deduplicate) until the ingest is complete,
and the final store holds each item exactly once. ``MEMLINEAGE_CRASH_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from memlineage import MemoryManager, Scope
from memlineage.testing import FakeEmbedder

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "crash_ingest.py"
sys.path.insert(0, str(REPO / "scripts"))
from crash_ingest import content_for  # noqa: E402

USER = "crash-user"


@dataclass
class CrashStats:
    kills: int = 0
    acknowledged: set[str] = field(default_factory=set)
    lost: list[str] = field(default_factory=list)
    repaired: dict[str, int] = field(
        default_factory=lambda: {"upserted": 0, "updated": 0, "removed": 0, "quarantined": 0}
    )
    backlog_seen: int = 0


def _writer(store: Path, start: int, count: int, run: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "PYTHONUNBUFFERED": "1"}
    store.parent.mkdir(parents=True, exist_ok=True)
    # stderr goes to a file: a full stderr pipe nobody reads would stall the writer.
    with (store.parent / f"writer-{start}.err").open("w") as err:
        return subprocess.Popen(  # noqa: S603 - fixed argv
            [sys.executable, str(SCRIPT), str(store), "--start", str(start), "--count", str(count), "--run", run],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )


def _finish(proc: subprocess.Popen[str], store: Path, start: int) -> tuple[str, str]:
    """The rest of stdout and the stderr text, once the writer has exited.

    Reads through ``proc.stdout`` (not ``communicate()``, which reads the raw pipe and would drop the lines that
    ``readline()`` already buffered: acknowledgements the test would then miss).
    """
    assert proc.stdout is not None
    with proc.stdout:  # closed here: the pipe would otherwise stay open until garbage collection
        rest = proc.stdout.read()
    proc.wait(timeout=600)
    return rest, (store.parent / f"writer-{start}.err").read_text()


def _acks(lines: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "ACK":
            out[int(parts[1])] = parts[2]
    return out


def _kill_during_ingest(store: Path, start: int, total: int, run: str, rng: random.Random, stats: CrashStats,
                        max_acks: int) -> tuple[dict[int, str], bool]:  # fmt: skip
    """Start a writer, SIGKILL it after a random number of acknowledgements plus a random delay."""
    proc = _writer(store, start, total - start, run)
    target = rng.randint(0, max_acks)
    lines: list[str] = []
    assert proc.stdout is not None
    while len(lines) < target:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
    time.sleep(rng.uniform(0, 0.03))  # land somewhere inside the next write
    finished = proc.poll() is not None
    if not finished:
        os.kill(proc.pid, signal.SIGKILL)
        stats.kills += 1
    rest, err = _finish(proc, store, start)
    lines.extend(rest.splitlines())
    if finished or "DONE" in rest:
        assert proc.returncode == 0, err[-3000:]
    else:
        assert proc.returncode == -signal.SIGKILL, err[-3000:]
    return _acks(lines), "DONE" in "".join(lines)


def _check_after_crash(store: Path, acked: dict[int, str], run: str, stats: CrashStats, *, recall_all: bool) -> None:
    mm = MemoryManager.open(store, embedder=FakeEmbedder(), repair_on_open=False)
    try:
        backlog = mm.ledger.index_backlog()
        stats.backlog_seen += len(backlog)
        live = [r for r in backlog if r["status"] not in ("archived", "erased") and r["index_state"] != "removing"]
        report = mm.repair()
        assert report["upserted"] + report["updated"] == len(live), (report, len(backlog))
        for k, v in report.items():
            stats.repaired[k] += v
        check = mm.verify()
        assert check.ok, check.differences()
        assert not check.orphans, "the index has an entry the ledger lacks"
        scope = Scope(user_id=USER)
        got = mm.get_many(list(acked.values()), scope=scope)
        for (i, mid), mem in zip(acked.items(), got, strict=True):
            if mem is None or mem.content != content_for(run, i):
                stats.lost.append(mid)
        sample = list(acked.items()) if recall_all else list(acked.items())[-20:]
        for i, mid in sample:
            if mid not in mm.recall(content_for(run, i), scope=scope, k=3, reinforce=False).ids:
                stats.lost.append(mid)
        assert not stats.lost, f"acknowledged memories lost: {stats.lost[:5]}"
    finally:
        mm.close()


def run_crash_campaign(store: Path, *, total: int, kills: int, seed: int, recall_all: bool = True) -> CrashStats:
    """Ingest ``total`` memories with ``kills`` SIGKILLs at random points; check after each; then finish."""
    rng = random.Random(seed)
    stats = CrashStats()
    run = f"r{seed}"
    acked: dict[int, str] = {}
    attempts = 0
    while stats.kills < kills and attempts < kills * 3:
        attempts += 1
        start = max(acked, default=-1) + 1
        if start >= total:
            break
        new, done = _kill_during_ingest(store, start, total, run, rng, stats, max_acks=max(1, total // kills))
        assert sorted(new) == list(range(start, start + len(new))), f"seed={seed}: acknowledgements not contiguous"
        for i, mid in new.items():
            assert acked.setdefault(i, mid) == mid, "a resent item must deduplicate to the same memory"
        _check_after_crash(store, acked, run, stats, recall_all=recall_all)
        if done:
            break
    start = max(acked, default=-1) + 1
    if start < total:  # finish the ingest without a kill
        proc = _writer(store, start, total - start, run)
        out, err = _finish(proc, store, start)
        assert proc.returncode == 0, err[-3000:]
        for i, mid in _acks(out.splitlines()).items():
            assert acked.setdefault(i, mid) == mid
    _check_after_crash(store, acked, run, stats, recall_all=recall_all)
    stats.acknowledged = set(acked.values())
    with MemoryManager.open(store, embedder=FakeEmbedder()) as mm:
        in_ledger = mm.ledger.ids_in_scope(Scope(user_id=USER))
        extra = [m.content for m in mm.get_many(sorted(set(in_ledger) - stats.acknowledged), scope=USER) if m]
        assert len(acked) == total == len(stats.acknowledged), f"seed={seed}: {len(acked)} acked, {total} sent"
        assert len(in_ledger) == total, f"seed={seed}: unacknowledged rows {extra[:5]}"
        assert mm.index.count() + mm.stats()["index_exact"] == total  # each in Chroma or held for the exact plan
        assert mm.verify().ok
    return stats


def _seed() -> int:
    return int(os.environ.get("MEMLINEAGE_CRASH_SEED", random.SystemRandom().randrange(1 << 30)))


def _report(name: str, seed: int, stats: CrashStats) -> None:
    if os.environ.get("MEMLINEAGE_REPORT"):
        print(  # noqa: T201
            f"\n{name}: seed={seed} kills={stats.kills} acknowledged={len(stats.acknowledged)} "
            f"lost={len(stats.lost)} backlog_seen={stats.backlog_seen} repaired={stats.repaired}"
        )


def test_crash_small(tmp_path: Path) -> None:
    """Default suite: 3 kills during a 150-memory ingest."""
    seed = _seed()
    stats = run_crash_campaign(tmp_path / "store", total=150, kills=3, seed=seed)
    _report("crash-small", seed, stats)
    assert stats.kills == 3, f"seed={seed}: {stats.kills} kills landed"
    assert stats.lost == []


@pytest.mark.slow
def test_crash_1000_memories_20_kills(tmp_path: Path) -> None:
    """`make test-reliability`: 20 kills at random points of a 1,000-memory ingest."""
    seed = _seed()
    stats = run_crash_campaign(tmp_path / "store", total=1000, kills=20, seed=seed)
    _report("crash-1000", seed, stats)
    assert stats.kills == 20, f"seed={seed}: only {stats.kills} kills landed"
    assert stats.lost == []
