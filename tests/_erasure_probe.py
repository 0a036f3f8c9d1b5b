"""Erasure probe shared by the unit and integration tests (loaded by the ``erasure_probe`` fixture of tests/conftest).

:func:`write_everything` writes one distinctive word per write path for a scope: remember, remember_many (tags,
metadata), automatic corrections (an update decision quotes the old and new value, a withdrawal the withdrawn
words), tool results replaced by newer ones, supersede and revise, a chat history (list content blocks, tool-call
arguments, tool results), a LangChain history when installed, the run recorder (tool-call arguments), activities
with metadata, links, a consolidated summary, a recall query, an adapter error. The finders then look for the words
generically: every text, JSON and binary column of every table of the ledger's metadata (a table added later is
covered without touching the test), the lexical index, and every object reachable in the process.
"""

from __future__ import annotations

import gc
import json
import logging
import sys
import types
from collections.abc import Iterable, Sequence
from typing import Any

from memlineage import Activity, MemoryManager, Scope, Status
from memlineage.capture import RunRecorder, ToolCallSpec
from memlineage.history import ChatEntry, ChatHistory
from memlineage.index._base import IndexFilter
from memlineage.index.lexical import tokenize
from memlineage.ledger._schema import metadata as ledger_tables
from memlineage.testing import FakeEmbedder
from sqlalchemy import select

#: Made-up words the English stemmer keeps as they are (checked by :func:`check_words`): a word found nowhere is
#: not one that was merely stemmed into another form.
ALICE_WORDS = [
    "Zorblax", "Quimbok", "Vexmoorth", "Plonkett", "Drizzix", "Yarrowgak", "Fennimork", "Glimbert", "Hoxleyk",
    "Jubbrink", "Krellix", "Moxworth", "Nuzzlek", "Ozzimand", "Prattlek", "Quoxley", "Rumbleck", "Snorkax",
    "Tibbolt", "Umbrix", "Vorpalk", "Wumpix",
]  # fmt: skip
BOB_WORDS = [
    "Brakkot", "Zindel", "Frumpot", "Wuxhalt", "Gorvik", "Threnbox", "Kazzpod", "Mibblort", "Pentrax", "Skorvald",
    "Dravvik", "Yelmoth", "Crunduk", "Bopzand", "Flinktor", "Quaddik", "Harvlox", "Jemptrik", "Lornkax", "Vuzzbot",
    "Tramblik", "Oxtherd",
]  # fmt: skip


class QuietEmbedder(FakeEmbedder):
    """:class:`FakeEmbedder` without its per-token cache: a test fake that keeps words would hide what the store
    keeps (the embedder is the application's object, not the store's)."""

    def _token_vector(self, token: str) -> Any:
        vec = super()._token_vector(token)
        self._cache.clear()
        return vec


def check_words(words: Sequence[str]) -> None:
    """Each word is one lexical token equal to itself lower-cased (the lexical index holds exactly it)."""
    for w in words:
        assert tokenize(w) == [w.lower()], (w, tokenize(w))


#: Indexes of the words :func:`write_everything` passes to the store without storing them (a recall query).
NOT_STORED = (20,)


def write_everything(mm: MemoryManager, scope: Scope, w: Sequence[str]) -> None:
    """Write ``w[0]``... through every write path into ``scope`` (nothing written is kept by the caller)."""
    mm.remember(f"I live in {w[0]}", scope=scope)
    mm.remember(f"Actually I moved to {w[1]}", scope=scope)  # an update decision: old and new value
    mm.remember_many(
        [{"content": f"my dog is called {w[2]}", "scope": scope, "tags": [w[3]], "metadata": {"note": w[4]}}]
    )
    mm.remember(f"I'm planning a trip to {w[5]} in May", scope=scope)
    mm.remember(f"The {w[5]} trip is cancelled.", scope=scope)  # a withdrawal: the withdrawn words
    for price in ("120", "95"):  # a tool result replaced by a newer one for the same arguments
        mm.remember(
            f"fare to {w[6]}: {price} EUR", scope=scope, source="tool:fares", metadata={"tool_args": {"to": w[6]}}
        )
    old = mm.remember(f"my locker code is {w[7]}", scope=scope)
    newer = mm.supersede(old.id, f"my locker code is {w[8]}", scope=scope).memory
    assert newer is not None
    mm.revise(newer.id, f"my locker code is {w[9]}", scope=scope)
    history = ChatHistory(mm, scope=scope)
    history.append(
        [
            ChatEntry("user", f"find flights to {w[10]}",
                      payload={"type": "human", "data": {"content": [{"type": "text", "text": f"to {w[10]}"}]}}),
            ChatEntry("assistant", f"called search({w[11]})", calls={"call-1": {"city": w[11]}},
                      payload={"type": "ai", "data": {"tool_calls": [{"id": "call-1", "args": {"city": w[11]}}]}}),
            ChatEntry("tool", f"flight to {w[11]} at 9:00 via {w[12]}", name="search", call_id="call-1",
                      payload={"type": "tool", "data": {"artifact": {"via": w[12]}}}),
        ]
    )  # fmt: skip
    try:
        from langchain_core.messages import AIMessage, HumanMessage

        from memlineage_langchain import LineageChatMessageHistory
    except ImportError:  # pragma: no cover - the langchain extra is installed by `make test`
        pass
    else:
        lc = LineageChatMessageHistory(mm, scope=Scope(user_id=scope.user_id, session_id=f"{scope.session_id}-lc"))
        lc.add_messages(
            [
                HumanMessage(content=[{"type": "text", "text": f"book the {w[13]} hotel"}]),
                AIMessage(
                    content="", tool_calls=[{"name": "book", "args": {"hotel": w[13], "ref": w[14]}, "id": "c9"}]
                ),
            ]
        )
    recorder = RunRecorder.of(mm)
    run = recorder.start_run(scope, "run-1", f"what is the weather in {w[15]}")
    recorder.model_step(run, text="Checking.", tool_calls=[ToolCallSpec("tc-1", "weather", {"city": w[15]})])
    recorder.tool_end(run, "tc-1", f"sunny, 21C, station {w[16]}")
    recorder.answer(run, f"It is sunny in {w[15]}.")
    recorder.end_run(run)
    act = mm.record_activity(Activity(kind="tool_call", name="lookup", scope=scope, metadata={"input": w[17]}))
    mm.end_activity(act.id, scope=scope, outcome="success", metadata={"output": w[17]})
    fact = mm.remember(f"my badge number is {w[18]}", scope=scope, activity_id=act.id)
    mm.link(fact.id, act.id, scope=scope)
    summary = mm.consolidate(
        scope, summarizer=lambda prompt: f"The user's badge is {w[18]} and code {w[19]} [m1]", require_overlap=False
    )
    assert summary.memories, "the summary line must be stored"
    mm.recall(f"where is {w[20]}", scope=scope, k=3)
    logging.disable(logging.WARNING)  # its WARNING (the application's log, which pytest keeps) is not the store
    try:
        mm.record_adapter_error("probe", ValueError(f"could not parse {w[21]}"), scope=scope)
    finally:
        logging.disable(logging.NOTSET)


