"""The lexical index's table of one collection: the SQLite file (or in-memory database) both kinds
of lexical index hold, with what every kind writes there: the rows of documents, a rebuild from the
collection, the file's ``meta`` and whether it is this collection's, in this layout.

Which rows to write when is the kind's to say (:mod:`~hseg.store.lexical.maintained`,
:mod:`~hseg.store.lexical.cached`); the table only writes them, each in one commit."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from hseg.chunking.records import SCHEMA_VERSION, Record
from hseg.chunking.schema import LEVEL_KEY, SEGMENT, level_is
from hseg.progress import Progress
from hseg.store.lexical.database import Database, drop_memory_database, file_inode, memory_database
from hseg.store.lexical.location import Location
from hseg.store.lexical.reads import TableReads
from hseg.store.lexical.tables import FORMAT, SCHEMA, clear_rows, delete_documents, insert_rows, set_meta
from hseg.store.paging import get_by_documents, pages, read_ahead

logger = logging.getLogger(__name__)

_PAGE = 2000  # records per Chroma read when rebuilding


class LexicalTable(TableReads):
    """The lexical rows of ``collection`` at ``location``; nothing is opened until the first use.

    ``count_checked`` says whether this object has compared the collection's record count with the
    one the file recorded at its last sync (each object does once, on its first check: records
    written without hseg change the count and nothing else).

    Example:
        >>> table = LexicalTable(collection, Location("memory", None, "demo"))  # doctest: +SKIP
        >>> table.rebuild(); table.count()  # doctest: +SKIP
        2134
    """

    def __init__(self, collection: Any, location: Location) -> None:
        self.collection = collection
        self.location = location
        self._db: Database | None = None
        self.count_checked = False

    @property
    def db(self) -> Database:
        if self._db is None:
            self._db = memory_database(self.location.key) if self.location.path is None else \
                Database(self.location.path)
        return self._db

    @property
    def name(self) -> str:
        """The collection's name (for logs and errors)."""
        return str(self.collection.name)

    def meta(self) -> dict[str, str]:
        """The file's ``meta`` table: its collection, layout, whether it is built, and its sync state."""
        return dict(self.db.rows("SELECT key, value FROM meta"))

    def belongs(self, meta: dict[str, str]) -> bool:
        """Whether a file's ``meta`` is this collection's, in this version's layout."""
        return meta.get("collection_id") == str(self.collection.id) and meta.get("format") == FORMAT

    def lost_rows(self) -> bool:
        """Whether the file holds another number of segment rows than its last write recorded."""
        noted = self.meta().get("rows")
        return noted is not None and int(noted) != self.count()

    def replaced(self) -> bool:
        """Whether the file this object opened is no longer the one at its path (deleted or replaced
        under a long-lived reader)."""
        path = self.location.path
        return self._db is not None and path is not None and self._db.inode != file_inode(path)

    def opened(self) -> tuple[bool, int | None]:
        """Whether this object has the file open, and the inode of the file it opened (``None`` in memory)."""
        return self._db is not None, None if self._db is None else self._db.inode

    def close(self) -> None:
        """Close the file; the next use opens the one at the path again."""
        seen, self._db = self._db, None
        if seen is not None:
            with contextlib.suppress(Exception):
                seen.close()

    # ----------------------------------------------------------------- writes

    def adopt(self) -> None:
        """Start afresh when the file belongs to another collection of the same name (dropped and
        created again) or to another layout; call with the writer lock held."""
        meta = self.meta()
        if self.belongs(meta):
            return
        with self.db.transaction() as c:
            if meta.get("format") != FORMAT:  # another layout: its tables again, as this version declares them
                c.execute("DROP TABLE IF EXISTS segments")
                for statement in SCHEMA:
                    c.execute(statement)
            c.execute("DELETE FROM meta")
            clear_rows(c)
            set_meta(c, collection_id=str(self.collection.id), format=FORMAT, built="0", schema=str(SCHEMA_VERSION),
                     rows="0")

    def rebuild(self, **meta: str) -> int:
        """Every row again from the collection's segment records, in one transaction (readers see the
        old index until it commits), with ``meta`` set in it; returns the segments indexed. Call with
        the writer lock held."""
        t0 = time.perf_counter()
        count = int(self.collection.count())
        n = 0
        # minutes at a million records, and a first search may be what waits for it
        note = Progress()
        with self.db.transaction() as c:
            clear_rows(c)
            # closed on an error too, so that the reading thread stops here, whoever keeps the error
            with contextlib.closing(read_ahead(pages(self.collection, level_is(SEGMENT), ["documents", "metadatas"],
                                                     _PAGE))) as read:
                for got in read:
                    n += insert_rows(c, got["ids"], got["documents"], got["metadatas"], logged=False)
                    note.note("lexical index of %r: %d segments indexed (the collection holds %d records)",
                              self.name, n, count)
            set_meta(c, **{"built": "1", "synced_count": str(count), **meta})
        note.note("lexical index of %r: %d segments indexed, merging their terms", self.name, n)
        # one b-tree per term instead of one per flush (faster queries), and the WAL folded back so that
        # it keeps no second copy of the index (the old index's pages stay in the file, free for the next
        # rebuild)
        with self.db.transaction() as c:
            c.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        if self.location.path is not None:
            self.db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
        logger.info("collection %r: lexical index built, %d segments in %.2f s", self.name, n,
                    time.perf_counter() - t0)
        return n

    def rewrite(self, doc_ids: Sequence[str], *, clear_pending: bool = True, **meta: str) -> int:
        """The rows of these documents as the collection now holds them, with ``meta`` set in the same
        commit; returns the rows written. Call with the writer lock held."""
        got_ids: list[str] = []
        docs: list[str] = []
        metas: list[Any] = []
        for got in get_by_documents(self.collection, list(doc_ids), ["documents", "metadatas"]):
            for rid, doc, m in zip(got["ids"], got["documents"], got["metadatas"]):
                if (m or {}).get(LEVEL_KEY) == SEGMENT:
                    got_ids.append(rid)
                    docs.append(doc)
                    metas.append(m)
        count = int(self.collection.count()) if clear_pending else None
        with self.db.transaction() as c:
            delete_documents(c, doc_ids)
            n = insert_rows(c, got_ids, docs, metas)
            if clear_pending:
                c.executemany("DELETE FROM pending WHERE doc_id = ?", ((d,) for d in doc_ids))
                set_meta(c, synced_count=str(count))
            set_meta(c, **meta)
        return n

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> int:
        """Replace the rows of these whole documents by their segment ``records``; returns the rows written."""
        segments = [r for r in records if r.metadata.get(LEVEL_KEY) == SEGMENT]
        with self.db.transaction() as c:
            delete_documents(c, doc_ids)
            return insert_rows(c, [r.id for r in segments], [r.document for r in segments],
                               [r.metadata for r in segments])

    def delete(self, doc_ids: Sequence[str]) -> None:
        """Remove the rows of these documents."""
        with self.db.transaction() as c:
            delete_documents(c, doc_ids)

    def drop(self) -> None:
        """Delete the file (or the in-memory database)."""
        self.close()
        if self.location.path is None:
            drop_memory_database(self.location.key)
            return
        for suffix in ("", "-wal", "-shm", ".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f"{self.location.path}{suffix}")
