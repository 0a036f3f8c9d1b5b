"""A session's chat history kept as memories with lineage (the core behind the LangChain and LlamaIndex histories).

Each message is a memory (``user``, ``agent``, ``tool:<name>`` or ``system`` source) in the user's scope, with the
session id, and each occurrence of a message is a ``chat_message`` activity of that session that generated it
(``wasGeneratedBy``) and records its position and the framework's message data (tool calls, ids; the words as said
only when they merged into an earlier memory with other words; erasure of the memory reaches them through that
link). Keeping occurrences apart from memories is what lets a session
say "yes" twice: the manager merges exact duplicates into one memory (``seen_again``), and the second occurrence
is linked to it instead of vanishing.

Lineage (the capture recorder's premise rule): a tool result derives from the earlier messages that hold its call's
argument values (the user's statement that named the city, a tool result that gave the amount), else from the user
turn that asked; an assistant message derives from that user turn, the tool results received since and the earlier
messages whose distinctive words it repeats; an acknowledgement rests on nothing. Correcting a statement therefore
makes the results and answers built on it ``suspect``.

``turns()`` returns every message exactly as appended: when the manager merges a restatement into an earlier memory
("i live in paris." into "I live in Paris."), the occurrence keeps the words as said (erasing the memory scrubs the
occurrences too). One writer holds a session at a time (every ``ChatHistory`` of the session in this process, and
other processes through a database lock on PostgreSQL): a batch takes consecutive positions, is checked whole before
anything is written, and its turns appear together or, when a write fails midway, not at all.

``clear()`` is an invalidation, never a hard delete: it closes the session's occurrences (outcome ``cleared``) and
retracts their memories (or archives them with ``on_clear="forget"``), under one ``chat_clear`` activity, except
memories another session still holds; the ledger keeps every version and event.

The message records (:class:`ChatEntry`, :class:`ChatTurn`) and the payload JSON helpers live in
:mod:`memlineage._history_entries`.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from datetime import datetime
from typing import Any, Generic, Literal, Protocol, TypeVar

from memlineage._evidence import argument_values, contains, content_premises, holders, is_filler
from memlineage._forget import on_erase
from memlineage._history_entries import (
    ChatEntry,
    ChatTurn,
    _check_storable,
    _failed,
    _same,
    payload_from_json,
    payload_to_json,
)
from memlineage._history_entries import Role as Role
from memlineage._twins import async_twin
from memlineage.errors import InvalidInputError
from memlineage.models import (
    Activity,
    Memory,
    MemoryKind,
    Scope,
    Source,
    Status,
    check_id,
    check_text,
    new_id,
    normalize_metadata,
)

__all__ = ["ChatEntry", "ChatHistory", "ChatTurn", "payload_from_json", "payload_to_json"]

logger = logging.getLogger(__name__)

_SOURCE = {"user": "user", "assistant": "agent", "system": "system"}

#: Activity kind of one message occurrence.
MESSAGE_ACTIVITY = "chat_message"


# One lock per (store, session) in this process, shared by every ChatHistory object of that session; held weakly
# on both sides, so a session's lock lives as long as one of its ChatHistory objects does (no growth with the
# number of sessions a long-running process has seen).
_SESSION_LOCKS: weakref.WeakKeyDictionary[Any, weakref.WeakValueDictionary[tuple[str, str | None, str | None], Any]] = (
    weakref.WeakKeyDictionary()
)
_SESSION_LOCKS_GUARD = threading.Lock()


def _session_lock(manager: object, scope: Scope) -> threading.RLock:
    key = (scope.user_id, scope.agent_id, scope.session_id)
    with _SESSION_LOCKS_GUARD:
        try:
            locks = _SESSION_LOCKS.setdefault(manager, weakref.WeakValueDictionary())
        except TypeError:  # a manager that cannot be weakly referenced: a lock of its own, kept on nothing shared
            return threading.RLock()
        lock = locks.get(key)
        if lock is None:
            lock = locks[key] = threading.RLock()
        return lock


class ChatManager(Protocol):
    """What :class:`ChatHistory` calls on its manager (a :class:`~memlineage.MemoryManager` has it).

    A ``ledger`` attribute is optional: when the manager has one, its ``guard``, ``activity_stamp`` and
    ``upsert_activity`` are used where present (looked up at run time).
    """

    @property
    def clock(self) -> Callable[[], datetime]:
        """Returns "now" (timezone-aware UTC)."""
        ...

    def get(self, memory_id: str, *, scope: Scope) -> Memory | None:
        """One memory of the scope, or None."""
        ...

    def get_many(self, ids: Sequence[str], *, scope: Scope) -> Sequence[Memory | None]:
        """The memories of ``ids`` in order (None where there is none in the scope)."""
        ...

    def remember(
        self,
        content: str,
        *,
        scope: Scope,
        source: Source | str,
        kind: MemoryKind,
        metadata: Mapping[str, Any] | None,
        derived_from: Iterable[str],
        confidence: float,
        activity_id: str | None,
        force: bool,
    ) -> Memory:
        """Store one memory with its lineage."""
        ...

    def retract(self, memory_id: str, *, scope: Scope, reason: str = ..., activity_id: str | None = None) -> object:
        """Withdraw a memory (what derives from it becomes suspect)."""
        ...

    def forget(self, memory_id: str, *, scope: Scope, reason: str = ...) -> object:
        """Archive a memory."""
        ...

    def record_activity(self, activity: Activity) -> Activity:
        """Store an activity (its ``scope`` is its owner)."""
        ...

    def activities(self, scope: Scope, *, kinds: Iterable[str] | None = None) -> list[Activity]:
        """The scope's activities of ``kinds``."""
        ...

    def get_activity(self, activity_id: str, *, scope: Scope) -> Activity | None:
        """One activity of the scope, or None."""
        ...

    def end_activity(
        self, activity_id: str, *, scope: Scope, outcome: str = ..., metadata: Mapping[str, Any] | None = None
    ) -> object:
        """Close an activity with ``outcome``."""
        ...

    def link(self, memory_id: str, activity_id: str, *, scope: Scope) -> object:
        """Link a memory to the activity that generated it again."""
        ...