def _texts(value: Any) -> Iterable[str]:
    if value is None:
        return
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        yield data.decode("utf-8", "replace")
        yield data.decode("utf-16-le", "replace")
    elif isinstance(value, str):
        yield value
    else:
        yield json.dumps(value, default=str, ensure_ascii=False)


def ledger_hits(mm: MemoryManager, words: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(table, column, word)`` for each word found in any column of any row of any ledger table."""
    low = [x.lower() for x in words]
    found: set[tuple[str, str, str]] = set()
    with mm.ledger.read() as conn:
        for table in ledger_tables.sorted_tables:
            for row in conn.execute(select(table)).mappings():
                for col, value in row.items():
                    for text in _texts(value):
                        t = text.lower()
                        found.update((table.name, col, w) for w, lw in zip(words, low) if lw in t)
    return sorted(found)


def user_rows(mm: MemoryManager, user_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of ``user_id`` in every table (by its ``user_id`` column, or its memories' ids), sorted."""
    with mm.ledger.read() as conn:
        mems = ledger_tables.tables["ml_memories"]
        ids = {r[0] for r in conn.execute(select(mems.c.id).where(mems.c.user_id == user_id))}
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in ledger_tables.sorted_tables:
            if "user_id" in table.c:
                rows = conn.execute(select(table).where(table.c.user_id == user_id))
            else:
                key = table.c.memory_id
                rows = conn.execute(select(table).where(key.in_(sorted(ids))))
            out[table.name] = sorted((tuple(repr(v) for v in r) for r in rows), key=repr)
    return out


def lexical_hits(mm: MemoryManager, user_id: str, words: Sequence[str]) -> list[str]:
    """Words whose lexical query finds any document of ``user_id``, whatever its status."""
    lexical = mm.services.recall.lexical
    where = IndexFilter(user_id=user_id, statuses=tuple(s.value for s in Status))
    return [w for w in words if lexical.query(w, 10, where)]


def heap_hits(words: Sequence[str], *, exclude: Iterable[object] = (), limit: int = 20) -> list[str]:
    """Strings (and bytes) reachable in the process that hold one of ``words``, each with the path that holds it.

    The walk starts from every module and every object the garbage collector tracks and follows references.
    Frames are not followed (the test's own locals), nor log records (logging is the application's);
    ``exclude`` lists objects not to report (the words themselves).
    """
    gc.collect()
    low = [w.lower() for w in words]
    skip = {id(x) for x in [*exclude, *low]}
    parent: dict[int, Any] = {}
    seen: set[int] = set()
    stack: list[tuple[Any, Any]] = [(o, None) for o in [*sys.modules.values(), *gc.get_objects()]]
    found: list[str] = []
    while stack and len(found) < limit:
        obj, via = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        parent[id(obj)] = via
        if isinstance(obj, (str, bytes, bytearray)):
            text = obj.lower() if isinstance(obj, str) else bytes(obj).decode("utf-8", "replace").lower()
            if id(obj) not in skip and any(w in text for w in low):
                found.append(f"{obj[:120]!r} held by {_path(obj, parent)}")
            continue
        if isinstance(obj, (types.FrameType, int, float, logging.LogRecord)):
            continue  # the test's locals; log records pytest captured (logging is the application's)
        try:
            stack.extend((r, obj) for r in gc.get_referents(obj))
        except Exception:  # noqa: BLE001, S112 - an object gc cannot walk holds nothing reachable here
            continue
    return found


def _path(obj: Any, parent: dict[int, Any], depth: int = 8) -> str:
    steps = []
    for _ in range(depth):
        up = parent.get(id(obj))
        if up is None:
            break
        name = type(up).__qualname__
        if isinstance(up, types.ModuleType):
            name = f"module {up.__name__}"
        elif isinstance(up, (types.FunctionType, types.BuiltinFunctionType)) or hasattr(up, "cache_info"):
            name = f"{name} {getattr(up, '__qualname__', '')}"
        steps.append(name)
        obj = up
    return " <- ".join(steps)
