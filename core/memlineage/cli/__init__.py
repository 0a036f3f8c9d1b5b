"""The ``memlineage`` command: a demo plus read-only views (recall, explain, audit, activities, stats) of a store.

Where the store is: ``--path`` / ``--ledger-url`` / ``--chroma-host`` first, then the environment
(``MEMLINEAGE_HOME``, ``MEMLINEAGE_LEDGER_URL``, ``MEMLINEAGE_CHROMA_HOST``/``_PORT``, ``MEMLINEAGE_COLLECTION``,
``MEMLINEAGE_LEDGER_SCHEMA``, ``MEMLINEAGE_EMBEDDING_MODEL_DIR``; see
:class:`~memlineage.settings.MemLineageSettings`), then ``./.memlineage``.
A store that does not exist is an error (exit code 2) unless ``--create`` is given: a typo never yields an empty
result.

Read-only mode (the default for every view): the embedded ledger (``ledger.db``) is copied with SQLite's online
backup API from a ``mode=ro`` connection, which gives a consistent point-in-time snapshot even while an application
holds the store and writes to it; the vector index is rebuilt in memory from the vectors stored in the ledger, so
Chroma's files are never opened. Nothing the command does (usage counts, expiry found by ``recall``) reaches the
store. With a server ledger (``--ledger-url``) the views read the live database: no usage counts are written, but
``recall`` still records the expiries that are due (as every reader does, with ``expired`` events); the index comes
from the Chroma server when ``--chroma-host`` is set, otherwise from the ledger's vectors.
``--live`` opens an embedded store as a writer instead (it takes the writer lock, so it fails while an
application holds the store).

The commands live in one private module per group (``_setup``: demo and migrate; ``_views``: the read-only views;
``_write``: the write-side commands; ``_servers``: mcp and serve; ``_transfer``: export, import and backup) and are
registered here, in the order ``memlineage --help`` lists them. ``_app`` holds the app, its consoles and shared
options; ``_store`` opens the store for a command.
"""

from __future__ import annotations

from memlineage.cli._app import ChromaOpt as ChromaOpt
from memlineage.cli._app import ChromaPortOpt as ChromaPortOpt
from memlineage.cli._app import CreateOpt as CreateOpt
from memlineage.cli._app import JsonOpt as JsonOpt
from memlineage.cli._app import LedgerOpt as LedgerOpt
from memlineage.cli._app import LiveOpt as LiveOpt
from memlineage.cli._app import PathOpt as PathOpt
from memlineage.cli._app import UserOpt as UserOpt
from memlineage.cli._app import app as app
from memlineage.cli._app import console as console
from memlineage.cli._app import err_console as err_console
from memlineage.cli._servers import mcp_command, serve
from memlineage.cli._setup import DEMO_GROUP as DEMO_GROUP
from memlineage.cli._setup import _demo_runner as _demo_runner
from memlineage.cli._setup import demo, migrate
from memlineage.cli._transfer import backup, export_store, import_store
from memlineage.cli._views import EXPLAIN_FORMATS as EXPLAIN_FORMATS
from memlineage.cli._views import activities, audit, explain, recall, stats
from memlineage.cli._views import audit_row as audit_row
from memlineage.cli._write import ReasonOpt as ReasonOpt
from memlineage.cli._write import YesOpt as YesOpt
from memlineage.cli._write import erase, reindex, revalidate, sweep, undo, verify

# The commands, in the order `memlineage --help` lists them.
app.command()(demo)
app.command()(migrate)
app.command()(recall)
app.command()(explain)
app.command()(audit)
app.command()(activities)
app.command()(stats)
app.command()(undo)
app.command()(revalidate)
app.command()(erase)
app.command()(verify)
app.command()(reindex)
app.command()(sweep)
app.command("mcp")(mcp_command)
app.command()(serve)
app.command("export")(export_store)
app.command("import")(import_store)
app.command()(backup)
