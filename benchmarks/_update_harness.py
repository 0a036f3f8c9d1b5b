"""Shared harness of the update benchmarks (``bench_updates.py``, ``bench_longmemeval.py``).

A benchmark describes each user's history as timed messages and asks questions at given times; every system gets
the same messages, the same embedder and the same questions in one process:

- ``chroma``: a plain Chroma collection holding every message with ``user_id`` metadata, queried with a
  ``where`` on the user (the vector store an agent already has);
- ``chroma+recency``: the same candidates, re-ranked by similarity + 0.05 × the message's recency within the
  user's history (a recency tie-break a user could add in a line);
- ``ml-core``: ``MemoryManager.open(path)`` defaults, one ``remember`` per message (``user`` / ``agent``), one
  ``recall`` per question;
- ``ml-langchain``: the same store defaults behind the LangChain adapter: ``LineageMemory`` per session,
  ``load_memory_variables`` then ``save_context`` per (user, assistant) pair, as ``AgentExecutor`` drives it.

Results come back as ranked message labels; benchmarks score them.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench_stale import CachedEmbedder, Clock


@dataclass(frozen=True)
class Message:
    """One message of a user's history: its label, role (``user`` / ``assistant``), text, time and session."""

    label: str
    role: str
    text: str
    at: datetime
    session: str


@dataclass
class History:
    """One user's messages, in time order."""

    user: str
    messages: list[Message] = field(default_factory=list)

    def label_of(self, content: str) -> str | None:
        """The label of the message a served text comes from (exact text, or a clause carried over from it)."""
        for m in self.messages:
            if m.text == content:
                return m.label
        for m in self.messages:
            if len(content) >= 12 and content in m.text:
                return m.label
        return None


class System:
    """A system under test: writes histories, answers questions with ranked labels."""

    name = "?"
    #: Served items that belong to another user (must stay 0).
    leaks = 0

    def write(self, histories: Sequence[History]) -> None:
        raise NotImplementedError

    def ask(self, h: History, question: str, at: datetime, k: int) -> list[str | None]:
        raise NotImplementedError

    def decisions(self, h: History) -> list[dict[str, Any]]:
        """Automatic update decisions made in this user's store (MemLineage rows only)."""
        return []

    def close(self) -> None:
        return None


class RawChroma(System):
    """A plain Chroma collection, every message a record with ``user_id``; optional recency tie-break."""

    def __init__(self, embedder: CachedEmbedder, *, recency: float = 0.0) -> None:
        import chromadb

        self.name = "chroma+recency" if recency else "chroma"
        self.embedder, self.recency = embedder, recency
        self.client = chromadb.EphemeralClient()
        self.col = self.client.create_collection(f"peer_{uuid.uuid4().hex[:8]}", metadata={"hnsw:space": "cosine"})
        self.times: dict[str, tuple[float, float]] = {}

    def write(self, histories: Sequence[History]) -> None:
        for h in histories:
            if not h.messages:
                continue
            texts = [m.text for m in h.messages]
            ids = [f"{h.user}:{i}" for i in range(len(texts))]
            metas = [{"user_id": h.user, "label": m.label, "t": m.at.timestamp()} for m in h.messages]
            for start in range(0, len(texts), 1000):
                sl = slice(start, start + 1000)
                self.col.add(
                    ids=ids[sl], documents=texts[sl], embeddings=self.embedder.embed(texts[sl]), metadatas=metas[sl]
                )
            ts = [m.at.timestamp() for m in h.messages]
            self.times[h.user] = (min(ts), max(ts))

    def ask(self, h: History, question: str, at: datetime, k: int) -> list[str | None]:
        n = max(k, 20) if self.recency else k
        res = self.col.query(
            query_embeddings=self.embedder.embed([question]), n_results=n, where={"user_id": h.user},
            include=["metadatas", "distances"],
        )  # fmt: skip
        metas, dists = res["metadatas"][0], res["distances"][0]
        self.leaks += sum(1 for m in metas if m["user_id"] != h.user)
        rows = list(zip(metas, dists))
        if self.recency:
            lo, hi = self.times.get(h.user, (0.0, 1.0))
            span = (hi - lo) or 1.0
            rows.sort(key=lambda r: -((1 - r[1]) + self.recency * (float(r[0]["t"]) - lo) / span))
        return [str(m["label"]) for m, _ in rows[:k]]


