"""Run every ``benchmarks/bench_*.py`` and print ONE summary table of the headline figures.

Each script runs as a subprocess with this interpreter and a timeout; its output goes to
``benchmarks/results/logs/<name>.log``. The figures are then read from the JSON files the scripts write into
``benchmarks/results/`` (``bench_policy.py`` prints its JSON with ``--json``: that line is saved as
``results/bench_policy.json``; ``bench_window.py`` prints text only: its timing is parsed from the log). A
missing or unreadable result prints "not run"; a figure left over from an earlier run (the script failed or
was skipped this time) is marked with the file's date.

Run: ``make bench`` or ``.venv/bin/python benchmarks/run_all.py [--only stale,store] [--skip locomo]
[--timeout 1800] [--collect-only]``. Writes ``benchmarks/results/summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
LOGS = RESULTS / "logs"
SHARED_MODEL = HERE.parents[1] / "shared" / "models" / "all-MiniLM-L6-v2" / "onnx"

#: Extra command-line arguments per script (everything else runs with its defaults).
EXTRA_ARGS: dict[str, list[str]] = {"bench_policy": ["--json"], "bench_updates": ["--suites", "all"]}
#: Scripts whose last stdout line is their JSON result; run_all saves it as ``results/<name>.json``.
STDOUT_JSON = {"bench_policy"}


@dataclass
class Run:
    """Outcome of one benchmark script in this invocation."""

    name: str
    status: str = "not run"  # ok | failed (rc N) | timeout after N s | not run
    seconds: float = 0.0
    log: str = ""
    started: float = field(default_factory=time.time)


# ====================================================================================== running


def discover() -> list[Path]:
    """Every ``bench_*.py`` beside this file, sorted."""
    return sorted(HERE.glob("bench_*.py"))


def run_script(path: Path, timeout: float, env: dict[str, str]) -> Run:
    """Run one script with this interpreter; save its output; never raise."""
    name = path.stem
    run = Run(name)
    cmd = [sys.executable, str(path), *EXTRA_ARGS.get(name, [])]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        out, err = proc.stdout, proc.stderr
        run.status = "ok" if proc.returncode == 0 else f"failed (rc {proc.returncode})"
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        run.status = f"timeout after {timeout:.0f} s"
    run.seconds = time.perf_counter() - t0
    run.log = out
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / f"{name}.log").write_text(f"$ {' '.join(cmd)}\n{out}\n--- stderr ---\n{err}", encoding="utf-8")
    if run.status == "ok" and name in STDOUT_JSON:
        line = next((ln for ln in reversed(out.strip().splitlines()) if ln.startswith("{")), "")
        try:
            (RESULTS / f"{name}.json").write_text(json.dumps(json.loads(line), indent=2) + "\n", encoding="utf-8")
        except json.JSONDecodeError:
            run.status = "ok (no JSON line on stdout)"
    return run


# ====================================================================================== collecting


def _load(*names: str) -> tuple[dict[str, Any] | None, Path | None]:
    """The first readable JSON file among ``results/<name>``."""
    for n in names:
        p = RESULTS / n
        if p.is_file():
            try:
                return json.loads(p.read_text(encoding="utf-8")), p
            except (OSError, json.JSONDecodeError):
                continue
    return None, None


def _get(d: Any, *path: str | int) -> Any:
    for key in path:
        if isinstance(d, dict) and key in d:
            d = d[key]
        elif isinstance(d, list) and isinstance(key, int) and -len(d) <= key < len(d):
            d = d[key]
        else:
            return None
    return d


def _num(v: Any, fmt: str) -> str | None:
    return fmt.format(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _pct(v: Any) -> str | None:
    return _num(v * 100 if isinstance(v, (int, float)) else v, "{:.0f} %")


Row = tuple[str, str, str | None, str]  # area, figure, value (None = not run), note


def rows_store() -> Iterator[Row]:
    d, _ = _load("bench_store.json", "store.json")
    ir, emb, aw = _get(d, "ingest_recall"), _get(d, "embedder"), _get(d, "recall_after_write")
    n = _num(_get(ir, "n"), "{:,}")
    yield (
        "store",
        f"ingest vs raw Chroma add, same metadata ({n} memories)",
        _num(_get(ir, "ingest_throughput_ratio_same_metadata"), "{:.2f}x"),
        f"{_num(_get(ir, 'memlineage_ingest_per_s'), '{:,.0f}/s') or '?'} vs "
        f"{_num(_get(ir, 'raw_same_metadata_ingest_per_s'), '{:,.0f}/s') or '?'}; target >= 0.9x",
    )
    yield (
        "store",
        f"recall p50 / p95 vs raw filtered query ({n} memories / 10 users)",
        f"{_num(_get(ir, 'recall_latency_ratio'), '{:.2f}x') or '?'} / "
        f"{_num(_get(ir, 'recall_latency_ratio_p95'), '{:.2f}x') or '?'}"
        if ir
        else None,
        _num(_get(ir, "memlineage_recall_p50_ms"), "{:.1f} ms p50") or "",
    )
    yield (
        "store",
        f"recall right after a write vs none ({_num(_get(aw, 'n'), '{:,}')} memories / 1 user)",
        _num(_get(aw, "after_write_ratio"), "{:.2f}x"),
        f"{_num(_get(aw, 'recall_after_write_p50_ms'), '{:.1f}') or '?'} vs "
        f"{_num(_get(aw, 'recall_p50_ms'), '{:.1f}') or '?'} ms p50; target <= 1.2x",
    )
    for c in _get(d, "cascades") or []:
        yield (
            "store",
            f"cascade retract() vs one raw UPDATE of the rows ({_num(_get(c, 'descendants'), '{:,}')} descendants)",
            _num(_get(c, "ratio_vs_raw_update"), "{:.2f}x"),
            f"{_num(_get(c, 'cascade_ms'), '{:,.0f}') or '?'} ms end to end (raw "
            f"{_num(_get(c, 'raw_update_ms'), '{:,.0f}') or '?'} ms); index catch-up in the background "
            f"{_num(_get(c, 'index_catch_up_ms'), '{:,.0f}') or '?'} ms",
        )
    yield (
        "embedder",
        f"speed-up vs chromadb default ({_get(emb, 'texts')} texts)",
        _num(_get(emb, "speedup"), "{:.1f}x"),
        "",
    )
    yield ("embedder", "max |diff| vs chromadb default", _num(_get(emb, "max_abs_diff"), "{:.1e}"), "")


def rows_scale() -> Iterator[Row]:
    d, _ = _load("bench_scale.json")
    for r in _get(d, "layouts") or [{}]:
        users = _get(r, "users")
        scale = f"{_num(_get(r, 'n'), '{:,}') or '?'} memories / {_num(users, '{:,}') or '?'} user" + (
            "" if users == 1 else "s"
        )
        yield (
            "scale",
            f"recall() p50 / p95 vs raw Chroma filtered query ({scale})",
            f"{_num(_get(r, 'recall_p50_ratio'), '{:.2f}x')} / {_num(_get(r, 'recall_p95_ratio'), '{:.2f}x')}"
            if _get(r, "recall_p50_ratio") is not None
            else None,
            f"{_num(_get(r, 'recall_p50_ms'), '{:.1f}') or '?'} vs "
            f"{_num(_get(r, 'raw_p50_ms'), '{:.1f}') or '?'} ms p50",
        )
        yield (
            "scale",
            f"dense leg p50 / p95 vs raw Chroma filtered query ({scale})",
            f"{_num(_get(r, 'dense_p50_ratio'), '{:.2f}x')} / {_num(_get(r, 'dense_p95_ratio'), '{:.2f}x')}"
            if _get(r, "dense_p50_ratio") is not None
            else None,
            f"plan {_get(r, 'plan')}; recall@10 vs exact: dense "
            f"{_num(_get(r, 'dense_recall_at_10'), '{:.3f}') or '?'}, "
            f"raw Chroma {_num(_get(r, 'raw_recall_at_10'), '{:.3f}') or '?'}",
        )


def rows_policy() -> Iterator[Row]:
    d, _ = _load("bench_policy.json", "policy.json")
    med = _get(d, "recall_ms_median") or {}
    note = ""
    if d:
        note = (
            f"{_get(d, 'policies')} policies, N={_get(d, 'n')}: "
            f"{_num(med.get('policies'), '{:.2f}') or '?'} vs {_num(med.get('none'), '{:.2f}') or '?'} ms"
        )
    yield (
        "policy",
        "recall overhead, policies / none (median)",
        _num(_get(d, "ratio_median"), "{:.2f}x"),
        note,
    )


def rows_window() -> Iterator[Row]:
    d, _ = _load("bench_window.json", "window.json")
    value = None
    note = ""
    if d:
        ms = _get(d, "default_median_ms") or _get(d, "median_ms")
        value = _num(ms, "{:.2f} ms")
    if value is None:
        log = LOGS / "bench_window.log"
        text = log.read_text(encoding="utf-8") if log.is_file() else ""
        m = re.search(r"target <= (\d+) ms for (\S+) messages: (\w+) \(([\d.]+) ms\)", text)
        if m:
            value, note = (
                f"{float(m.group(4)):.2f} ms",
                f"{m.group(2)} messages, target <= {m.group(1)} ms: {m.group(3)}",
            )
    yield ("window", "window build, default budget (median)", value, note)


def rows_locomo() -> Iterator[Row]:
    d, _ = _load("locomo.json", "bench_locomo.json")
    res = _get(d, "results") or {}
    if not res:
        yield ("LoCoMo", "R@10 (categories 1-4)", None, "")
        return
    for system, r in res.items():
        if isinstance(r, dict) and "error" in r:
            yield ("LoCoMo", f"R@10 {system}", None, f"error: {str(r['error'])[:60]}")
            continue
        yield (
            "LoCoMo",
            f"R@10 {system} (cat. 1-4)",
            _num(_get(r, "1-4", "R@10"), "{:.1f} %"),
            f"R@5 {_num(_get(r, '1-4', 'R@5'), '{:.1f}') or '?'}, n={_get(r, '1-4', 'n')}",
        )


def rows_value_gate() -> Iterator[Row]:
    d, _ = _load("value_gate.json", "bench_value_gate.json")
    totals = {t.get("config"): t for t in (_get(d, "totals") or []) if isinstance(t, dict)}
    for config, label in (("default", "default (keeps all, V promotes)"), ("gate", "seed's buffering gate")):
        t = totals.get(config)
        if t:
            yield (
                "value gate",
                f"stored / buffered turns, {label}",
                f"{t.get('stored')} / {t.get('buffered')}",
                f"of {t.get('turns')} turns; evidence kept {t.get('evidence_stored')}/{t.get('evidence_turns')}",
            )
        else:
            yield ("value gate", f"stored / buffered turns, {label}", None, "")
    for config, label in (("default", "default"), ("gate", "seed's gate"), ("core", "no value model")):
        t = totals.get(config)
        yield (
            "value gate",
            f"evidence recall@10, {label}",
            _pct(_get(t, "recall@10")),
            f"recall@5 {_pct(_get(t, 'recall@5')) or '?'}" if t else "",
        )


def rows_stale() -> Iterator[Row]:
    """One row per system: stale served / current found / leaks at k=3, main and held-out splits side by side."""
    d, _ = _load("bench_stale.json")
    systems = _get(d, "systems") or {}
    if not systems or _get(d, "k") is None:  # absent, or a result file from before the plain mode
        yield ("stale", "stale served / current found @3 (plain conversation)", None, "")
        return
    k = _get(d, "k")
    for name, s in systems.items():
        figure = f"{name} (@{k})"
        if _get(s, "status") != "ok":
            yield ("stale", figure, None, str(_get(s, "status")))
            continue
        main = _get(s, "metrics", "main/all")
        value = f"main: stale {main['stale']}/{main['n']}, current {main['current']}/{main['n']}" if main else None
        parts = [f"leaks {main['leaks']}"] if main else []
        if _get(s, "turn_errors"):
            parts.append(f"{len(_get(s, 'turn_errors'))} turns failed to write")
        for split in ("heldout", "fresh"):
            m = _get(s, "metrics", f"{split}/all")
            if m:
                n = m["n"]
                parts.append(f"{split}: stale {m['stale']}/{n}, current {m['current']}/{n}, leaks {m['leaks']}")
        yield ("stale", figure, value, "; ".join(parts))


def rows_updates() -> Iterator[Row]:
    """Per suite and system: stale / current / kept at k=3, and automatic decisions right / applied."""
    d, _ = _load("bench_updates.json")
    systems = _get(d, "systems") or {}
    if not systems:
        yield ("updates", "stale / current / kept @3 (suites written by others)", None, "")
        return
    for name, s in systems.items():
        for suite, m in sorted((_get(s, "suites") or {}).items()):
            if "update" not in m:
                continue
            value = (
                f"stale {m['stale@3']}/{m['update']}, current {m['current@3']}/{m['with_current']}, "
                f"kept {m['kept@3']}/{m['non_update']}"
            )
            notes = [f"past {m['past@3']}/{m['past']}", f"leaks {_get(s, 'leaks')}"]
            if name.startswith("ml"):
                notes.append(f"decisions {m.get('applied_right', 0)}/{m.get('applied', 0)} right")
                notes.append(f"withdrawn non-updates {m['withdrawn']}")
            yield ("updates", f"{suite}: {name}", value, "; ".join(notes))


def rows_longmemeval() -> Iterator[Row]:
    """Per file and system: a stale turn above the current one, current in the top 3."""
    d, _ = _load("bench_longmemeval.json")
    files = _get(d, "files") or {}
    if not files:
        yield ("longmemeval", "knowledge-update: stale above current", None, "")
        return
    for f, rows in files.items():
        for name, r in rows.items():
            value = f"stale>current {r['stale>cur']}/{r['latest']}, current@3 {r['cur@3']}/{r['latest']}"
            dec = _get(r, "decisions") or {}
            notes = f"past@5 {r['past@5']}/{r['past']}; split {_get(d, 'split')}"
            if name.startswith("ml"):
                notes += f"; decisions on the evidence pair {dec.get('right', 0)}/{dec.get('made', 0)}"
            yield ("longmemeval", f"{f}: {name}", value, notes)


def rows_lineage() -> Iterator[Row]:
    d, _ = _load("bench_lineage.json")
    surfaces = _get(d, "surfaces") or {}
    if not surfaces:
        yield ("lineage", "suspect-set recall / precision after a correction", None, "")
        return
    base = _get(d, "baseline", "surfaces") or {}
    ref = _get(d, "baseline", "ref")
    for name, s in surfaces.items():
        if "error" in s:
            yield ("lineage", f"{name}: recall / precision", None, str(s["error"])[:60])
            continue
        b = base.get(name) if isinstance(base, dict) else None
        was = f"{_pct(_get(b, 'recall'))} / {_num(_get(b, 'precision'), '{:.2f}')}" if b and "recall" in b else "-"
        yield (
            "lineage",
            f"{name}: recall / precision",
            f"{_pct(s.get('recall'))} / {_num(s.get('precision'), '{:.2f}')}",
            f"{_get(d, 'corrections')} corrections; at {ref}: {was}",
        )


def rows_surfaces() -> Iterator[Row]:
    d, _ = _load("bench_surfaces.json")
    surfaces = _get(d, "surfaces") or {}
    if not surfaces:
        yield ("surfaces", "exceptions into the agent / lineage precision / recall", None, "")
        return
    for name, s in surfaces.items():
        if "error" in s:
            yield ("surfaces", name, None, str(s["error"])[:60])
            continue
        yield (
            "surfaces",
            f"{name}: exceptions / precision / recall",
            f"{s.get('exceptions_into_agent')} / {_num(s.get('precision'), '{:.2f}')} / "
            f"{_num(s.get('recall'), '{:.2f}')}",
            f"{s.get('turns')} turns; corrections applied {s.get('corrections_applied')}/{s.get('corrections')}; "
            f"failed calls stored {s.get('failed_calls_stored')}",
        )


def rows_turn() -> Iterator[Row]:
    d, _ = _load("bench_turn.json")
    rows = _get(d, "rows") or []
    if not rows:
        yield ("turn", "memory work per agent turn / raw Chroma turn", None, "")
        return
    load = _get(d, "load_average")
    for r in rows:
        yield (
            "turn",
            f"{r['surface']}: memory work per turn vs raw Chroma (goal <= 1.5)",
            f"{r['ratio']:.2f}x",
            f"{r['memory_work_ms']:.0f} ms vs {r['raw_chroma_turn_ms']:.0f} ms; load {load[0]:.1f}" if load else "",
        )


#: Which script feeds which rows (the script name decides "not run" and "earlier run" notes).
SECTIONS: list[tuple[str, Callable[[], Iterator[Row]], tuple[str, ...]]] = [
    ("bench_store", rows_store, ("bench_store.json", "store.json")),
    ("bench_scale", rows_scale, ("bench_scale.json",)),
    ("bench_policy", rows_policy, ("bench_policy.json", "policy.json")),
    ("bench_window", rows_window, ("bench_window.json", "window.json", "logs/bench_window.log")),
    ("bench_locomo", rows_locomo, ("locomo.json", "bench_locomo.json")),
    ("bench_value_gate", rows_value_gate, ("value_gate.json", "bench_value_gate.json")),
    ("bench_stale", rows_stale, ("bench_stale.json",)),
    ("bench_updates", rows_updates, ("bench_updates.json",)),
    ("bench_longmemeval", rows_longmemeval, ("bench_longmemeval.json",)),
    ("bench_lineage", rows_lineage, ("bench_lineage.json",)),
    ("bench_surfaces", rows_surfaces, ("bench_surfaces.json",)),
    ("bench_turn", rows_turn, ("bench_turn.json",)),
]


def _source_date(files: Sequence[str]) -> str:
    for f in files:
        p = RESULTS / f
        if p.is_file():
            return datetime.fromtimestamp(p.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    return ""


def collect(runs: dict[str, Run], started: float, collect_only: bool = False) -> list[dict[str, Any]]:
    """All summary rows, each with where its figure came from (this run, or the result file's date)."""
    out = []
    for script, rows, files in SECTIONS:
        run = runs.get(script)
        date = _source_date(files)
        fresh = any((RESULTS / f).is_file() and (RESULTS / f).stat().st_mtime >= started for f in files)
        for area, figure, value, note in rows():
            if value is None:
                source = "not run" if run is None or run.status == "ok" else run.status
                if not (HERE / f"{script}.py").is_file():
                    source = "not run (script absent)"
            elif fresh:
                source = "this run"
            elif collect_only or run is None:
                source = date
            else:
                source = f"earlier run, {date} (now {run.status})"
            out.append(
                {
                    "area": area,
                    "figure": figure,
                    "value": value or "not run",
                    "note": note,
                    "source": source,
                    "script": script,
                }
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--timeout",
        type=float,
        default=float(os.environ.get("BENCH_TIMEOUT", 1800)),
        help="seconds per script (default 1800, or $BENCH_TIMEOUT)",
    )
    ap.add_argument("--only", default="", help="comma-separated script names to run, e.g. 'stale,store'")
    ap.add_argument("--skip", default="", help="comma-separated script names not to run")
    ap.add_argument("--collect-only", action="store_true", help="run nothing; summarise the existing results")
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)

    def norm(s: str) -> set[str]:
        return {x.strip().removeprefix("bench_").removesuffix(".py") for x in s.split(",") if x.strip()}

    only, skip = norm(args.only), norm(args.skip)
    scripts = [
        p
        for p in discover()
        if (not only or p.stem.removeprefix("bench_") in only) and p.stem.removeprefix("bench_") not in skip
    ]
    env = dict(os.environ)
    env.setdefault("ANONYMIZED_TELEMETRY", "False")
    env.setdefault("MEM0_TELEMETRY", "False")
    if "MEMLINEAGE_EMBEDDING_MODEL_DIR" not in env and (SHARED_MODEL / "model.onnx").is_file():
        env["MEMLINEAGE_EMBEDDING_MODEL_DIR"] = str(SHARED_MODEL)
    RESULTS.mkdir(parents=True, exist_ok=True)

    started = time.time()
    runs: dict[str, Run] = {}
    if not args.collect_only:
        for i, path in enumerate(scripts, 1):
            with console.status(f"[{i}/{len(scripts)}] {path.name} (timeout {args.timeout:.0f} s)..."):
                run = run_script(path, args.timeout, env)
            runs[run.name] = run
            colour = "green" if run.status.startswith("ok") else "red"
            console.print(
                f"[{colour}]{path.name}: {run.status}[/{colour}] in {run.seconds:.0f} s "
                f"(log: {LOGS.relative_to(HERE.parent) / (run.name + '.log')})"
            )

    rows = collect(runs, started, args.collect_only)
    table = Table(title="MemLineage benchmarks: headline figures")
    for col, kw in (
        ("area", {}),
        ("figure", {}),
        ("value", {"justify": "right"}),
        ("note", {}),
        ("source", {}),
    ):
        table.add_column(col, **kw)
    for r in rows:
        value = r["value"] if r["value"] != "not run" else "[dim]not run[/dim]"
        table.add_row(r["area"], r["figure"], value, r["note"], r["source"])
    console.print(table)
    summary = {
        "generated": datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": sys.executable,
        "runs": {n: {"status": r.status, "seconds": round(r.seconds, 1)} for n, r in runs.items()},
        "rows": rows,
    }
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    failed = [n for n, r in runs.items() if not r.status.startswith("ok")]
    if failed:
        console.print(f"[red]failed or timed out: {', '.join(failed)}[/red] (see {LOGS})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
