"""The indexes derived from a store's collection, behind one contract.

A store keeps indexes beside its Chroma collection whose rows the collection's records determine:
the unit index (:mod:`hseg.store.unit_index`, a companion collection of fused vectors) and the
lexical index (:mod:`hseg.store.lexical`, BM25 rows in SQLite, maintained by writers or cached per
reader). Each implements :class:`DerivedIndex` (write in the bracket, forget, what is held,
rebuild, drop, state), and the store's writes (:mod:`hseg.store.documents`) and upkeep
(:mod:`hseg.store.maintenance`) loop over :class:`Indexes` instead of naming them. A new kind of
index (a server's native sparse index, say) is one class implementing the contract.
"""

from hseg.store.indexes.contract import DerivedIndex
from hseg.store.indexes.ordered import Indexes

__all__ = ["DerivedIndex", "Indexes"]
