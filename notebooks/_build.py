"""Builds the notebooks from plain Python cell lists (keeps them reviewable); run: python notebooks/_build.py."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent


def build(name: str, cells: list[tuple[str, str]]) -> None:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells]
    nbformat.write(nb, HERE / name)


QUICKSTART = [
    ("md", "# MemLineage core quickstart\n\nremember → recall → correct → explain, on an embedded store in a "
           "temporary directory. Offline: the default embedder reads all-MiniLM-L6-v2's ONNX files from "
           "`MEMLINEAGE_EMBEDDING_MODEL_DIR` (or chromadb's cache)."),
    ("code", "import tempfile\nfrom pathlib import Path\n\nfrom memlineage import MemoryManager, Scope, Status\n\n"
             "store = Path(tempfile.mkdtemp()) / \"store\"\nmm = MemoryManager.open(store)\n"
             "alice = Scope(user_id=\"alice\", session_id=\"trip-1\")"),
    ("md", "## remember, with lineage\nEach memory records its source (`user`, `tool:<name>`, `reasoning`...) and "
           "the memories it was derived from."),
    ("code", "city = mm.remember(\"I want to travel to Paris\", scope=alice, source=\"user\", kind=\"semantic\")\n"
             "dates = mm.remember(\"My trip is from 3 to 7 May\", scope=alice, source=\"user\")\n"
             "flight = mm.remember(\"Flight to Paris on 3 May costs 120 EUR\", scope=alice,\n"
             "                     source=\"tool:flight_api\", derived_from=[city.id, dates.id], tags=[\"flight_price\"])\n"
             "plan = mm.remember(\"Book Hotel Lumière near the Louvre\", scope=alice, source=\"reasoning\",\n"
             "                   derived_from=[flight.id], confidence=0.8)\n"
             "print(plan.summary())\nassert plan.trust <= flight.trust"),
    ("md", "## recall\nScope-filtered inside the query; every hit carries its score parts and a lineage summary."),
    ("code", "for hit in mm.recall(\"where am I staying?\", scope=alice, k=3):\n"
             "    print(f\"{hit.score:.2f}  {hit.content}  [{hit.lineage}]\")\n"
             "assert mm.recall(\"Paris\", scope=Scope(user_id=\"bob\")).hits == []  # tenant isolation"),
    ("md", "## correct a premise\nSuperseding the city marks everything derived from it `suspect`; recall stops "
           "serving it."),
    ("code", "report = mm.supersede(city.id, \"I want to travel to Lyon\", scope=alice, source=\"user\")\n"
             "print(\"suspect:\", report.suspect)\n"
             "assert set(report.suspect) == {flight.id, plan.id}\n"
             "assert plan.id not in mm.recall(\"hotel\", scope=alice, k=5).ids\n"
             "assert mm.require(plan.id, scope=alice).status is Status.SUSPECT"),
    ("md", "## explain\nThe provenance chain, as text and as a Mermaid picture rendered inline."),
    ("code", "ex = mm.explain(plan.id, scope=alice)\nprint(ex.to_text())"),
    ("code", "from IPython.display import Markdown\nMarkdown(\"```mermaid\\n\" + ex.to_mermaid() + \"\\n```\")"),
    ("code", "mm.close()"),
]

if __name__ == "__main__":
    which = sys.argv[1:] or ["all"]
    if "all" in which or "01" in which:
        build("01_core_quickstart.ipynb", QUICKSTART)
