"""LangChain adapters for MemLineage."""

__all__: list[str] = []
