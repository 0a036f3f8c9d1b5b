"""Shared test configuration: offline model files when the workspace ships them."""

from __future__ import annotations

import importlib.util
import os
import types
from pathlib import Path

import pytest

_SHARED_MODEL = Path(__file__).resolve().parents[2] / "shared" / "models" / "all-MiniLM-L6-v2" / "onnx"
if "MEMLINEAGE_EMBEDDING_MODEL_DIR" not in os.environ and (_SHARED_MODEL / "model.onnx").is_file():
    os.environ["MEMLINEAGE_EMBEDDING_MODEL_DIR"] = str(_SHARED_MODEL)
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def _load_erasure_probe() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("_erasure_probe", Path(__file__).parent / "_erasure_probe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def erasure_probe() -> types.ModuleType:
    """tests/_erasure_probe.py: writes words through every write path, then finds them (erasure tests)."""
    return _load_erasure_probe()
