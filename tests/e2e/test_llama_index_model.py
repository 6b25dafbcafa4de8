"""llama_index_hseg end to end with the real MiniLM (``encoder`` fixture): a small text on every kind
of Chroma client, and the issue's equivalence on the ``chroma_eval`` corpora: the LlamaIndex path
returns the same parents and scores as the core store. The parser, ClusterVectorizer and retriever on
the hashing encoder are ``tests/unit/test_llama_index.py``.
"""

from __future__ import annotations

import csv

import chromadb
import numpy as np
import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.vector_stores.chroma")

from llama_index.core import Document  # noqa: E402
from llama_index.core.ingestion import IngestionPipeline  # noqa: E402
from llama_index.vector_stores.chroma import ChromaVectorStore  # noqa: E402

from hseg.chunking.chunker import HierarchicalChunker  # noqa: E402
from hseg.store import HierarchicalStore  # noqa: E402
from llama_index_hseg import (  # noqa: E402
    HierarchicalSegmentNodeParser,
    HierarchicalSegmentRetriever,
)
from tests.support.clients import KINDS, client_fixture  # noqa: E402
from tests.unit.test_llama_index import cosine_collection  # noqa: E402

# chroma_client: every kind here, the chroma run server's included
chroma_client = client_fixture(*KINDS)


@pytest.mark.model
def test_e2e_small_on_every_client(chroma_client, chroma_collection_name, encoder, example_text):
    """Real MiniLM, tiny text, on in-memory, on-disk and ``chroma run`` Chroma."""
    text = example_text[: example_text.find("\n\n", 2500) + 2]
    parser = HierarchicalSegmentNodeParser(encoder=encoder, target_tokens=128, min_segment_tokens=16,
                                           max_segment_tokens=64)
    vs = ChromaVectorStore(chroma_collection=cosine_collection(chroma_client, chroma_collection_name))
    try:
        nodes = IngestionPipeline(transformations=[parser], vector_store=vs).run(
            documents=[Document(text=text, id_="tiny", metadata={"source": "example.md"})])
        assert vs._collection.count() == len(nodes) > 1
        target = next(n for n in nodes if n.metadata["hseg_level"] == "segment" and n.metadata["hseg_index"] == 2)
        retriever = HierarchicalSegmentRetriever(vs, encoder=encoder, similarity_top_k=2)
        got = retriever.retrieve(target.text)
        core = HierarchicalStore.from_collection(vs._collection, encoder).search(target.text, k=2)
        assert [(n.node.id_, n.score) for n in got] == [(h.cluster_id, h.score) for h in core]
        # a segment's vector is the token-weighted mean of its sentences' vectors, not the encoding of
        # its whole text, so its own text scores high but not 1 (0.89 here with the shipped segmenter)
        assert got[0].node.id_ == target.metadata["hseg_cluster_id"] and got[0].score > 0.8
        assert text[got[0].node.start_char_idx : got[0].node.end_char_idx] == got[0].node.text
    finally:
        chroma_client.delete_collection(chroma_collection_name)


@pytest.fixture(scope="module")
def chroma_eval(shared_dir, encoder, tmp_path_factory):
    """The three chroma_eval corpora ingested twice on one PersistentClient: through an
    IngestionPipeline into a ChromaVectorStore, and with HierarchicalStore.add (the reference).
    Encoding them takes a minute or more on CPU, so it happens once; the shared CachingEncoder
    serves the second chunking from its cache."""
    paths = sorted((shared_dir / "data" / "chroma_eval" / "corpora").glob("*.md"))
    if len(paths) != 3:
        pytest.skip("the chroma_eval corpora are absent")
    documents = [Document(text=p.read_text(encoding="utf-8"), id_=p.stem, metadata={"corpus_id": p.stem})
                 for p in paths]
    client = chromadb.PersistentClient(path=str(tmp_path_factory.mktemp("li-eval") / "db"))
    vs = ChromaVectorStore(chroma_collection=cosine_collection(client, "llama-index"))
    IngestionPipeline(transformations=[HierarchicalSegmentNodeParser(encoder=encoder)], vector_store=vs).run(
        documents=documents)
    core = HierarchicalStore("core", client=client, encoder=encoder)
    core.add(HierarchicalChunker(encoder=encoder).chunk_many([d.text for d in documents], [d.id_ for d in documents]),
             [d.metadata for d in documents])
    with open(shared_dir / "data" / "chroma_eval" / "questions.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    questions = [rows[i]["question"] for i in range(0, len(rows), max(1, len(rows) // 5))][:5]
    return vs, core, questions


@pytest.mark.model
@pytest.mark.shared_data
@pytest.mark.parametrize("unit, kwargs", [("cluster", {"similarity_top_k": 5}), ("auto", {"budget_tokens": 1024})])
def test_e2e_equivalence_with_the_core_store(chroma_eval, encoder, unit, kwargs):
    vs, core, questions = chroma_eval
    assert vs._collection.count() == core.count()
    retriever = HierarchicalSegmentRetriever(vs, encoder=encoder, unit=unit, **kwargs)
    same_collection = HierarchicalStore.from_collection(vs._collection, encoder)
    search_kwargs = {"k": kwargs.get("similarity_top_k"), "budget_tokens": kwargs.get("budget_tokens"), "unit": unit}
    for q in questions:
        got = [(n.node.metadata["hseg_cluster_id"], n.node.start_char_idx, n.node.end_char_idx, n.score)
               for n in retriever.retrieve(q)]
        for store in (same_collection, core):
            ref = [(h.cluster_id, h.start, h.end, h.score) for h in store.search(q, **search_kwargs)]
            assert [g[:3] for g in got] == [r[:3] for r in ref], q
            np.testing.assert_allclose([g[3] for g in got], [r[3] for r in ref], atol=1e-6)
        assert got
    # the retriever reads a collection the core store wrote just as well
    on_core = HierarchicalSegmentRetriever(core, unit=unit, **kwargs).retrieve(questions[0])
    assert [n.node.metadata["hseg_cluster_id"] for n in on_core] == [
        h.cluster_id for h in core.search(questions[0], **search_kwargs)]
