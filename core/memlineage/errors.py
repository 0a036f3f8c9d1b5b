"""The MemLineage exception tree.

Every error the library raises on purpose derives from :class:`MemLineageError`, so one ``except`` catches them
all. Where a builtin has the same meaning, the error also derives from it (a missing memory is a ``LookupError``,
bad input is a ``ValueError``), so code written against the builtins keeps working.

```
MemLineageError
├── ConfigurationError (ValueError)
├── MissingDependencyError (ImportError)
├── InvalidInputError (ValueError)
│   ├── InvalidNamespaceError
│   ├── LineageCycleError
│   └── ContextOverflowError
├── MemoryNotFoundError (LookupError)
├── ConflictError
├── ScopeViolationError (PermissionError)
├── PolicyViolationError (PermissionError)   carries .decision
├── PolicyLoadError (ValueError)
└── StorageError
    ├── StoreLockedError
    └── SchemaVersionError
```
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = [
    "ConfigurationError",
    "ConflictError",
    "ContextOverflowError",
    "InvalidInputError",
    "InvalidNamespaceError",
    "LineageCycleError",
    "MemLineageError",
    "MemoryNotFoundError",
    "MissingDependencyError",
    "PolicyLoadError",
    "PolicyViolationError",
    "SchemaVersionError",
    "ScopeViolationError",
    "StorageError",
    "StoreLockedError",
]


class MemLineageError(Exception):
    """Root of every error MemLineage raises on purpose."""


class ConfigurationError(MemLineageError, ValueError):
    """Options that contradict each other or name something that does not exist."""


class MissingDependencyError(MemLineageError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class InvalidInputError(MemLineageError, ValueError):
    """An argument has the wrong type or value; nothing was written."""


class InvalidNamespaceError(InvalidInputError):
    """A namespace is not a non-empty tuple of non-empty strings without '.'."""


class LineageCycleError(InvalidInputError):
    """The requested derivation would make a memory its own ancestor."""


class ContextOverflowError(InvalidInputError):
    """What must reach the model (system prompt, current user turn, in-flight tool call) cannot fit the context.

    Raised by :meth:`memlineage.window.WorkingMemory.render` only after every in-flight tool result was already
    cut down to its truncation marker; the message says how many tokens are needed and how many the context
    allows.
    """


class MemoryNotFoundError(MemLineageError, LookupError):
    """No memory (or activity) with that id exists in the requested scope."""


class ConflictError(MemLineageError):
    """A concurrent write changed what this one rested on; nothing was written.

    Raised when the memory a ``supersede`` replaces was superseded, retracted or erased by another writer between
    reading it and writing (re-read the newest version and supersede that), or when the database aborted the
    transaction to break a lock cycle with another writer (retry the call).
    """


class ScopeViolationError(MemLineageError, PermissionError):
    """An operation tried to reach a memory that belongs to another scope."""


class _Decision(Protocol):
    """What a refusal's decision tells (a :class:`memlineage.Decision`; this bottom layer cannot name it)."""

    @property
    def id(self) -> str:
        """The decision's id."""

    @property
    def policy_id(self) -> str | None:
        """The deciding policy."""

    @property
    def reason(self) -> str:
        """Why, in words."""

    @property
    def inputs(self) -> dict[str, Any]:
        """The field values that mattered, by path."""


class PolicyViolationError(MemLineageError, PermissionError):
    """A policy denied the operation; ``.decision`` says which policy and why.

    Args:
        message: What happened and what to do instead.
        decision: The denying :class:`memlineage.Decision` (or ``None`` for a built-in rule).
    """

    def __init__(self, message: str, decision: _Decision | None = None) -> None:
        super().__init__(message)
        self.decision = decision


class PolicyLoadError(MemLineageError, ValueError):
    """A policy file or definition is invalid; the message names the file, policy and field."""


class StorageError(MemLineageError):
    """The ledger or the index failed; always raised ``from`` the underlying exception."""


class StoreLockedError(StorageError):
    """Another process holds the embedded store's writer lock."""


class SchemaVersionError(StorageError):
    """The ledger's schema is not at the revision this release needs.

    Raised on opening a server (PostgreSQL) ledger whose schema is older (run ``memlineage migrate``) and on opening
    any ledger a newer release has migrated further (upgrade memlineage). Nothing was changed.
    """
