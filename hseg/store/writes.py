"""What a store's writes do (:class:`Writes`): whole documents added, replaced and deleted in their
turns (:mod:`hseg.store.turns`) under the backend's writer turn, with their derived indexes' rows
(:mod:`hseg.store.documents`), the indexes rebuilt from the records, and the store dropped. What a
crash leaves, and the order of the writes: :meth:`hseg.store.HierarchicalStore.add` and
:mod:`hseg.store.documents`.

Example:
    >>> writes = Writes(parts)  # doctest: +SKIP
    >>> writes.add(chunker.chunk(text, doc_id="a.md"))  # doctest: +SKIP
    57
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from hseg.chunking.chunks import Chunking
from hseg.chunking.records import Record, records_for
from hseg.chunking.schema import DOC_ID_KEY, ENCODER_KEY, of_document
from hseg.store.connection import lexical_errors
from hseg.store.documents import (
    checked_document,
    chunkings_to_add,
    delete_documents,
    same_text_elsewhere,
    with_text_hashes,
    write_documents,
)
from hseg.store.maintenance import Incomplete, Maintenance
from hseg.store.parts import StoreParts
from hseg.store.reads import Reads

logger = logging.getLogger(__name__)

#: called as ``on_written(doc_ids)`` after each write call, and ``on_same_text({doc id: other ids})``
OnWritten = Callable[[list[str]], None]
OnSameText = Callable[[dict[str, list[str]]], None]


class Writes:
    """The writes of the store whose parts are ``parts`` (see :class:`hseg.store.HierarchicalStore`'s
    methods of the same names), and what keeps it whole between runs (:attr:`maintenance`), which
    asks them."""

    def __init__(self, parts: StoreParts) -> None:
        self._parts = parts
        self._reads = Reads(parts)
        self.maintenance = Maintenance(parts, self._reads, self.sync_unit_index)
        """What keeps the store whole: what is incomplete, the repair, what ``hseg index`` remembers
        (:class:`hseg.store.maintenance.Maintenance`)."""

    # ----------------------------------------------------------------- turns

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """The backend's writer turn (an embedded store's writer lock) for the block."""
        with self._parts.backend.writing(self._parts.lock_timeout):
            yield

    def writer_turn(self) -> object | None:
        """This process's present hold of the writer's turn (``None``: not held, or the shape has none)."""
        return self._parts.backend.writer_turn()

    @contextlib.contextmanager
    def _turn(self, doc_ids: Sequence[str]) -> Iterator[None]:
        """The turns of these documents (:mod:`hseg.store.turns`) for the block; a server lost while they
        are taken is named in the error, as in every write."""
        parts = self._parts
        with contextlib.ExitStack() as held:
            with parts.backend.errors(f"taking the write turn of {len(doc_ids)} documents"):
                held.enter_context(parts.turns.taking(doc_ids, parts.lock_timeout))
            yield

    @contextlib.contextmanager
    def _writing(self, action: str) -> Iterator[None]:
        """Around one of this store's writes: the writer's turn (:meth:`writing`), which the fresh reads
        must not take for another process's, and a lost server named in the error."""
        backend = self._parts.backend
        with self.writing(), backend.own_write(), backend.errors(action):
            yield

    # ----------------------------------------------------------------- documents

    def add(self, chunkings: Chunking | Iterable[Chunking],
            metadatas: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None, *,
            on_written: OnWritten | None = None, stored: Incomplete | None = None,
            on_same_text: OnSameText | None = None) -> int:
        """Upsert the records of whole documents given as chunkings; returns the records written."""
        items, metas = chunkings_to_add(chunkings, metadatas)
        doc_ids = [c.doc_id for c in items]
        per_doc = [records_for(ch, md) for ch, md in zip(items, metas)]
        records = [r for recs in per_doc for r in recs]
        binding = self._parts.binding
        with self._parts.backend.errors("reading the collection"):
            binding.check_dimension(records)
        enc_name = binding.of_chunkings(items)
        if enc_name is not None:
            binding.check_name(enc_name)
            for r in records:  # a chunking made without the chunker does not name its encoder: the store's
                r.metadata.setdefault(ENCODER_KEY, enc_name)
        if not items:
            return 0
        return self._write(doc_ids, per_doc, enc_name, stored, on_written, on_same_text)

    def add_records(self, documents: Mapping[str, Sequence[Record]], *, on_written: OnWritten | None = None,
                    on_same_text: OnSameText | None = None) -> int:
        """Write whole documents given as their records, ``{doc id: records}``; returns the records written."""
        if not isinstance(documents, Mapping):
            raise ValueError(f"documents must be a dict of doc id -> records, got {type(documents).__name__}")
        doc_ids = [str(d) for d in documents]
        per_doc = [checked_document(d, list(documents[d])) for d in doc_ids]
        records = [r for recs in per_doc for r in recs]
        binding = self._parts.binding
        with self._parts.backend.errors("reading the collection"):
            binding.check_dimension(records)
        enc_name = binding.check_records((r.metadata for r in records), binding.query_name())
        if enc_name is not None:
            binding.check_name(enc_name)
        if not doc_ids:
            return 0
        return self._write(doc_ids, per_doc, enc_name, None, on_written, on_same_text)

    def _write(self, doc_ids: list[str], per_doc: list[list[Record]], enc_name: str | None,
               stored: Incomplete | None, on_written: OnWritten | None, on_same_text: OnSameText | None) -> int:
        """The one write of whole documents: their turns, then the writer's turn, then what the store
        holds of them and of their texts under other ids, their records and index rows, and the old
        records they no longer have."""
        parts = self._parts
        binding = parts.binding
        per_doc, shas = with_text_hashes(per_doc, doc_ids)
        with self._turn(doc_ids), self._writing(f"writing {len(doc_ids)} documents"):
            old = self._existing(doc_ids, stored)
            with parts.backend.errors("reading the collection"):
                same = same_text_elsewhere(parts.collection, shas, parts.lexical)
            for doc_id, others in same.items():
                logger.warning("document %r: its text is also stored under %s; both are searched (random ids, as "
                               "LlamaIndex's SimpleDirectoryReader gives without filename_as_id=True, store a file "
                               "again on every run): give documents stable ids, or delete the other", doc_id,
                               ", ".join(repr(o) for o in others))
            if same and on_same_text is not None:
                on_same_text(same)
            binding.adopt_if_empty(enc_name)
            stale = write_documents(parts.collection, parts.indexes, per_doc, doc_ids, old, parts.batch_size(),
                                    on_written, errors=parts.backend.errors)
            binding.record(enc_name)
        written = sum(len(recs) for recs in per_doc)
        logger.info("add: %d documents, %d records upserted, %d stale records deleted", len(doc_ids), written, stale)
        return written

    def _existing(self, doc_ids: list[str], stored: Incomplete | None = None) -> Mapping[str, Mapping[str, Any]]:
        """``{record id: metadata}`` of the records the collection holds for these documents: as
        ``stored`` read them when it asked about them all under this hold of the writer lock (no other
        process can have written them since), else read now, in the documents' turns: an answer read
        with no lock held (a server's client, an in-memory store) may be older than another writer's
        version, which this write must replace too."""
        if stored is None or stored.turn is None or stored.turn is not self.writer_turn() \
                or not stored.asked.issuperset(doc_ids):
            held: Mapping[str, Mapping[str, Mapping[str, Any]]] = self.maintenance.records(doc_ids)
        else:
            held = {d: stored.records[d] for d in doc_ids if d in stored.records}
        return {rid: meta for records in held.values() for rid, meta in records.items()}

    def delete(self, doc_id: str) -> int:
        """Remove every record of a document and its index rows; returns how many records went."""
        parts = self._parts
        with self._turn([doc_id]), self._writing(f"deleting document {doc_id!r}"):
            ids = parts.collection.get(where=of_document(doc_id), include=[])["ids"]
            delete_documents(parts.collection, parts.indexes, [doc_id], ids, parts.batch_size())
        logger.info("delete: %d records of document %r", len(ids), doc_id)
        return len(ids)

    def delete_where(self, where: Mapping[str, Any]) -> int:
        """Remove every record matching a non-empty Chroma ``where``; returns how many went."""
        if not isinstance(where, Mapping) or not where:
            raise ValueError(f"where must be a non-empty dict, got {where!r}")
        parts = self._parts
        with parts.backend.errors(f"reading records where {dict(where)}"):
            found = parts.collection.get(where=dict(where), include=["metadatas"])
        docs = sorted({str(m[DOC_ID_KEY]) for m in found["metadatas"] if m and DOC_ID_KEY in m})
        # read again in the documents' turns: a write of one of them may have been under way
        with self._turn(docs), self._writing(f"deleting records where {dict(where)}"):
            got = parts.collection.get(where=dict(where), include=["metadatas"])
            docs = sorted({str(m[DOC_ID_KEY]) for m in got["metadatas"] if m and DOC_ID_KEY in m})
            delete_documents(parts.collection, parts.indexes, docs, got["ids"], parts.batch_size())
        return len(got["ids"])

    def drop(self) -> None:
        """Delete the collection, its unit index and its lexical index; the store is unusable afterwards."""
        parts = self._parts
        collection, backend = parts.collection, parts.backend
        with self.writing(), backend.errors(f"deleting collection {collection.name!r}"):
            parts.indexes.drop()  # first: the unit index names the collection's records
            backend.drop_collection(collection, collection.name)
        backend.close()
        logger.info("dropped collection %r, its unit index and its lexical index", collection.name)

    # ----------------------------------------------------------------- the indexes rebuilt

    def sync_lexical_index(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the lexical index of these documents (default: all); returns the segments it holds."""
        index = self._parts.lexical_for("rebuilding the lexical index")
        with self._parts.backend.errors("rebuilding the lexical index"), lexical_errors(index.location.path):
            return int(index.sync(None if doc_ids is None else list(doc_ids)))

    def sync_unit_index(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the unit index of these documents (default: all); returns the unit records written."""
        parts = self._parts
        units = parts.units
        if units is None:
            raise ValueError(f"collection {parts.collection.name!r}: no unit index (the store has no Chroma client)")
        # the records it reads may have been written around hseg's checks (a ChromaVectorStore): refuse
        # to index vectors of two models together, before writing each batch
        binding = parts.binding
        reference = [binding.query_name()]

        def check(metadatas: list[dict[str, Any]]) -> None:
            reference[0] = binding.check_records(metadatas, reference[0])

        with self._writing("rebuilding the unit index"):
            # a full rebuild (every document) also brings an index of an older layout to the current one
            written = units.rebuild(None if doc_ids is None else list(doc_ids), check)
            if binding.recorded is None and reference[0] is not None:
                binding.record(reference[0])  # e.g. a collection made by ChromaVectorStore
        return written
