"""Paging: a collection's records page by page (bounded memory on any size: the one paging
loop of hseg) and what their metadata adds up to."""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from hseg.chunking.schema import DOC_ID_KEY, LEVEL_KEY, TOKENS_KEY
from hseg.retrieval.plans import is_missing_vector

T = TypeVar("T")

#: the name (prefix) of :func:`read_ahead`'s worker thread
READ_AHEAD_THREAD = "hseg-read-ahead"


def pages(collection: Any, where: Mapping[str, Any] | None, include: list[str], page: int
          ) -> Iterator[dict[str, Any]]:
    """The collection's records matching ``where``, in pages of at most ``page`` records, in the
    order Chroma lists them.

    The ids first, in one ``get`` without payload, then each page by its ids: a ``get`` with a
    ``where``, ``limit`` and ``offset`` evaluates the filter over the whole collection for every page
    (seconds a page at a few hundred thousand records, so a full read grew with the square of the
    store), where a read by ids costs its page. Records deleted meanwhile are left out; records
    written meanwhile are not read (as with any paging).

    Example:
        >>> ids = [i for got in pages(collection, None, [], 5000) for i in got["ids"]]  # doctest: +SKIP
    """
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise ValueError(f"page must be a positive int, got {page!r}")
    ids = list(collection.get(where=dict(where) if where else None, include=[])["ids"])
    for part in batched(ids, page):
        yield in_order(collection.get(ids=list(part), include=include), part)


def read_ahead(items: Iterator[T], depth: int = 1) -> Generator[T, None, None]:
    """``items`` as they are, drawn by a worker thread up to ``depth`` ahead of the caller: the next
    page is read from Chroma (another process, or Rust without the GIL) while the caller writes the
    last one. An error of ``items`` is raised to the caller where it would have met it; a caller that
    stops early (an error of its own, or ``close()``) waits for the item in hand and stops the worker.

    Example:
        >>> list(read_ahead(iter(range(3))))
        [0, 1, 2]
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be a positive int, got {depth!r}")
    return _drawn(items, depth)


def _drawn(items: Iterator[T], depth: int) -> Generator[T, None, None]:
    end: Any = object()
    # one worker: the draws run one after another, in order, whatever is queued
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=READ_AHEAD_THREAD) as pool:
        ahead: deque[Future[T]] = deque(pool.submit(next, items, end) for _ in range(depth))
        try:
            while (item := ahead.popleft().result()) is not end:
                ahead.append(pool.submit(next, items, end))
                yield item
        finally:
            for draw in ahead:
                draw.cancel()


def in_order(got: Mapping[str, Any], ids: Sequence[str]) -> dict[str, Any]:
    """A ``get``'s result with its records in the order of ``ids`` (those it holds)."""
    at = {rid: i for i, rid in enumerate(got["ids"])}
    order = [at[rid] for rid in ids if rid in at]
    out = dict(got)
    for key, values in got.items():
        if key != "included" and values is not None and not isinstance(values, (str, bytes)) \
                and hasattr(values, "__len__") and len(values) == len(got["ids"]):
            out[key] = values[order] if hasattr(values, "shape") else [values[i] for i in order]
    return out


def level_stats(metadatas: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Documents, clusters, segments, other writers' records and mean token sizes of record metadata.

    Example:
        >>> level_stats([{"hseg_level": "cluster", "hseg_doc_id": "a", "hseg_tokens": 40}, {}])["other_records"]
        1
    """
    docs: set[str] = set()
    tokens: dict[str, list[int]] = {"cluster": [], "segment": []}
    other = 0
    for meta in metadatas:
        level = meta.get(LEVEL_KEY)
        if level not in tokens:
            other += 1
            continue
        docs.add(str(meta[DOC_ID_KEY]))
        tokens[level].append(int(meta.get(TOKENS_KEY, 0)))

    def mean(xs: list[int]) -> float | None:
        return round(sum(xs) / len(xs), 1) if xs else None

    return {
        "documents": len(docs),
        "clusters": len(tokens["cluster"]),
        "segments": len(tokens["segment"]),
        "vectors": len(tokens["cluster"]) + len(tokens["segment"]),
        "other_records": other,
        "mean_cluster_tokens": mean(tokens["cluster"]),
        "mean_segment_tokens": mean(tokens["segment"]),
    }


def batched(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``size`` (the one batching loop of the store's reads and writes)."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


#: documents per ``$in`` filter: a bounded filter and response per call
IN_FILTER_SIZE = 500


def where_in(key: str, values: Sequence[str]) -> dict[str, Any]:
    """A Chroma ``where`` matching records whose ``key`` is one of ``values`` (Chroma refuses a one-value ``$in``
    on some versions, so one value is an equality).

    Example:
        >>> where_in("source", ["a.md"]), where_in("source", ["a.md", "b.md"])
        ({'source': 'a.md'}, {'source': {'$in': ['a.md', 'b.md']}})
    """
    return {key: values[0]} if len(values) == 1 else {key: {"$in": list(values)}}


def get_by_documents(collection: Any, doc_ids: Sequence[str], include: list[str]) -> Iterator[dict[str, Any]]:
    """The records of these documents, one ``get`` per :data:`IN_FILTER_SIZE` documents."""
    for part in batched(list(doc_ids), IN_FILTER_SIZE):
        yield collection.get(where=where_in(DOC_ID_KEY, part), include=include)


def ids_without_vectors(collection: Any, ids: Sequence[str], batch: int = 1000) -> set[str]:
    """The records among ``ids`` whose vector is missing from the collection's vector index.

    Chroma keeps metadata and documents in SQLite and vectors in the HNSW index; an embedded store
    written by two processes at once can keep a record's metadata and lose its vector, and then no
    search finds it. Reading the vectors back fails for the whole request when one is missing, so a
    failing request is split in halves until the missing ones are named (``log2`` requests each).
    """
    missing: set[str] = set()

    def check(part: Sequence[str]) -> None:
        try:
            collection.get(ids=list(part), include=["embeddings"])
        except Exception as exc:  # chromadb raises InternalError("Error finding id ...")
            if not is_missing_vector(exc):
                raise
            if len(part) == 1:
                missing.add(part[0])
                return
            half = len(part) // 2
            check(part[:half])
            check(part[half:])

    for part in batched(list(ids), batch):
        check(part)
    return missing
