"""Opt-in settings read from ``MEMLINEAGE_*`` environment variables (only by ``MemoryManager.from_settings``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["MemLineageSettings"]


class MemLineageSettings(BaseSettings):
    """Deployment settings; every field maps to ``MEMLINEAGE_<FIELD>``.

    Example:
        ``MEMLINEAGE_LEDGER_URL=postgresql+psycopg://app@db/mem MEMLINEAGE_CHROMA_HOST=chroma`` selects server mode.
    """

    model_config = SettingsConfigDict(env_prefix="MEMLINEAGE_", extra="ignore")

    home: Path | None = Field(default=None, description="Embedded store directory (default ./.memlineage).")
    ledger_url: str | None = Field(default=None, description="SQLAlchemy URL; default SQLite in `home`.")
    ledger_schema: str | None = Field(
        default=None, description="PostgreSQL schema holding the ledger's tables; default the URL's search path."
    )
    chroma_host: str | None = Field(default=None, description="Chroma server host; unset = embedded Chroma.")
    chroma_port: int = Field(default=8000, description="Chroma server port.")
    collection: str | None = Field(
        default=None,
        description="Chroma collection; default 'memlineage' embedded, else one derived from the ledger (server).",
    )
    embedding_model_dir: Path | None = Field(
        default=None, description="Directory with all-MiniLM-L6-v2's ONNX files (offline use)."
    )
