"""Update detection's data model: actions, statements, candidates, decisions and the reconciler protocol."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from memlineage.models import StrEnum


class Action(StrEnum):
    """What an update decision does to the ledger."""

    NEW = "new"
    DUPLICATE = "duplicate"
    UPDATE = "update"
    CONTRADICT = "contradict"


class Statement(BaseModel):
    """A statement about to be stored, as a reconciler sees it.

    Attributes:
        content: The text.
        source: ``user``, ``tool:<name>``, ``agent``...
        slot: Slot key (given by the caller or detected), or None.
        slot_value: The value the statement assigns to ``slot`` (detected), or None.
        valid_from: Event time of the statement (UTC).
        session: Session id of the statement, or None.
        scope_key: Who said it (user and agent), so that a reconciler never puts two users' statements into one
            model prompt; None when unknown (such a statement gets a prompt of its own).
        repairs: The whole message opens by taking back what was just said ("argh no, ..."; see
            :func:`memlineage.reconcile.repairs`), read before its questions were left out of ``content``: "Brunch
            for Sunday? Oh scratch that, Saturday." repairs its own question, nothing said before. None: read from
            ``content``.
    """

    model_config = ConfigDict(frozen=True)

    content: str
    source: str
    slot: str | None = None
    slot_value: str | None = None
    valid_from: datetime | None = None
    session: str | None = None
    scope_key: str | None = None
    repairs: bool | None = None


class Candidate(BaseModel):
    """A live memory the statement may update (same scope, compatible source).

    Attributes:
        id: Memory id.
        content: Its text.
        source: Its source.
        slot: Its slot key (stored or detected now), or None.
        slot_value: Its slot value as detected now, or None.
        valid_from: Its event time (UTC).
        similarity: Cosine similarity to the statement in [-1, 1], higher = closer; None when not known.
        session: Its session id, or None.
        scope_key: Whose memory it is (user and agent, as :attr:`Statement.scope_key`); a reconciler never shows
            or targets a candidate whose key differs from its statement's. None when unknown.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    content: str
    source: str
    slot: str | None = None
    slot_value: str | None = None
    valid_from: datetime | None = None
    similarity: float | None = None
    session: str | None = None
    scope_key: str | None = None


class UpdateDecision(BaseModel):
    """One reconciler decision for one statement.

    Attributes:
        action: ``new``, ``duplicate``, ``update`` or ``contradict``.
        target: The candidate id the action applies to (None for ``new``).
        reason: Why, in words (kept on the decision activity and shown by ``explain``).
        evidence: What the decision rests on (slot, old and new value, cue, similarity, overlap...).
        decided_by: ``rules``, ``signals``, ``llm`` or ``rules(fallback)``.
        confidence: How sure the decision is, in [0, 1]. An ``update`` or ``contradict`` is applied at or above
            :data:`APPLY_CONFIDENCE`; an ``update`` below it but at or above :data:`POSSIBLE_CONFIDENCE` is
            recorded as a *possible update* (nothing changes state; recall ranks the newer statement first, and
            ``confirm`` / ``reject`` settle it).
    """

    model_config = ConfigDict(frozen=True)

    action: Action = Action.NEW
    target: str | None = None
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    decided_by: str = "rules"
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)


#: Confidence at or above which an automatic update or withdrawal is carried out (supersede / retract).
APPLY_CONFIDENCE = 0.85
#: Confidence at or above which an update below :data:`APPLY_CONFIDENCE` is recorded as a possible update.
POSSIBLE_CONFIDENCE = 0.5


@runtime_checkable
class Reconciler(Protocol):
    """Port for update detection: statements with their candidates in, one decision per statement out."""

    name: str

    def decide(self, items: Sequence[tuple[Statement, Sequence[Candidate]]]) -> list[UpdateDecision]:
        """One decision per ``(statement, candidates)`` pair, in order; a target must be one of its candidates."""
        ...