_M = TypeVar("_M", bound=ChatManager)


class ChatHistory(Generic[_M]):
    """The ordered messages of one user's session, stored as memories with lineage.

    Setup:
        ``pip install memlineage``; the LangChain and LlamaIndex adapters wrap this class.

    Instantiate:
        ``ChatHistory(mm, scope=Scope(user_id="alice", session_id="trip-1"))``; ``scope`` may also be a user id
        string with ``session_id=...``.

    Use:
        ``append([ChatEntry("user", "hi")])``, ``turns()`` oldest first, ``clear()``.

    Example:
        >>> from memlineage.testing import make_manager
        >>> history = ChatHistory(make_manager(), scope="alice", session_id="s1")
        >>> _ = history.append([ChatEntry("user", "yes"), ChatEntry("assistant", "Booked."), ChatEntry("user", "yes")])
        >>> [t.text for t in history.turns()]
        ['yes', 'Booked.', 'yes']

    Args:
        manager: A :class:`~memlineage.MemoryManager`.
        scope: The user's scope (``Scope``, mapping or user id string).
        session_id: The session, when ``scope`` names none (or the same one). Required one way or the other.
        on_clear: ``"retract"`` (default: the messages are withdrawn; what derives from them becomes suspect) or
            ``"forget"`` (archived: out of recall, descendants untouched).
        kind: Memory kind of the messages (default ``episodic``).

    Raises:
        InvalidInputError: no session id, two different session ids, a bad scope, or an unknown ``on_clear``.
    """

    def __init__(
        self,
        manager: _M,
        *,
        scope: Scope | Mapping[str, Any] | str,
        session_id: str | None = None,
        on_clear: Literal["retract", "forget"] = "retract",
        kind: MemoryKind | str = MemoryKind.EPISODIC,
    ) -> None:
        base = Scope.coerce(scope)
        if session_id is not None and base.session_id is not None and session_id != base.session_id:
            msg = f"two sessions given: scope names {base.session_id!r} and session_id={session_id!r}; pass one of them"
            raise InvalidInputError(msg)
        if session_id is not None:
            base = Scope(user_id=base.user_id, agent_id=base.agent_id, session_id=session_id)
        if base.session_id is None:
            msg = "a chat history belongs to one session: pass session_id=... or scope=Scope(user_id, session_id=...)"
            raise InvalidInputError(msg)
        if on_clear not in ("retract", "forget"):
            msg = f"on_clear must be 'retract' or 'forget', got {on_clear!r}"
            raise InvalidInputError(msg)
        try:
            memory_kind = MemoryKind(kind)
        except ValueError:
            msg = f"kind must be one of {[k.value for k in MemoryKind]}, got {kind!r}"
            raise InvalidInputError(msg) from None
        self.manager = manager
        self.scope = base
        self.on_clear = on_clear
        self.kind = memory_kind
        self._lock = _session_lock(manager, base)
        # The session's message occurrences as last read, with the ledger's stamp of them (see _activities);
        # emptied by every erasure, so no erased wording stays here.
        self._known: tuple[tuple[int, ...], tuple[Activity, ...]] | None = None
        on_erase(self._forget_known)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the session: one writer at a time.

        In this process all ChatHistory objects of the session share one lock; on a store whose ledger takes
        database locks (PostgreSQL), a lock on the session holds across processes too.
        """
        ledger = getattr(self.manager, "ledger", None)
        guard = getattr(ledger, "guard", None)
        key = ("chat_session", self.scope.user_id, self.scope.agent_id or "", self.scope.session_id or "")
        with self._lock, guard([key]) if callable(guard) else nullcontext():
            yield

    # ------------------------------------------------------------------ reads
    def turns(self, last: int | None = None) -> list[ChatTurn]:
        """The session's messages, oldest first (cleared and erased ones left out).

        Args:
            last: Only the last N turns (>= 0); default all. The window never starts with a tool result: a
                result whose call (the assistant message that requested it) falls outside the window is left out
                too, so the window can hold fewer than N turns.

        Raises:
            InvalidInputError: ``last`` is negative.
        """
        if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 0):
            msg = f"last must be None or a non-negative int, got {last!r}"
            raise InvalidInputError(msg)
        occurrences = self._occurrences()
        ids = list(dict.fromkeys(a.metadata["memory_id"] for a in occurrences))
        by_id = {i: m for i, m in zip(ids, self.manager.get_many(ids, scope=self.scope)) if m is not None}
        out = [
            ChatTurn(
                role=a.metadata["role"],
                memory=by_id[a.metadata["memory_id"]],
                payload=payload_from_json(a.metadata.get("message") or {}),
                position=int(a.metadata["position"]),
                activity_id=a.id,
                wording=a.metadata.get("text") if isinstance(a.metadata.get("text"), str) else None,
            )
            for a in occurrences
            if a.metadata["memory_id"] in by_id and by_id[a.metadata["memory_id"]].status is not Status.ERASED
        ]
        if last is None:
            return out
        window = out[len(out) - last :] if last else []
        while window and window[0].role == "tool":  # its call is outside the window: a dangling result
            window = window[1:]
        return window

    def _forget_known(self) -> None:
        self._known = None

    def _stamp(self, ids: Sequence[str] | None = None) -> tuple[int, ...] | None:
        """The ledger's fingerprint of the session's message occurrences (or of ``ids`` among them); None = none."""
        stamp = getattr(getattr(self.manager, "ledger", None), "activity_stamp", None)
        scope = self.scope
        return tuple(stamp(scope.user_id, kind=MESSAGE_ACTIVITY, agent_id=scope.agent_id, session_id=scope.session_id,
                           ids=ids)) if callable(stamp) else None  # fmt: skip

    def _activities(self) -> list[Activity]:
        """The session's message occurrences, read again only when the ledger's stamp of them changed.

        The stamp (one aggregate read) changes when an occurrence is added, ended, cleared or redacted by any writer,
        in any process; read before the rows, a change in between only costs the next call a full read.
        """
        stamp, known = self._stamp(), self._known
        if stamp is not None and known is not None and known[0] == stamp:
            return list(known[1])
        acts = self.manager.activities(self.scope, kinds=[MESSAGE_ACTIVITY])
        self._known = (stamp, tuple(acts)) if stamp is not None else None
        return acts

    def _extend_known(self, base: tuple[tuple[int, ...], tuple[Activity, ...]] | None, ids: Sequence[str]) -> None:
        """After an append: known = what it started from + what it wrote, when the stamps add up (else unknown)."""
        self._known = None
        if base is None or not ids:
            return
        after, ours = self._stamp(), self._stamp(ids)
        if after is None or ours is None or tuple(a + b for a, b in zip(base[0], ours, strict=True)) != after:
            return
        written = [self.manager.get_activity(i, scope=self.scope) for i in ids]
        if all(a is not None for a in written):
            self._known = (after, (*base[1], *(a for a in written if a is not None)))

    def _occurrences(self, acts: Sequence[Activity] | None = None, *, include_cleared: bool = False) -> list[Activity]:
        acts = self._activities() if acts is None else acts
        live = [
            a
            for a in acts
            if "memory_id" in a.metadata  # a redacted (erased) occurrence keeps no memory id; nor an unfinished one
            and a.outcome != "failed"
            and (include_cleared or a.outcome != "cleared")
        ]
        return sorted(live, key=lambda a: (int(a.metadata.get("position", 0)), a.started_at))

    # ------------------------------------------------------------------ writes
    def _checked(self, entries: Sequence[ChatEntry]) -> list[tuple[ChatEntry, str, dict[str, Any]]]:
        """Validate a whole batch before anything is written: ``(entry, source, occurrence metadata)`` each.

        Raises:
            InvalidInputError: the first bad entry.
        """
        if isinstance(entries, (str, bytes, ChatEntry, Mapping)) or not isinstance(entries, Iterable):
            msg = f"append() takes a list of ChatEntry, got {type(entries).__name__}"
            raise InvalidInputError(msg)
        out = []
        for e in list(entries):
            if not isinstance(e, ChatEntry) or e.role not in ("user", "assistant", "tool", "system"):
                msg = f"chat entries must be ChatEntry with role user/assistant/tool/system, got {e!r}"
                raise InvalidInputError(msg)
            if not isinstance(e.calls, Mapping) or not (e.call_id is None or isinstance(e.call_id, str)):
                msg = f"a chat entry's calls must be a mapping of call id to arguments and call_id a str: {e!r}"
                raise InvalidInputError(msg)
            if not isinstance(e.payload, Mapping):
                msg = f"a chat entry's payload must be a mapping: {e!r}"
                raise InvalidInputError(msg)
            if not isinstance(e.text, str) or not e.text.strip():
                msg = f"a chat message needs text for its memory (describe tool calls when there is none): {e!r}"
                raise InvalidInputError(msg)
            conf = e.confidence
            if isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0.0 <= conf <= 1.0:
                msg = f"a chat entry's confidence must be a number in [0, 1]: {e!r}"
                raise InvalidInputError(msg)
            check_text(e.text, "a chat message's text")  # what remember() would refuse, refused before any write
            source = f"tool:{e.name or 'tool'}" if e.role == "tool" else _SOURCE[e.role]
            Source.parse(source)
            if e.call_id is not None:
                check_id(e.call_id, "a tool message's call_id")
            for call_id in e.calls:
                check_id(call_id, "a tool call id in calls")
            meta: dict[str, Any] = {"role": e.role, "position": 0, "message": payload_to_json(e.payload)}
            if e.calls:
                meta["calls"] = payload_to_json({str(k): v for k, v in e.calls.items()})
            if e.call_id is not None:
                meta["call_id"] = e.call_id
            _check_storable(meta, "a chat entry")  # every backend stores it: no lone surrogate, no NUL
            out.append((e, source, meta))
        return out

    def append(self, entries: Sequence[ChatEntry]) -> list[ChatTurn]:
        """Store messages in order; returns their turns.

        The batch is all or nothing: every entry is checked before anything is written, its turns take
        consecutive positions (another writer of the session waits: a lock shared by every ``ChatHistory`` of the
        session in this process, and a database lock across processes on PostgreSQL), and they appear together.
        When a write fails midway, the memories the batch created are retracted and none of its turns appear.
        ``turns()`` returns each message exactly as appended, also when its memory merged into an earlier one
        with other words.

        Raises:
            InvalidInputError: a bad entry (unknown role, empty or unstorable text, bad calls or payload); nothing
                of the batch is written.
        """
        checked = self._checked(entries)
        if not checked:
            return []
        with self._locked():
            return self._append_locked(checked)

    def _append_locked(
        self, checked: Sequence[tuple[ChatEntry, str, dict[str, Any]]], *, leaving: frozenset[str] = frozenset()
    ) -> list[ChatTurn]:
        """Append under the session's hold; occurrences in ``leaving`` (about to be cleared) are no premises."""
        acts = self._activities()
        base = self._known  # what the append starts from (None: no stamp to keep it by)
        # positions are never reused: unfinished, failed, cleared and redacted occurrences keep theirs
        position = 1 + max((int(a.metadata["position"]) for a in acts if "position" in a.metadata), default=-1)
        live = [a for a in self._occurrences(acts) if a.id not in leaving]
        user_turn = next((a.metadata["memory_id"] for a in reversed(live) if a.metadata["role"] == "user"), None)
        since = [] if user_turn is None else _tools_after(live, user_turn)
        asked: dict[str, Any] = {}  # tool call id -> its arguments, from the session's assistant messages
        for a in live:
            asked.update(a.metadata.get("calls") or {})
        out: list[ChatTurn] = []
        earlier: dict[str, Memory] | None = None  # the session's live user and tool messages, read when needed
        written: dict[str, Memory] = {}  # ... and those of this batch
        started: list[Activity] = []  # the batch's occurrences, unpublished until every message is stored
        finals: list[dict[str, Any]] = []
        created: list[str] = []  # memories this batch created (withdrawn if the batch fails)
        try:
            for e, source, meta in checked:
                premises: list[str] = []
                if e.role == "assistant" and is_filler(e.text):
                    premises = []  # an acknowledgement rests on nothing and is nobody's premise
                elif e.role == "tool" and e.call_id is not None and e.call_id in asked:
                    if earlier is None:
                        earlier = self._earlier(live)
                    premises = self._argument_premises(asked[e.call_id], {**earlier, **written})
                    if not premises and user_turn is not None:
                        premises = [user_turn]
                elif e.role == "assistant" and e.calls:
                    # a message requesting tool calls rests on what supplied their arguments, like the results
                    if earlier is None:
                        earlier = self._earlier(live)
                    pool = {**earlier, **written}
                    premises = [p for args in e.calls.values() for p in self._argument_premises(args, pool)]
                    if user_turn is not None:
                        premises = [user_turn, *since, *premises]
                elif e.role in ("assistant", "tool") and user_turn is not None:
                    premises = [user_turn, *since] if e.role == "assistant" else [user_turn]
                    if e.role == "assistant":
                        if earlier is None:
                            earlier = self._earlier(live)
                        premises += self._content_premises(e.text, user_turn, {**earlier, **written})
                meta = {**meta, "position": position}
                if "calls" in meta:
                    asked.update(meta["calls"])
                act = self.manager.record_activity(
                    Activity(id=new_id(), kind=MESSAGE_ACTIVITY, name=e.role, scope=self.scope, metadata=meta)
                )
                started.append(act)
                mem = self.manager.remember(
                    e.text,
                    scope=self.scope,
                    source=source,
                    kind=self.kind,
                    derived_from=list(dict.fromkeys(premises)),
                    activity_id=act.id,
                    confidence=e.confidence,
                    metadata={"chat_session": self.scope.session_id, "position": position},
                    force=True,  # a transcript keeps every message, whatever a value model thinks of it
                )
                if mem.lineage.activity_id != act.id:  # merged into an earlier memory (same or restated words)
                    self.manager.link(mem.id, act.id, scope=self.scope)
                else:
                    created.append(mem.id)
                if e.role == "tool" and (e.failed or _failed(e.payload)):
                    # the history keeps the message; its text is an error, never a fact: the memory is withdrawn
                    self.manager.retract(
                        mem.id, scope=self.scope, reason="the tool call failed: an outcome, not a fact"
                    )
                final: dict[str, Any] = {"memory_id": mem.id}
                wording = None if mem.content == e.text else e.text
                if wording is not None:  # the history returns what was said, not the earlier memory's words
                    final["text"] = wording
                finals.append(final)
                out.append(ChatTurn(e.role, mem, dict(e.payload), position, act.id, wording))
                position += 1
                if e.role in ("user", "tool"):
                    written[mem.id] = mem
                if e.role == "user":
                    user_turn, since = mem.id, []
                elif e.role == "tool":
                    since.append(mem.id)
            self._end_all(started, "success", finals)
        except BaseException:
            self._known = None
            self._withdraw(started, created)
            raise
        self._extend_known(base, [a.id for a in started])
        return out

    def _end_all(self, acts: Sequence[Activity], outcome: str, finals: Sequence[Mapping[str, Any]]) -> None:
        """End occurrences together, in one ledger transaction (all of them or none)."""
        ledger = getattr(self.manager, "ledger", None)
        if ledger is None or not callable(getattr(ledger, "upsert_activity", None)):
            for act, final in zip(acts, finals, strict=True):
                self.manager.end_activity(act.id, scope=self.scope, outcome=outcome, metadata=final)
            return
        now = self.manager.clock()
        ended = [
            act.model_copy(
                update={"ended_at": now, "outcome": outcome, "metadata": {**act.metadata, **normalize_metadata(final)}}
            )
            for act, final in zip(acts, finals, strict=True)
        ]
        with ledger.transaction() as conn:
            for act in ended:
                ledger.upsert_activity(conn, act)

    def _withdraw(self, started: Sequence[Activity], created: Sequence[str]) -> None:
        """Undo what a failed batch wrote (best effort): its occurrences fail, the memories it created are retracted."""
        for act in started:
            try:
                self.manager.end_activity(act.id, scope=self.scope, outcome="failed")
            except Exception as exc:  # noqa: BLE001 - the original error is what the caller sees
                logger.warning("chat history: could not close an occurrence of a failed batch: %s", exc)
        for mid in created:
            try:
                mem = self.manager.get(mid, scope=self.scope)
                if mem is not None and mem.status in (Status.ACTIVE, Status.SUSPECT):
                    self.manager.retract(mid, scope=self.scope, reason="chat append failed: the batch was withdrawn")
            except Exception as exc:  # noqa: BLE001 - the original error is what the caller sees
                logger.warning("chat history: could not withdraw a message of a failed batch: %s", exc)

    def replace(self, entries: Sequence[ChatEntry], reason: str = "chat history replaced") -> list[ChatTurn]:
        """Make the session's history ``entries``: what it already holds stays, only the rest changes.

        The longest common beginning (same role, text and payload, in order) is kept as it is: nothing retracted,
        nothing re-stored, so setting the same history again is a no-op. The remaining entries are appended first
        (resting only on the kept beginning), then the old turns after it are cleared (see :meth:`clear`), under one
        hold of the session: when the append fails, the old history is still whole.

        Returns:
            The session's turns afterwards.

        Raises:
            InvalidInputError: a bad entry; nothing changes (checked before anything is cleared).
        """
        checked = self._checked(entries)
        with self._locked():
            current = self.turns()
            keep = 0
            while keep < min(len(current), len(checked)) and _same(current[keep], checked[keep][0]):
                keep += 1
            old = current[keep:]
            leaving = frozenset(t.activity_id for t in old)
            new = self._append_locked(checked[keep:], leaving=leaving) if keep < len(checked) else []
            if old:
                self._clear_locked(reason, old)
            return [*current[:keep], *new]

    def _earlier(self, live: Sequence[Activity]) -> dict[str, Memory]:
        """The session's live user and tool messages (the last 200), by memory id."""
        ids = [str(a.metadata["memory_id"]) for a in live[-200:] if a.metadata.get("role") in ("user", "tool")]
        found = self.manager.get_many(list(dict.fromkeys(ids)), scope=self.scope)
        return {m.id: m for m in found if m is not None and m.status.value in ("active", "suspect")}

    @staticmethod
    def _argument_premises(arguments: object, earlier: Mapping[str, Memory]) -> list[str]:
        """Earlier user and tool messages that hold the call's argument values (the capture's ``arguments`` rule)."""
        return holders(list(earlier.values()), argument_values(arguments), lambda m, v: contains(m.content, v))

    @staticmethod
    def _content_premises(text: str, user_turn: str, earlier: Mapping[str, Memory]) -> list[str]:
        """Earlier messages an answer rests on by repeating what only they said (the same rule as the capture).

        "In Rome I suggest Albergo Centrale", answering "Suggest a hotel.", rests on "I'm planning a trip to Rome":
        when that is corrected, the answer turns suspect (:func:`memlineage._evidence.content_premises`).
        """
        asked = earlier.get(user_turn)
        pool = [m for mid, m in earlier.items() if mid != user_turn]
        return content_premises(text, asked.content if asked is not None else "", pool)

    def clear(self, reason: str = "chat history cleared", *, turns: Sequence[ChatTurn] | None = None) -> list[str]:
        """Invalidate the session's history (or only ``turns`` of it): occurrences closed, memories retracted.

        With ``on_clear="forget"`` the memories are archived instead of retracted.

        A memory another session of the user also holds (the same words said there) stays valid for that session.
        Nothing is deleted: versions, edges and events stay in the ledger.

        Returns:
            Ids of the memories retracted or archived.
        """
        with self._locked():
            return self._clear_locked(reason, turns)

    def _clear_locked(self, reason: str, turns: Sequence[ChatTurn] | None) -> list[str]:
        live = self._occurrences()
        if turns is not None:
            chosen = {t.activity_id for t in turns}
            live = [a for a in live if a.id in chosen]
        if not live:
            return []
        clearing = self.manager.record_activity(
            Activity(kind="chat_clear", name=self.on_clear, scope=self.scope, metadata={"reason": reason})
        )
        # the occurrences close together (one transaction): a reader never sees half a clear
        self._end_all(live, "cleared", [{"cleared_by": clearing.id}] * len(live))
        ids = list(dict.fromkeys(a.metadata["memory_id"] for a in live))
        user = Scope(user_id=self.scope.user_id, agent_id=self.scope.agent_id)
        closing = {a.id for a in live}
        elsewhere = {  # words said again elsewhere (another session, or a turn that stays) stay valid
            a.metadata.get("memory_id")
            for a in self.manager.activities(user, kinds=[MESSAGE_ACTIVITY])
            if a.outcome not in ("cleared", "failed") and a.id not in closing
        }
        done: list[str] = []
        for mem in self.manager.get_many(ids, scope=self.scope):
            if mem is None or mem.id in elsewhere:
                continue
            if mem.status in (Status.ACTIVE, Status.SUSPECT):
                if self.on_clear == "forget":
                    self.manager.forget(mem.id, scope=self.scope, reason=reason)
                else:
                    self.manager.retract(mem.id, scope=self.scope, reason=reason, activity_id=clearing.id)
                done.append(mem.id)
        self.manager.end_activity(clearing.id, scope=self.scope, outcome="success", metadata={"invalidated": done})
        return done

    # ------------------------------------------------------------------ async twins (R6)
    aturns = async_twin(turns)
    aappend = async_twin(append)
    aclear = async_twin(clear)
    areplace = async_twin(replace)


def _tools_after(occurrences: Sequence[Activity], user_memory: str) -> list[str]:
    """Memory ids of the tool results after the last occurrence of ``user_memory``."""
    out: list[str] = []
    for a in reversed(occurrences):
        if a.metadata["memory_id"] == user_memory and a.metadata["role"] == "user":
            break
        if a.metadata["role"] == "tool":
            out.append(a.metadata["memory_id"])
    return out[::-1]
