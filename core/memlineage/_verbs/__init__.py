"""The public verbs of :class:`~memlineage.MemoryManager`, grouped by path; each delegates to a service."""
