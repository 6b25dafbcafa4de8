"""The write log of a collection whose lexical index is a cache (a client of a server): which
documents each hseg write changed, so that a reader brings its cache up to date by re-reading those
documents, not the whole collection.

How and why: docs/design.md, ``hseg.store.lexical.journal``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: the journal collection of collection ``name`` is ``name + JOURNAL_SUFFIX``
JOURNAL_SUFFIX = "_hseg_writes"
#: ``done`` entries younger than this are kept: a reader that checks at least this often never rebuilds.
#: A check reads only the entries since its last one, so a longer log costs a check nothing
KEEP_S = 3 * 3600.0
#: how far before its last read a reader looks again, at least every :data:`SWEEP_S`: more than an
#: entry's trip to the server plus what two clients' readings of the server's clock may differ by
MARGIN_S = 120.0
#: how far before its last read a reader looks at its other checks: an entry's trip to the server plus
#: the clock difference of machines kept in time (NTP); an entry stamped earlier than that before it
#: became visible is found by the next sweep of :data:`MARGIN_S`
NEAR_MARGIN_S = 10.0
#: seconds between a reader's looks :data:`MARGIN_S` back (a look that far back reads every entry of
#: that time: hundreds under a writer writing back to back)
SWEEP_S = 10.0
#: an open write older than this may be a dead writer's: its documents are re-read (what Chroma holds is
#: what the writer left), again at most this often while it stays open; a live writer's ``done`` entry
#: comes after, and its documents are read again then
OPEN_STALE_S = 60.0
#: an open write older than this is taken for a dead writer's: its documents are re-read once more, then no longer
OPEN_WRITE_TTL_S = 3600.0
#: open entries of dead writers older than this are deleted by the next writer
OPEN_KEEP_S = 7 * 24 * 3600.0

#: seconds between two readings of the server's clock by one client (carried forward on its monotonic
#: clock in between, which drifts by microseconds in that time)
CLOCK_REFRESH_S = 60.0

_OPEN, _DONE, _HORIZON = "open", "done", "horizon"


class ServerClock:
    """The time on the clock of the server of ``api`` (a Chroma client's API object), in seconds since
    the epoch: its heartbeat, read again every :data:`CLOCK_REFRESH_S` and carried forward on this
    process's monotonic clock in between (a heartbeat per check would cost a request per search).
    One clock for every client of a server, whatever their own clocks say; an embedded or in-memory
    client's is this machine's.

    Example:
        >>> ServerClock(chromadb.HttpClient()._server).now()  # doctest: +SKIP
        1765000000.123
    """

    def __init__(self, api: Any) -> None:
        self.api = api
        self._read: tuple[float, float] | None = None  # (the server's time, this process's monotonic time)

    def now(self) -> float:
        mono = time.monotonic()
        if self._read is None or mono - self._read[1] >= CLOCK_REFRESH_S:
            before = time.monotonic()
            server = self.api.heartbeat() / 1e9
            mono = time.monotonic()
            self._read = (server, (before + mono) / 2)  # the heartbeat was read half-way, within the trip
        return self._read[0] + (mono - self._read[1])



def journal_name(collection_name: str) -> str:
    """Name of the write journal beside ``collection_name``.

    Example:
        >>> journal_name("docs")
        'docs_hseg_writes'
    """
    return collection_name + JOURNAL_SUFFIX


@dataclass(frozen=True)
class Entry:
    """One entry of the log: its record id, when its writer stamped it, and its documents."""

    id: str
    at: float
    docs: tuple[str, ...]


@dataclass(frozen=True)
class LogRead:
    """What one read of the log found: ``done`` entries since the asked time, the ``open`` entries,
    and the compaction horizon (0 before any compaction)."""

    done: list[Entry] = field(default_factory=list)
    opens: list[Entry] = field(default_factory=list)
    horizon: float = 0.0


class Journal:
    """The write log held in ``collection`` (its store's backend opens it,
    :meth:`hseg.store.backends.Backend.journal`), read and written through ``api``, chromadb's
    ``ServerAPI`` of that connection.

    Example:
        >>> journal = backend.journal(collection)  # doctest: +SKIP
        >>> entry = journal.begin(["doc-1"]); journal.end(entry, ["doc-1"])  # doctest: +SKIP
        >>> [e.docs for e in journal.read(since=0.0).done]  # doctest: +SKIP
        [('doc-1',)]
    """

    def __init__(self, collection: Any, api: Any) -> None:
        self.collection = collection
        self.api = api  # the connection it was opened through: the server's clock, and drop()
        self.clock = ServerClock(api)
        # entries this object has read (they never change: a write makes new ones), by id: a read asks
        # the server for the ids in its window, then for the metadata of the ids it does not know
        self._known: dict[str, tuple[str, Entry]] = {}

    @property
    def name(self) -> str:
        return str(self.collection.name)

    def now(self) -> float:
        """The server's time, the clock of every time in the log (:class:`ServerClock`)."""
        return self.clock.now()

    def begin(self, doc_ids: Sequence[str]) -> str:
        """Record a write of these documents as under way; returns its ``open`` entry's id."""
        rid = f"{_OPEN}-{uuid.uuid4().hex}"
        self._put(rid, _OPEN, self.now(), doc_ids)
        return rid

    def end(self, open_id: str, doc_ids: Sequence[str]) -> None:
        """Record the write ``open_id`` of these documents as finished, then compact the log."""
        now = self.now()
        self._put(f"{_DONE}-{uuid.uuid4().hex}", _DONE, now, doc_ids)
        self.collection.delete(ids=[open_id])
        self.compact(now)

    def abandon(self, open_id: str) -> None:
        """Forget a write that failed before it changed anything."""
        self.collection.delete(ids=[open_id])

    def read(self, since: float, *, by_ids: bool = False) -> LogRead:
        """The ``done`` entries stamped at or after ``since``, every ``open`` entry and the horizon.

        One request, or with ``by_ids`` (for a long window) two: the ids of those entries, then the
        metadata of the ids this object has not read before and of the horizon (the only record that
        changes). Under a writer writing back to back a window of :data:`MARGIN_S` holds hundreds of
        entries, whose metadata was most of a check's cost (``benchmarks/RESULTS.md``)."""
        where = {"$or": [{"kind": {"$in": [_OPEN, _HORIZON]}}, {"at": {"$gte": since}}]}
        known = self._known
        if by_ids:
            ids = self.collection.get(where=where, include=[])["ids"]
            wanted = [rid for rid in ids if rid not in known or known[rid][0] == _HORIZON]
            got = self.collection.get(ids=wanted, include=["metadatas"]) if wanted else {"ids": [], "metadatas": []}
        else:
            got = self.collection.get(where=where, include=["metadatas"])
            ids = got["ids"]
        fresh: dict[str, tuple[str, Entry]] = {}
        for rid, meta in zip(got["ids"], got["metadatas"]):
            meta = meta or {}
            kind, at = str(meta.get("kind")), float(meta.get("at") or 0.0)
            fresh[rid] = (kind, Entry(rid, at, tuple(json.loads(str(meta.get("docs") or "[]")))))
        # what the window listed, as read now or before (an id listed a moment ago and deleted since,
        # an open entry whose write ended, is not an entry now) ...
        listed = {rid: fresh[rid] if rid in fresh else known[rid] for rid in ids if rid in fresh or rid in known}
        # ... and, for the next long window, the done entries before this one (they never change)
        self._known = {**{rid: e for rid, e in known.items() if e[0] == _DONE and e[1].at < since}, **listed}
        out = LogRead()
        horizon = 0.0
        for kind, entry in listed.values():
            if kind == _HORIZON:
                horizon = max(horizon, entry.at)
            elif kind == _OPEN:
                out.opens.append(entry)
            elif kind == _DONE and entry.at >= since:
                out.done.append(entry)
        return LogRead(sorted(out.done, key=lambda e: (e.at, e.id)), out.opens, horizon)

    def compact(self, now: float) -> int:
        """Delete ``done`` entries older than :data:`KEEP_S` and dead writers' ``open`` entries older
        than :data:`OPEN_KEEP_S`; returns how many went. The horizon is raised first, so that a reader
        never finds an entry gone without the horizon saying so."""
        cutoff = now - KEEP_S
        old = self.collection.get(where={"$or": [{"$and": [{"kind": _DONE}, {"at": {"$lt": cutoff}}]},
                                                 {"$and": [{"kind": _OPEN}, {"at": {"$lt": now - OPEN_KEEP_S}}]}]},
                                  include=["metadatas"])
        if not old["ids"]:
            return 0
        deleted_up_to = max(float((m or {}).get("at") or 0.0) for m in old["metadatas"])
        current = self.read(since=now).horizon  # only ever raised: two writers compacting at once
        self.collection.upsert(ids=[_HORIZON], embeddings=[[1.0]],
                               metadatas=[{"kind": _HORIZON, "at": max(current, deleted_up_to)}])
        self.collection.delete(ids=list(old["ids"]))
        return len(old["ids"])

    def drop(self) -> None:
        """Delete the journal collection."""
        c = self.collection
        self.api.delete_collection(c.name, tenant=c.tenant, database=c.database)

    def _put(self, rid: str, kind: str, at: float, doc_ids: Sequence[str]) -> None:
        self.collection.upsert(ids=[rid], embeddings=[[1.0]],
                               metadatas=[{"kind": kind, "at": at, "docs": json.dumps(sorted(set(doc_ids)))}])
