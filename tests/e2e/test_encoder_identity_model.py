"""Which encoder made a chunking (issue 12, items 7–9), with the real model: the offline folder is the
default model, and long sentences chunk without the tokenizer's warning. The rest, on the hashing
encoder, is ``tests/unit/test_encoder_identity.py``."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.encoders import DEFAULT_MODEL, SentenceTransformerEncoder
from tests.unit.test_encoder_identity import offline_folder


@pytest.mark.model
def test_the_offline_folder_is_the_default_model_for_the_segmenter_too():
    enc = SentenceTransformerEncoder(offline_folder())
    assert enc.name == DEFAULT_MODEL
    assert HierarchicalChunker(encoder=enc).segmenter.name == "bilstm"  # not the TextTiling fallback


@pytest.mark.model
def test_long_sentences_do_not_print_the_transformers_length_warning(caplog, capfd):
    enc = SentenceTransformerEncoder()  # a fresh tokenizer: transformers warns once per tokenizer
    long_sentence = " ".join(f"word{i}" for i in range(900)) + "."
    with caplog.at_level(logging.WARNING):
        chunking = HierarchicalChunker(encoder=enc).chunk(long_sentence + " A short one.", doc_id="long")
    assert chunking.segments
    said = caplog.text + "".join(capfd.readouterr())
    assert "Token indices sequence length" not in said
    assert np.isfinite(np.stack([s.embedding for s in chunking.segments])).all()
