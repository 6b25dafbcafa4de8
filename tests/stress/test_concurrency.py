"""Reliability (issue 7), concurrency: eight reader threads and one writer on one persistent store; every
answer exact, every document whole (hashing encoder).

Two writer processes are ``tests/stress/test_two_writers.py`` and ``tests/stress/test_lexical_kill_9.py``.
See ``docs/reliability.md``.
"""

from __future__ import annotations

import random
import threading
import time
import traceback

from hseg.store import HierarchicalStore
from hseg_testing.checks import document_problems, stored_documents
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder, synthetic_book


def test_eight_readers_and_one_writer_on_one_persistent_store(tmp_path):
    chunker = small_chunker()
    texts = {f"doc{i:02d}": synthetic_book(2_500, seed=300 + i) for i in range(36)}
    path = str(tmp_path / "db")
    writer_store = HierarchicalStore("conc", path=path, encoder=HashingEncoder())
    first = list(texts)[:8]
    writer_store.add(chunker.chunk_many([texts[d] for d in first], first))
    reader = HierarchicalStore("conc", path=path, encoder=HashingEncoder())
    queries = ["river delta flood water", "engine piston torque", "court appeal verdict", "orbit planet comet",
               "bread flour yeast oven", "vaccine immune dose", "market price trade", "glacier ice summit"]
    errors: list[BaseException] = []
    answers = [0]
    lock = threading.Lock()

    def read(worker: int) -> None:
        rnd = random.Random(worker)
        try:
            for i in range(30):  # bounded
                q = rnd.choice(queries)
                unit = ("cluster", "segment", "auto")[i % 3]
                hits = reader.search(q, k=4, unit=unit) if i % 2 else reader.search(q, budget_tokens=600, unit=unit)
                got = reader.collection.get(ids=list({h.cluster_id for h in hits}), include=["documents", "metadatas"])
                parents = dict(zip(got["ids"], got["documents"]))
                for h in hits:
                    source = texts[h.doc_id]
                    assert h.text == source[h.start : h.end]  # the returned text is exact
                    assert h.cluster_id in parents  # its parent exists ...
                    parent = parents[h.cluster_id]
                    m = got["metadatas"][got["ids"].index(h.cluster_id)]
                    assert parent == source[m["hseg_start"] : m["hseg_end"]]  # ... with its full text
                    if unit == "cluster":
                        assert h.text == parent
                    elif unit == "segment":
                        assert h.text in parent
                    else:  # an auto passage starts in its parent and may go on past it (rule 5)
                        assert m["hseg_start"] <= h.start < m["hseg_end"] and h.end > h.start
                with lock:
                    answers[0] += 1
        except BaseException as exc:
            errors.append(exc)

    def write() -> None:
        try:
            for d in list(texts)[8:]:
                writer_store.add(chunker.chunk(texts[d], d))
            writer_store.add(chunker.chunk(texts[first[0]], first[0]))  # idempotent re-add while read
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(w,)) for w in range(8)] + [threading.Thread(target=write)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, 180 - (time.monotonic() - start)))
    assert not any(t.is_alive() for t in threads), "a thread did not finish within 180 s"
    # whole tracebacks: a rare Chroma error here must say which read raised it
    assert errors == [], "\n".join("".join(traceback.format_exception(e)) for e in errors[:3])
    assert answers[0] == 8 * 30
    final = stored_documents(writer_store.collection)
    assert set(final) == set(texts)
    assert all(document_problems(final[d], texts[d]) == [] for d in texts)