class _MemLineage(System):
    """``MemoryManager.open(path)`` with defaults, on a simulated clock and the shared embedder."""

    def __init__(self, embedder: CachedEmbedder) -> None:
        from memlineage import MemoryManager

        self.dir = tempfile.mkdtemp(prefix="ml_updates_")
        self.clock = Clock()
        self.mm = MemoryManager.open(self.dir, embedder=embedder, clock=self.clock)
        self.by_user: dict[str, History] = {}
        #: Writes the store refused (MemLineageError), as text.
        self.errors: list[str] = []

    def _labels(self, h: History, memories: Sequence[Any]) -> list[str | None]:
        self.leaks += sum(1 for m in memories if m.scope.user_id != h.user)
        return [h.label_of(m.content) for m in memories]

    def decisions(self, h: History) -> list[dict[str, Any]]:
        from memlineage import Scope

        out = []
        for act in self.mm.activities(Scope(user_id=h.user), kinds=["update_detection"], limit=10_000):
            meta = act.metadata or {}
            # a decision may name no memory on one side (a withdrawal names no statement): nothing to look up
            target = self.mm.get(meta["target"], scope=Scope(user_id=h.user)) if meta.get("target") else None
            statement = self.mm.get(meta["statement"], scope=Scope(user_id=h.user)) if meta.get("statement") else None
            out.append(
                {
                    "action": act.name,
                    "outcome": act.outcome,
                    "target": h.label_of(target.content) if target else None,
                    "statement": h.label_of(statement.content) if statement else None,
                    "reason": meta.get("reason"),
                    "confidence": meta.get("confidence"),
                }
            )
        return out

    def close(self) -> None:
        self.mm.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class MemLineageCore(_MemLineage):
    """One ``remember`` per message (user → ``user``, assistant → ``agent``), one ``recall`` per question."""

    name = "ml-core"

    def write(self, histories: Sequence[History]) -> None:
        from memlineage import MemLineageError, Scope

        for h in histories:
            self.by_user[h.user] = h
            for m in h.messages:
                self.clock.now = m.at
                try:
                    self.mm.remember(
                        m.text, scope=Scope(user_id=h.user, session_id=m.session),
                        source="user" if m.role == "user" else "agent", valid_from=m.at,
                    )  # fmt: skip
                except MemLineageError as exc:  # refused input (e.g. invisible characters only): counted
                    self.errors.append(f"{type(exc).__name__}: {exc}"[:200])

    def ask(self, h: History, question: str, at: datetime, k: int) -> list[str | None]:
        from memlineage import Scope

        self.clock.now = at
        hits = self.mm.recall(question, scope=Scope(user_id=h.user, session_id="ask"), k=k)
        return self._labels(h, [x.memory for x in hits])


class MemLineageLangChain(_MemLineage):
    """``LineageMemory`` per session: ``load_memory_variables`` then ``save_context`` per exchange."""

    name = "ml-langchain"

    def write(self, histories: Sequence[History]) -> None:
        from memlineage import Scope

        from memlineage_langchain import LineageMemory

        for h in histories:
            self.by_user[h.user] = h
            memories: dict[str, Any] = {}
            msgs = h.messages
            i = 0
            while i < len(msgs):
                user_msg: Message | None = msgs[i] if msgs[i].role == "user" else None
                nxt = msgs[i + 1] if user_msg is not None and i + 1 < len(msgs) else None
                answer = nxt if nxt is not None and nxt.role == "assistant" else None
                if user_msg is None:
                    answer = msgs[i]  # an assistant message that opens a session
                i += 2 if (user_msg is not None and answer is not None) else 1
                first = user_msg or answer
                assert first is not None
                memory = memories.get(first.session)
                if memory is None:
                    memory = memories[first.session] = LineageMemory(
                        manager=self.mm, scope=Scope(user_id=h.user, session_id=first.session), k=5
                    )
                self.clock.now = first.at
                inputs = {"input": user_msg.text if user_msg else ""}
                if user_msg is not None:
                    memory.load_memory_variables(inputs)
                if answer is not None:
                    self.clock.now = answer.at
                try:
                    memory.save_context(inputs, {"output": answer.text if answer else ""})
                except Exception as exc:  # noqa: BLE001 - a real agent would have crashed here: counted
                    self.errors.append(f"{type(exc).__name__}: {exc}"[:200])

    def ask(self, h: History, question: str, at: datetime, k: int) -> list[str | None]:
        from memlineage import Scope

        from memlineage_langchain import LineageMemory

        self.clock.now = at
        memory = LineageMemory(manager=self.mm, scope=Scope(user_id=h.user, session_id="ask"), k=k)
        ids = memory.load_memory_variables({"input": question})["memlineage_recalled"][:k]
        mems = [m for m in self.mm.get_many(ids, scope=Scope(user_id=h.user)) if m is not None]
        return self._labels(h, mems)


def make_systems(names: Sequence[str], embedder: CachedEmbedder) -> list[System]:
    """Build the named systems (``chroma``, ``chroma+recency``, ``ml-core``, ``ml-langchain``)."""
    out: list[System] = []
    for n in names:
        if n == "chroma":
            out.append(RawChroma(embedder))
        elif n == "chroma+recency":
            out.append(RawChroma(embedder, recency=0.05))
        elif n == "ml-core":
            out.append(MemLineageCore(embedder))
        elif n == "ml-langchain":
            out.append(MemLineageLangChain(embedder))
        else:
            raise SystemExit(f"unknown system {n!r}")
    return out


def rank_of(labels: Sequence[str | None], wanted: set[str]) -> float:
    """1-based rank of the first label in ``wanted`` (infinity when absent)."""
    for i, label in enumerate(labels, start=1):
        if label in wanted:
            return float(i)
    return math.inf
