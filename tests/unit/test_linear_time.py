"""Issue 27: every extractor runs in linear time; no input shape makes the write path quadratic.

Two checks over adversarial 16 KB inputs (long runs of digits, digit groups, words, CJK, dates, ...): each regular
expression the core compiles (module constants and every language table, found by walking the package, so a new
pattern is covered without editing this file) scans them in well under a second, and a whole ``remember`` through the
default value model, slot detection and update detection stays within a few seconds. A quadratic pattern takes
seconds on 16 KB (the reported one took 34 s); a linear one takes milliseconds, so the bounds hold on a loaded machine.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import time

import memlineage
import pytest
from memlineage import Scope
from memlineage.extractors._patterns import tables_for
from memlineage.testing import make_manager
from memlineage.value import ValueModel

SIZE = 16_000
UNITS = [
    "1",
    "1,",
    "1.",
    "1 ",
    "555-",
    "a ",
    "Ab ",
    "A",
    "我",
    "我 ",
    "3 June ",
    "a@",
    "hi",
    "I live in ",
    "not ",
    ", ",
]


def _patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for info in pkgutil.walk_packages(memlineage.__path__, "memlineage."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            items = value if isinstance(value, (tuple, list, frozenset)) else (value,)
            for i, item in enumerate(items):
                if isinstance(item, re.Pattern):
                    found[f"{info.name}.{name}[{i}]"] = item
                elif isinstance(item, tuple):  # (label, pattern) rows
                    for j, part in enumerate(item):
                        if isinstance(part, re.Pattern):
                            found[f"{info.name}.{name}[{i}][{j}]"] = part
    for sample in ("hello", "你好"):
        table = tables_for(sample)[0]
        for field in dataclasses.fields(table):
            value = getattr(table, field.name)
            items = list(value.values()) if isinstance(value, dict) else value
            items = items if isinstance(items, (tuple, list)) else [items]
            for i, item in enumerate(items):
                parts = item if isinstance(item, tuple) else (item,)
                for j, part in enumerate(parts):
                    if isinstance(part, re.Pattern):
                        found[f"{table.language}.{field.name}[{i}][{j}]"] = part
                    for k, sub in enumerate(getattr(part, "patterns", ())):
                        found[f"{table.language}.{field.name}[{i}][{j}].{k}"] = sub
    return found


PATTERNS = _patterns()


def test_the_walk_finds_the_tables_and_module_patterns() -> None:
    names = " ".join(PATTERNS)
    assert len(PATTERNS) > 200 and "en.slots" in names and "zh.negation" in names and "_ENTITY_PATTERNS" in names


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_every_pattern_scans_adversarial_input_in_linear_time(name: str) -> None:
    pattern = PATTERNS[name]
    for unit in UNITS:
        text = unit * (SIZE // len(unit))
        start = time.perf_counter()
        for _ in pattern.finditer(text):
            pass
        took = time.perf_counter() - start
        assert took < 0.3, f"{name} took {took:.2f} s on {unit!r} x {SIZE // len(unit)}: {pattern.pattern[:120]}"


@pytest.mark.parametrize("unit", UNITS)
def test_the_default_write_path_stays_linear(unit: str) -> None:
    with make_manager(value_model=ValueModel()) as mm:
        scope = Scope(user_id="u")
        mm.remember("I live in Paris and I work at 1,000 Labs.", scope=scope)
        start = time.perf_counter()
        mm.remember(unit * (SIZE // len(unit)), scope=scope)
        took = time.perf_counter() - start
    assert took < 5.0, f"remember() of {unit!r} x {SIZE // len(unit)} took {took:.1f} s"
