import subprocess
import sys

import memlineage_llamaindex


def test_all() -> None:
    assert memlineage_llamaindex.__all__ == [
        "LineageChatStore",
        "LineageEventHandler",
        "LineageMemory",
        "LineageMemoryBlock",
        "LineageSpanHandler",
        "capture_run",
        "lineage_memory",
        "memory_tools",
    ]
    assert memlineage_llamaindex.__all__ == sorted(memlineage_llamaindex.__all__)
    for name in memlineage_llamaindex.__all__:
        assert getattr(memlineage_llamaindex, name) is not None


def test_imports_only_memlineage_and_llama_index() -> None:
    code = (
        "import sys, memlineage_llamaindex; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('langchain', 'langchain_core', 'langchain_classic', 'langgraph', 'memlineage_langchain')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_class_mro() -> None:
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
    from llama_index.core.memory import Memory
    from llama_index.core.memory.memory import BaseMemoryBlock

    assert BaseMemoryBlock.__name__ in [c.__name__ for c in memlineage_llamaindex.LineageMemoryBlock.__mro__]
    assert issubclass(memlineage_llamaindex.LineageMemory, Memory)
    assert issubclass(memlineage_llamaindex.LineageEventHandler, BaseEventHandler)
    assert issubclass(memlineage_llamaindex.LineageSpanHandler, BaseSpanHandler)
