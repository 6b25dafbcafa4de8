"""A chunker built only when a document needs chunking: a re-run of ``hseg index`` that finds every
document unchanged builds none, so it loads no model and imports no torch (building the default
chunker loads the BiLSTM segmenter, seconds to tens of seconds, to compute the settings fingerprint).

The fingerprint (:func:`hseg.ingest.fingerprint.chunk_settings`) decides which documents are unchanged,
so it must be known first. A store remembers the fingerprint of the last chunker built for it under the
:func:`~hseg.ingest.fingerprint.settings_key` of its settings (:mod:`hseg.store.remembered`); a run
with the same key uses it, and builds the chunker only for a document that needs chunking.

Example:
    >>> lazy = LazyChunker(lambda: HierarchicalChunker(config), key, remembered)  # doctest: +SKIP
    >>> chunk_settings(lazy) == remembered, lazy.built  # doctest: +SKIP
    (True, False)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from hseg.ingest.fingerprint import chunk_settings

logger = logging.getLogger(__name__)


class LazyChunker:
    """``build()`` makes the chunker on first use; ``key`` is the settings key of what it will build
    and ``remembered`` the fingerprint a store holds for that key (either may be ``None``)."""

    def __init__(self, build: Callable[[], Any], key: str | None = None, remembered: str | None = None) -> None:
        self._build = build
        self.key = key
        self.remembered = remembered if key is not None else None
        self._chunker: Any = None

    @property
    def built(self) -> bool:
        return self._chunker is not None

    @property
    def chunker(self) -> Any:
        """The chunker (built now if it is not yet); a fingerprint other than the remembered one is logged."""
        if self._chunker is None:
            self._chunker = self._build()
            if self.remembered is not None and chunk_settings(self._chunker) != self.remembered:
                logger.warning("the chunker's settings fingerprint differs from the one the store remembers for "
                               "the same settings key (hseg changed without a new version?): the store remembers the "
                               "new one, and the next run chunks again the documents stored with the old")
                self.remembered = None
        return self._chunker

    def fingerprint(self) -> str:
        """The settings fingerprint: the remembered one while nothing is built, else the chunker's."""
        if self._chunker is None and self.remembered is not None:
            return self.remembered
        return chunk_settings(self.chunker)

    def chunk_many(self, texts: Sequence[str], doc_ids: Sequence[str | None] | None = None, **kwargs: Any) -> Any:
        return self.chunker.chunk_many(texts, doc_ids, **kwargs)

    def __getattr__(self, name: str) -> Any:  # config, encoder, segmenter, ...: the built chunker's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.chunker, name)
