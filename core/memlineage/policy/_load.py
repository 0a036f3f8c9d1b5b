"""Loading policies from YAML / JSON files and plain data, with errors naming file, policy and field.

File format (YAML shown; JSON is the same structure)::

    version: 1
    layer: domain              # optional default layer for the entries below
    policies:
      - id: flight_price_freshness
        description: flight prices older than an hour are stale
        operations: [read]
        target: {tags: [flight_price]}
        condition: "memory.age > 3600.0"
        effect: require_refresh
        refresh: flight_price
        cost: 1.0
        priority: 60

A bare list of policies is accepted too. Scope isolation cannot be configured from a file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from memlineage.errors import PolicyLoadError
from memlineage.policy._model import LOAD_SOURCE, Policy

__all__ = ["load_policies", "load_policy_file"]

_TOP_LEVEL = frozenset({"version", "layer", "policies"})
_SCOPE_KEYS = frozenset({"scope_isolation", "disable_scope_isolation", "cross_scope"})


def load_policy_file(path: str | os.PathLike[str]) -> list[Policy]:
    """Read a ``.yaml`` / ``.yml`` / ``.json`` policy file.

    Raises:
        PolicyLoadError: unreadable file, parse error (with line and column), unknown field, bad expression,
            duplicate id. The message starts with the file path and names the policy and field.
    """
    p = Path(path)
    source = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"{source}: cannot read policy file: {exc.strerror or exc}"
        raise PolicyLoadError(msg) from exc
    except UnicodeDecodeError as exc:
        msg = f"{source}: not UTF-8 text (byte {exc.start}); save the policy file as UTF-8"
        raise PolicyLoadError(msg) from exc
    suffix = p.suffix.lower()
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            msg = f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            raise PolicyLoadError(msg) from exc
    elif suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            msg = f"{source}: invalid YAML{where}: {problem}"
            raise PolicyLoadError(msg) from exc
    else:
        msg = f"{source}: unknown policy file type {suffix!r}; use .yaml, .yml or .json"
        raise PolicyLoadError(msg)
    return load_policies(data, source=source)


def load_policies(data: object, *, source: str = "<data>") -> list[Policy]:
    """Validate policies given as data: a list of mappings, or a mapping with a ``policies`` list.

    Args:
        data: Parsed YAML/JSON content.
        source: Where it came from, used in error messages (a file path, or ``"<data>"``).

    Raises:
        PolicyLoadError: naming ``source``, the policy (id and entry number) and the field.

    Example:
        >>> [p.id for p in load_policies([{"id": "p1", "effect": "deny"}])]
        ['p1']
    """
    default_layer = None
    if data is None:
        return []
    if isinstance(data, Mapping):
        scope_keys = set(data) & _SCOPE_KEYS
        if scope_keys:
            msg = (
                f"{source}: field {sorted(scope_keys)[0]!r}: scope isolation is always on and cannot be "
                "changed by a policy file; use the audited admin call for cross-scope access"
            )
            raise PolicyLoadError(msg)
        unknown = set(data) - _TOP_LEVEL
        if unknown:
            msg = f"{source}: unknown top-level field(s) {sorted(unknown)}; allowed: {sorted(_TOP_LEVEL)}"
            raise PolicyLoadError(msg)
        if data.get("version", 1) != 1:
            msg = f"{source}: field 'version': unsupported policy file version {data['version']!r}; use 1"
            raise PolicyLoadError(msg)
        default_layer = data.get("layer")
        entries = data.get("policies", [])
    else:
        entries = data
    if not isinstance(entries, list):
        msg = f"{source}: field 'policies' must be a list of policies, got {type(entries).__name__}"
        raise PolicyLoadError(msg)
    policies: list[Policy] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            msg = f"{source}: policy entry #{index} must be a mapping, got {type(entry).__name__}"
            raise PolicyLoadError(msg)
        bad_keys = [k for k in entry if not isinstance(k, str)]
        if bad_keys:
            msg = f"{source}: policy entry #{index}: field names must be strings, got {bad_keys[0]!r}"
            raise PolicyLoadError(msg)
        item = dict(entry)
        if default_layer is not None:
            item.setdefault("layer", default_layer)
        policy_id = item.get("id")
        if isinstance(item.get("condition"), Mapping):
            msg = (
                f"{source}: policy {policy_id!r} (entry #{index}): field 'condition': write the condition "
                'as a CEL expression string, e.g. "memory.age > 3600.0"'
            )
            raise PolicyLoadError(msg)
        token = LOAD_SOURCE.set((source, index))
        try:
            policy = Policy(**item)
        finally:
            LOAD_SOURCE.reset(token)
        if policy.id in seen:
            msg = f"{source}: policy {policy.id!r} (entry #{index}): field 'id': duplicate of entry #{seen[policy.id]}"
            raise PolicyLoadError(msg)
        seen[policy.id] = index
        policies.append(policy)
    return policies
