"""The route of a user's correction from the LangChain callback to the cascade (issue 29), counted at run time.

A scripted ``AgentExecutor`` turn says "I live in Paris", the next one "Correction: I live in Lyon, not Paris".
Printed: the project files on the call stack when the cascade starts (the path the correction travels down; a file
entered again after another one is a return), every project file that any call entered from the callback's
``on_chain_start`` until then (update detection, the gates and the ledger included), and the files whose functions
were handed the correction itself (its text, or a draft or memory holding it), with the returns to a file left.

Run from the repository root: ``.venv/bin/python scripts/correction_route.py``.
"""

from __future__ import annotations

import dataclasses
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))

import memlineage.services.cascade as cascade_module  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from memlineage import MemoryManager, Scope  # noqa: E402
from memlineage.testing import make_manager  # noqa: E402

from memlineage_langchain import LineageCaptureCallback  # noqa: E402
from tests.unit.langchain.conftest import get_weather, scripted  # noqa: E402
from tests.unit.langchain.test_agent_executor import executor, memory_for, weather_model  # noqa: E402

SCOPE = Scope(user_id="alice", session_id="s1")
CORRECTION = "Correction: I live in Lyon, not Paris"


def _ours(filename: str) -> bool:
    return "/memlineage" in filename and "site-packages" not in filename


def _rel(filename: str) -> str:
    return str(Path(filename).resolve().relative_to(ROOT))


def _two_turns(mm: MemoryManager) -> Callable[[], object]:
    """Play the first turn; return the correction turn, for the caller to instrument."""
    handler = LineageCaptureCallback(mm, scope=SCOPE, raise_error=True)
    memory = memory_for(mm, SCOPE)
    first = executor(weather_model("Paris", answer="Pack sunglasses."), [get_weather], memory)
    first.invoke({"input": "I live in Paris, what should I pack?"}, config={"callbacks": [handler]})
    second = executor(scripted(AIMessage(content="Noted, Lyon.")), [get_weather], memory)
    return lambda: second.invoke({"input": CORRECTION}, config={"callbacks": [handler]})


def stack_route() -> list[tuple[str, str]]:
    """The project files on the stack when the cascade starts, from the callback down: ``(file, functions)``."""
    correction = _two_turns(make_manager())
    stacks: list[traceback.StackSummary] = []
    original = cascade_module.Cascade.invalidate

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        stacks.append(traceback.extract_stack())
        return original(self, *args, **kwargs)

    cascade_module.Cascade.invalidate = spy  # type: ignore[method-assign]
    try:
        correction()
    finally:
        cascade_module.Cascade.invalidate = original  # type: ignore[method-assign]
    frames = [f for f in stacks[0] if _ours(f.filename)]
    start = next(i for i, f in enumerate(frames) if "memlineage_langchain" in f.filename)
    route: list[tuple[str, str]] = []
    for f in frames[start:]:
        if route and route[-1][0] == _rel(f.filename):
            route[-1] = (route[-1][0], f"{route[-1][1]} > {f.name}")
        else:
            route.append((_rel(f.filename), f.name))
    return route


def _carries(value: object, text: str, depth: int = 0) -> bool:
    """Whether ``value`` holds the correction's words: the text itself, or a record, list or mapping that does."""
    if isinstance(value, str):
        return text in value
    if depth >= 3:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_carries(x, text, depth + 1) for x in list(value)[:50])
    if isinstance(value, dict):
        return any(_carries(x, text, depth + 1) for x in list(value.values())[:50])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(_carries(getattr(value, f.name, None), text, depth + 1) for f in dataclasses.fields(value))
    fields = getattr(type(value), "model_fields", None)
    return bool(fields) and any(_carries(getattr(value, k, None), text, depth + 1) for k in fields)


def calls() -> list[tuple[str, bool]]:
    """Every project call from the callback's ``on_chain_start`` until the cascade starts, in call order.

    Each is ``(file, handed)``: ``handed`` when one of its arguments (``self`` left out) carries the correction (its
    text, or a draft or memory holding it), the run-time counterpart of following one value through the code. The
    cascade's own ``invalidate`` counts as handed.
    """
    correction = _two_turns(make_manager())
    seen: list[tuple[str, bool]] = []
    state = {"on": False, "done": False}

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or state["done"] or not _ours(frame.f_code.co_filename):
            return
        code = frame.f_code
        state["on"] = state["on"] or (code.co_name == "on_chain_start" and "_callback" in code.co_filename)
        if not state["on"]:
            return
        state["done"] = code.co_name == "invalidate" and "cascade" in code.co_filename
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        handed = state["done"] or any(_carries(frame.f_locals.get(n), CORRECTION) for n in names if n != "self")
        seen.append((_rel(code.co_filename), handed))

    sys.setprofile(profile)
    try:
        correction()
    finally:
        sys.setprofile(None)
    return seen


def main() -> None:
    """Print the three counts."""
    route = stack_route()
    files = [file for file, _ in route]
    returns = [f for i, f in enumerate(files) if f in files[:i]]
    for file, functions in route:
        print(f"  {file}: {functions}")
    print(f"on the stack: {len(route)} stops, {len(set(files))} files, {len(returns)} returns {returns}")
    seen = calls()
    print(f"every call until the cascade: {len(seen)} calls in {len({f for f, _ in seen})} files")
    handed = [file for file, carried in seen if carried]
    stays = [f for i, f in enumerate(handed) if i == 0 or handed[i - 1] != f]  # consecutive calls in a file: one stay
    again = sum(1 for i, f in enumerate(stays) if f in stays[:i])
    print(f"calls handed the correction: {len(stays)} stays in {len(set(stays))} files, {again} returns to a file")


if __name__ == "__main__":
    main()
