"""The LangChain adapter's public surface is explicit (STYLE R4) and imports no other adapter (R1)."""

from __future__ import annotations

import subprocess
import sys

import memlineage_langchain

EXPECTED = [
    "AsyncLineageCaptureCallback",
    "LineageCaptureCallback",
    "LineageChatMessageHistory",
    "LineageMemory",
    "LineageMiddleware",
    "LineageRetriever",
    "LineageStore",
    "memory_tools",
    "tool_error_text",
]


def test_all_is_pinned_sorted_and_resolvable():
    assert memlineage_langchain.__all__ == EXPECTED
    for name in EXPECTED:
        assert hasattr(memlineage_langchain, name), name


def test_adapter_imports_no_other_adapter():
    code = (
        "import sys, memlineage_langchain; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('llama_index', 'memlineage_llamaindex')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
