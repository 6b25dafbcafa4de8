"""What keeps a store whole between runs: the one object ``hseg index`` and ``hseg repair`` ask,
handed out by :attr:`hseg.store.HierarchicalStore.maintenance`.

How and why: docs/design.md, ``hseg.store.maintenance``.

Example:
    >>> answer = store.maintenance.incomplete({"a.md": Expected(sha, settings, len(text))})  # doctest: +SKIP
    >>> answer.doc_ids  # doctest: +SKIP
    ('a.md',)
    >>> store.add(chunker.chunk(text, doc_id="a.md"), stored=answer)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hseg.chunking.schema import DOC_ID_KEY
from hseg.errors import LexicalIndexStorageError, LexicalIndexUnavailable
from hseg.store.completeness import (
    documents_missing_vectors,
    is_complete,
    mixed_versions,
    segment_ids,
    tiled_length,
)
from hseg.store.connection import ServerErrors
from hseg.store.indexes import DerivedIndex
from hseg.store.paging import get_by_documents
from hseg.store.parts import StoreParts
from hseg.store.reads import Reads
from hseg.store.remembered import (
    remember_chunk_options,
    remember_fingerprint,
    remembered_chunk_options,
    remembered_fingerprint,
)

#: ``{doc id: {record id: metadata}}``
logger = logging.getLogger(__name__)

StoredRecords = dict[str, dict[str, dict[str, Any]]]


@dataclass(frozen=True)
class Expected:
    """How a document would be stored: the SHA-256 of its text (``content_sha256``), the settings
    fingerprint it would be chunked with (``chunk_settings``) and its text's length."""

    sha: str
    settings: str
    length: int


@dataclass(frozen=True)
class Incomplete:
    """The answer of :meth:`Maintenance.incomplete`: ``doc_ids``, the documents asked about that are not
    stored whole as expected, in the order asked; ``records``, what the collection held for every
    document asked about when it was read (``{doc id: {record id: metadata}}``, absent: none), which
    :meth:`~hseg.store.HierarchicalStore.add` takes instead of reading them again while the writer
    lock it was read under is still held (never on a server or an in-memory store, which hold none:
    there another writer may have written them since, and the add reads them again in their turns)."""

    doc_ids: tuple[str, ...]
    records: Mapping[str, Mapping[str, Mapping[str, Any]]]
    #: every document asked about
    asked: frozenset[str] = frozenset()
    #: the hold of the embedded store's writer lock it was read under (``None``: none held)
    turn: object | None = field(default=None, compare=False)

    def holds(self, doc_id: str) -> bool:
        """Whether the collection held records of ``doc_id`` when it was asked."""
        return bool(self.records.get(doc_id))


@dataclass(frozen=True)
class Remembered:
    """What a store tells ``hseg index`` before it writes: its records (``0``: a new or empty collection,
    which binds no encoder and remembers nothing), the encoder recorded, and the chunk options of the
    runs that wrote it."""

    records: int
    encoder: str | None
    chunk_options: dict[str, Any] | None


@dataclass(frozen=True)
class Repaired:
    """What :meth:`Maintenance.repair` did: the documents given unit-index or lexical rows from their
    records, the unit-index rows written, the documents that miss records or vectors (only their source
    gives them back) and those that hold two versions (``mixed``), of ``documents`` in the store."""

    repaired: list[str]
    rows: int
    lost: list[str]
    documents: int
    #: documents holding records of two versions of their text (:func:`hseg.store.completeness.mixed_versions`):
    #: only their source says which is current, and adding them again through hseg replaces the other
    mixed: list[str] = field(default_factory=list)


