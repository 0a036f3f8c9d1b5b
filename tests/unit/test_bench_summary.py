"""The README's benchmark block is generated from the results files (``benchmarks/run_all.py --readme``)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

_SCRIPT = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "run_all.py"), run_name="run_all")
#: The globals the script's functions read (run_path returns a copy): a test points RESULTS elsewhere in them.
_GLOBALS = _SCRIPT["main"].__globals__
run_all = SimpleNamespace(**_SCRIPT)

TURN = {
    "load_average": [2.17, 1.5, 1.2],
    "rows": [
        {"surface": "middleware", "ratio": 1.56, "memory_work_ms": 75.9, "raw_chroma_turn_ms": 48.6,
         "amortized_ratio": 1.61},
    ],
}  # fmt: skip


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    (out / "bench_turn.json").write_text(json.dumps(TURN), encoding="utf-8")
    monkeypatch.setitem(_GLOBALS, "RESULTS", out)
    return out


def test_the_readme_block_is_rewritten_from_the_results(results: Path, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        f"# Title\n\nBefore.\n\n{run_all.README_START}\n| old | pasted | 9.99x |\n{run_all.README_END}\n\nAfter.\n",
        encoding="utf-8",
    )
    assert run_all.main(["--collect-only", "--readme", str(readme)]) == 0
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\nBefore.\n\n") and text.endswith(f"{run_all.README_END}\n\nAfter.\n")
    block = text[text.index(run_all.README_START) : text.index(run_all.README_END)]
    assert "9.99x" not in block  # what was pasted is gone
    assert "| turn | middleware: memory work per turn vs raw Chroma (goal <= 1.5) | 1.56x |" in block
    assert "charged back 1.61x" in block and "load 2.2" in block
    assert "`bench_store.py`" in block  # scripts with no results are named, not given figures
    assert (results / "summary.md").read_text(encoding="utf-8") in text


def test_a_readme_without_the_markers_is_left_alone(results: Path, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# No block here\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="no generated block"):
        run_all.main(["--collect-only", "--readme", str(readme)])
    assert readme.read_text(encoding="utf-8") == "# No block here\n"


def test_a_pipe_in_a_note_does_not_break_the_table() -> None:
    rows = [{"area": "a", "figure": "x | y", "value": "1", "note": "n", "source": "s", "script": "bench_x"}]
    table = run_all.render_markdown(rows, "now")
    assert "| a | x \\| y | 1 | n | s |" in table


def test_the_real_turn_recall_row_comes_from_bench_store(results: Path) -> None:
    """bench_store's recall at real chat turns of one user (issue 26) gets its own row, both ratios in it."""
    store = {
        "recall_real_turns": {
            "n": 300, "queries": 60, "plan": "exact", "raw_recall_p50_ms": 2.4, "memlineage_recall_p50_ms": 11.2,
            "recall_latency_ratio": 4.67, "embed_query_p50_ms": 2.7, "recall_latency_ratio_with_query_embedding": 2.62,
        }
    }  # fmt: skip
    (results / "bench_store.json").write_text(json.dumps(store), encoding="utf-8")
    rows = [r for r in run_all.rows_store() if "LoCoMo turns" in r[1]]
    assert rows == [
        (
            "store",
            "recall p50 vs raw filtered query (300 LoCoMo turns / 1 user)",
            "4.67x / 2.62x",
            "11.2 vs 2.4 ms p50, same vectors / with the query embedded on both sides; target <= 1.0x",
        )
    ]


def test_the_update_suites_get_a_total_row_per_system(results: Path) -> None:
    """Totals over every suite come from bench_updates' own sums, not from a script beside it."""
    bench_updates = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "bench_updates.py"))
    row = {"update": 34, "stale@3": 8, "current@3": 31, "with_current": 34, "non_update": 20, "kept@3": 17,
           "withdrawn": 0, "past": 6, "past@3": 6}  # fmt: skip
    suites = {"a": row, "b": {**row, "stale@3": 5}, "(unlabelled)": {"applied": 1, "applied_right": 0}}
    totals = bench_updates["totals"](suites)
    assert totals["update"] == 68 and totals["stale@3"] == 13 and totals["kept@3"] == 34 and totals["applied"] == 1
    report = {"systems": {"ml-core": {"suites": suites, "totals": totals, "leaks": 0}}}
    (results / "bench_updates.json").write_text(json.dumps(report), encoding="utf-8")
    rows = [r for r in run_all.rows_updates() if r[1].startswith("every suite")]
    assert rows == [("updates", "every suite: ml-core", "stale 13/68, current 62/68, kept 34/40", "past 12/12")]
