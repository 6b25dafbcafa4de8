"""Two writes of one document id at the same moment end with one version of it, never records of
both (issue 54, finding 2): threads of one process (``aadd`` runs in a thread) here, on every in-process
client; clients of one ``chroma run`` server in ``tests/e2e/test_one_version_per_document_server.py``."""

from __future__ import annotations

import threading

import pytest

from hseg.store import HierarchicalStore
from hseg_testing.checks import document_problems, stored_documents_of
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder

ROUNDS = 12

TEXTS = [
    "\n\n".join(f"Version {v}, paragraph {p}: tides rise and fall as the moon pulls the sea, and the "
                f"coast floods twice a day in version {v}." for p in range(6 + 3 * v))
    for v in range(2)
]


def at_once(writes: list) -> list[BaseException]:
    """Run each of ``writes`` in a thread of its own, all released at one moment; the errors raised."""
    barrier = threading.Barrier(len(writes))
    errors: list[BaseException] = []

    def run(write) -> None:
        barrier.wait()
        _catch(errors, write)

    threads = [threading.Thread(target=run, args=(w,)) for w in writes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def versions_of(store: HierarchicalStore, doc_id: str) -> set[int]:
    """Which of :data:`TEXTS` the stored records of ``doc_id`` came from (a whole document: exactly one)."""
    records = stored_documents_of(store, doc_id)
    assert document_problems(records) == [], document_problems(records)
    return {v for r in records.values() for v, text in enumerate(TEXTS) if r["doc"] in text
            and r["meta"]["hseg_level"] == "cluster"}


def test_two_threads_adding_one_document_leave_one_version(chroma_client, chroma_collection_name):
    chunker = small_chunker()
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder())
    chunkings = [chunker.chunk(t, doc_id="report") for t in TEXTS]
    for round_ in range(ROUNDS):
        errors = at_once([lambda i=i: store.add(chunkings[(i + round_) % 2]) for i in range(2)])  # noqa: B023
        assert not errors, errors
        assert len(versions_of(store, "report")) == 1, f"round {round_}: both versions stored"


def test_a_second_store_object_on_the_collection_waits_too(chroma_client, chroma_collection_name):
    """The turn belongs to the collection, not to the store object: a retriever's store and the user's
    (two objects over one collection) take turns."""
    chunker = small_chunker()
    stores = [HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder())
              for _ in range(2)]
    chunkings = [chunker.chunk(t, doc_id="report") for t in TEXTS]
    for round_ in range(ROUNDS):
        assert not at_once([lambda i=i: stores[i].add(chunkings[(i + round_) % 2]) for i in range(2)])  # noqa: B023
        assert len(versions_of(stores[0], "report")) == 1, f"round {round_}: both versions stored"


def test_a_thread_holding_a_documents_turn_writes_it_again_at_once(chroma_client, chroma_collection_name):
    chunker = small_chunker()
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder(),
                              lock_timeout=5)
    with store.turns.taking(["report"], 5):
        store.add(chunker.chunk(TEXTS[0], doc_id="report"))
        assert store.delete("report") > 0


def test_another_thread_waits_for_the_turn_and_is_told_after_the_timeout(chroma_client, chroma_collection_name):
    from hseg.errors import WriterBusyError

    chunker = small_chunker()
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder(),
                              lock_timeout=0.3)
    chunking = chunker.chunk(TEXTS[0], doc_id="report")
    errors: list[BaseException] = []
    with store.turns.taking(["report"], 5):
        t = threading.Thread(target=lambda: _catch(errors, store.add, chunking))
        t.start()
        t.join()
    assert len(errors) == 1 and isinstance(errors[0], WriterBusyError), errors
    assert "report" in str(errors[0])
    assert store.count() == 0


def _catch(errors: list[BaseException], fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - the test reads it
        errors.append(exc)


@pytest.mark.parametrize("n_docs", [3])
def test_overlapping_sets_of_documents_never_wait_on_each_other(chroma_client, chroma_collection_name, n_docs):
    """Writes of overlapping sets of documents in opposite orders: the turns are taken in one order, so
    neither waits for the other forever (the timeout would name it)."""
    chunker = small_chunker()
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder(),
                              lock_timeout=60)
    docs = [chunker.chunk(TEXTS[0], doc_id=f"d{i}") for i in range(n_docs)]
    errors = at_once([lambda order=order: store.add(order) for order in (docs, docs[::-1])])
    assert not errors, errors
    assert store.doc_ids() == [f"d{i}" for i in range(n_docs)]


def test_what_hseg_index_read_before_its_turn_is_read_again_in_it(chroma_client, chroma_collection_name):
    """``hseg index`` asks which documents are incomplete, then adds them with what it read (``stored=``).
    Read outside a hold of the writer lock (a server's client, an in-memory store, a library caller), that
    answer may be older than another writer's version of the document: the add reads the document's
    records again in its turn, and replaces that version too."""
    from hseg.store.maintenance import Expected

    chunker = small_chunker()
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder())
    mine, theirs = (chunker.chunk(t, doc_id="report") for t in TEXTS)
    answer = store.maintenance.incomplete({"report": Expected("sha", "settings", len(TEXTS[0]))})
    assert answer.doc_ids == ("report",) and not answer.holds("report")
    store.add(theirs)  # another writer, between the question and the add
    store.add(mine, stored=answer)
    assert versions_of(store, "report") == {0}


def test_a_dead_writers_lease_is_taken_after_it_stays_unchanged(monkeypatch):
    """A client killed while it held a document's lease (on a server) leaves the lease record: the next
    writer takes it once it has stayed unchanged for ``STALE_S`` on its own clock, and giving a lease back
    never deletes another holder's."""
    import time
    import uuid

    import chromadb

    from hseg.errors import WriterBusyError
    from hseg.store import turns

    col = chromadb.EphemeralClient().create_collection(f"t-{uuid.uuid4().hex}", embedding_function=None)
    leases = turns.Leases(col)
    col.add(ids=[turns.lease_id("report")], embeddings=[[1.0]], metadatas=[{"kind": "turn", "holder": "dead"}])
    with pytest.raises(WriterBusyError, match="report"):
        leases.take(["report"], time.monotonic() + 0.3, "store 'x'")
    monkeypatch.setattr(turns, "STALE_S", 0.2)
    token = leases.take(["report", "other"], time.monotonic() + 10, "store 'x'")
    held = col.get(ids=[turns.lease_id("report"), turns.lease_id("other")], include=["metadatas"])
    assert [m["holder"] for m in held["metadatas"]] == [token, token]
    leases._delete([turns.lease_id("report")], "dead")  # the dead writer's give-back, late: deletes nothing
    assert len(col.get(ids=[turns.lease_id("report")])["ids"]) == 1
    leases.give_back(token)
    assert col.count() == 0
