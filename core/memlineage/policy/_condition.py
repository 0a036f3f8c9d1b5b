"""Policy conditions: CEL programs compiled once, Python callables, and the fields they can read.

CEL engine choice: ``common-expression-language`` (import name ``cel``), not ``cel-python`` (``celpy``).
Measured here on CPython 3.11 for ``memory.source_kind == "reasoning" && memory.confidence < 0.7``:

==========================  ===============================  ==========================
                            common-expression-language 0.10  cel-python 0.5.0
==========================  ===============================  ==========================
compile                     ~0.016 ms                        ~0.14 ms
evaluate (prepared context)  ~0.3 µs per policy               ~140 µs
implementation              Rust ``cel-interpreter`` (PyO3)   pure Python on ``lark``
==========================  ===============================  ==========================

Both are maintained; ``common-expression-language`` ships binary wheels for the platforms we support, releases
often, has typed stubs, and is roughly 400x faster per evaluation once the context is built, which matters
because read policies run over every recall candidate. The cost that remains is converting Python values into
a
CEL context (a few µs per memory), so the engine converts only the fields that the active conditions
reference,
once per candidate, and shares that context across all CEL policies.

CEL variables: ``memory`` (the memory under decision), ``new`` (the incoming memory of a write or update),
``request`` (who asks and why) and ``now`` (epoch seconds, float). Timestamps are epoch seconds;
``memory.age``
is ``now - memory.created_at`` in seconds. Absent values are ``null``.
"""

from __future__ import annotations

import ast
import functools
import logging
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlineage.models import INVALIDATING_STATUSES, Memory, Status
from memlineage.policy import _cel as cel
from memlineage.policy._request import Operation, PolicyRequest

if TYPE_CHECKING:
    from cel import Program

logger = logging.getLogger(__name__)

__all__ = [
    "MEMORY_FIELDS",
    "REQUEST_FIELDS",
    "CompiledCondition",
    "PolicyContext",
    "check_cel",
    "compile_condition",
    "memory_fields",
    "request_fields",
]


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


#: ``memory.<field>`` / ``new.<field>`` accessors: (memory, ctx) -> CEL-convertible value.
MEMORY_FIELDS: dict[str, Callable[[Memory, PolicyContext], Any]] = {
    "id": lambda m, c: m.id,
    "content": lambda m, c: m.content,
    "kind": lambda m, c: m.kind.value,
    "status": lambda m, c: m.status.value,
    "tags": lambda m, c: list(m.tags),
    "source_kind": lambda m, c: m.lineage.source_kind.value,
    "source_name": lambda m, c: m.lineage.source_name,
    "source": lambda m, c: str(m.lineage.source),
    "confidence": lambda m, c: m.lineage.confidence,
    "trust": lambda m, c: m.lineage.trust,
    "value": lambda m, c: m.value,
    "created_at": lambda m, c: m.created_at.timestamp(),
    "recorded_at": lambda m, c: m.recorded_at.timestamp(),
    "valid_from": lambda m, c: _epoch(m.valid_from),
    "valid_to": lambda m, c: _epoch(m.valid_to),
    "expires_at": lambda m, c: _epoch(m.expires_at),
    "last_used_at": lambda m, c: _epoch(m.last_used_at),
    "age": lambda m, c: c.now_epoch - m.created_at.timestamp(),
    "expired": lambda m, c: m.expires_at is not None and m.expires_at.timestamp() <= c.now_epoch,
    "slot": lambda m, c: m.slot,
    "version": lambda m, c: m.version,
    "supersedes": lambda m, c: m.supersedes,
    "use_count": lambda m, c: m.use_count,
    "metadata": lambda m, c: m.metadata,
    "derived_from": lambda m, c: list(m.lineage.derived_from),
    "user_id": lambda m, c: m.scope.user_id,
    "agent_id": lambda m, c: m.scope.agent_id,
    "session_id": lambda m, c: m.scope.session_id,
    "suspect": lambda m, c: c.is_suspect(m),
    "invalid_premises": lambda m, c: list(c.invalid_premises(m)),
}

