"""``LineageRetriever``: a LangChain ``BaseRetriever`` over MemLineage recall."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from memlineage.construct import typed_construction
from memlineage.manager import MemoryManager
from memlineage.models import Scope
from pydantic import ConfigDict, Field, field_validator
from typing_extensions import override

from memlineage_langchain._convert import hit_to_document, optional_scope, require_scope, scope_from_mapping

__all__ = ["LineageRetriever"]

logger = logging.getLogger(__name__)


@typed_construction
class LineageRetriever(BaseRetriever):
    """Retrieve memories as ``Document``s, scoped to one user, with lineage in the metadata.

    Each document's ``id`` is the memory id; ``metadata`` holds ``score`` ([0, 1], higher = more relevant),
    ``source``, ``status``, ``trust``, ``lineage`` and ``flags``. The read records ``used`` edges from the
    retriever run (its LangChain ``run_id``) to every memory served.

    Setup:
        ``pip install "memlineage[langchain]"``.

    Instantiate:
        >>> from memlineage import Scope
        >>> from memlineage.testing import make_manager
        >>> mm = make_manager()
        >>> _ = mm.remember("Parrots can talk", scope="alice")
        >>> retriever = LineageRetriever(manager=mm, scope=Scope(user_id="alice"), k=3)

    Use:
        >>> [d.page_content for d in retriever.invoke("parrots")]
        ['Parrots can talk']

        Without a ``scope`` the run config's metadata must carry ``user_id``
        (``retriever.invoke(q, config={"metadata": {"user_id": "alice"}})``). ``k`` can be overridden per call:
        ``retriever.invoke(q, k=1)``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    manager: MemoryManager = Field(description="The memory manager to recall from.")
    scope: Scope | None = Field(
        default=None, description="Fixed scope (a Scope, a mapping or a user id string); None = from run metadata."
    )
    k: int = Field(default=4, ge=0, description="Number of documents returned.")
    kinds: list[str] | None = Field(default=None, description="Restrict to these memory kinds.")
    tags: list[str] | None = Field(default=None, description="Memories must carry all these tags.")
    include_suspect: bool = Field(default=False, description="Also return suspect memories (flagged).")

    _scope = field_validator("scope", mode="before")(optional_scope)

    @override
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None, **kwargs: Any
    ) -> list[Document]:
        scope = require_scope(self.scope or scope_from_mapping(run_manager.metadata), "LineageRetriever")
        result = self.manager.recall(
            query,
            scope=scope,
            k=self.k if k is None else k,
            kinds=self.kinds,
            tags=self.tags,
            include_suspect=self.include_suspect,
            activity_id=str(run_manager.run_id),
        )
        return [hit_to_document(h) for h in result]
