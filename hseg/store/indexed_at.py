"""When each document was indexed: the :data:`~hseg.chunking.schema.INDEXED_AT_KEY` that every record
of a write carries, in whole seconds since the epoch.

How and why: docs/design.md, ``hseg.store.indexed_at``.

Example:
    >>> from hseg.chunking.records import Record
    >>> from hseg.chunking.schema import LEVEL_KEY
    >>> rec = Record("s-1", None, "Tides.", {DOC_ID_KEY: "a", LEVEL_KEY: "segment"})
    >>> stamped([[rec]], {}, 1765000000)[0][0].metadata[INDEXED_AT_KEY]
    1765000000
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hseg.chunking.records import Record
from hseg.chunking.schema import DOC_ID_KEY, INDEXED_AT_KEY


def write_time(indexes: Iterable[Any]) -> int:
    """Now, in whole seconds since the epoch: the server's clock through the write log of whichever of
    a store's ``indexes`` follows one (a server client's lexical index,
    :class:`~hseg.store.lexical.journal.Journal`, whose clock its write reads anyway), else this
    machine's."""
    for index in indexes:
        journal = getattr(index, "journal", None)
        if journal is not None:
            return int(journal.now())
    return int(time.time())


def stamped(per_doc: Sequence[list[Record]], old: Mapping[str, Mapping[str, Any]], now: int) -> list[list[Record]]:
    """These whole documents' records, each carrying its document's time: the one ``old`` (``{record
    id: stored metadata}`` of these documents) holds where the write changes none of its records,
    else ``now``."""
    held: dict[str, dict[str, Mapping[str, Any]]] = {}
    for rid, meta in old.items():
        held.setdefault(str(meta.get(DOC_ID_KEY)), {})[rid] = meta
    out = []
    for recs in per_doc:
        if recs:
            kept = _kept_time(recs, held.get(str(recs[0].metadata.get(DOC_ID_KEY)), {}))
            at = now if kept is None else kept
            recs = [dataclasses.replace(r, metadata={**r.metadata, INDEXED_AT_KEY: at}) for r in recs]
        out.append(recs)
    return out


def _kept_time(recs: Sequence[Record], stored: Mapping[str, Mapping[str, Any]]) -> int | None:
    """The time the stored version of a document carries when ``recs`` are exactly its records (ids
    and metadata; the text is in the metadata's ``content_sha256``), else ``None``."""
    if stored.keys() != {r.id for r in recs}:
        return None
    times = {meta.get(INDEXED_AT_KEY) for meta in stored.values()}
    if len(times) != 1:
        return None
    at = times.pop()
    if not isinstance(at, int) or isinstance(at, bool):
        return None
    for r in recs:
        if _without_time(stored[r.id]) != _without_time(r.metadata):
            return None
    return at


def _without_time(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k != INDEXED_AT_KEY and v is not None}


def iso_utc(seconds: Any) -> str | None:
    """A stored :data:`~hseg.chunking.schema.INDEXED_AT_KEY` as ISO 8601 UTC, ``None`` where absent.

    Example:
        >>> iso_utc(1765000000), iso_utc(None)
        ('2025-12-06T05:46:40Z', None)
    """
    if seconds is None or isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return None
    return dt.datetime.fromtimestamp(int(seconds), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