#: ``request.<field>`` accessors.
REQUEST_FIELDS: dict[str, Callable[[PolicyRequest], Any]] = {
    "operation": lambda r: r.operation.value,
    "purpose": lambda r: r.purpose,
    "user_id": lambda r: r.scope.user_id,
    "agent_id": lambda r: r.scope.agent_id,
    "session_id": lambda r: r.scope.session_id,
    "source_kind": lambda r: None if r.source is None else r.source.kind.value,
    "source_name": lambda r: None if r.source is None else r.source.name,
    "source": lambda r: None if r.source is None else str(r.source),
    "query": lambda r: r.query,
    "budget": lambda r: r.budget,
    "promote": lambda r: r.promote,
    "admin": lambda r: r.admin is not None,
    "attributes": lambda r: r.attributes,
}

_SAMPLE_MEMORY: dict[str, Any] = {
    "id": "m",
    "content": "c",
    "kind": "semantic",
    "status": "active",
    "tags": ["t"],
    "source_kind": "user",
    "source_name": "n",
    "source": "user:n",
    "confidence": 1.0,
    "trust": 1.0,
    "value": 0.5,
    "created_at": 1.0,
    "recorded_at": 1.0,
    "valid_from": 1.0,
    "valid_to": 2.0,
    "expires_at": 2.0,
    "last_used_at": 1.0,
    "age": 1.0,
    "expired": False,
    "slot": "s",
    "version": 1,
    "supersedes": "p",
    "use_count": 0,
    "metadata": {},
    "derived_from": ["p"],
    "user_id": "u",
    "agent_id": "a",
    "session_id": "s",
    "suspect": False,
    "invalid_premises": [],
}
_SAMPLE_REQUEST: dict[str, Any] = {
    "operation": "read",
    "purpose": "decision",
    "user_id": "u",
    "agent_id": "a",
    "session_id": "s",
    "source_kind": "user",
    "source_name": "n",
    "source": "user:n",
    "query": "q",
    "budget": 1.0,
    "promote": False,
    "admin": False,
    "attributes": {},
}
assert set(_SAMPLE_MEMORY) == set(MEMORY_FIELDS) and set(_SAMPLE_REQUEST) == set(REQUEST_FIELDS)

