"""Constructor errors of the framework adapters as MemLineage errors.

LangChain and LlamaIndex classes are pydantic models: a bad constructor argument raises pydantic's
``ValidationError``. The adapters wrap their constructors with :func:`typed_construction`, so bad input to any
MemLineage class raises :class:`~memlineage.errors.InvalidInputError` (one ``except MemLineageError`` catches it),
with pydantic's error kept as the cause.
"""

from __future__ import annotations

import functools
from typing import TypeVar

from pydantic import ValidationError

from memlineage.errors import InvalidInputError

__all__ = ["typed_construction"]

T = TypeVar("T", bound=type)


def typed_construction(cls: T) -> T:
    """Class decorator: a ``ValidationError`` raised while constructing ``cls`` becomes ``InvalidInputError``.

    The message names the class and each field with pydantic's reason, e.g.
    ``LineageRetriever(...): k: Input should be greater than or equal to 1``.
    """
    original = cls.__init__  # type: ignore[misc]  # cls is the class being decorated, not an instance

    @functools.wraps(original)
    def __init__(self: object, *args: object, **kwargs: object) -> None:
        try:
            original(self, *args, **kwargs)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e.get('loc', ())) or 'arguments'}: {e.get('msg', '')}" for e in exc.errors()
            )
            msg = f"{cls.__name__}(...): {problems}"
            raise InvalidInputError(msg) from exc

    cls.__init__ = __init__  # type: ignore[misc]
    return cls
