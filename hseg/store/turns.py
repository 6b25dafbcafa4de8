"""One writer per document at a time: the turn every write of a store's documents takes, so that two
writes of one document id, from two threads of a process or from two clients of one Chroma server,
end with one version of it, never records of both.

How and why: docs/design.md, ``hseg.store.turns``.

Example:
    >>> turns = DocumentTurns.of(collection, leases=None)  # doctest: +SKIP
    >>> with turns.taking(["report"], timeout_s=600):  # doctest: +SKIP
    ...     ...  # read the document's records, write the new ones, delete the old
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from hseg.errors import WriterBusyError

logger = logging.getLogger(__name__)

#: locks of the process's table of document turns (two documents of one stripe take turns too)
STRIPES = 4096
#: a lease unchanged this long (holder and beat, on the waiter's clock) is taken for a dead writer's
STALE_S = 60.0
#: how often a holder renews its leases
BEAT_S = 10.0
_POLL_S = 0.05
_PART = 1000  # leases asked for per call, within any server's batch limit
_LEASE_KIND = "turn"

# the turns of every store of this process: two stores opened on one collection are one writer's threads
_stripes = [threading.RLock() for _ in range(STRIPES)]
# per thread, {(collection key, document): how deep} of the leases it holds, whichever store took them
_mine = threading.local()


def lease_id(doc_id: str) -> str:
    """The id of a document's lease record (a hash: a document id may be longer than an id should be).

    Example:
        >>> lease_id("report")[:5]
        'turn-'
    """
    return "turn-" + hashlib.sha256(doc_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


class Leases:
    """Per-document leases kept in ``collection`` (a server's write journal), shared by its clients.

    Example:
        >>> leases = Leases(journal.collection)  # doctest: +SKIP
        >>> token = leases.take(["report"], deadline=time.monotonic() + 600, what="store 'docs'")  # doctest: +SKIP
        >>> leases.give_back(token)  # doctest: +SKIP
    """

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self._held: dict[str, tuple[list[str], threading.Event]] = {}

    def take(self, doc_ids: Sequence[str], deadline: float, what: str) -> str:
        """Take the leases of these documents, waiting until ``deadline`` (``time.monotonic()``) at most,
        then :class:`~hseg.errors.WriterBusyError`; returns the token that holds them."""
        token = uuid.uuid4().hex
        pending = sorted({lease_id(d): d for d in doc_ids}.items())
        held: list[str] = []
        seen: dict[str, tuple[Any, Any, float]] = {}  # lease id -> (holder, beat, since when on our clock)
        try:
            while pending:
                part = pending[:_PART]
                ids = [rid for rid, _ in part]
                self.collection.add(ids=ids, embeddings=[[1.0]] * len(ids),
                                    metadatas=[{"kind": _LEASE_KIND, "holder": token, "beat": 0, "doc": d[:200]}
                                               for _, d in part])
                got = self.collection.get(ids=ids, include=["metadatas"])
                holder = {rid: dict(m or {}) for rid, m in zip(got["ids"], got["metadatas"])}
                won = 0
                while won < len(part) and holder.get(part[won][0], {}).get("holder") == token:
                    won += 1
                held += ids[:won]
                out_of_order = [rid for rid in ids[won + 1:] if holder.get(rid, {}).get("holder") == token]
                if out_of_order:  # taken past one another writer holds: given back, taken in order later
                    self._delete(out_of_order, token)
                pending = pending[won:]
                if not pending:
                    break
                rid, doc = pending[0]
                other = holder.get(rid)
                if other is None:  # given back between our add and our get: try again at once
                    continue
                state = (other.get("holder"), other.get("beat"))
                now = time.monotonic()
                if rid not in seen or seen[rid][:2] != state:
                    seen[rid] = (*state, now)
                elif now - seen[rid][2] >= STALE_S:
                    logger.warning("%s: the writer of document %r renewed its turn for %.0f s: taken for a dead "
                                   "writer's", what, doc, now - seen[rid][2])
                    self._delete([rid], str(state[0]))
                    continue
                if now >= deadline:
                    raise WriterBusyError(f"{what}: another writer is writing document {doc!r}; waited for its "
                                          "turn until the lock timeout. Retry later, or raise lock_timeout")
                time.sleep(_POLL_S)
        except BaseException:
            with contextlib.suppress(Exception):
                self._delete(held, token)
            raise
        stop = threading.Event()
        self._held[token] = (held, stop)
        threading.Thread(target=self._beat, args=(held, stop), name="hseg-turn-beat", daemon=True).start()
        return token

    def give_back(self, token: str) -> None:
        """Give back the leases ``token`` holds (only those it still holds)."""
        held, stop = self._held.pop(token)
        stop.set()
        try:
            self._delete(held, token)
        except Exception as exc:  # the server is gone: the leases go stale, and the next writer takes them
            logger.warning("could not give back %d document turns (%s): the next writer of those documents "
                           "waits %.0f s", len(held), exc, STALE_S)

    def _delete(self, ids: list[str], holder: str) -> None:
        if ids:
            self.collection.delete(ids=ids, where={"holder": holder})

    def _beat(self, ids: list[str], stop: threading.Event) -> None:
        beat = 0
        while not stop.wait(BEAT_S):
            beat += 1
            with contextlib.suppress(Exception):  # a missed beat: the next one, or a waiter's STALE_S
                self.collection.update(ids=ids, metadatas=[{"beat": beat}] * len(ids))


class DocumentTurns:
    """The turns of one collection's documents: the process's stripes, then, for clients of a server,
    the leases (``leases``; ``None`` for an embedded or in-memory store, whose processes the writer lock
    keeps apart).

    Example:
        >>> with DocumentTurns(str(collection.id), None, "store 'docs'").taking(["a"], 600):  # doctest: +SKIP
        ...     pass
    """

    def __init__(self, key: str, leases: Leases | None, what: str) -> None:
        self.key = key
        self.leases = leases
        self.what = what

    @contextlib.contextmanager
    def taking(self, doc_ids: Sequence[str], timeout_s: float) -> Iterator[None]:
        """Hold the turns of these documents for the block, waiting up to ``timeout_s`` seconds for
        them (then :class:`~hseg.errors.WriterBusyError`). A thread that holds them already enters at once."""
        deadline = time.monotonic() + timeout_s
        docs = sorted(set(doc_ids))
        stripes = sorted({hash((self.key, d)) % STRIPES for d in docs})
        taken: list[threading.RLock] = []
        try:
            for s in stripes:
                lock = _stripes[s]
                if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    raise WriterBusyError(f"{self.what}: another thread of this process is writing one of "
                                          f"{len(docs)} documents ({docs[0]!r}, ...); waited {timeout_s:g} s for "
                                          "its turn")
                taken.append(lock)
            with self._leases(docs, deadline):
                yield
        finally:
            for lock in reversed(taken):
                lock.release()

    @contextlib.contextmanager
    def _leases(self, docs: list[str], deadline: float) -> Iterator[None]:
        if self.leases is None:
            yield
            return
        mine: dict[tuple[str, str], int] = _mine.__dict__.setdefault("depth", {})
        keys = [(self.key, d) for d in docs]
        new = [d for d, k in zip(docs, keys) if not mine.get(k)]
        token = self.leases.take(new, deadline, self.what) if new else None
        for k in keys:
            mine[k] = mine.get(k, 0) + 1
        try:
            yield
        finally:
            for k in keys:
                mine[k] -= 1
                if not mine[k]:
                    del mine[k]
            if token is not None:
                self.leases.give_back(token)
