"""Retrieval, the paper's step 3 and the budget-aware unit: search settings, read plans, whole
parents, passages, the unit index's fused vectors, and how a hit becomes a framework result."""
