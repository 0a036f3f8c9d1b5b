"""The CEL engine (``common-expression-language``), loaded on first use.

``import cel`` also imports the package's command line (typer, rich, prompt_toolkit: about 0.15 s and three CLI
packages in every process), so MemLineage defers it to the first condition compiled or evaluated; importing
``memlineage`` (or opening a store without conditional policies) never loads it. Callers use this module where they
would use ``cel``: ``compile(source)`` and ``Context()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import cel

__all__ = ["Context", "compile"]


def compile(source: str) -> cel.Program:  # noqa: A001 - mirrors cel.compile
    """Compile a CEL expression (``cel.compile``); raises what ``cel.compile`` raises for invalid CEL."""
    import cel  # deferred: see the module docstring

    return cel.compile(source)


def Context() -> cel.Context:  # noqa: N802 - mirrors the cel.Context class
    """A new evaluation context (``cel.Context()``)."""
    import cel  # deferred: see the module docstring

    return cel.Context()
