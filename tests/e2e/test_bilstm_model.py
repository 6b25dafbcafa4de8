"""The shipped BiLSTM weights with the real model: a real document segmented, and ``hseg chunk`` with a
saved copy of the weights (the rest of the segmenter is ``tests/unit/test_bilstm.py``)."""

from __future__ import annotations

import pytest

from tests.support import REPO, shared_or_skip

torch = pytest.importorskip("torch")

from hseg.cli import main  # noqa: E402
from hseg.segmentation.bilstm import BiLSTMSegmenter  # noqa: E402
from hseg.segmentation.wiki727k import read_wiki727k  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def wiki_dev(monkeypatch):
    """``(the first wiki_dev documents, the real encoder on the CPU)``."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from hseg.encoders import as_encoder

    folder = shared_or_skip("data/segmentation/wiki_dev")
    return read_wiki727k(folder, limit=5), as_encoder(None, device="cpu")


@pytest.mark.model
def test_shipped_weights_segment_a_real_document(wiki_dev):
    docs, encoder = wiki_dev
    doc = docs[0]
    seg = BiLSTMSegmenter.load(encoder=encoder)
    ends = seg.boundaries(doc.sentences, encoder.encode(doc.sentences))
    assert ends[-1] == len(doc.sentences) - 1
    assert 1 < len(ends) < len(doc.sentences) // 2


@pytest.mark.model
def test_the_shipped_model_in_numpy_segments_real_documents_as_on_torch(wiki_dev):
    # the default runs the shipped weights' arrays in numpy (no torch to import); a training or a
    # weights file runs them on torch: the same boundaries either way
    from hseg.segmentation.bilstm_core import ArraysSegmenter

    docs, encoder = wiki_dev
    arrays, weights = ArraysSegmenter.load(), BiLSTMSegmenter.load(encoder=encoder, device="cpu")
    for doc in docs:
        vectors = encoder.encode(doc.sentences)
        assert arrays.boundaries(doc.sentences, vectors) == weights.boundaries(doc.sentences, vectors)


# ------------------------------------------------------------------------- segmenter names and paths


@pytest.mark.model
def test_cli_chunk_with_saved_copy_of_the_shipped_weights(tmp_path, monkeypatch, capsys):
    import json

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    copy = BiLSTMSegmenter.load(device="cpu").save(tmp_path / "copy.pt")
    example = REPO / "examples" / "data" / "example.md"
    outputs = []
    for segmenter in (str(copy), "bilstm"):
        assert main(["chunk", str(example), "--segmenter", segmenter, "--format", "json", "--quiet"]) == 0
        outputs.append(json.loads(capsys.readouterr().out)[0])
    assert outputs[0]["segments"] and outputs[0] == outputs[1]  # the file works like the name it was saved from
