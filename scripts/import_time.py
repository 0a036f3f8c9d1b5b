"""Import cost of the core: median wall time of fresh interpreters (issue 15: ``import memlineage`` ≤ 0.3 s).

Run: ``.venv/bin/python scripts/import_time.py [--runs 10]``. Prints, for each statement, the median and the spread
in seconds, the bare interpreter start-up for reference, and the CLI / framework packages the statement loaded
(there should be none).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

STATEMENTS = (
    "pass",
    "import memlineage",
    "from memlineage import MemoryManager, Scope",
)
WATCHED = ("typer", "rich", "prompt_toolkit", "cel", "chromadb", "onnxruntime", "langchain_core", "llama_index")


def measure(statement: str, runs: int) -> tuple[float, float, float]:
    """Median, min and max wall time (s) of ``python -c statement`` over ``runs`` fresh processes."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def loaded(statement: str) -> list[str]:
    """Watched packages present in ``sys.modules`` after ``statement``."""
    code = f"import sys\n{statement}\nprint(' '.join(m for m in {WATCHED!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return out.stdout.split()


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    for statement in STATEMENTS:
        median, low, high = measure(statement, args.runs)
        extra = loaded(statement)
        print(f"{statement:48} median {median:.3f} s (min {low:.3f}, max {high:.3f})  loads: {extra or 'none'}")


if __name__ == "__main__":
    main()
