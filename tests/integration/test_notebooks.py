"""Every notebook under notebooks/ executes top to bottom, offline (nbclient)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    run(path, tmp_path)


def test_locomo_notebook_skips_cleanly_without_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLINEAGE_LOCOMO_PATH", str(tmp_path / "absent" / "locomo_dev7.json"))
    nb = run(Path(__file__).resolve().parents[2] / "notebooks" / "04_locomo_real_conversations.ipynb", tmp_path)
    out = text_of(nb)
    assert "LoCoMo data not found" in out and "MEMLINEAGE_LOCOMO_PATH" in out
