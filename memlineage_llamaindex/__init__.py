"""LlamaIndex adapters for MemLineage."""

__all__: list[str] = []
