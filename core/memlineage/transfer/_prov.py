"""Export as a W3C PROV-JSON bundle, rendered by :meth:`memlineage.lineage.Explanation.to_prov_json`."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memlineage._version import __version__
from memlineage.errors import StorageError
from memlineage.ledger import HEAD, Ledger, row_to_memory
from memlineage.ledger import _tables_io as t
from memlineage.lineage import Explanation
from memlineage.services._rows import row_activity
from memlineage.transfer._jsonl import FORMAT, ExportSummary, ProgressCallback, _atomic_target

__all__ = ["export_prov"]

#: PROV-JSON namespaces of the bundle.
_PREFIX = {"ml": "https://memlineage.dev/ns#", "prov": "http://www.w3.org/ns/prov#"}

#: The ledger tables a bundle draws on (its events are only counted).
memories, activities, edges, events = (
    t.table_named(n) for n in ("ml_memories", "ml_activities", "ml_edges", "ml_events")
)


def export_prov(
    ledger: Ledger, path: Path, *, user_id: str | None, on_progress: ProgressCallback | None
) -> ExportSummary:
    """Write the ledger (or one user's part) as one PROV-JSON bundle; see :func:`memlineage.transfer.export_store`.

    The bundle holds every memory version as an entity (content, status, scope, trust, hash...), every activity,
    the source agents and every lineage edge (wasDerivedFrom with its support group and attribution,
    wasRevisionOf, wasGeneratedBy, wasInvalidatedBy, used, wasInformedBy). It is for other PROV tools: vectors
    and the event log are not in it, and :func:`import_store` reads JSON Lines only.
    """
    path = _atomic_target(path)
    users = [user_id] if user_id is not None else None
    digests: dict[str, t.TableDigest] = {}
    with t.snapshot(ledger) as conn:
        chosen = (memories, activities, edges)
        total = sum(t.count_rows(conn, tb, users) for tb in chosen)
        if on_progress is not None:
            on_progress(0, total)
        rows: dict[str, list[dict[str, Any]]] = {}
        for table in chosen:
            digest = digests[table.name] = t.TableDigest()
            rows[table.name] = []
            for row in t.rows_of(conn, table, users):
                rows[table.name].append(row)
                digest.add(t.encode_line(table, row)[1])
        n_events = t.count_rows(conn, events, users)
    mems = [row_to_memory(r) for r in rows[memories.name]]
    acts = [row_activity(r) for r in rows[activities.name]]
    edge_rows = rows[edges.name]
    bundle: dict[str, Any] = {}
    if mems:
        ex = Explanation(
            memory=mems[0],
            ancestors=mems[1:],
            edges=[(e["src"], e["relation"], e["dst"]) for e in edge_rows],
            activities=acts,
            attribution={(e["src"], e["dst"]): e["attribution"] for e in edge_rows if e["attribution"]},
        )
        bundle = ex.to_prov_json()
        bundle.pop("prefix", None)
        # the explanation's keys follow the edge list: add what a store knows beyond an explanation
        for n, e in enumerate(edge_rows):
            entry = bundle.get(e["relation"], {}).get(f"_:e{n}")
            if entry is not None:
                entry["ml:support"] = e["support"]
                if e["activity_id"]:
                    entry["ml:activity"] = f"ml:{e['activity_id']}"
        for r in rows[memories.name]:
            entity = bundle["entity"][f"ml:{r['id']}"]
            entity.update({f"ml:{k}": r[k] for k in ("user_id", "content_hash", "version") if r[k] is not None})
            entity.update({f"ml:{k}": r[k] for k in ("agent_id", "session_id", "slot", "supersedes") if r[k]})
    elif acts:
        bundle["activity"] = {f"ml:{a.id}": {"prov:type": a.kind} for a in acts}
    for r in rows[activities.name]:
        entry = bundle["activity"][f"ml:{r['id']}"]
        entry.update({f"ml:{k}": r[k] for k in ("user_id", "outcome", "parent_id", "run_id") if r[k]})
    bundle_id = f"ml:export-{uuid.uuid4().hex}"
    tables = {name: d.as_dict() for name, d in digests.items()}
    doc = {
        "prefix": _PREFIX,
        "entity": {
            bundle_id: {
                "prov:type": {"$": "prov:Bundle", "type": "prov:QUALIFIED_NAME"},
                "ml:format": FORMAT + "+prov",
                "ml:memlineageVersion": __version__,
                "ml:schemaRevision": HEAD,
                "ml:userId": user_id or "",
                "ml:exportedAt": datetime.now(timezone.utc).isoformat(),
                "ml:tables": json.dumps(tables, sort_keys=True),
                "ml:eventsNotIncluded": n_events,
            }
        },
        "bundle": {bundle_id: bundle},
    }
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(doc, out, ensure_ascii=False, indent=1)
                out.flush()
                os.fsync(out.fileno())
            Path(tmp).replace(path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        msg = f"cannot write the export to {str(path)!r}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    if on_progress is not None:
        on_progress(total, total)
    return ExportSummary(
        path=str(path),
        format="prov",
        user_id=user_id,
        vectors=False,
        records=total,
        tables=tables,
    )
