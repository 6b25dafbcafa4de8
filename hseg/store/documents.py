"""Whole documents in and out of a store: the collection's records and the indexes derived from it
(:class:`hseg.store.indexes.Indexes`: the unit index, then the lexical index), written and deleted
in the one order that keeps every index from naming a record the collection lacks.

A write: inside every index's bracket, the collection's records (documents packed whole into upsert
calls, :func:`hseg.store.batches.write_batches`), then each index's rows in order, and only then the
records the documents no longer have. A delete: the indexes' rows first (in the reverse order),
then the records. The brackets (the lexical index's outermost) are how a write cut short by a crash
is found and repaired on the next open.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hseg.chunking.chunks import Chunking
from hseg.chunking.records import Record, check_unicode
from hseg.chunking.schema import CLUSTER, CONTENT_HASH_KEY, DOC_ID_KEY, LEVEL_KEY, START_KEY, content_sha256
from hseg.store.batches import dedupe, delete_ids, write_batches, write_failure
from hseg.store.connection import ServerErrors
from hseg.store.indexed_at import stamped, write_time
from hseg.store.indexes import Indexes
from hseg.store.paging import IN_FILTER_SIZE, batched, where_in

if TYPE_CHECKING:
    from hseg.store.lexical.index import LexicalIndex

def chunkings_to_add(chunkings: Chunking | Iterable[Chunking],
                     metadatas: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None
                     ) -> tuple[list[Chunking], list[Any]]:
    """The documents of one ``add`` and their metadata, one each, checked and without repeats
    (:func:`hseg.store.batches.dedupe`)."""
    items = [chunkings] if isinstance(chunkings, Chunking) else list(chunkings)
    for i, item in enumerate(items):
        if not isinstance(item, Chunking):
            raise ValueError(f"chunkings[{i}] must be a Chunking (from HierarchicalChunker), "
                             f"got {type(item).__name__}")
    if metadatas is None or isinstance(metadatas, Mapping):
        metas: list[Any] = [metadatas] * len(items)
    elif isinstance(metadatas, (str, bytes)):
        raise ValueError(f"metadatas must be a dict, a list of dicts or None, got {type(metadatas).__name__}")
    else:
        metas = list(metadatas)
        if len(metas) != len(items):
            raise ValueError(f"metadatas: got {len(metas)} for {len(items)} chunkings")
    return dedupe(items, metas)


def checked_document(doc_id: str, records: list[Record]) -> list[Record]:
    """The records of one whole document, as given to :meth:`~hseg.store.HierarchicalStore.add_records`:
    each a :class:`Record` of this document (its ``hseg_doc_id``) with a level, once; its cluster records
    tile its text and list exactly its segment records (:func:`hseg.store.completeness.tiled_length`).
    Anything else is a ``ValueError`` naming the document and the fix: a part of a document written as
    the whole would replace the rest of it."""
    from hseg.store.completeness import tiled_length  # completeness reads the unit index, which imports this

    check_unicode(f"doc_id {doc_id!r}", doc_id)
    seen: set[str] = set()
    for i, r in enumerate(records):
        if not isinstance(r, Record):
            raise ValueError(f"document {doc_id!r}: records[{i}] must be a Record, got {type(r).__name__}")
        if r.id in seen:
            raise ValueError(f"document {doc_id!r}: record {r.id!r} given twice")
        seen.add(r.id)
        if r.metadata.get(DOC_ID_KEY) != doc_id or r.metadata.get(LEVEL_KEY) is None:
            raise ValueError(f"document {doc_id!r}: record {r.id!r} is not one of its hseg records (its "
                             f"{DOC_ID_KEY} is {r.metadata.get(DOC_ID_KEY)!r}, its {LEVEL_KEY} "
                             f"{r.metadata.get(LEVEL_KEY)!r}); chunk it with hseg")
    if records and tiled_length({r.id: r.metadata for r in records}) is None:
        raise ValueError(f"document {doc_id!r}: its {len(records)} records are not a whole document (its clusters "
                         "must tile its text and list exactly the segments given); give all of a document's "
                         "clusters and segments in one write")
    return records


def with_text_hashes(per_doc: list[list[Record]], doc_ids: list[str]) -> tuple[list[list[Record]], dict[str, str]]:
    """These whole documents' records, each carrying its document's ``content_sha256``, and ``{doc id:
    content_sha256}``: the hash the records already carry (``hseg index`` sets it), else that of the
    text the document's cluster records tile (:func:`hseg.chunking.schema.content_sha256`). A blank
    document (no records) has none."""
    out, shas = [], {}
    for doc_id, recs in zip(doc_ids, per_doc):
        if not recs:
            out.append(recs)
            continue
        sha = next((str(r.metadata[CONTENT_HASH_KEY]) for r in recs if r.metadata.get(CONTENT_HASH_KEY)), None)
        if sha is None:
            clusters = sorted((r for r in recs if r.metadata.get(LEVEL_KEY) == CLUSTER),
                              key=lambda r: int(r.metadata[START_KEY]))
            sha = content_sha256("".join(r.document for r in clusters))
        shas[doc_id] = sha
        out.append([r if r.metadata.get(CONTENT_HASH_KEY) else
                    dataclasses.replace(r, metadata={**r.metadata, CONTENT_HASH_KEY: sha}) for r in recs])
    return out, shas


def same_text_elsewhere(collection: Any, shas: Mapping[str, str], lexical: LexicalIndex | None = None
                        ) -> dict[str, list[str]]:
    """``{doc id: the other documents holding its text}`` for the documents of ``shas`` (``{doc id:
    content_sha256}``, as :func:`with_text_hashes` gives them): those the store holds under another
    id, and those of ``shas`` with the same text.

    Asked of the ``lexical`` index where it answers for the collection exactly (a maintained one in
    step, :meth:`~hseg.store.lexical.LexicalIndex.documents_holding`): one look-up of its index on the
    hash, whose cost does not grow with the store. Else (no index, a server client's cache, an index
    out of step) one metadata ``where`` on the hashes in Chroma, which reads only the records of those
    texts but costs what Chroma's ``get`` with a ``where`` costs, and that grows with the collection."""
    holders: dict[str, set[str]] = {}
    for doc_id, sha in shas.items():
        holders.setdefault(sha, set()).add(doc_id)
    indexed = None if lexical is None or not holders else lexical.documents_holding(holders)
    if indexed is not None:
        for sha, docs in indexed.items():
            holders[sha] |= docs
    else:
        for part in batched(sorted(holders), IN_FILTER_SIZE):
            got = collection.get(where=where_in(CONTENT_HASH_KEY, list(part)), include=["metadatas"])
            for meta in got["metadatas"] or []:
                if meta and meta.get(DOC_ID_KEY) is not None and meta.get(CONTENT_HASH_KEY) in holders:
                    holders[str(meta[CONTENT_HASH_KEY])].add(str(meta[DOC_ID_KEY]))
    return {doc_id: sorted(holders[sha] - {doc_id}) for doc_id, sha in shas.items() if len(holders[sha]) > 1}


