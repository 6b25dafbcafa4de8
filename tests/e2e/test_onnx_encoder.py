"""The ONNX Runtime backend (issue 13) with the real model: same vectors as torch, cached export, a query
path without torch. Its settings and arguments are ``tests/unit/test_onnx_encoder_options.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hseg.encoders import (
    BACKENDS,
    DEFAULT_MODEL,
    OnnxEncoder,
    as_encoder,
)
from hseg.encoders.onnx_model import MANIFEST_NAME
from tests.support import REPO

TEXTS = [
    "Galileo saw four moons circling Jupiter.",
    "Precession is the slow wobble of a spinning body's axis.",
    "x",
    "Ümlauts, accents (café, naïve) and CJK 東京.",
    "A long paragraph about tides. " * 80,  # beyond the 256-token window: truncated identically
]


@pytest.fixture(scope="module")
def onnx_encoder():
    return OnnxEncoder(device="cpu")


@pytest.mark.model
def test_onnx_vectors_equal_torch_vectors(onnx_encoder, encoder):
    torch_vectors = encoder.encoder.encode(TEXTS)
    onnx_vectors = onnx_encoder.encode(TEXTS)
    assert onnx_vectors.dtype == np.float32 and onnx_vectors.shape == torch_vectors.shape
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(onnx_vectors * torch_vectors, axis=1)) >= 0.9999
    query = "What did Galileo see?"
    assert float(onnx_encoder.encode_query(query) @ encoder.encoder.encode_query(query)) >= 0.9999
    # one batch or many, longest first: the order of the output is the order of the input
    one_by_one = np.stack([onnx_encoder.encode([t])[0] for t in TEXTS])
    assert np.allclose(one_by_one, onnx_vectors, atol=1e-5)


@pytest.mark.model
def test_a_one_thread_session_gives_the_same_vectors(onnx_encoder):
    # Ray workers sharing a machine run one thread each (hseg.ingest.ray)
    single = as_encoder(None, backend="onnx", threads=1)
    assert single.runner.session.get_session_options().intra_op_num_threads == 1
    np.testing.assert_allclose(single.encode(TEXTS), onnx_encoder.encode(TEXTS), atol=1e-6)


@pytest.mark.model
def test_onnx_encoder_describes_the_model_like_torch(onnx_encoder, encoder):
    torch_encoder = encoder.encoder
    assert onnx_encoder.name == torch_encoder.name == DEFAULT_MODEL
    assert onnx_encoder.dimension == torch_encoder.dimension == 384
    assert onnx_encoder.max_seq_length == torch_encoder.max_seq_length
    assert [onnx_encoder.count_tokens(t) for t in TEXTS] == [torch_encoder.count_tokens(t) for t in TEXTS]
    assert onnx_encoder.encode([]).shape == (0, 384)
    assert onnx_encoder.providers[-1] == "CPUExecutionProvider"


@pytest.mark.model
def test_export_is_cached_and_redone_when_the_weights_change(onnx_encoder, monkeypatch):
    import hseg.encoders.onnx_runtime as onnx_export  # where OnnxEncoder looks export_model up

    def no_export(*args, **kwargs):
        raise AssertionError("exported again although the cache is fresh")

    with monkeypatch.context() as mp:
        mp.setattr(onnx_export, "export_model", no_export)
        OnnxEncoder(device="cpu")  # served from the cache
    manifest_path = onnx_encoder.folder / MANIFEST_NAME
    saved = manifest_path.read_text()
    data = json.loads(saved)
    data["source"] = "/elsewhere/model.safetensors:1:1"  # as if the weights had been replaced
    manifest_path.write_text(json.dumps(data))
    calls = []
    real = onnx_export.export_model
    monkeypatch.setattr(onnx_export, "export_model", lambda *a, **k: calls.append(a) or real(*a, **k))
    redone = OnnxEncoder(device="cpu")
    assert len(calls) == 1 and redone.manifest.source != data["source"]
    assert redone.manifest.min_probe_cosine >= 0.9999


@pytest.mark.model
def test_export_refuses_a_model_it_would_encode_differently(encoder, tmp_path):
    from hseg.encoders.onnx_export import _describe

    model = encoder.encoder.model
    tokenizer = model[0].tokenizer
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        with pytest.raises(ValueError, match="pads on the left.*backend='torch'"):
            _describe(model, DEFAULT_MODEL, DEFAULT_MODEL)
    finally:
        tokenizer.padding_side = side


@pytest.mark.model
def test_the_chunker_runs_on_either_backend_with_the_same_chunks(example_text):
    from hseg.chunking.chunker import HierarchicalChunker

    chunkings = {b: HierarchicalChunker(backend=b, device="cpu").chunk(example_text, doc_id="ex") for b in BACKENDS}
    onnx, torch = chunkings["onnx"], chunkings["torch"]
    assert [(s.start, s.end) for s in onnx.segments] == [(s.start, s.end) for s in torch.segments]
    assert [(c.start, c.end) for c in onnx.clusters] == [(c.start, c.end) for c in torch.clusters]
    assert onnx.info["encoder"] == torch.info["encoder"] == DEFAULT_MODEL


@pytest.mark.model
def test_the_adapters_and_the_cli_pick_the_backend_by_the_same_setting():
    from hseg.cli import build_parser
    from hseg.encoders import SentenceTransformerEncoder
    from langchain_hseg import HierarchicalSegmentTextSplitter
    from llama_index_hseg import HierarchicalSegmentNodeParser

    def base(encoder):
        return getattr(encoder, "encoder", encoder)  # under the chunker's CachingEncoder

    assert isinstance(base(HierarchicalSegmentTextSplitter().chunker.encoder), OnnxEncoder)
    torch_splitter = HierarchicalSegmentTextSplitter(backend="torch", device="cpu")
    assert isinstance(base(torch_splitter.chunker.encoder), SentenceTransformerEncoder)
    assert isinstance(base(HierarchicalSegmentNodeParser(backend="onnx").chunker.encoder), OnnxEncoder)
    parser = build_parser()
    for command in (["index", "f.md", "--db", "d"], ["query", "q", "--db", "d"], ["eval-segmenter", str(REPO)]):
        assert parser.parse_args(command).backend == "onnx"
        assert parser.parse_args([*command, "--backend", "torch"]).backend == "torch"
    with pytest.raises(SystemExit):
        parser.parse_args(["query", "q", "--db", "d", "--backend", "tf"])


@pytest.mark.model
def test_a_query_served_by_onnx_imports_neither_torch_nor_transformers(onnx_encoder, tmp_path):
    """``hseg query`` end to end in a fresh interpreter, on a store written by ``hseg index``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    db = tmp_path / "db"
    subprocess.run([sys.executable, "-m", "hseg.cli", "index", str(REPO / "examples/data/example.md"), "--db", str(db),
                    "--quiet"], check=True, env=env, capture_output=True, timeout=300)
    probe = ("import sys, json; from hseg.cli import main; "
             "code = main(['query', 'What did Galileo see through his telescope?', '--db', sys.argv[1], '-k', '2', "
             "'--json']); "
             "print(json.dumps({'code': code, 'heavy': sorted(m for m in ('torch', 'transformers', "
             "'sentence_transformers') if m in sys.modules)}))")
    # a bound against a hang only, so generous: a busy machine stretches a fresh interpreter's imports
    out = subprocess.run([sys.executable, "-c", probe, str(db)], check=True, env=env, capture_output=True, text=True,
                         timeout=600).stdout
    hits, status = out[:out.rindex("\n", 0, len(out) - 1)], json.loads(out.strip().splitlines()[-1])
    assert status == {"code": 0, "heavy": []}
    assert "Jupiter" in hits or "telescope" in hits
