"""The public surface is explicit (STYLE R4) and the core never imports a framework (R1)."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import subprocess
import sys

import memlineage
import pydantic
import pytest

# The public surface, written out: a name added to or dropped from an `__all__` must be added or dropped here too.
EXPECTED_ALL = {
    "memlineage": [
        "Activity", "CascadeReport", "ChatMessage", "ChromaIndex", "ConfigurationError", "ConflictError",
        "ConsistencyReport",
        "ConsolidationResult", "ContextOverflowError", "Decision", "Effect", "Embedder", "ErasureReceipt", "Event",
        "Exclusion", "Explanation", "FeatureExtractor", "InMemoryIndex", "InvalidInputError", "InvalidNamespaceError",
        "LLMExtractor", "Lineage", "LineageCycleError", "MemLineageError", "MemLineageSettings", "Memory",
        "MemoryFeatures", "MemoryKind", "MemoryManager", "MemoryNotFoundError", "MissingDependencyError",
        "OnnxMiniLMEmbedder", "Operation", "Policy", "PolicyEngine", "PolicyLayer", "PolicyLoadError",
        "PolicyRequest", "PolicyTarget", "PolicyViolationError", "RecallHit", "RecallResult", "Relation",
        "RuleBasedConsolidator", "RuleBasedExtractor", "SchemaVersionError", "Scope", "ScopeViolationError", "Source",
        "SourceKind", "Status", "StorageError", "StoreLockedError", "SweepReport", "ToolCall", "Trace",
        "ValueAssessment", "ValueModel", "ValueProfile", "ValueWeights", "VectorIndex", "WorkingMemory",
        "WriteGateSink", "__version__", "builtin_policies", "load_policies",
    ],
    "memlineage.index": [
        "ChromaIndex", "Embedder", "InMemoryIndex", "IndexFilter", "IndexHit", "OnnxMiniLMEmbedder",
        "ScopedVectorIndex", "VectorIndex", "default_model_dir", "ensure_embedder", "index_metadata",
    ],
    "memlineage.ledger": [
        "HEAD", "Event", "Ledger", "decode_vector", "encode_vector", "memory_to_row", "migrate", "row_to_memory",
        # the SQLAlchemy names code outside the ledger may use (only the ledger imports SQLAlchemy)
        "Connection", "IntegrityError", "OperationalError", "SQLAlchemyError", "Table", "has_memory_table",
        "hide_url_password", "url_without_password",
    ],
    "memlineage.extractors": [
        "FeatureExtractor", "GoalRelation", "InfoType", "LLMExtractor", "LLMFeatureOutput", "MemoryFeatures",
        "RuleBasedExtractor", "content_terms", "detect_slot", "is_forcing_directive",
    ],
    "memlineage.policy": [
        "DEFAULT_TOOL_TTL", "SCOPE_POLICY_ID", "AdminGrant", "Decision", "Effect", "Operation", "Policy",
        "PolicyConflict", "PolicyContext", "PolicyEngine", "PolicyLayer", "PolicyRequest", "PolicyTarget",
        "ReadOutcome", "RefreshHook", "builtin_policies", "decision_trust_floor", "dependency_consistency",
        "freshness", "load_policies", "load_policy_file", "precedence_key", "source_trust_floor", "tool_result_ttl",
        "ttl_expiry", "user_write_protection",
    ],
    "memlineage.testing": ["FakeEmbedder", "make_manager"],
    "memlineage_langchain": [
        "AsyncLineageCaptureCallback", "LineageCaptureCallback", "LineageChatMessageHistory", "LineageMemory",
        "LineageMiddleware", "LineageRetriever", "LineageStore", "memory_tools", "tool_error_text",
    ],
    "memlineage_llamaindex": [
        "LineageChatStore", "LineageEventHandler", "LineageMemory", "LineageMemoryBlock", "LineageSpanHandler",
        "capture_run", "lineage_memory", "memory_tools",
    ],
}  # fmt: skip


@pytest.mark.parametrize("package", sorted(EXPECTED_ALL))
def test_all_is_the_expected_literal_list_and_every_name_imports(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(EXPECTED_ALL[package])
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"


def test_internals_are_not_top_level_exports() -> None:
    # Ledger's methods take SQLAlchemy connections: build-from-parts code imports it from memlineage.ledger.
    for name in ("Ledger", "memory_to_row", "RunRecorder", "ChatHistory"):
        assert name not in memlineage.__all__
    with pytest.raises(AttributeError):
        memlineage.Ledger  # noqa: B018
    assert "WorkingMemory" in dir(memlineage)


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


#: Packages the core must not load by being imported: CLI toolkits (the CEL package's CLI pulls them in),
#: frameworks, the vector database and the ONNX runtime.
NOT_ON_IMPORT = (
    "typer", "rich", "prompt_toolkit", "cel", "langchain", "langchain_core", "langchain_classic", "langgraph",
    "llama_index", "memlineage_langchain", "memlineage_llamaindex", "chromadb", "onnxruntime",
)  # fmt: skip


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    return [m for m in NOT_ON_IMPORT if m in loaded]


@pytest.mark.parametrize(
    "statement",
    [
        "import memlineage",
        "from memlineage import MemoryManager, Scope, WorkingMemory",
        "import memlineage.testing, memlineage.tools, memlineage.window, memlineage.ledger",
    ],
)
def test_importing_the_core_loads_no_cli_framework_or_vector_database(statement: str) -> None:
    assert _loaded_after(statement) == []


def test_import_memlineage_defers_the_heavy_libraries() -> None:
    # SQLAlchemy, NumPy and pydantic load with the first name that needs them, not with the package.
    code = "import sys, memlineage\nprint(sorted(m for m in ('sqlalchemy', 'numpy', 'pydantic') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert memlineage.MemoryManager.__module__.startswith("memlineage.")


def test_import_linter_contracts_hold():
    import shutil
    from pathlib import Path

    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 kept, 0 broken" in out.stdout
    assert "core layers: facade over services over gates and ports over storage KEPT" in out.stdout
    assert "only the ledger speaks SQL KEPT" in out.stdout


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


def test_adapters_import_only_public_core_modules():
    """Issue 29: an adapter imports no private core module (a path segment starting with ``_``), so the core's
    internals can move without breaking them; what adapters need is public (``memlineage.construct``, ``render``)."""
    import ast
    from pathlib import Path

    root = Path(memlineage.__file__).parents[2]
    offenders = []
    for package in ("memlineage_langchain", "memlineage_llamaindex"):
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for name in names:
                    parts = name.split(".")
                    if parts[0] == "memlineage" and any(p.startswith("_") for p in parts[1:]):
                        offenders.append(f"{path.relative_to(root)}: {name}")
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


def test_python_dash_m_cli_knows_every_command():
    """``python -m memlineage.cli`` registers every command before it runs (``cli/__main__.py`` runs the app last)."""
    from memlineage.cli import app

    names = {c.name or c.callback.__name__ for c in app.registered_commands}
    out = subprocess.run(
        [sys.executable, "-m", "memlineage.cli", "--help"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    missing = [n for n in names if n not in out]
    assert {"mcp", "serve", "recall"} <= names and missing == []


def test_the_update_decision_is_not_called_decision_any_more():
    """Issue 29: ``memlineage.Decision`` is a policy decision; the reconciler's is ``UpdateDecision`` (the old name
    still works, with a DeprecationWarning); ports end in ``Port`` where an implementation has the plain name."""
    import memlineage.ports as ports
    import memlineage.reconcile as reconcile

    assert reconcile.UpdateDecision is not memlineage.Decision and "Decision" not in reconcile.__all__
    with pytest.warns(DeprecationWarning, match="UpdateDecision"):
        assert reconcile.Decision is reconcile.UpdateDecision
    assert {"LexicalIndexPort", "PolicyGatePort", "ValueGatePort"} <= set(ports.__all__)
    assert not {"LexicalIndex", "PolicyGate", "ValueGate"} & set(ports.__all__)
