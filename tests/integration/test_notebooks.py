"""Every notebook under notebooks/ executes top to bottom, offline (nbclient)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from memlineage.index import default_model_dir
from nbclient import NotebookClient

pytestmark = pytest.mark.integration

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.fixture(autouse=True)
def _kernel_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """IPython's profile and matplotlib's font cache go to the test's tmp dir, not the user's home."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / ".ipython"))
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / ".matplotlib"))


def run(path: Path, cwd: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    return nb


def text_of(nb: nbformat.NotebookNode) -> str:
    return "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )


#: The notebooks open stores with the default embedder, as a user would; its files are not downloaded in tests.
needs_model = pytest.mark.skipif(
    not (default_model_dir() / "model.onnx").is_file(), reason="embedding model files not available offline"
)


@needs_model
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    run(path, tmp_path)


def test_locomo_notebook_skips_cleanly_without_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLINEAGE_LOCOMO_PATH", str(tmp_path / "absent" / "locomo_dev7.json"))
    nb = run(Path(__file__).resolve().parents[2] / "notebooks" / "04_locomo_real_conversations.ipynb", tmp_path)
    out = text_of(nb)
    assert "LoCoMo data not found" in out and "MEMLINEAGE_LOCOMO_PATH" in out


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_executed_and_clean(path: Path) -> None:
    """The committed notebook reads as documentation: every code cell ran, no error, no warning on stderr."""
    nb = nbformat.read(path, as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert code_cells and all(c.get("execution_count") for c in code_cells), "run: python notebooks/_build.py --execute"
    for cell in code_cells:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", out.get("evalue")
            if out.get("name") == "stderr":
                assert "Warning" not in out.get("text", "") and "Traceback" not in out.get("text", ""), out["text"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_imports_only_public_names(path: Path) -> None:
    import re

    nb = nbformat.read(path, as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    private = re.findall(r"(?:from|import)\s+(memlineage\w*(?:\.\w+)*\._\w+)", source)
    assert not private, f"{path.name} imports private modules {private}"


def test_readme_links_every_notebook_with_a_description() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    for path in NOTEBOOKS:
        at = next((i for i, ln in enumerate(lines) if f"](notebooks/{path.name})" in ln), None)
        assert at is not None, f"README does not link {path.name}"
        item = lines[at]
        for ln in lines[at + 1 :]:  # the bullet's continuation lines
            if not ln.startswith("  ") or not ln.strip():
                break
            item += " " + ln.strip()
        assert len(item.split(f"](notebooks/{path.name})", 1)[-1].strip(" :")) > 30, f"no description for {path.name}"


def test_a_notebook_shows_the_lineage_graph_as_a_picture() -> None:
    nb = nbformat.read(REPO / "notebooks" / "01_core_quickstart.ipynb", as_version=4)
    pictures = [
        out
        for c in nb.cells
        if c.cell_type == "code"
        for out in c.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]
    assert pictures, "notebook 01 draws the lineage graph with matplotlib"


def test_committed_notebooks_are_what_build_py_writes(tmp_path: Path) -> None:
    """notebooks/_build.py is the source: the committed cells are exactly what it writes (linted, formatted)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("nb_build", REPO / "notebooks" / "_build.py")
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    for name, cells in builder.NOTEBOOKS.values():
        builder.build(name, cells, out=tmp_path)
        built = [c.source for c in nbformat.read(tmp_path / name, as_version=4).cells]
        committed = [c.source for c in nbformat.read(REPO / "notebooks" / name, as_version=4).cells]
        assert built == committed, f"{name}: run python notebooks/_build.py --execute {name[:2]}"
