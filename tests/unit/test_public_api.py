"""The public surface is explicit (STYLE R4) and the core never imports a framework (R1)."""

from __future__ import annotations

import subprocess
import sys

import memlineage

EXPECTED_CORE = sorted(memlineage.__all__)


def test_core_all_is_sorted_and_resolvable():
    assert memlineage.__all__ == sorted(memlineage.__all__)
    for name in memlineage.__all__:
        assert hasattr(memlineage, name), name


def test_core_exports_the_facade_models_and_errors():
    for name in ("MemoryManager", "Memory", "Scope", "Source", "Relation", "Status", "MemLineageError"):
        assert name in memlineage.__all__
    assert [r.value for r in memlineage.Relation] == [
        "wasDerivedFrom",
        "wasGeneratedBy",
        "used",
        "wasAttributedTo",
        "wasAssociatedWith",
        "wasInformedBy",
        "wasRevisionOf",
        "wasInvalidatedBy",
    ]


def test_errors_share_one_root():
    import memlineage.errors as errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.MemLineageError)
    assert issubclass(errors.InvalidInputError, ValueError)
    assert issubclass(errors.MemoryNotFoundError, LookupError)
    assert issubclass(errors.MissingDependencyError, ImportError)


def test_import_memlineage_loads_no_framework_or_chromadb():
    code = (
        "import sys, memlineage, memlineage.testing, memlineage.tools\n"
        "bad = [m for m in ('chromadb', 'langchain_core', 'langchain_classic', 'langgraph', 'llama_index',"
        " 'memlineage_langchain', 'memlineage_llamaindex') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_import_linter_contracts_hold():
    import shutil
    from pathlib import Path

    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 kept, 0 broken" in out.stdout
