"""What a policy is asked about: the :class:`Operation` and the :class:`PolicyRequest` (with an :class:`AdminGrant`).

Kept apart from :mod:`memlineage.policy._model` so that conditions (:mod:`memlineage.policy._condition`), which
the model compiles, can name the request without importing the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlineage.models import Scope, Source, SourceKind, new_id, utcnow

__all__ = ["AdminGrant", "Operation", "PolicyRequest"]


class _StrEnum(str, Enum):
    def __str__(self) -> str:
        return str(self.value)


class Operation(_StrEnum):
    """The memory operation a policy governs.

    ``read`` = recall/get, ``write`` = remember, ``update`` = revise/supersede, ``delete`` =
    retract/forget/erase.
    """

    READ = "read"
    WRITE = "write"
    UPDATE = "update"
    DELETE = "delete"


class AdminGrant(BaseModel):
    """Permission for one cross-scope read, issued and audited by :meth:`PolicyEngine.admin_grant`."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=new_id, description="Grant id, recorded on every decision it enables.")
    actor: str = Field(description="Who asked (an operator or service name).")
    reason: str = Field(description="Why cross-scope access is needed.")
    issued_at: datetime = Field(default_factory=utcnow, description="When it was issued (UTC).")


class PolicyRequest(BaseModel):
    """The request a policy sees: who asks, for what purpose, with which budget.

    Example:
        >>> PolicyRequest(scope=Scope(user_id="alice"), purpose="decision").purpose
        'decision'
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    operation: Operation = Field(default=Operation.READ, description="The operation being checked.")
    scope: Scope = Field(description="Scope of the caller; memories outside it are never served.")
    purpose: str | None = Field(default=None, description="Why memories are read, e.g. 'decision'.")
    source: Source | None = Field(default=None, description="Who writes / updates / deletes (None on reads).")
    query: str | None = Field(default=None, description="Recall query text.")
    budget: float | None = Field(
        default=None, ge=0.0, description="Refresh budget in policy cost units, >= 0; None = unlimited."
    )
    promote: bool = Field(default=False, description="The caller promotes a tool result to long-term memory.")
    history: bool = Field(
        default=False,
        description="The read asks about the past ('what did you recommend yesterday?'): an expired memory is "
        "served flagged as history instead of withheld (never for purpose 'decision').",
    )
    admin: AdminGrant | None = Field(default=None, description="Audited cross-scope grant (admin calls only).")
    attributes: dict[str, Any] = Field(default_factory=dict, description="Extra request fields for conditions.")

    @field_validator("source", mode="before")
    @classmethod
    def _parse_source(cls, value: Source | str | SourceKind | Mapping[str, Any] | None) -> Source | None:
        return None if value is None else Source.parse(value)

    def for_operation(self, operation: Operation | str) -> PolicyRequest:
        """A copy of this request for another operation."""
        return self.model_copy(update={"operation": Operation(operation)})
