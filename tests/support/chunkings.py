"""Synthetic chunkings: valid ``Chunking`` objects with random unit vectors, no chunker and no model
(the ``make_chunking`` fixture of ``tests/conftest.py``)."""

from __future__ import annotations

import re

import numpy as np

from hseg.chunking.chunks import Chunking, Cluster, Segment, chunk_id


def build_synthetic_chunking(doc_id, rng, *, n_clusters=4, max_segments=4, dim=16, segment_vectors=None,
                             vocabulary=None):
    """A valid ``Chunking`` with random unit vectors (cluster vector = normalised segment mean).

    ``segment_vectors`` (n, dim) fixes the segment vectors; then every cluster gets
    ``max_segments`` segments and ``n`` must equal ``n_clusters * max_segments``. With
    ``vocabulary`` (a list of words) each segment's text is a few words drawn from it (for the
    lexical side), instead of a run of ``w``.
    """
    sizes = ([max_segments] * n_clusters if segment_vectors is not None
             else [int(x) for x in rng.integers(1, max_segments + 1, n_clusters)])
    segments, clusters, pos, idx = [], [], 0, 0
    for ci, size in enumerate(sizes):
        members = []
        for _ in range(size):
            if vocabulary is None:
                text = f"{doc_id} segment {idx} " + "w" * int(rng.integers(1, 30)) + ".\n"
            else:
                words = rng.choice(vocabulary, size=int(rng.integers(3, 12)))
                text = f"{doc_id} segment {idx} " + " ".join(words) + ".\n"
                # a cut after each word, sized as the segment is (rule 6 of the auto unit can end there)
                cuts = tuple((m.end(), 1 + m.end() // 4) for m in re.finditer(r"[a-z]+(?= )", text))
            if segment_vectors is not None:
                vec = np.asarray(segment_vectors[idx], dtype=np.float32)
            else:
                vec = rng.standard_normal(dim).astype(np.float32)
            vec = vec / np.linalg.norm(vec)
            members.append(Segment(chunk_id(doc_id, "segment", pos, pos + len(text)), doc_id, idx, pos,
                                   pos + len(text), text, 1 + len(text) // 4, idx, idx + 1, vec,
                                   cuts=cuts if vocabulary is not None else ()))
            pos += len(text)
            idx += 1
        mean = np.mean([s.embedding for s in members], axis=0)
        start, end = members[0].start, members[-1].end
        clusters.append(Cluster(chunk_id(doc_id, "cluster", start, end), doc_id, ci, start, end,
                                "".join(s.text for s in members), sum(s.token_count for s in members),
                                tuple(members), (mean / np.linalg.norm(mean)).astype(np.float32)))
        segments.extend(members)
    return Chunking(doc_id, "".join(s.text for s in segments), tuple(segments), tuple(clusters))
