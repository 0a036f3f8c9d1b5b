"""The public surface is explicit (STYLE R4) and the core never imports a framework (R1)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys

import memlineage
import pydantic
import pytest

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
    assert "3 kept, 0 broken" in out.stdout
    assert "core layers: facade over services over gates and ports over storage KEPT" in out.stdout


def test_agent_demo_is_found_through_its_entry_point():
    from memlineage.cli import DEMO_GROUP, _demo_runner

    from memlineage_langchain.demo import run_agent_demo

    names = {e.name for e in importlib.metadata.entry_points(group=DEMO_GROUP)}
    assert "agent" in names
    assert _demo_runner("agent") is run_agent_demo
    assert _demo_runner("no-such-demo") is None


def test_core_source_never_imports_an_adapter():
    """Not even dynamically (import-linter sees static imports only): the demo comes through an entry point."""
    import re
    from pathlib import Path

    core = Path(memlineage.__file__).parent
    pattern = re.compile(
        r"^\s*(from|import)\s+memlineage_(langchain|llamaindex)|import_module\(\s*[\"']memlineage_", re.M
    )
    offenders = [str(p.relative_to(core)) for p in core.rglob("*.py") if pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_assigning_a_part_rewires_the_services_and_keeps_the_value_buffer():
    from memlineage import Scope
    from memlineage.policy import PolicyEngine, builtin_policies
    from memlineage.testing import make_manager
    from memlineage.value import ValueModel

    mm = make_manager(value_model=ValueModel())
    s = Scope(user_id="u", session_id="s1")
    kept = mm.remember("ok thanks", scope=s)
    assert [b.id for b in mm.buffered(s)] == [kept.id]
    engine = PolicyEngine(builtin_policies())
    mm.policy = engine
    assert mm.services.policy.engine is engine
    assert mm.services.writes.policy is mm.services.policy and mm.services.recall.policy is mm.services.policy
    assert [b.id for b in mm.buffered(s)] == [kept.id]  # the value gate's state carried over
    mm.policy = None
    assert not mm.services.policy.enabled


def test_adapter_constructors_raise_typed_errors_with_pydantics_reason():
    from memlineage import InvalidInputError

    from memlineage_langchain import LineageMemory, LineageRetriever
    from memlineage_llamaindex import LineageChatStore, LineageMemoryBlock

    for build, words in (
        (lambda: LineageMemory(scope="alice"), "LineageMemory(...): manager: Field required"),
        (lambda: LineageRetriever(k=-1), "k: Input should be greater than or equal to 0"),
        (lambda: LineageChatStore(user_id=None), "user_id: Input should be a valid string"),
        (lambda: LineageMemoryBlock(scope="alice"), "LineageMemoryBlock(...): manager"),
    ):
        with pytest.raises(InvalidInputError, match=re.escape(words)) as info:
            build()
        assert isinstance(info.value.__cause__, pydantic.ValidationError)
