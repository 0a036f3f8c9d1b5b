"""Issue 28: the README's recommended LlamaIndex path (``FunctionAgent`` with ``lineage_memory`` and ``capture_run``)
meets no deprecation warning."""

from __future__ import annotations

import warnings
from typing import Any

from memlineage import MemoryManager, Scope
from pydantic.warnings import PydanticDeprecationWarning

from memlineage_llamaindex import capture_run, lineage_memory


async def test_the_recommended_memory_path_warns_nothing(manager: MemoryManager, li: Any) -> None:
    from llama_index.core.agent.workflow import FunctionAgent

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = FunctionAgent(
            tools=li.tools(),
            llm=li.llm(li.calls(("c-1", "get_weather", {"city": "Paris"})), li.say("It is 18C in Paris.")),
        )
        async with lineage_memory(manager, user_id="alice", session_id="trip-42") as memory:
            await capture_run(
                agent.run(user_msg="Weather in Paris?", memory=memory), manager, scope=Scope(user_id="alice")
            )
    found = [
        f"{w.category.__name__}: {w.message} ({w.filename})"
        for w in caught
        if (issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)) or "deprecat" in str(w.message))
        # pydantic's own v1-attribute notices, raised when llama-index-workflows introspects models with
        # inspect.getmembers: not an API of the recommended path, and hidden by Python's default filters
        and not issubclass(w.category, PydanticDeprecationWarning)
    ]
    assert found == []
    assert manager.find(scope=Scope(user_id="alice")), "the run was stored"