def write_documents(collection: Any, indexes: Indexes, per_doc: list[list[Record]], doc_ids: list[str],
                    old: Mapping[str, Mapping[str, Any]], batch: int,
                    on_written: Callable[[list[str]], None] | None = None, *, errors: ServerErrors) -> int:
    """Upsert these documents' records (``per_doc``, one list per id of ``doc_ids``) and their index
    rows, then delete the records of ``old`` (``{record id: stored metadata}`` of these documents)
    they no longer have; returns how many were deleted. ``on_written`` hears which documents each
    upsert call completed; ``errors`` names a lost server, saying how far the write got."""
    with errors("reading the server's clock"):  # each document's time (hseg.store.indexed_at)
        per_doc = stamped(per_doc, old, write_time(indexes))
    records = [r for recs in per_doc for r in recs]
    new_ids = {r.id for r in records}
    stale = [rid for rid in old if rid not in new_ids]
    done: list[str] = []  # documents whose every record is written
    # the outer context names the server for the lexical journal's calls
    with errors(f"recording the write of {len(doc_ids)} documents"), indexes.writing(doc_ids):
        for part, complete, partial in write_batches(per_doc, doc_ids, batch):
            if part:
                with errors(write_failure(len(doc_ids), done, partial)):
                    collection.upsert(
                        ids=[r.id for r in part],
                        embeddings=[r.embedding for r in part],
                        documents=[r.document for r in part],
                        # upsert merges metadata: a key the document no longer has is removed by sending None
                        metadatas=[{**{k: None for k in old.get(r.id, {}) if k not in r.metadata}, **r.metadata}
                                   for r in part],
                    )
            done += complete
            if on_written is not None and complete:
                on_written(list(complete))
        with errors(f"writing the unit index of {len(doc_ids)} documents"):
            indexes.write(records, doc_ids)
        with errors(f"deleting stale records after writing all {len(doc_ids)} documents"):
            delete_ids(collection, stale, batch)
    return len(stale)


def delete_documents(collection: Any, indexes: Indexes, doc_ids: Sequence[str], ids: Sequence[str],
                     batch: int) -> None:
    """Delete the records ``ids`` of these documents, their index rows first."""
    with indexes.writing(doc_ids):
        indexes.forget(doc_ids)
        delete_ids(collection, ids, batch)
