"""Write-path stage: update detection (gather candidates, ask the reconciler, plan supersede / retract / merge).

Runs inside :meth:`MemoryManager.remember_many` after exact-duplicate resolution and embedding, before the value gate
and persistence, so nothing is written here: decisions are attached to the drafts (``supersedes``, ``retracts``,
``decision``) and carried out in the same ledger transaction as the new memories. See :mod:`memlineage.reconcile`
for the decisions and the rules behind them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np

from memlineage import telemetry
from memlineage._draft import Draft
from memlineage._forget import text_cache
from memlineage.errors import PolicyViolationError
from memlineage.extractors._patterns import has_cjk, tables_for
from memlineage.index import IndexFilter, VectorIndex
from memlineage.ledger import Connection, Ledger, row_to_memory
from memlineage.ledger._queries_activities import activity_meta
from memlineage.ledger._queries_detect import scope_rows
from memlineage.models import Memory, MemoryKind, Scope, Source, SourceKind, Status, from_epoch
from memlineage.reconcile import (
    APPLY_CONFIDENCE,
    POSSIBLE_CONFIDENCE,
    Action,
    Candidate,
    Reconciler,
    Statement,
    UpdateDecision,
    may_revise,
    may_update,
    repairs,
    slot_of,
    tool_slot,
    withdraws,
)
from memlineage.reconcile._signals import asserting_text, clauses_of
from memlineage.retrieval import only_asks

__all__ = ["Detected", "detect_updates"]

logger = logging.getLogger(__name__)

_LIVE = (Status.ACTIVE.value, Status.SUSPECT.value)
#: Nearest statements by vector offered to the reconciler.
NEIGHBOURS = 8
#: Extra nearest entries asked of the index, for entries whose withdrawal the index has not applied yet, and for
#: the speaker's questions and requests, which are no candidates ("convert 80 EUR to my home currency" asked fifty
#: times must not push "my home currency is DKK" out of the neighbours of its correction).
OVERFETCH = 24
#: How many times deeper the second page of neighbours reaches when the first holds too few of the speaker's
#: statements (see ``_neighbours``).
DEEPER = 8
#: Most recent live statements of the scope, offered too for Chinese text and withdrawals (words, not vectors: the
#: English MiniLM cannot tell unrelated Chinese sentences apart, and a withdrawal names its object in few words).
RECENT = 50
RECENT_CJK = 200
#: In-batch earlier statements count as neighbours at or above this cosine similarity.
BATCH_SIMILARITY = 0.6

#: Runs update / delete policies (operation, memories, scope, source); raises on a refusal, its result is unused.
CheckOperation = Callable[[str, Sequence[Memory], Scope, Source], object]


@dataclass
class _Ports:
    ledger: Ledger
    index: VectorIndex
    check_operation: CheckOperation


@dataclass(frozen=True)
class Detected:
    """What update detection decided for one batch (nothing is written yet).

    Attributes:
        todo: The drafts to store, in order. Drafts that update or withdraw a memory carry ``supersedes`` /
            ``retracts`` and their ``decision``; detected slots are set (``slot``, ``slot_value``, ``auto_slot``);
            possible updates are in ``possible``.
        batch_dups: ``(index, first_index)`` pairs of in-batch restatements (positions in the call's drafts), the
            given ones first.
        merges: ``(index, ledger_row, draft)`` triples of restatements of live ledger memories, the given first.
    """

    todo: list[Draft]
    batch_dups: list[tuple[int, int]]
    merges: list[tuple[int, dict[str, Any], Draft]]


def detect_updates(
    drafts: Sequence[Draft],
    todo: Sequence[Draft],
    batch_dups: Sequence[tuple[int, int]],
    merges: Sequence[tuple[int, dict[str, Any], Draft]],
    now: datetime,
    *,
    ledger: Ledger,
    index: VectorIndex,
    reconciler: Reconciler | None,
    check_operation: CheckOperation,
) -> Detected:
    """Decide, for each draft about to be stored, whether it updates, repeats or withdraws a live memory.

    Args:
        drafts: Every draft of the call, in input order (``Draft.id`` gives a draft's position).
        todo: The drafts still to store (exact duplicates already removed), embedded.
        batch_dups: ``(index, first_index)`` pairs found so far.
        merges: ``(index, ledger_row, draft)`` triples found so far.
        now: Write time.
        ledger: The ledger (read only here).
        index: The vector index (read only here).
        reconciler: Decides; None = detection off.
        check_operation: Raises ``PolicyViolationError`` when an update / delete policy refuses the change.

    Returns:
        The drafts to store (new drafts where detection decided something) and the restatements, with the given
        ones; the arguments are not changed.
    """
    found = Detected(list(todo), list(batch_dups), list(merges))
    if reconciler is None or not todo:
        return found
    ports = _Ports(ledger, index, check_operation)
    # A model judges meaning, so it sees the nearest statements of every user statement; the rules only need them
    # where a cue, replacement, withdrawal or number could revise a statement without a slot.
    broad = bool(getattr(reconciler, "wants_neighbours", False))
    recent_always = bool(getattr(reconciler, "wants_recent", False))
    # a model judges meaning whatever the wording; generic signals need a statement about a known subject
    any_subject = bool(getattr(reconciler, "judges_meaning", False))
    position = {d.id: i for i, d in enumerate(drafts)}
    pending: list[tuple[Draft, Statement, list[Candidate]]] = []
    earlier: dict[tuple[str, str | None], _Earlier] = {}  # per scope: the drafts of this call before this one
    reads = _Reads(ledger)
    current: dict[str, Draft] = {}  # by draft id: each draft as detection leaves it
    for d in todo:
        d, st = _statement(ports, d, now)
        current[d.id] = d
        same_scope = earlier.setdefault((d.scope.user_id, d.scope.agent_id), _Earlier())
        if st is not None and d.supersedes is None:
            cands = _candidates(
                ports, d, st, same_scope, now, broad=broad, recent_always=recent_always, reads=reads,
                any_subject=any_subject,
            )  # fmt: skip
            if cands:
                pending.append((d, st, cands))
        same_scope.append(d)
    if not pending:
        return Detected([current[d.id] for d in todo], found.batch_dups, found.merges)
    decisions = reconciler.decide([(st, cands) for _, st, cands in pending])
    telemetry.decisions(
        (d.action.value, d.confidence, d.decided_by, len(c)) for (_, _, c), d in zip(pending, decisions)
    )
    dropped: set[str] = set()
    claimed: set[str] = set()
    for (d, _st, cands), decision in zip(pending, decisions, strict=True):
        known = {c.id: c for c in cands}
        if decision.action is Action.NEW or decision.target not in known or decision.target in claimed:
            continue
        if decision.action in (Action.UPDATE, Action.CONTRADICT) and decision.confidence < APPLY_CONFIDENCE:
            if decision.action is Action.UPDATE and decision.confidence >= POSSIBLE_CONFIDENCE:
                # recorded with the new memory; changes no status
                current[d.id] = replace(d, possible=(*d.possible, decision))
            continue
        target = decision.target
        assert target is not None
        in_batch = current.get(target)
        if in_batch is not None and target in dropped:
            continue  # its target was itself merged away
        if decision.action is Action.DUPLICATE:
            # A restatement merges into a memory of the same kind only (an episodic turn that repeats a semantic
            # fact is a new event, as for exact duplicates).
            if in_batch is not None:
                if in_batch.kind is d.kind or d.auto_kind:
                    dropped.add(d.id)
                    found.batch_dups.append((position[d.id], position[in_batch.id]))
                continue
            row = ledger.memory_rows([target])[0]
            if row is not None and row["status"] in _LIVE and (row["kind"] == d.kind.value or d.auto_kind):
                dropped.add(d.id)
                found.merges.append((position[d.id], row, replace(d, decision=decision)))
            continue
        if in_batch is None and not _allowed(ports, d, target, decision.action):
            continue
        claimed.add(target)
        d, decision = _drop_replaced_premises(ledger, d, target, decision)
        if decision.action is not Action.UPDATE:
            current[d.id] = replace(d, decision=decision, retracts=target)
            continue
        old = {"id": target, "version": 1, "slot": in_batch.slot} if in_batch is not None else None
        old = old or ledger.memory_rows([target])[0]
        # the new value takes over the attribute the old one held
        held = old.get("slot") if old is not None else None
        slot = d.slot if d.slot is not None else (str(held) if held else None)
        current[d.id] = replace(d, decision=decision, supersedes=old, slot=slot)
    return Detected([current[d.id] for d in todo if d.id not in dropped], found.batch_dups, found.merges)


def _drop_replaced_premises(
    ledger: Ledger, d: Draft, target: str, decision: UpdateDecision
) -> tuple[Draft, UpdateDecision]:
    """A statement cannot rest on what it replaces or withdraws, nor on anything built on that.

    Adapters that take the whole context as premises (a refreshed fare "derived from" the old fare that was
    recalled into the run) would otherwise make the new value suspect in the very cascade it triggers. The dropped
    premises are kept in the decision's evidence.

    Returns:
        The draft without those premises and the decision naming them (both unchanged when none is dropped).
    """
    if not d.derived_from:
        return d, decision
    built_on = {target, *ledger.walk([target], direction="descendants")}
    dropped = [p for p in d.derived_from if p in built_on]
    if not dropped:
        return d, decision
    decision = decision.model_copy(update={"evidence": {**decision.evidence, "dropped_premises": dropped}})
    return replace(d, derived_from=tuple(p for p in d.derived_from if p not in built_on)), decision


def _allowed(ports: _Ports, d: Draft, target: str, action: Action) -> bool:
    """Whether a live ledger memory may be superseded / retracted by this draft (status and policies)."""
    row = ports.ledger.memory_rows([target])[0]
    if row is None or row["status"] not in _LIVE:
        return False
    operation = "update" if action is Action.UPDATE else "delete"
    try:
        ports.check_operation(operation, [row_to_memory(row)], d.scope, d.source)
    except PolicyViolationError as exc:
        logger.info("update detection: %s of %s by %s refused by a policy (%s)", operation, target, d.source, exc)
        return False
    return True


def _statement(ports: _Ports, d: Draft, now: datetime) -> tuple[Draft, Statement | None]:
    """The statement a draft makes, with its slot (given, or detected for user statements and tool results).

    Returns:
        The draft with the detected slot (``slot``, ``slot_value``, ``auto_slot``) and its statement; None for a
        draft that states nothing update detection compares.
    """
    if d.kind is MemoryKind.WORKING:
        return d, None
    source = str(d.source)
    content = d.content
    if d.source.kind is SourceKind.USER:
        # only what the statement asserts about the present can update anything: not its questions, requests,
        # suppositions or past states ("If I moved to Lisbon...", "I used to live in Phoenix")
        content = asserting_text(d.content)
        if not content:
            return d, None
        if d.slot is None:
            slot, value = slot_of(content)
            features = d.features
            if slot is None and features is not None and features.slot:
                # the extractor read the whole message: its slot counts when the message asserts all it says, or
                # its value is in what it asserts ("if I moved to Raleigh would my cost of living go up? just
                # curious" asserts no residence)
                whole = " ".join(content.split()) == " ".join(d.content.split())
                named = str(features.slot_value or "").casefold()
                if whole or (named and named in content.casefold()):
                    slot, value = features.slot, features.slot_value
            if slot is not None:
                d = replace(d, slot=slot, slot_value=value, auto_slot=True)
        elif d.slot_value is None:
            d = replace(d, slot_value=slot_of(content)[1])
    elif d.source.kind is SourceKind.TOOL:
        if d.slot is None:
            slot = tool_slot(source, _tool_arguments(ports, d))
            if slot is None:
                return d, None  # a tool result is only compared with the same call of the same tool
            d = replace(d, slot=slot, slot_value=d.content, auto_slot=True)
    elif d.slot is None:
        return d, None  # agent text, reasoning, consolidation...: never matched by content (no silent overrides)
    return d, Statement(
        content=content, source=source, slot=d.slot, slot_value=d.slot_value, valid_from=d.valid_from or now,
        session=d.scope.session_id, scope_key=_scope_key(d.scope.user_id, d.scope.agent_id),
        repairs=repairs(d.content),  # the whole message: its questions are no longer in ``content``
    )  # fmt: skip


def _scope_key(user_id: str, agent_id: str | None) -> str:
    """The key of a user and agent for reconcilers (:attr:`Statement.scope_key`), unambiguous for any ids."""
    return json.dumps([user_id, agent_id], ensure_ascii=False)


def _tool_arguments(ports: _Ports, d: Draft) -> object:
    """The arguments of the tool call behind a tool result: from its metadata, else from its activity."""
    for key in ("tool_args", "arguments", "tool_input", "input"):
        if key in d.metadata:
            return d.metadata[key]
    if d.activity_id:
        with ports.ledger.read() as conn:
            row = activity_meta(conn, d.activity_id)
        if row is not None and row[1] in (None, d.scope.user_id):
            meta = row[0] or {}
            for key in ("arguments", "tool_args", "tool_input", "input"):
                if key in meta:
                    return meta[key]
    return None


def _candidates(
    ports: _Ports,
    d: Draft,
    st: Statement,
    earlier: _Earlier,
    now: datetime,
    *,
    broad: bool = False,
    recent_always: bool = False,
    reads: _Reads | None = None,
    any_subject: bool = False,
) -> list[Candidate]:
    """Live memories of the draft's scope the statement may update: slot holders, neighbours, recent statements.

    ``earlier`` holds the drafts of the same scope before this one in the call; ``reads`` the ledger reads of the
    call (see :class:`_Reads`).
    """
    user_statement = d.source.kind is SourceKind.USER
    cjk = has_cjk(st.content)
    # Nearest statements by vector only when something in the statement could revise a slot-less one
    # (a correction cue, a replacement, a withdrawal, a number of the speaker's state): plain records pay none.
    # Generic signals (reconcile._generic) compare statements about a known subject only: a record about no one
    # ("note 7 about topic 3") pays for no candidate read unless a rule could use it.
    personal = user_statement and (
        any_subject or any(c.subject is not None and c.asserts_present for c in clauses_of(st.content))
    )
    revises = user_statement and ((broad and personal) or may_revise(st.content))
    recent = user_statement and ((recent_always and personal) or cjk or withdraws(st.content) or bool(st.repairs))
    if not (st.slot or revises or recent):
        # a plain record reads nothing: no connection is opened and no query is built for it (bulk ingest)
        return _batch_candidates(d, st, earlier, now, by_words=revises or cjk)
    rows: dict[str, dict[str, Any]] = {}
    similarity: dict[str, float] = {}
    user, agent = d.scope.user_id, d.scope.agent_id
    with reads if reads is not None else _Reads(ports.ledger) as ledger_reads:
        if st.slot:
            rows.update((r["id"], r) for r in ledger_reads.scope_rows(user, agent, slot=st.slot))
        if user_statement:
            if recent:
                limit = RECENT_CJK if cjk else RECENT
                rows.update((r["id"], r) for r in ledger_reads.scope_rows(user, agent, limit=limit))
            if revises and d.embedding is not None:
                similarity = _neighbours(ports, ledger_reads, d, rows)
    lacking = [i for i in rows if i not in similarity]
    # Only a correction cue lets closeness in meaning alone make a possible update (reconcile._generic): the other
    # candidates' vectors are read for such statements only (a read of their blobs per statement costs ingest 10x).
    cue = user_statement and tables_for(st.content)[0].is_correction(st.content)
    if cue and lacking and d.embedding is not None and getattr(ports.ledger, "vectors", None) is not None:
        # generic signals weigh closeness in meaning: the cosine of every candidate, not only the nearest
        mine = np.asarray(d.embedding, dtype=np.float32)
        norm = float(np.linalg.norm(mine)) or 1.0
        for mid, vec in ports.ledger.vectors(lacking).items():
            if vec.shape == mine.shape:
                similarity[mid] = float(vec @ mine) / ((float(np.linalg.norm(vec)) or 1.0) * norm)
    source = str(d.source)
    out: list[Candidate] = []
    for r in sorted(rows.values(), key=lambda r: (r["valid_from"] or r["recorded_at"], r["recorded_at"])):
        if r["status"] not in _LIVE or r["kind"] == MemoryKind.WORKING.value or r["user_id"] != user:
            continue
        if r["agent_id"] != agent:
            continue
        old_source = r["source_kind"] + (f":{r['source_name']}" if r["source_name"] else "")
        if not may_update(source, old_source):
            continue
        slot, value = r["slot"], None
        if r["source_kind"] == SourceKind.USER.value and (slot is None or slot == st.slot):
            detected, value = slot_of(r["content"])  # cached per text: memories are immutable
            slot = slot or detected
            if detected != slot:
                value = None
        elif r["source_kind"] == SourceKind.TOOL.value:
            value = r["content"]
        out.append(
            Candidate.model_construct(  # built from ledger rows: already valid
                id=r["id"],
                content=r["content"],
                source=old_source,
                slot=slot,
                slot_value=value,
                valid_from=from_epoch(r["valid_from"] or r["recorded_at"]),
                similarity=similarity.get(r["id"]),
                session=r["session_id"],
                scope_key=_scope_key(r["user_id"], r["agent_id"]),
            )
        )
    out.extend(_batch_candidates(d, st, earlier, now, by_words=revises or cjk))
    return out


def _neighbours(ports: _Ports, ledger_reads: _Reads, d: Draft, rows: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The statement's nearest live memories by vector: their similarity, their rows added to ``rows``.

    Keeps the NEIGHBOURS nearest statements of the speaker and the NEIGHBOURS nearest of other sources, plus
    the closeness of rows already held (slot holders, recent statements) among the NEIGHBOURS nearest. A question or
    request is never updated (reconcile skips it) and takes no place: where the speaker asked about a value fifty
    times ("convert 80 EUR to my home currency") and answers repeat it ("your home currency is KRW"), those must
    not push the speaker's own statement of it out, so a page that holds too few statements is followed by a
    deeper one (``DEEPER`` times as many entries; only in such scopes).
    """
    if d.embedding is None:  # embedded before detection runs; a draft without a vector has no neighbours
        return {}
    user, agent = d.scope.user_id, d.scope.agent_id
    held = set(rows)
    # The index learns of status changes from the deferred sync, so a memory withdrawn a moment ago may still look
    # live there: ask for more and keep the nearest the ledger says are live (the same ones as with an index in
    # step, whatever the sync thread's timing).
    where = IndexFilter(user_id=user, agent_id=agent, statuses=_LIVE)
    want = NEIGHBOURS + OVERFETCH
    user_kind = SourceKind.USER.value
    while True:
        similarity = {hit.id: hit.similarity for hit in ports.index.query(d.embedding, want, where)}
        missing = sorted(set(similarity) - set(rows))
        if missing:
            rows.update((r["id"], r) for r in ledger_reads.rows_by_id(user, agent, missing))
        live = [i for i in similarity if i in rows]  # rows only holds live memories; the index lists nearest first
        found = [i for i in live if i not in held]  # rows read for their closeness only
        said = [i for i in found if rows[i]["source_kind"] == user_kind and not _asks_only(rows[i]["content"])]
        if len(said) >= NEIGHBOURS or len(similarity) < want or want > NEIGHBOURS + OVERFETCH:
            break
        want *= DEEPER
    nearest = {
        *(i for i in live[:NEIGHBOURS] if i in held),
        *said[:NEIGHBOURS],
        *[i for i in found if rows[i]["source_kind"] != user_kind][:NEIGHBOURS],
    }
    for i in [i for i in rows if i not in held and i not in nearest]:
        del rows[i]
    return {i: similarity[i] for i in live if i in nearest}


@text_cache(maxsize=16384)
def _asks_only(text: str) -> bool:
    """Whether a memory's text only asks: a question or request holding no slot value.

    Cached per text and emptied by every erasure. "I live in Paris, what should I pack?" asks, and still holds the
    residence a correction replaces.
    """
    return only_asks(text) and slot_of(text)[0] is None


class _Reads:
    """The ledger reads of one detection call: statements built once, scope reads made once per call.

    The slot holders of a scope and its most recent statements are the same for every draft of a call (nothing is
    written before persistence), so each is read once and shared (read only); the statements are built once per
    shape (:func:`memlineage.ledger._queries_detect.scope_query`), so a read costs its execution only, with
    the same SQL as a statement built per draft. Used as a context manager around the reads of one draft: a
    connection is opened on the first read that is not already known, and closed when the draft is done.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._known: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        self._stack: ExitStack | None = None
        self._conn: Connection | None = None

    def __enter__(self) -> _Reads:
        return self

    def __exit__(self, *exc: object) -> None:
        stack, self._stack, self._conn = self._stack, None, None
        if stack is not None:
            stack.close()

    def scope_rows(
        self, user: str, agent: str | None, *, slot: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Live rows of the scope holding ``slot``, or its ``limit`` newest live user statements (read once a call)."""
        key = (user, agent, slot, limit)
        found = self._known.get(key)
        if found is None:
            if slot is not None:
                found = self._execute("slot", user, agent, slot=slot)
            else:
                found = self._execute("recent", user, agent, limit=limit)
            self._known[key] = found
        return found

    def rows_by_id(self, user: str, agent: str | None, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Live rows of the scope among ``ids``."""
        return self._execute("ids", user, agent, ids=list(ids))

    def _execute(
        self,
        shape: str,
        user: str,
        agent: str | None,
        *,
        limit: int | None = None,
        slot: str | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Run the ``shape`` read of the scope (``slot``, ``recent`` or ``ids``) on the call's connection."""
        if self._conn is None:
            self._stack = ExitStack()
            self._conn = self._stack.enter_context(self.ledger.read())
        return scope_rows(self._conn, shape, user, agent, _LIVE, limit=limit, slot=slot, ids=ids)


class _Earlier:
    """The drafts of one scope met so far in a detection call, indexed for :func:`_batch_candidates`.

    Keeps each draft's source and float32 vector (with its norm), the drafts by slot, and a matrix of the vectors
    filled on the first comparison by words, so that a statement is compared with the earlier drafts in one
    product instead of one per pair; a plain import never fills it.
    """

    def __init__(self) -> None:
        self.drafts: list[Any] = []
        self.sources: list[str] = []
        self.by_slot: dict[str, list[int]] = {}
        self._vectors: list[tuple[np.ndarray, Any] | None] = []
        self._matrix: np.ndarray | None = None
        self._norms: np.ndarray | None = None
        self._filled = 0
        self._mixed = False  # vectors of different sizes: every draft is compared pair by pair

    def append(self, d: Draft) -> None:
        """Add the draft that was just examined (its slot, if any, is final for the loop)."""
        if d.slot is not None:
            self.by_slot.setdefault(d.slot, []).append(len(self.drafts))
        self.drafts.append(d)
        self.sources.append(str(d.source))
        self._vectors.append(None)

    def vector(self, i: int) -> tuple[np.ndarray, Any] | None:
        """Draft ``i``'s vector as float32 and its norm (None without a vector), converted once."""
        found = self._vectors[i]
        if found is None and self.drafts[i].embedding is not None:
            vec = np.asarray(self.drafts[i].embedding, dtype=np.float32)
            found = self._vectors[i] = (vec, np.linalg.norm(vec))
        return found

    def close_to(self, mine: tuple[np.ndarray, Any], threshold: float) -> list[int] | None:
        """Indexes of the drafts whose cosine with ``mine`` may reach ``threshold`` (a superset; None = all).

        Computed in float32 over the stacked vectors with a margin of 1e-3, far above their rounding, so every
        draft whose exact cosine (computed pair by pair, as before) reaches the threshold is in the result.
        """
        n = len(self.drafts)
        if self._mixed:
            return None
        dims = mine[0].shape[0]
        if self._matrix is None or self._matrix.shape[0] < n or self._norms is None:
            size = max(n, 16, 2 * (0 if self._matrix is None else self._matrix.shape[0]))
            matrix = np.zeros((size, dims), dtype=np.float32)
            norms = np.full(size, np.nan, dtype=np.float32)
            if self._matrix is not None and self._norms is not None:
                matrix[: self._filled] = self._matrix[: self._filled]
                norms[: self._filled] = self._norms[: self._filled]
            self._matrix, self._norms = matrix, norms
        if self._matrix.shape[1] != dims:
            self._mixed = True
            return None
        for i in range(self._filled, n):
            theirs = self.vector(i)
            if theirs is None:
                continue  # no vector: NaN norm, never close by words
            if theirs[0].shape != (dims,):
                self._mixed = True
                return None
            self._matrix[i] = theirs[0]
            self._norms[i] = theirs[1]
        self._filled = n
        denom = self._norms[:n] * mine[1]
        denom[denom == 0] = 1.0
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            approx = (self._matrix[:n] @ mine[0]) / denom
        # NaN (no vector, or a NaN in one) compares False here: such drafts are kept and checked exactly
        return [int(i) for i in np.flatnonzero(~(approx < threshold - 1e-3))]


def _batch_candidates(d: Draft, st: Statement, earlier: _Earlier, now: datetime, *, by_words: bool) -> list[Candidate]:
    """Earlier drafts of the same call and scope that the statement may update (same slot or close wording).

    Without a slot and without ``by_words`` (nothing in the statement could revise a slot-less one) nothing is
    compared, so a bulk import of plain records costs no pairwise work. Only the drafts that can be close are
    examined: the same slot, every one for Chinese text, else those whose cosine may reach ``BATCH_SIMILARITY``
    (:meth:`_Earlier.close_to`); each of them is checked, and its cosine computed, exactly as for every pair.
    """
    out: list[Candidate] = []
    if st.slot is None and not by_words:
        return out
    source = str(d.source)
    cjk = has_cjk(d.content)
    mine = None
    if by_words and d.embedding is not None:
        vec = np.asarray(d.embedding, dtype=np.float32)
        mine = (vec, np.linalg.norm(vec))
    examine: Sequence[int] | None = None  # None: every earlier draft
    if not (cjk and by_words):
        near = earlier.close_to(mine, BATCH_SIMILARITY) if mine is not None and earlier.drafts else []
        if near is not None:
            same = earlier.by_slot.get(st.slot, []) if st.slot is not None else []
            examine = sorted({*near, *same}) if near and same else (near or same)
    for i in range(len(earlier.drafts)) if examine is None else examine:
        e = earlier.drafts[i]  # same scope as d: ``earlier`` holds one scope's drafts
        if e.kind is MemoryKind.WORKING or not may_update(source, earlier.sources[i]):
            continue
        same_slot = st.slot is not None and e.slot == st.slot
        if not (same_slot or by_words):
            continue
        sim = None
        theirs = earlier.vector(i) if mine is not None else None
        if mine is not None and theirs is not None:
            denom = float(mine[1] * theirs[1]) or 1.0
            sim = float(mine[0] @ theirs[0]) / denom
        close = same_slot or cjk or (sim is not None and sim >= BATCH_SIMILARITY)
        if not close:
            continue
        out.append(
            Candidate(
                id=e.id,
                content=e.content,
                source=earlier.sources[i],
                slot=e.slot,
                slot_value=e.slot_value,
                valid_from=e.valid_from or now,
                similarity=sim,
                scope_key=st.scope_key,
            )
        )
    return out
