"""The structure the code keeps (issue 29): typed parameters, modules of a readable size."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core" / "memlineage"
PACKAGES = (CORE, ROOT / "memlineage_langchain", ROOT / "memlineage_llamaindex")
#: The most lines a library module may have.
MAX_LINES = 700


def _opaque_any(path: Path, root: Path = ROOT) -> list[str]:
    """Parameters annotated exactly ``Any`` (``*args: Any`` and ``**kwargs: Any`` included) in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x is not None)]:
            if arg.annotation is not None and ast.unparse(arg.annotation) in ("Any", "'Any'", "typing.Any"):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}({arg.arg})")
    return found


def test_no_core_parameter_is_typed_any() -> None:
    # a parameter says what it takes: a type, a Protocol, or ``object`` where anything is narrowed at run time
    found = [hit for path in sorted(CORE.rglob("*.py")) for hit in _opaque_any(path)]
    assert found == []


def test_the_counter_sees_an_any_parameter(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("from typing import Any\ndef f(x: Any, *a: int, **k: Any) -> Any: ...\n", encoding="utf-8")
    assert _opaque_any(path, tmp_path) == ["m.py:2 f(x)", "m.py:2 f(k)"]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_no_module_is_over_the_line_limit(package: Path) -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in package.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
