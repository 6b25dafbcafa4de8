"""What the store is: :class:`HierarchicalStore`, the one object users hold, a facade that delegates.
Opening it puts its parts together once (:mod:`hseg.store.parts`: the collection, the backend of its
client's shape, the derived indexes, the encoder binding); its reads (:mod:`hseg.store.reads`), writes
(:mod:`hseg.store.writes`) and searches (:mod:`hseg.store.searching`, which plans the reads of
:mod:`hseg.retrieval`) are objects over those parts, and each method here is one call to one of them."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from hseg.chunking.chunks import Chunking
from hseg.chunking.records import Record
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.parents import DEFAULT_OVERSAMPLE
from hseg.retrieval.settings import SearchSettings
from hseg.store.delegation import Delegated
from hseg.store.listing import DocumentPage
from hseg.store.maintenance import Incomplete
from hseg.store.parts import DEFAULT_LOCK_TIMEOUT, StoreParts, open_store, wrap_collection
from hseg.store.reads import LexicalMatch, Reads
from hseg.store.searching import Searcher
from hseg.store.writes import Writes

_PRIVATE = "an internal part of the store, kept for a while"


class HierarchicalStore:
    """Segment + cluster vectors of hierarchical chunks in one Chroma collection.

    Args:
        collection_name: the collection, created (cosine space) when absent.
        path: directory of a ``chromadb.PersistentClient`` (the embedded default).
        client: any chromadb client (``EphemeralClient()``, ``HttpClient(...)``, ...).
        host: a Chroma server, through ``chromadb.HttpClient``.
        port: that server's port.
        encoder: embeds query strings (anything :func:`hseg.encoders.as_encoder` accepts); it must
            be the model that embedded the chunks. Default: all-MiniLM-L6-v2, loaded on first use.
        configuration: extra HNSW settings for a new collection, e.g. ``{"ef_search": 400}`` (or
            Chroma's ``{"hnsw": {...}}`` form). An existing collection keeps its own settings. The
            default ``ef_search`` (4096, :data:`hseg.store.connection.EXACT_SEARCH_RECORDS`) makes
            searches exact, hence identical from one build of the same documents to the next, on
            collections of up to that many records; a lower one is faster on large stores.
        oversample: the first Chroma request asks for ``ceil(oversample * k)`` records (>= 1;
            default 1.5); later requests widen as needed, so this only tunes latency.
        allow_encoder_mismatch: accept an encoder whose name differs from the one recorded in the
            collection (e.g. the same model loaded from another path).
        lock_timeout: seconds a write of an embedded store (``path=``, or a ``PersistentClient``)
            waits while another process writes to it (default 600), then raises
            :class:`hseg.errors.WriterBusyError`; see :meth:`writing`.
        create: ``False`` opens an existing collection only (a :class:`hseg.errors.CollectionNotFoundError`
            naming the collections there when it is absent, a :class:`hseg.errors.StoreNotFoundError` when
            ``path`` holds no Chroma database), so that a store opened to read writes nothing. With ``True``
            and a ``path``, a search of a collection this created and nothing has written yet raises
            :class:`hseg.errors.StoreNotFoundError` (a mistyped path or name) instead of returning ``[]``.

    Only one of ``path``, ``client`` and ``host`` may be given; with none, the store uses
    ``chromadb.EphemeralClient()`` (in memory; all ephemeral clients of a process share data).

    Raises:
        ValueError: more than one of ``path``/``client``/``host``, a ``lock_timeout`` below 0, a space
            other than cosine (in ``configuration`` or the existing collection's).
        EncoderMismatchError: ``encoder`` is not the model the collection records (unless
            ``allow_encoder_mismatch``).
        SchemaTooNewError: the collection was written by a newer hseg.
        CollectionNotFoundError: with ``create=False``, no such collection (``StoreNotFoundError``: no
            Chroma database at ``path``).
        ServerUnreachableError: the Chroma server at ``host`` cannot be reached.

    Example:
        >>> import chromadb
        >>> store = HierarchicalStore("demo", client=chromadb.EphemeralClient())  # doctest: +SKIP
        >>> store.add([chunking], [{"source": "a.md"}])  # doctest: +SKIP
        >>> [h.cluster_id for h in store.search("query", k=2, where={"source": "a.md"})]  # doctest: +SKIP
    """

    lock_timeout = Delegated("_parts.lock_timeout", "Seconds a write of an embedded store waits for another "
                             "process's (see :meth:`writing`).", settable=True)
    encoder = Delegated("_parts.binding.encoder", "The query encoder (the default model is loaded on first "
                        "access).", settable=True)
    encoder_name = Delegated("_parts.binding.recorded", "The encoder name recorded in the collection, if any.")
    planner = Delegated("_searcher.planner", "The search planner.", deprecated=_PRIVATE)
    encoder_binding = Delegated("_parts.binding", "The encoder binding.", deprecated=f"{_PRIVATE}; use encoder, "
                                "encoder_name and use_encoder()")
    unit_index = Delegated("_parts.units", "The unit index.", settable=True, deprecated=f"{_PRIVATE}; use "
                           "sync_unit_index() and stats()")
    lexical_index = Delegated("_parts.lexical", "The lexical index.", deprecated=f"{_PRIVATE}; use "
                              "sync_lexical_index(), stats() and search(lexical_weight=...)")

    def __init__(self, collection_name: str = "hseg", *, path: str | None = None, client: Any = None,
                 host: str | None = None, port: int = 8000, encoder: Any = None,
                 configuration: Mapping[str, Any] | None = None, oversample: float = DEFAULT_OVERSAMPLE,
                 allow_encoder_mismatch: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 create: bool = True) -> None:
        self._init(open_store(collection_name, path=path, client=client, host=host, port=port, encoder=encoder,
                              configuration=configuration, oversample=oversample,
                              allow_mismatch=allow_encoder_mismatch, lock_timeout=lock_timeout, create=create))

    @classmethod
    def from_collection(cls, collection: Any, encoder: Any = None, *, oversample: float = DEFAULT_OVERSAMPLE,
                        allow_encoder_mismatch: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
                        ) -> HierarchicalStore:
        """Wrap an existing chromadb ``Collection`` (e.g. ``langchain_chroma.Chroma._collection``).

        The collection must use the cosine space; it may also hold records of other writers, which
        :meth:`search` ignores.

        Args:
            collection: a chromadb ``Collection``.
            encoder: embeds query strings, as the constructor's.
            oversample: as the constructor's.
            allow_encoder_mismatch: as the constructor's.
            lock_timeout: as the constructor's.

        Returns:
            The store over that collection.

        Raises:
            ValueError: the collection is not in the cosine space, or ``lock_timeout`` is below 0.
            EncoderMismatchError: ``encoder`` is not the model the collection records (unless
                ``allow_encoder_mismatch``).
            SchemaTooNewError: the collection was written by a newer hseg.

        Example:
            >>> vs = langchain_chroma.Chroma("c", embedding_function=emb,  # doctest: +SKIP
            ...     collection_configuration={"hnsw": {"space": "cosine"}})
            >>> store = HierarchicalStore.from_collection(vs._collection, encoder=emb)  # doctest: +SKIP
        """
        self = cls.__new__(cls)
        self._init(wrap_collection(collection, encoder, oversample=oversample, allow_mismatch=allow_encoder_mismatch,
                                   lock_timeout=lock_timeout))
        return self

    def _init(self, parts: StoreParts) -> None:
        self._parts, self.collection, self.client, self.turns = parts, parts.collection, parts.client, parts.turns
        self.oversample, self.allow_encoder_mismatch = parts.oversample, parts.allow_mismatch
        self._reads, self._writes = Reads(parts), Writes(parts)
        self.maintenance = self._writes.maintenance
        """What keeps the store whole: what is incomplete, the repair, what ``hseg index`` remembers
        (:class:`hseg.store.maintenance.Maintenance`)."""
        self._searcher = Searcher(parts, self._reads.refuse_made_by_opening)

    # ----------------------------------------------------------------- writes

    def writing(self) -> AbstractContextManager[None]:
        """Hold this embedded store's writer lock for the block (nothing for a server or in-memory store).

        Every write of the store takes it by itself (:meth:`add`, :meth:`delete`, :meth:`delete_where`,
        :meth:`sync_unit_index`, :meth:`drop`): processes writing one embedded store take turns, each
        waiting up to :attr:`lock_timeout` seconds, then :class:`hseg.store.lock.WriterBusyError`. A
        block of writes made around the store through its collection (e.g. a LlamaIndex
        ``ChromaVectorStore.add``) holds it for all of them; the store's own writes inside take it
        again without waiting. On entry, when another process wrote since this process's client last
        wrote, the client is started anew, so the writes go through a vector index holding that
        process's vectors instead of saving an older one over them (:mod:`hseg.store.lock`,
        :func:`hseg.store.freshness.current_writes`).

        Example:
            >>> with store.writing():  # doctest: +SKIP
            ...     chroma_vector_store.add(nodes)
            ...     store.sync_unit_index(doc_ids)
        """
        return self._writes.writing()

    def writer_turn(self) -> object | None:
        """This process's present hold of the embedded store's writer lock (:func:`hseg.store.lock.writer_turn`;
        ``None``: not held, or a server or in-memory store, which has none)."""
        return self._writes.writer_turn()

    def max_batch_size(self) -> int:
        """Records per write call: the client's ``get_max_batch_size()``
        (:meth:`hseg.store.backends.Backend.max_batch_size`)."""
        return self._parts.batch_size()

    def add(self, chunkings: Chunking | Iterable[Chunking],
            metadatas: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None, *,
            on_written: Callable[[list[str]], None] | None = None, stored: Incomplete | None = None,
            on_same_text: Callable[[dict[str, list[str]]], None] | None = None) -> int:
        """Upsert the records of one or more documents; returns the number of records written.

        ``metadatas`` is one mapping per chunking (or a single mapping for all). Idempotent:
        re-adding the same chunking rewrites the same ids. Records of a re-added document that
        the new chunking no longer has are deleted, and user metadata keys it no longer has are
        removed. All records are built (and validated) before the first write.

        A document given twice with the same text, chunks and metadata is written once; the same
        ``doc_id`` with different content raises ``ValueError``. A blank document (no chunks) writes
        nothing and removes what the store held for its id.

        Crash safety: documents are packed whole into upsert calls (at most :meth:`max_batch_size`
        records each) and Chroma applies one call as a whole, so a process killed mid-``add`` or a
        server that goes away leaves every document either complete or absent. Only a document with
        more records than one call holds (several thousand: megabytes of text) is split; its cluster
        records go first, each carrying its full parent text, so a reader of a partly written
        document still gets whole parents, and adding it again completes it.

        Records of a re-added document that its new chunking lacks are deleted after the upserts. A
        process killed between the two leaves both versions of that document, and :meth:`search` may
        return hits of either, until the document is added again: the next ``add`` of it deletes
        every stored record its chunking lacks, whichever version wrote them. ``hseg index`` does not
        skip such a document as unchanged (records of another text, other settings or another
        chunking make it incomplete: :func:`hseg.ingest.is_complete`), so re-running it cleans up.
        The order of the writes, and what a crash leaves: :mod:`hseg.store.documents`.

        ``on_written(doc_ids)`` is told, after each write call, which documents now have all their
        records stored (their unit-index records follow at the end of the ``add``): what a caller
        needs to say what an ``add`` that failed half way had written.

        Every record carries its document's ``content_sha256``. A document whose text the store
        already holds under another id (a loader's random ids, as LlamaIndex's ``SimpleDirectoryReader``
        gives without ``filename_as_id=True``, store a file again on every run) is written, and
        logged as a warning naming both ids; ``on_same_text({doc id: [other ids]})`` hears the same.

        Args:
            chunkings: one chunking or several (one per document).
            metadatas: one mapping per chunking, or a single mapping for all.
            on_written: called as ``on_written(doc_ids)`` after each write call.
            stored: the answer of :meth:`maintenance.incomplete <hseg.store.maintenance.Maintenance.incomplete>`
                for these documents (``hseg index`` asks it first); what it read of their records is used
                instead of reading them again, while the writer lock it was read under is still held.
            on_same_text: called once, before the write, as ``on_same_text({doc id: other ids})``
                with the documents whose text is stored (or given in this call) under other ids.

        Returns:
            The number of records written.

        Raises:
            ValueError: metadata the store cannot keep, or one ``doc_id`` given twice with different
                content (before anything is written).
            EncoderMismatchError: vectors of another model or dimension than the collection's.
            WriterBusyError: another process kept an embedded store's writer lock past ``lock_timeout``.
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> store.add(chunker.chunk_many(texts, doc_ids), [{"source": p} for p in paths])  # doctest: +SKIP
            57
        """
        return self._writes.add(chunkings, metadatas, on_written=on_written, stored=stored, on_same_text=on_same_text)

    def add_records(self, documents: Mapping[str, Sequence[Record]], *,
                    on_written: Callable[[list[str]], None] | None = None,
                    on_same_text: Callable[[dict[str, list[str]]], None] | None = None) -> int:
        """Write documents given as their records, ``{doc id: records}``, through the write of :meth:`add`
        (turn, writer lock, unit-index and lexical rows, the old version replaced as one unit); returns
        the number of records written. For adapters whose framework carries the records (a LlamaIndex
        node is one record: its id, vector, text and metadata): each document must be whole, as
        :func:`hseg.chunking.records.records_for` builds it (its cluster records tile its text and list
        exactly its segment records).

        Args:
            documents: ``{doc id: records}``.
            on_written: called as ``on_written(doc_ids)`` after each write call, as :meth:`add`'s.
            on_same_text: told the documents whose text is stored under other ids, as :meth:`add`'s
                (which also logs them as a warning).

        Returns:
            The number of records written.

        Raises:
            ValueError: ``documents`` is not a dict, or a document is not whole (naming it), before
                anything is written.
            EncoderMismatchError: vectors of another model or dimension than the collection's.
            WriterBusyError: another process kept an embedded store's writer lock past ``lock_timeout``.
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> store.add_records({"report": records_for(chunking, {"source": "r.md"})})  # doctest: +SKIP
            57
        """
        return self._writes.add_records(documents, on_written=on_written, on_same_text=on_same_text)

    def delete(self, doc_id: str) -> int:
        """Remove every record of a document, and its unit-index and lexical rows.

        Args:
            doc_id: the document.

        Returns:
            How many records were removed (0 for a document the store does not hold).

        Raises:
            WriterBusyError: another process kept an embedded store's writer lock past ``lock_timeout``.
            ServerUnreachableError: the Chroma server cannot be reached.
        """
        return self._writes.delete(doc_id)

    def delete_where(self, where: Mapping[str, Any]) -> int:
        """Remove every record matching a Chroma ``where`` (e.g. another writer's document key). The
        documents' unit-index records go first.

        Args:
            where: a non-empty Chroma ``where``.

        Returns:
            How many records were removed.

        Raises:
            ValueError: ``where`` is not a non-empty dict.
            WriterBusyError: another process kept an embedded store's writer lock past ``lock_timeout``.
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> store.delete_where({"document_id": "report"})  # doctest: +SKIP
            12
        """
        return self._writes.delete_where(where)

    def drop(self) -> None:
        """Delete the collection, its unit index and its lexical index (everything this store holds);
        the store object is unusable afterwards. Deleting only the collection by hand would leave the
        unit index behind, and a later collection of the same name would find it stale.

        Example:
            >>> HierarchicalStore("scratch", path="./chroma").drop()  # doctest: +SKIP
        """
        self._writes.drop()

    def sync_lexical_index(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the lexical (BM25) index of these documents (default: all) from the stored records;
        returns the segments it holds.

        Needed only for documents written into the collection without hseg (e.g. by a LlamaIndex
        ``ChromaVectorStore``); :meth:`add` and :meth:`delete` keep the index in step, and a search or
        ``hseg index`` repairs what a write cut short left (:mod:`hseg.store.lexical`).

        Example:
            >>> store.sync_lexical_index()  # doctest: +SKIP
            2134
        """
        return self._writes.sync_lexical_index(doc_ids)

    def sync_unit_index(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the unit index of these documents (default: all) from the stored records; returns
        the number of unit records written.

        Needed only for documents written into the collection without it (e.g. by a LlamaIndex
        ``IngestionPipeline`` into a ``ChromaVectorStore``, or by hseg before 0.3); :meth:`add`
        keeps the index in step by itself, and ``hseg index`` repairs what a cut-short write left.
        A full rebuild (no ``doc_ids``) also writes an index of an older layout anew in the current
        one, whose records hold fewer metadata keys (:mod:`hseg.retrieval.unit_vectors`).

        Example:
            >>> store.sync_unit_index()  # doctest: +SKIP
            2576
        """
        return self._writes.sync_unit_index(doc_ids)

    def use_encoder(self, encoder: Any) -> None:
        """Embed queries with ``encoder`` from now on, checked against the collection's encoder as the
        constructor checks it.

        Args:
            encoder: anything :func:`hseg.encoders.as_encoder` accepts.

        Raises:
            EncoderMismatchError: ``encoder`` is not the model the collection records (unless
                ``allow_encoder_mismatch``).

        Example:
            >>> store = HierarchicalStore("hseg", path="./chroma-db", create=False)  # doctest: +SKIP
            >>> store.use_encoder(load_encoder(store.encoder_name))  # doctest: +SKIP
        """
        self._parts.binding.use(encoder)

    # ----------------------------------------------------------------- reads

    def count(self, where: Mapping[str, Any] | None = None) -> int:
        """Number of records in the collection (both levels, and records of other writers), or of
        those matching a Chroma ``where``.

        Args:
            where: a Chroma ``where``, or ``None`` for every record.

        Returns:
            The number of records.

        Raises:
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> store.count({"source": "notes/a.md"})  # doctest: +SKIP
            14
        """
        return self._reads.count(where)

    def iter_metadatas(self, where: Mapping[str, Any] | None = None, *, page: int = 5000
                       ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every record's metadata (or that of those matching ``where``), read page by page; records of
        other writers sharing the collection included.

        Args:
            where: a Chroma ``where``, or ``None`` for every record.
            page: records read per call.

        Yields:
            ``(record id, metadata)``.

        Raises:
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> clusters = store.iter_metadatas({"hseg_level": "cluster"})  # doctest: +SKIP
            >>> sources = {m.get("source") for _, m in clusters}  # doctest: +SKIP
        """
        return self._reads.metadatas(where, page)

    def doc_ids(self) -> list[str]:
        """Sorted ids of the documents stored (read from the cluster records, page by page)."""
        return self._reads.doc_ids()

    def document_page(self, offset: int = 0, limit: int = 100, after: str | None = None) -> DocumentPage:
        """A page of the stored documents, sorted by id, each with its size, content hash, time
        indexed and metadata; read from the lexical index (brought in step first, then one snapshot of
        it), so a page costs what its documents hold, not what the store holds. Without a lexical index
        (a store over an object that is not a chromadb collection) every segment record is read.

        Args:
            offset: ids to skip first (a page from an offset skips that many ids).
            limit: the most documents in the page.
            after: list only the ids after this one (a page after an id costs the same however deep
                it lies).

        Returns:
            The page: its documents, how many the store holds, and whether more follow.

        Raises:
            ServerUnreachableError: the Chroma server cannot be reached.
            LexicalIndexStorageError: the lexical index's folder is read-only or its disk full.

        Example:
            >>> page = store.document_page(limit=10)  # doctest: +SKIP
            >>> page.documents[0].doc_id, page.more  # doctest: +SKIP
            ('notes/a.md', True)
            >>> store.document_page(limit=10, after=page.documents[-1].doc_id)  # doctest: +SKIP
        """
        return self._reads.document_page(offset, limit, after)

    def document_ids_near(self, doc_id: str, n: int = 50) -> list[str]:
        """Stored document ids next to ``doc_id`` in sorted order, read as :meth:`document_page` reads:
        the candidates of a "did you mean" that reads little of the store.

        Args:
            doc_id: the id (stored or not) to look around.
            n: the most ids on each side.

        Returns:
            Up to ``n`` ids before ``doc_id`` (nearest first), then up to ``n`` from it on; every id
            without a lexical index.

        Raises:
            ServerUnreachableError: the Chroma server cannot be reached.
            LexicalIndexStorageError: the lexical index's folder is read-only or its disk full.

        Example:
            >>> store.document_ids_near("notes/b.md", n=1)  # doctest: +SKIP
            ['notes/a.md', 'notes/c.md']
        """
        return self._reads.document_ids_near(doc_id, n)

    def lexical_top(self, terms: Sequence[str], limit: int = 10) -> list[LexicalMatch] | None:
        """The best segments for some words by BM25 alone, from the lexical index (brought in step
        first): what a keyword search shows, without the vectors of :meth:`search`.

        Args:
            terms: the words, lower-cased, e.g. ``["tidal", "locking"]`` (each matched as a word, stemmed).
            limit: the most segments.

        Returns:
            ``(row, score, metadata, text)`` of each segment, best first: its lexical row (document,
            cluster, position), its BM25 score, its record's metadata as a search reads it and its
            exact text; ``None`` for a store without a lexical index.

        Raises:
            ServerUnreachableError: the Chroma server cannot be reached.
            LexicalIndexStorageError: the lexical index's folder is read-only or its disk full.

        Example:
            >>> row, score, metadata, text = store.lexical_top(["tides"], limit=3)[0]  # doctest: +SKIP
            >>> row.doc_id, "tides" in text.lower()  # doctest: +SKIP
            ('notes/a.md', True)
        """
        return self._reads.lexical_top(terms, limit)

    def stats(self) -> dict[str, Any]:
        """Counts and mean token sizes of the hseg records, how many documents are whole (their
        records and unit-index records all there, each with its vector;
        :func:`hseg.store.completeness.completeness`), ``records_without_vectors`` and
        ``unit_records_without_vectors`` (records metadata alone keeps: no search finds them), and
        ``record_encoders``, the records counted by the encoder their ``hseg_encoder`` names (more than
        one, or another than ``encoder``, means vectors of several models were written into the
        collection), and ``lexical_index``: where it lives and the segments it holds once checked (a
        damaged file is built again first; ``problem`` says why it cannot be); read page by page
        (:func:`hseg.store.stats.collection_stats`), through a view
        that has seen other processes' writes.

        Example:
            >>> store.stats()["documents"]  # doctest: +SKIP
            5
        """
        return self._reads.stats(self.maintenance.lexical_segments)

    def get_records(self, doc_id: str, *, include_embeddings: bool = True) -> list[Record]:
        """A document's records in document order (each cluster record before its segments).

        Args:
            doc_id: the document.
            include_embeddings: read the vectors too (else each record's ``embedding`` is empty).

        Returns:
            The records (``[]`` for a document the store does not hold).

        Raises:
            ServerUnreachableError: the Chroma server cannot be reached.
        """
        return self._reads.records(doc_id, include_embeddings)

    # ----------------------------------------------------------------- searches

    def search(
        self,
        query: str | np.ndarray | Sequence[float],
        k: int | None = None,
        *,
        settings: SearchSettings | None = None,
        query_text: str | None = None,
        **fields: Any,
    ) -> list[SearchHit]:
        """The best hits for a query, best first: the one search door.

        Args:
            query: a string (embedded with :attr:`encoder`) or a query vector.
            k: results (default 4); a shorthand for ``k=`` in ``fields``.
            settings: a :class:`~hseg.retrieval.settings.SearchSettings` (default: its defaults).
            query_text: the query's words for the lexical side when ``query`` is a vector (a string
                query is its own text); needed only with ``lexical_weight`` > 0.
            fields: any of its fields (``budget_tokens``, ``unit``, ``mode``, ``cluster_weight``,
                ``neighbour_weight``, ``lexical_weight``, ``where``, ``where_document``), overriding ``settings``.

        Returns:
            The hits, best first, each with its exact span of its document.

        Raises:
            ValueError: a setting out of range or unknown (naming it), a ``query_text`` that is not a
                string or is given beside a string query, or ``lexical_weight`` > 0 on a store without
                a lexical index (one wrapping an object that is not a chromadb collection).
            EncoderMismatchError: a query vector of another dimension than the collection's, or a hit
                whose vectors another model made.
            StoreNotFoundError: a store opened at a ``path`` that held none, and nothing written since.
            IndexOutOfStepError: what the search read disagrees with the collection.
            ServerUnreachableError: the Chroma server cannot be reached.

        ``unit="cluster"`` (default) returns whole parents ranked by the max cosine over their vectors
        (paper eq. 2, :mod:`hseg.retrieval.parents`); ``"segment"`` and ``"auto"`` return passages of
        adjacent segments (:mod:`hseg.retrieval.passages`). Every path is exact with respect to the
        neighbours Chroma returns. With ``lexical_weight=λ`` > 0 every unit is ranked by its dense score
        ``+ λ ·`` its BM25 score divided by the query's best (the lexical index,
        :mod:`hseg.store.lexical`), exact with respect to what Chroma and the lexical index return.

        Example:
            >>> [(h.cluster_id, round(h.score, 3)) for h in store.search("tides", k=2)]  # doctest: +SKIP
            [('clu-5d0c...', 0.612), ('clu-a9e1...', 0.574)]
            >>> hits = store.search("tides", budget_tokens=1024, unit="auto")  # doctest: +SKIP
            >>> hybrid = store.search("tides", budget_tokens=1024, unit="auto", lexical_weight=0.3)  # doctest: +SKIP
        """
        return self._searcher.search(query, k, settings=settings, query_text=query_text, **fields)

    def search_many(
        self,
        queries: Sequence[str | np.ndarray | Sequence[float]],
        k: int | None = None,
        *,
        settings: SearchSettings | None = None,
        query_texts: Sequence[str | None] | None = None,
        **fields: Any,
    ) -> list[list[SearchHit]]:
        """:meth:`search` for many queries, with the same settings and the same answers, in fewer
        calls: the searches advance together and each step's reads go to Chroma as one ``query`` with
        many query vectors and one ``get``, and to the lexical index as one read of each kind
        (:mod:`hseg.retrieval.plans`). For evaluations
        and batch jobs; a single question is :meth:`search`.

        Args:
            queries: strings or query vectors.
            k: results per query, as :meth:`search`'s.
            settings: as :meth:`search`'s, for every query.
            query_texts: the words of vector queries for the lexical side (one per query; ``None`` for a
                string query).
            fields: as :meth:`search`'s.

        Returns:
            One list of hits per query, in order.

        Raises:
            ValueError: ``queries`` is not a list, ``query_texts`` not one per query, or as :meth:`search`.
            EncoderMismatchError: as :meth:`search`.
            StoreNotFoundError: as :meth:`search`.
            IndexOutOfStepError: as :meth:`search`.
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> hits = store.search_many(["what causes tides?", "who saw Jupiter's moons?"], budget_tokens=1024,
            ...                          unit="auto")  # doctest: +SKIP
            >>> len(hits)  # doctest: +SKIP
            2
        """
        return self._searcher.search_many(queries, k, settings=settings, query_texts=query_texts, **fields)

    # ----------------------------------------------------------------- async

    async def asearch(self, query: Any, k: int | None = None, *, settings: SearchSettings | None = None,
                      query_text: str | None = None, **fields: Any) -> list[SearchHit]:
        """:meth:`search` in a worker thread (the encoder and Chroma calls block)."""
        return await asyncio.to_thread(functools.partial(self.search, query, k, settings=settings,
                                                         query_text=query_text, **fields))

    async def asearch_many(self, queries: Any, k: int | None = None, *, settings: SearchSettings | None = None,
                           query_texts: Sequence[str | None] | None = None, **fields: Any) -> list[list[SearchHit]]:
        """:meth:`search_many` in a worker thread."""
        return await asyncio.to_thread(functools.partial(self.search_many, queries, k, settings=settings,
                                                         query_texts=query_texts, **fields))

    async def aadd(self, chunkings: Any, metadatas: Any = None) -> int:
        """:meth:`add` in a worker thread."""
        return await asyncio.to_thread(self.add, chunkings, metadatas)

    async def adelete(self, doc_id: str) -> int:
        """:meth:`delete` in a worker thread."""
        return await asyncio.to_thread(self.delete, doc_id)