class Maintenance:
    """The upkeep of the store whose parts are ``parts`` (:attr:`hseg.store.HierarchicalStore.maintenance`):
    what is incomplete, the repair of what its records can give back, and what it remembers between
    ``hseg index`` runs. ``reads`` lists the store's documents; ``sync_unit_index(doc ids)`` is the
    store's door to its unit index (the writer lock, and the encoder check of the vectors it reads)."""

    def __init__(self, parts: StoreParts, reads: Reads, sync_unit_index: Callable[[Sequence[str]], int]) -> None:
        self._parts = parts
        self._reads = reads  # the documents and records the store holds
        self._sync_units = sync_unit_index  # the store's door to the unit index: writer lock, encoder check
        self._errors: ServerErrors = parts.backend.errors  # a lost server named in what fails

    # ----------------------------------------------------------------- what is incomplete

    def incomplete(self, expected: Mapping[str, Expected], *, force: bool = False) -> Incomplete:
        """The documents of ``expected`` not stored whole as their text and settings would store them:
        records missing, from another text or settings, or not tiling the text (a write cut short, or
        two versions left by a crash), a record or unit-index record without its vector (two processes
        that wrote an embedded store at once), unit-index or lexical rows out of step. Reads each kind
        once for all of them. ``force``: every document counts as incomplete, and only their records
        are read (for the write that replaces them).

        Example:
            >>> store.maintenance.incomplete({"a.md": Expected(sha, settings, 21)}).doc_ids  # doctest: +SKIP
            ()
        """
        turn = self._parts.backend.writer_turn()
        docs = list(expected)
        stored = self.records(docs) if docs else {}
        if force:
            return Incomplete(tuple(docs), stored, frozenset(docs), turn)
        shas = {d: e.sha for d, e in expected.items()}
        held = [h for _, h in self._held(docs, shas)] if docs else []
        complete = [d for d, e in expected.items()
                    if is_complete(stored.get(d, {}), e.sha, e.settings, e.length,
                                   held=[h.get(d, set()) for h in held])]
        # complete metadata is not enough: a record whose vector was lost is never found, so it is redone
        lost = self._missing_vectors({d: list(stored[d]) for d in complete}) if complete else set()
        whole = {d for d in complete if d not in lost}
        return Incomplete(tuple(d for d in docs if d not in whole), stored, frozenset(docs), turn)

    def records(self, doc_ids: Sequence[str]) -> StoredRecords:
        """``{doc id: {record id: metadata}}`` of what the collection holds for these documents
        (documents it does not hold are absent), read in one ``get`` per 500 documents.

        Example:
            >>> store.maintenance.records(["report"])["report"]  # doctest: +SKIP
            {'cluster-5d0c...': {'hseg_level': 'cluster', ...}, ...}
        """
        collection = self._parts.collection
        out: StoredRecords = {}
        with self._errors("reading the collection"):
            for got in get_by_documents(collection, doc_ids, ["metadatas"]):
                for rid, meta in zip(got["ids"], got["metadatas"]):
                    if meta:
                        out.setdefault(str(meta[DOC_ID_KEY]), {})[rid] = dict(meta)
        return out

    def _held(self, doc_ids: Sequence[str], shas: Mapping[str, str] | None = None
              ) -> list[tuple[DerivedIndex, dict[str, set[str]]]]:
        """``(index, {doc id: segment ids it holds})`` for each index writers keep
        (:meth:`hseg.store.indexes.DerivedIndex.held`; with ``shas``, only rows written from that text)."""
        with self._errors("reading the indexes derived from the collection"):
            return self._parts.indexes.held(doc_ids, shas)

    def _readable(self, doc_ids: Sequence[str]) -> list[tuple[DerivedIndex, dict[str, set[str]]]]:
        """:meth:`_held` of the indexes that can be read: one whose file can be neither read nor built
        again is left out (logged; ``stats`` says why), so that the others are still repaired."""
        out = []
        with self._errors("reading the indexes derived from the collection"):
            for index in self._parts.indexes:
                try:
                    held = index.held(doc_ids)
                except (LexicalIndexUnavailable, LexicalIndexStorageError, sqlite3.Error) as exc:
                    logger.info("an index cannot be read (%s): its rows are not repaired", exc)
                    continue
                if held is not None:
                    out.append((index, held))
        return out

    def lexical_segments(self, doc_ids: Sequence[str]) -> dict[str, set[str]] | None:
        """``{doc id: segment ids}`` the lexical index holds for these documents (absent: none); ``None``
        where writers keep no lexical index (a server's per-client cache is derived from the collection)."""
        index = self._parts.lexical
        if index is None:
            return None
        try:
            with self._errors("reading the lexical index"):
                return index.held(doc_ids)
        except Exception as exc:  # an index that can be neither read nor built: stats says why (lexical_state)
            logger.info("the lexical index cannot be read (%s): its rows are not counted per document", exc)
            return None

    def _missing_vectors(self, records: Mapping[str, Sequence[str]]) -> set[str]:
        """The documents of ``records`` (``{doc id: record ids}``) with a record whose vector is missing,
        in the collection or in the unit index: metadata alone does not make a document searchable."""
        return documents_missing_vectors(self._parts.collection, self._parts.units, records, self._errors)

    # ----------------------------------------------------------------- repair

    def repair(self) -> Repaired:
        """Give every document whose records are whole (they tile its text, each with its vector) but
        whose unit-index rows are missing or out of step its unit-index and lexical rows, built from
        its records (what a LlamaIndex ``IngestionPipeline`` into a ``ChromaVectorStore`` leaves);
        count those that miss records or vectors. Loads no model.

        Example:
            >>> store.maintenance.repair().repaired  # doctest: +SKIP
            ['a.md']
        """
        docs = self._reads.doc_ids()
        records = self.records(docs)
        vectorless = self._missing_vectors({d: list(recs) for d, recs in records.items()})
        lost = [d for d in sorted(records) if tiled_length(records[d]) is None or d in vectorless]
        # each index rebuilds the whole documents whose rows it holds out of step (written around hseg,
        # and perhaps followed by an hseg write, a document can have one index's rows but not another's)
        off = [(index, [d for d in sorted(records) if d not in lost and held.get(d, set()) != segment_ids(records[d])])
               for index, held in self._readable(docs)]
        rows = 0
        for index, docs_off in off:
            if docs_off:
                written = self._rebuild(index, docs_off)
                rows += written if index is self._parts.units else 0
        mixed = [d for d in lost if mixed_versions(records[d])]
        repaired = sorted({d for _, docs_off in off for d in docs_off})
        return Repaired(repaired, rows, [d for d in lost if d not in mixed], len(records), mixed)

    def _rebuild(self, index: DerivedIndex, doc_ids: list[str]) -> int:
        """``index``'s rows of these documents again; the unit index through the store's door for it
        (the writer lock, and the encoder check of the vectors it reads)."""
        if index is self._parts.units:
            return self._sync_units(doc_ids)
        with self._errors("rebuilding an index derived from the collection"):
            return index.rebuild(doc_ids)

    # ----------------------------------------------------------------- what the collection remembers

    def remembered(self) -> Remembered:
        """The records the collection holds, the encoder it records and the chunk options it remembers
        (an empty collection, left by a first run that failed, binds no encoder and remembers none)."""
        collection = self._parts.collection
        with self._errors("reading the collection"):
            records = self._reads.count()
        if not records:
            return Remembered(0, None, None)
        return Remembered(records, self._parts.binding.recorded, remembered_chunk_options(collection))

    def fingerprint(self, key: str | None) -> str | None:
        """The settings fingerprint remembered for the settings key ``key``
        (:func:`hseg.ingest.fingerprint.settings_key`); ``None``: none."""
        return remembered_fingerprint(self._parts.collection, key)

    def remember(self, *, chunk_options: Mapping[str, Any] | None = None,
                 fingerprint: tuple[str | None, str] | None = None) -> None:
        """Remember the chunk options of a run (before its first write, so that a run cut short is
        finished by a plain re-run), or ``(settings key, fingerprint)`` of the chunker it built."""
        collection = self._parts.collection
        with self._errors("writing the collection's metadata"):
            if chunk_options is not None:
                remember_chunk_options(collection, chunk_options)
            if fingerprint is not None:
                remember_fingerprint(collection, *fingerprint)
