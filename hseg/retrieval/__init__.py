"""Retrieval, the paper's step 3 and the budget-aware unit: search settings, read plans, whole
parents, passages, the unit index's fused vectors, and how a hit becomes a framework result."""

#: no names of its own: a stage folder whose modules are imported by their own names
#: (users reach the search settings and hits from :mod:`hseg` and :mod:`hseg.store`)
__all__: list[str] = []
