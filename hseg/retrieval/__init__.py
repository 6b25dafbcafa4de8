"""Retrieval, the paper's step 3 and the budget-aware unit: search settings, read plans, whole
parents, passages, the unit index's fused vectors, and how a hit becomes a framework result."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hseg.faces import lazy_names

if TYPE_CHECKING:  # the names of _HOME, for type checkers
    from hseg.retrieval.hits import SearchHit  # noqa: F401
    from hseg.retrieval.results import result_for  # noqa: F401
    from hseg.retrieval.settings import MODES, UNITS, SearchSettings  # noqa: F401

#: each public name and the module that holds it, imported on first use
#: (as in every stage face: importing one module of the package loads no other)
_HOME = {
    "SearchSettings": "hseg.retrieval.settings", "MODES": "hseg.retrieval.settings",
    "UNITS": "hseg.retrieval.settings", "SearchHit": "hseg.retrieval.hits", "result_for": "hseg.retrieval.results",
}

__all__ = list(_HOME)

__getattr__ = lazy_names(__name__, _HOME)
