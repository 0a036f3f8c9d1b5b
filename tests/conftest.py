"""Shared test configuration: offline model files when the workspace ships them."""

from __future__ import annotations

import os
from pathlib import Path

_SHARED_MODEL = Path(__file__).resolve().parents[2] / "shared" / "models" / "all-MiniLM-L6-v2" / "onnx"
if "MEMLINEAGE_EMBEDDING_MODEL_DIR" not in os.environ and (_SHARED_MODEL / "model.onnx").is_file():
    os.environ["MEMLINEAGE_EMBEDDING_MODEL_DIR"] = str(_SHARED_MODEL)
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