_REF_RE = re.compile(r"(?<![\w.])(memory|new|request)\s*\.\s*([A-Za-z_]\w*)")
_MACRO_VAR_RE = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,")
_STRING_RE = re.compile(r"'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"", re.S)
_VARIABLES = frozenset({"memory", "new", "request", "now"})


#: Longest CEL condition accepted, in characters (bounds parse, load-time dry run and per-memory evaluation).
MAX_CONDITION_CHARS = 1000
#: Deepest nesting of brackets accepted in a CEL condition.
MAX_CONDITION_NESTING = 24
_MACRO_CALL_RE = re.compile(r"\.\s*(all|exists|exists_one|map|filter)\s*\(")
#: Macros whose cost grows with the square of the list (this CEL build copies the result list on every step).
_QUADRATIC_MACROS = frozenset({"map", "filter"})
_OPEN, _CLOSE = "([{", ")]}"


def check_cost(source: str) -> None:
    """Reject a CEL condition whose evaluation cost is not bounded (the CEL binding offers no cost limit).

    Rules, so that one evaluation costs at most about ``len(source)`` steps per element of the longest list it
    walks (lists in memories are bounded by the write limits): at most :data:`MAX_CONDITION_CHARS` characters
    and :data:`MAX_CONDITION_NESTING` levels of brackets; comprehensions (``all``, ``exists``, ``exists_one``)
    never nested inside one another; no ``map`` / ``filter``, which are quadratic here (measured: ``map`` over
    30,000 items takes 34 s; ``exists`` 14 ms) — ``exists`` / ``all`` / ``size`` express the same conditions.

    Raises:
        ValueError: naming the rule broken (wrapped into ``PolicyLoadError`` by callers).
    """
    if len(source) > MAX_CONDITION_CHARS:
        msg = f"condition is {len(source)} characters long; the limit is {MAX_CONDITION_CHARS}"
        raise ValueError(msg)
    code = _STRING_RE.sub('""', source)
    depth = deepest = 0
    closes: dict[int, int] = {}
    stack: list[int] = []
    for i, ch in enumerate(code):
        if ch in _OPEN:
            stack.append(i)
            depth += 1
            deepest = max(deepest, depth)
        elif ch in _CLOSE and stack:
            closes[stack.pop()] = i
            depth -= 1
    if deepest > MAX_CONDITION_NESTING:
        msg = f"condition nests brackets {deepest} deep; the limit is {MAX_CONDITION_NESTING}"
        raise ValueError(msg)
    spans: list[tuple[int, int]] = []
    for m in _MACRO_CALL_RE.finditer(code):
        if m.group(1) in _QUADRATIC_MACROS:
            msg = f"{m.group(1)}() is not allowed in conditions (its cost is quadratic); use exists(), all() or size()"
            raise ValueError(msg)
        start = m.end() - 1
        end = closes.get(start, len(code))
        if any(a < start < b for a, b in spans):
            msg = "comprehensions (all/exists/exists_one) cannot be nested: the cost would multiply"
            raise ValueError(msg)
        spans.append((start, end))


@functools.lru_cache(maxsize=1024)
def _compile_cel(source: str) -> Program:
    return cel.compile(source)


def check_cel(source: str) -> Program:
    """Compile a CEL condition and check what it references; return the program.

    Checks: cost bounds (:func:`check_cost`); syntax; top-level variables are ``memory``, ``new``, ``request``,
    ``now`` (or comprehension variables); every ``memory.x`` / ``new.x`` / ``request.x`` is a known field; a dry
    run on sample values evaluates to a bool without a type error.

    Raises:
        ValueError: with a message naming the problem (wrapped into ``PolicyLoadError`` by callers).
    """
    check_cost(source)
    try:
        program = _compile_cel(source)
    except Exception as exc:  # the binding raises ValueError for parse errors
        msg = f"invalid CEL expression: {str(exc).splitlines()[0]}"
        raise ValueError(msg) from None
    code = _STRING_RE.sub('""', source)
    macro_vars = set(_MACRO_VAR_RE.findall(code))
    unknown_vars = set(program.variables()) - _VARIABLES - macro_vars
    if unknown_vars:
        msg = f"unknown variable(s) {sorted(unknown_vars)}; use memory, new, request or now"
        raise ValueError(msg)
    for var, name in _REF_RE.findall(code):
        known = REQUEST_FIELDS if var == "request" else MEMORY_FIELDS
        if name not in known:
            msg = f"unknown field {var}.{name}; known {var} fields: {', '.join(sorted(known))}"
            raise ValueError(msg)
    try:
        result = program.execute(
            {"memory": _SAMPLE_MEMORY, "new": _SAMPLE_MEMORY, "request": _SAMPLE_REQUEST, "now": 2.0}
        )
    except (KeyError, IndexError):
        return program  # e.g. memory.metadata.price on the empty sample metadata: fine at load time
    except Exception as exc:
        msg = f"CEL type error: {str(exc).splitlines()[0]}"
        raise ValueError(msg) from None
    if not isinstance(result, bool):
        msg = f"condition must evaluate to a bool, got {type(result).__name__} ({result!r})"
        raise ValueError(msg)
    return program


@dataclass(frozen=True)
class CompiledCondition:
    """A condition ready to run: a CEL program, a Python callable or nothing (always true).

    Attributes:
        kind: ``"always"``, ``"cel"``, ``"callable"`` or ``"batch"``.
        source: The CEL source, or the callable's qualified name.
        program: The compiled CEL program (``kind == "cel"``).
        func: The callable (``callable`` / ``batch``).
        memory_fields: ``memory.*`` fields a CEL condition reads.
        new_fields: ``new.*`` fields a CEL condition reads.
        request_fields: ``request.*`` fields a CEL condition reads.
        inputs: Field paths recorded in decisions, e.g. ``("memory.confidence",)``.
        flat_program: The same condition with ``memory.x`` / ``new.x`` / ``request.x`` rewritten to flat
            variables (``_m_x``, ``_n_x``, ``_r_x``), or None when the condition uses a whole object.
            Converting a
            few scalars into a CEL context is several times cheaper than converting one map, so the engine
            uses
            this form whenever it exists.
        python: ``(single, batch)`` Python functions for conditions in the simple subset (see
            :func:`compile_python`), evaluated over the whole batch; None otherwise.
    """

    kind: str
    source: str | None = None
    program: Program | None = None
    func: Callable[..., Any] | None = None
    memory_fields: frozenset[str] = frozenset()
    new_fields: frozenset[str] = frozenset()
    request_fields: frozenset[str] = frozenset()
    inputs: tuple[str, ...] = ()
    flat_program: Program | None = None
    python: tuple[Callable[..., Any], Callable[..., Any]] | None = None


def compile_condition(
    condition: str | Callable[..., Any] | None, *, batch: bool = False, inputs: Sequence[str] = ()
) -> CompiledCondition:
    """Compile a policy condition once.

    Args:
        condition: CEL source, a callable or None.
        batch: The callable takes ``(memories, ctx)`` and returns one bool per memory.
        inputs: Field paths to record in decisions; inferred from CEL sources when empty.

    Raises:
        ValueError: invalid CEL (see :func:`check_cel`).
    """
    if condition is None:
        return CompiledCondition(kind="always", inputs=tuple(inputs))
    if callable(condition):
        name = getattr(condition, "__qualname__", None) or type(condition).__name__
        return CompiledCondition(
            kind="batch" if batch else "callable", source=name, func=condition, inputs=tuple(inputs)
        )
    program = check_cel(condition)
    refs = _REF_RE.findall(_STRING_RE.sub('""', condition))
    mem = frozenset(n for v, n in refs if v == "memory")
    new = frozenset(n for v, n in refs if v == "new")
    req = frozenset(n for v, n in refs if v == "request")
    inferred = tuple(dict.fromkeys(f"{v}.{n}" for v, n in refs))
    return CompiledCondition(
        kind="cel",
        source=condition,
        program=program,
        memory_fields=mem,
        new_fields=new,
        request_fields=req,
        inputs=tuple(inputs) or inferred,
        flat_program=_flatten(condition),
        python=compile_python(condition),
    )


FLAT_PREFIX = {"memory": "_m_", "new": "_n_", "request": "_r_"}


def _flatten(source: str) -> Program | None:
    """Compile ``source`` with ``memory.x`` → ``_m_x`` (etc.) outside string literals; None if impossible."""
    parts: list[str] = []
    pos = 0
    for match in _STRING_RE.finditer(source):
        parts.append(_REF_RE.sub(lambda m: FLAT_PREFIX[m.group(1)] + m.group(2), source[pos : match.start()]))
        parts.append(match.group(0))
        pos = match.end()
    parts.append(_REF_RE.sub(lambda m: FLAT_PREFIX[m.group(1)] + m.group(2), source[pos:]))
    flat = "".join(parts)
    try:
        program = _compile_cel(flat)
    except Exception:
        return None
    if set(program.variables()) & {"memory", "new", "request"}:
        return None  # a whole object is used (e.g. passed to a macro): keep the map form
    return program


@dataclass
class PolicyContext:
    """What a condition sees besides the memory: the request, the time and lineage lookups.

    Python callable conditions receive it as their second argument.

    Attributes:
        request: The :class:`PolicyRequest`.
        operation: The operation being decided.
        now: Evaluation time (UTC).
        new: The incoming memory of a write or update, else None.
        premise_status: Optional lookup ``ids -> {id: Status}`` used for ``suspect`` / ``invalid_premises``.
    """

    request: PolicyRequest
    operation: Operation
    now: datetime
    new: Memory | None = None
    premise_status: Callable[[Sequence[str]], Mapping[str, Status]] | None = None
    now_epoch: float = field(init=False)
    _statuses: dict[str, Status] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.now_epoch = self.now.timestamp()

    def prefetch(self, memories: Sequence[Memory]) -> None:
        """Look up the statuses of all premises of ``memories`` in one call (if a lookup was given)."""
        if self.premise_status is None:
            return
        wanted = {p for m in memories for p in m.lineage.derived_from if p not in self._statuses}
        if wanted:
            found = self.premise_status(sorted(wanted))
            self._statuses.update({k: Status(v) for k, v in found.items()})

    def invalid_premises(self, memory: Memory) -> tuple[str, ...]:
        """Ids of direct premises that are superseded, retracted, expired or erased."""
        if not memory.lineage.derived_from or self.premise_status is None:
            return ()
        missing = [p for p in memory.lineage.derived_from if p not in self._statuses]
        if missing:
            self.prefetch([memory])
        return tuple(p for p in memory.lineage.derived_from if self._statuses.get(p) in INVALIDATING_STATUSES)

    def is_suspect(self, memory: Memory) -> bool:
        """``suspect`` status, or an invalid direct premise (when a lookup is available)."""
        return memory.status is Status.SUSPECT or bool(self.invalid_premises(memory))


def memory_fields(memory: Memory, ctx: PolicyContext, names: frozenset[str] | Sequence[str]) -> dict[str, Any]:
    """Extract the named ``memory.*`` fields of ``memory`` as CEL-ready values."""
    return {name: MEMORY_FIELDS[name](memory, ctx) for name in names}


def request_fields(request: PolicyRequest, names: frozenset[str] | Sequence[str]) -> dict[str, Any]:
    """Extract the named ``request.*`` fields as CEL-ready values."""
    return {name: REQUEST_FIELDS[name](request) for name in names}


# ----------------------------------------------------------------------------------------------------------
# Vectorised fast path: the simple CEL subset most policies use, evaluated over a whole batch in Python.
# ----------------------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<str>"(?:[^"\\\n])*"|'(?:[^'\\\n])*')
      | (?P<num>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+|\d+)(?![\w.])
      | (?P<op>&&|\|\||==|!=|<=|>=|<|>|!|\+|-|\*|\(|\)|\[|\]|,)
      | (?P<name>[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)
    )""",
    re.X,
)
_VAR_NAMES = {"memory": "m", "new": "n", "request": "r"}
_SIMPLE_NAMES = {"true": "True", "false": "False", "null": "None", "now": "now", "in": "in"}
_ALLOWED_NODES = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.Compare, ast.Lt, ast.LtE,
    ast.Gt, ast.GtE, ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Name,
    ast.Load, ast.Constant, ast.List, ast.Subscript, ast.Call,
)  # fmt: skip


def _cel_eq(a: object, b: object) -> bool:
    """CEL equality: a bool only equals a bool (Python's ``True == 1`` is not CEL's)."""
    if isinstance(a, bool) is not isinstance(b, bool):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_cel_eq(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _orderable(a: object, b: object) -> tuple[int | float | str, int | float | str]:
    """The operands of a CEL ordering: two bools, two numbers (int or double) or two strings, else a TypeError."""
    if isinstance(a, bool) or isinstance(b, bool):
        if isinstance(a, bool) and isinstance(b, bool):
            return a, b
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a, b
    elif isinstance(a, str) and isinstance(b, str):
        return a, b
    raise TypeError("no such overload")


def _lt(a: object, b: object) -> bool:
    return bool(operator.lt(*_orderable(a, b)))


def _le(a: object, b: object) -> bool:
    return bool(operator.le(*_orderable(a, b)))


def _gt(a: object, b: object) -> bool:
    return bool(operator.gt(*_orderable(a, b)))


def _ge(a: object, b: object) -> bool:
    return bool(operator.ge(*_orderable(a, b)))


def _in(a: object, b: object) -> bool:
    if isinstance(b, list):
        return any(_cel_eq(a, x) for x in b)
    if isinstance(b, dict):
        return a in b
    raise TypeError("no such overload")


def _same_arith(a: object, b: object, kinds: tuple[type, ...]) -> None:
    if isinstance(a, bool) or isinstance(b, bool) or type(a) is not type(b) or not isinstance(a, kinds):
        raise TypeError("no such overload")  # CEL never mixes int and double, nor bools, in arithmetic


def _add(a: object, b: object) -> object:
    _same_arith(a, b, (int, float, str, list))
    return operator.add(a, b)


def _sub(a: object, b: object) -> object:
    _same_arith(a, b, (int, float))
    return operator.sub(a, b)


def _mul(a: object, b: object) -> object:
    _same_arith(a, b, (int, float))
    return operator.mul(a, b)


def _neg(a: object) -> int | float:
    if isinstance(a, bool) or not isinstance(a, (int, float)):
        raise TypeError("no such overload")
    return -a


def _b(a: object) -> bool:
    if not isinstance(a, bool):
        raise TypeError("no such overload: logical operator on a non-bool")
    return a


_HELPERS: dict[str, Any] = {
    "_cel_eq": _cel_eq, "_lt": _lt, "_le": _le, "_gt": _gt, "_ge": _ge, "_in": _in, "_add": _add,
    "_sub": _sub, "_mul": _mul, "_neg": _neg, "_b": _b,
}  # fmt: skip
_CMP = {ast.Eq: "_cel_eq", ast.NotEq: "_cel_eq", ast.Lt: "_lt", ast.LtE: "_le", ast.Gt: "_gt", ast.GtE: "_ge",
        ast.In: "_in", ast.NotIn: "_in"}  # fmt: skip
_ARITH = {ast.Add: "_add", ast.Sub: "_sub", ast.Mult: "_mul"}


def _call(name: str, *args: ast.expr) -> ast.expr:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


def _is_bool_expr(node: ast.AST) -> bool:
    return (
        isinstance(node, (ast.Call, ast.BoolOp))
        or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not))
        or (isinstance(node, ast.Constant) and isinstance(node.value, bool))
    )


class _CelSemantics(ast.NodeTransformer):
    """Rewrite operators into helpers with CEL's typing rules (errors where CEL has no overload)."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) != 1:
            raise ValueError("chained comparison")
        op = node.ops[0]
        call = _call(_CMP[type(op)], node.left, node.comparators[0])
        if isinstance(op, (ast.NotEq, ast.NotIn)):
            call = ast.UnaryOp(op=ast.Not(), operand=call)
        return ast.copy_location(call, node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(_call(_ARITH[type(node.op)], node.left, node.right), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.USub):
            return ast.copy_location(_call("_neg", node.operand), node)
        if not _is_bool_expr(node.operand):
            node.operand = _call("_b", node.operand)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        node.values = [v if _is_bool_expr(v) else _call("_b", v) for v in node.values]
        return node


def _translate(source: str) -> str | None:
    out: list[str] = []
    pos = 0
    code = source.strip()
    while pos < len(code):
        match = _TOKEN_RE.match(code, pos)
        if match is None or match.end() == pos:
            return None
        pos = match.end()
        if match.group("str") is not None:
            out.append(match.group("str"))
        elif match.group("num") is not None:
            out.append(match.group("num"))
        elif match.group("op") is not None:
            out.append({"&&": " and ", "||": " or ", "!": " not "}.get(match.group("op"), match.group("op")))
        else:
            parts = [p.strip() for p in match.group("name").split(".")]
            head = parts[0]
            if head in _VAR_NAMES and len(parts) >= 2:
                out.append(_VAR_NAMES[head] + "".join(f"[{p!r}]" for p in parts[1:]))
            elif head in _SIMPLE_NAMES and len(parts) == 1:
                out.append(f" {_SIMPLE_NAMES[head]} ")
            else:
                return None  # functions, macros, whole objects, unknown names: CEL only
    return "".join(out)


def compile_python(source: str) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """Compile a simple CEL condition to Python: ``(single, batch)`` or None when outside the subset.

    The subset: field selections on ``memory`` / ``new`` / ``request``, ``now``, number / string / bool / null
    literals, list literals, ``&& || !``, comparisons, ``in``, ``+ - *`` and parentheses.
    ``single(m, r, n, now)``
    evaluates one memory's fields; ``batch(ms, r, n, now)`` a list of them (a list comprehension: no per-item
    call). Operators go through helpers with CEL's typing (no bool/number mixing, no int/double arithmetic,
    logical operators on bools only), and callers fall back to the CEL program whenever the Python form
    raises, so CEL decides every error case.
    """
    text = _translate(source)
    if text is None:
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            return None
        if isinstance(node, ast.Call):
            return None  # no calls in the source (the helper calls are added below)
        if isinstance(node, ast.Name) and node.id not in {"m", "n", "r", "now", "True", "False", "None"}:
            return None
        if isinstance(node, ast.Subscript) and not (
            isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
        ):
            return None
    try:
        body = _CelSemantics().visit(tree).body
    except (ValueError, KeyError):
        return None
    single = ast.Expression(
        body=ast.Lambda(
            args=ast.arguments(
                posonlyargs=[], args=[ast.arg(arg=a) for a in ("m", "r", "n", "now")], kwonlyargs=[],
                kw_defaults=[], defaults=[],
            ),
            body=body,
        )
    )  # fmt: skip
    batch = ast.Expression(
        body=ast.Lambda(
            args=ast.arguments(
                posonlyargs=[], args=[ast.arg(arg=a) for a in ("ms", "r", "n", "now")], kwonlyargs=[],
                kw_defaults=[], defaults=[],
            ),
            body=ast.ListComp(
                elt=body,
                generators=[
                    ast.comprehension(
                        target=ast.Name(id="m", ctx=ast.Store()),
                        iter=ast.Name(id="ms", ctx=ast.Load()),
                        ifs=[],
                        is_async=0,
                    )
                ],
            ),
        )
    )  # fmt: skip
    namespace: dict[str, Any] = {"__builtins__": {}, **_HELPERS}
    try:
        single_fn = eval(compile(ast.fix_missing_locations(single), "<cel-fast>", "eval"), namespace)  # noqa: S307
        batch_fn = eval(compile(ast.fix_missing_locations(batch), "<cel-fast>", "eval"), namespace)  # noqa: S307
    except (SyntaxError, ValueError, TypeError):
        return None
    return single_fn, batch_fn
