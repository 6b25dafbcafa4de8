"""What writes: documents packed whole into upsert calls, duplicate documents, and the message of a
write that failed half way (see the crash-safety notes of :meth:`HierarchicalStore.add`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from hseg.chunking.chunks import Chunking
from hseg.chunking.records import Record, flatten_metadata
from hseg.chunking.schema import CLUSTER, LEVEL_KEY
from hseg.store.paging import batched


def dedupe(items: list[Chunking], metas: list[Any]) -> tuple[list[Chunking], list[Any]]:
    """Drop repeats of a document (same id, text, chunks and metadata); refuse an id given twice
    with different content."""
    first: dict[str, int] = {}
    out_items: list[Chunking] = []
    out_metas: list[Any] = []
    for ch, md in zip(items, metas):
        j = first.get(ch.doc_id)
        if j is None:
            first[ch.doc_id] = len(out_items)
            out_items.append(ch)
            out_metas.append(md)
            continue
        other, other_md = out_items[j], out_metas[j]
        if other.text != ch.text:
            why = "different texts"
        elif [c.id for c in other.clusters] + [s.id for s in other.segments] != \
                [c.id for c in ch.clusters] + [s.id for s in ch.segments]:
            why = "the same text chunked differently"
        elif flatten_metadata(other_md) != flatten_metadata(md):
            why = "different metadata"
        else:
            continue
        raise ValueError(f"doc_ids: duplicate doc_id {ch.doc_id!r} in one add with {why}; give each document once")
    return out_items, out_metas


def write_batches(
    per_doc: list[list[Record]], doc_ids: list[str], batch: int
) -> Iterator[tuple[list[Record], list[str], str | None]]:
    """Upsert calls of at most ``batch`` records that never split a document that fits one call.

    Yields ``(records, documents completed by this call, document split across calls or None)``.
    A document too large for one call goes alone, cluster records first (each is a whole parent)."""
    part: list[Record] = []
    members: list[str] = []
    for doc_id, recs in zip(doc_ids, per_doc):
        if len(recs) > batch:
            if part or members:
                yield part, members, None
                part, members = [], []
            ordered = [r for r in recs if r.metadata[LEVEL_KEY] == CLUSTER] + \
                      [r for r in recs if r.metadata[LEVEL_KEY] != CLUSTER]
            for i in range(0, len(ordered), batch):
                last = i + batch >= len(ordered)
                yield ordered[i : i + batch], [doc_id] if last else [], doc_id
            continue
        if part and len(part) + len(recs) > batch:
            yield part, members, None
            part, members = [], []
        part += recs
        members.append(doc_id)  # a blank document has no records: it is done with this call
    if part or members:
        yield part, members, None


def write_failure(total: int, done: list[str], partial: str | None) -> str:
    state = (f"document {partial!r} has more records than one call holds and may be partly written; "
             if partial is not None else "no document is partly written; ")
    return (f"writing {total} documents ({len(done)} written completely before the failure; {state}"
            "add them again to complete the rest)")


def delete_ids(collection: Any, ids: Sequence[str], batch: int) -> None:
    """Delete records by id, at most ``batch`` per call (the one batched delete of the store)."""
    for part in batched(list(ids), batch):
        collection.delete(ids=list(part))
