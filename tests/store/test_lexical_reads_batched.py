"""The lexical reads of many searches answered together (:func:`hseg.retrieval.plans.run_many`) are
each what the lexical index answers that read alone: by key (the union asked once), scored (every
word read once, each query summed from its own), and the segments after a segment (read for the
largest budget asked, cut to each read's own)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hseg.retrieval.lexical_query import query_terms
from hseg.retrieval.plans import Lexical, run_many, run_one
from tests.store.test_hybrid import QUESTIONS, make_store


def _asked(read: Lexical) -> Any:
    return (yield read)


def _plain(answer: Any) -> Any:
    """An answer with its arrays as lists, to compare with ``==``."""
    if isinstance(answer, tuple):
        return tuple(np.asarray(x).tolist() for x in answer)
    return answer


def test_lexical_reads_answered_together_are_each_the_index_answer_alone(chroma_client, chroma_collection_name):
    store, chunkings, _ = make_store(chroma_client, chroma_collection_name)
    index = store._parts.lexical
    index.ensure_fresh()
    segments = [s.id for ch in chunkings for s in ch.segments]
    clusters = [c.id for ch in chunkings for c in ch.clusters]
    reads = [Lexical(index, "following", (sid,), limit) for sid in segments[::4] for limit in (0, 3, 12, 40, 10**6)]
    reads += [Lexical(index, "following", tuple(segments[i:i + 5]), 25) for i in range(0, len(segments), 7)]
    reads += [Lexical(index, "scored", tuple(query_terms(q))) for q in [*QUESTIONS, "tide", "zebra tide"]]
    reads += [Lexical(index, "scored", (word,)) for word in ("moon", "tide", "zebra")]
    reads += [Lexical(index, kind, tuple(segments[i:i + 6]) + ("no-such-segment",))
              for kind in ("rows", "records", "rowids_of") for i in range(0, len(segments), 9)]
    reads += [Lexical(index, kind, tuple(clusters[i:i + 3]) + ("no-such-cluster",))
              for kind in ("cluster_sizes", "cluster_segments") for i in range(0, len(clusters), 4)]
    reads += [Lexical(index, "ids_at", tuple(range(i, i + 8))) for i in range(1, 40, 6)]
    reads += [Lexical(index, "count")] * 2
    direct = []
    for read in reads:
        if read.kind == "scored":
            direct.append(index.scored(read.keys))
        elif read.kind == "count":
            direct.append(index.count())
        elif read.kind == "following":
            direct.append(index.following(read.keys, read.limit))
        else:
            direct.append(getattr(index, read.kind)(read.keys))
    alone = [run_one(_asked(read)) for read in reads]
    together = run_many([_asked(read) for read in reads])
    assert [_plain(a) for a in alone] == [_plain(d) for d in direct]
    assert [_plain(t) for t in together] == [_plain(d) for d in direct]
    # the chains were long enough for the cut to matter
    assert any(len(d[r.keys[0]]) >= 2 for r, d in zip(reads, direct) if r.kind == "following" and r.limit == 12)
