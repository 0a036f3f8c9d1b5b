"""Every verb is declared once: typed bad-call errors, and an async twin generated with its full signature."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from memlineage import MemoryManager
from memlineage.errors import InvalidInputError, StorageError
from memlineage.testing import make_manager

#: Public callables of the manager that are not verbs: lifecycle of the object and adapter plumbing.
NOT_VERBS = {"close", "default_options", "model_reconciler", "record_adapter_error"}
#: Constructors are verbs (typed bad calls) with no twin: opening a store is not awaited.
CONSTRUCTORS = {"open", "from_settings"}


def _public() -> dict[str, object]:
    return {n: getattr(MemoryManager, n) for n in dir(MemoryManager) if not n.startswith("_")}


def _verbs() -> list[str]:
    return sorted(n for n, f in _public().items() if getattr(f, "__memlineage_verb__", False))


def test_every_public_method_is_a_verb_or_its_twin() -> None:
    public = {n for n, f in _public().items() if callable(f)}
    twins = {n for n in public if inspect.iscoroutinefunction(getattr(MemoryManager, n))}
    assert public - twins - set(_verbs()) == NOT_VERBS
    assert len(_verbs()) >= 40


@pytest.mark.parametrize("name", [n for n in _verbs() if n not in CONSTRUCTORS])
def test_each_verb_has_an_async_twin_with_its_signature(name: str) -> None:
    twin = getattr(MemoryManager, f"a{name}")
    assert inspect.iscoroutinefunction(twin)
    assert twin.__name__ == f"a{name}"
    assert inspect.signature(twin) == inspect.signature(getattr(MemoryManager, name))


def test_no_verb_is_patched_onto_the_class_after_it_is_built() -> None:
    # a verb lives in the __dict__ of the class whose body declares it; setattr(MemoryManager, ...) at import time
    # would put a mixin's verb into MemoryManager's own __dict__
    for name in _verbs():
        owner = next(c for c in MemoryManager.__mro__ if name in c.__dict__)
        fn = owner.__dict__[name]
        fn = getattr(fn, "__func__", fn)
        assert fn.__qualname__ == f"{owner.__name__}.{name}", name


def test_a_twin_runs_the_verb_and_raises_its_errors() -> None:
    mm = make_manager()

    async def run() -> None:
        m = await mm.aremember("I live in Lyon", scope="alice", source="user")
        assert (await mm.aget(m.id, scope="alice")) == mm.get(m.id, scope="alice")
        hits = await mm.arecall("where do I live", scope="alice", k=1)
        assert [h.memory.id for h in hits.hits] == [m.id]
        assert [x.id for x in await mm.aget_many([m.id], scope="alice") if x] == [m.id]
        with pytest.raises(InvalidInputError, match="unexpected keyword"):
            await mm.aremember("x", scope="alice", bogus=1)  # type: ignore[call-arg]

    asyncio.run(run())
    mm.close()
    with pytest.raises(StorageError, match="closed"):
        asyncio.run(mm.astats())


def test_a_twin_calls_a_subclass_override() -> None:
    class Counting(MemoryManager):
        calls = 0

        def stats(self, scope=None):  # type: ignore[no-untyped-def, override]
            Counting.calls += 1
            return super().stats(scope)

    mm = make_manager()
    mm.__class__ = Counting
    asyncio.run(mm.astats())
    assert Counting.calls == 1
    mm.close()


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        ("memlineage.value:ValueModel", "assess"),
        ("memlineage.value:ValueModel", "extract"),
        ("memlineage.extractors._llm:LLMExtractor", "extract"),
        ("memlineage.history:ChatHistory", "turns"),
        ("memlineage.history:ChatHistory", "append"),
        ("memlineage.history:ChatHistory", "clear"),
        ("memlineage.history:ChatHistory", "replace"),
        ("memlineage.tools:MemoryTools", "search"),
        ("memlineage.tools:MemoryTools", "remember"),
        ("memlineage.tools:MemoryTools", "correct"),
        ("memlineage.tools:MemoryTools", "forget"),
    ],
)
def test_other_async_twins_are_generated_from_their_sync_method(owner: str, name: str) -> None:
    import importlib

    module, cls_name = owner.split(":")
    cls = getattr(importlib.import_module(module), cls_name)
    twin = getattr(cls, f"a{name}")
    assert inspect.iscoroutinefunction(twin)
    assert inspect.signature(twin) == inspect.signature(getattr(cls, name))
