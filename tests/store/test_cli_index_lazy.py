"""A re-run of ``hseg index`` that finds every document unchanged builds no chunker (issue 47 item 12):
it imported torch and loaded the BiLSTM segmenter (20 s on a busy machine) only to compute the settings
fingerprint that says the documents are unchanged. The store remembers that fingerprint under the
settings key (:func:`hseg.ingest.fingerprint.settings_key`); :class:`hseg.ingest.lazy.LazyChunker` builds
the chunker when a document needs chunking. ``hseg`` runs in processes of its own (a test process has
imported what a build imports already), on the hashing encoder and the default segmenter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hseg.chunking.config import ChunkerConfig
from hseg.ingest.fingerprint import chunk_settings, settings_key
from hseg.ingest.lazy import LazyChunker
from hseg_testing.chunkers import hashing_chunker
from hseg_testing.fakes import HashingEncoder, synthetic_book
from tests.store.test_cli_index import write_file
from tests.support import REPO

CHILD = r"""
import json, sys
sys.path.insert(0, {repo!r})
from hseg.cli import main
from hseg.encoders import factory
from hseg.segmentation import bilstm_core
from hseg_testing.fakes import HashingEncoder

factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
built = []  # the shipped segmenter's weights loaded: the chunker was built
load = bilstm_core.ArraysSegmenter.load.__func__
bilstm_core.ArraysSegmenter.load = classmethod(lambda cls, *a, **k: built.append(1) or load(cls, *a, **k))
code = main(sys.argv[1:])
loaded = {{"torch": "torch" in sys.modules, "bilstm": bool(built)}}
print("MODULES " + json.dumps(loaded))
sys.exit(code)
"""


def _index(tmp_path) -> tuple[str, bool]:
    script = tmp_path / "child.py"
    if not script.exists():
        script.write_text(CHILD.format(repo=str(REPO)), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), "index", "docs", "--db", "db", "--encoder",
                           HashingEncoder.name, "--quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    summary = done.stdout.splitlines()[0]
    modules = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("MODULES "))[8:])
    assert not modules["torch"]  # the shipped segmenter runs in numpy, the hashing encoder needs none
    return summary, modules["bilstm"]


def test_a_rerun_that_chunks_nothing_builds_no_chunker(tmp_path):
    for name in ("a", "b"):
        write_file(tmp_path / "docs" / f"{name}.md", synthetic_book(3000, seed=ord(name)))
    summary, built = _index(tmp_path)
    assert summary.startswith("documents  2 indexed") and built  # the default segmenter: the BiLSTM's weights
    summary, built = _index(tmp_path)
    assert summary.startswith("documents  0 indexed, 2 unchanged") and not built, summary  # was: the BiLSTM loaded
    write_file(tmp_path / "docs" / "a.md", synthetic_book(3000, seed=99))
    summary, built = _index(tmp_path)
    assert summary.startswith("documents  1 indexed, 1 unchanged") and built  # a document to chunk: built
    summary, built = _index(tmp_path)
    assert summary.startswith("documents  0 indexed, 2 unchanged") and not built, summary


def test_the_settings_key_decides_the_fingerprint(tmp_path):
    """Equal keys must mean equal fingerprints (a store reuses one), and what changes a fingerprint must
    change the key: the settings, the encoder, the segmenter's weights file."""
    base = ChunkerConfig(segmenter="texttiling")
    key = settings_key(base, HashingEncoder.name)
    assert key == settings_key(ChunkerConfig(segmenter="texttiling", show_progress=True), HashingEncoder.name)
    for other in (settings_key(base.replace(target_tokens=128), HashingEncoder.name),
                  settings_key(base.replace(structure="none"), HashingEncoder.name),
                  settings_key(base, "another-encoder"), settings_key(ChunkerConfig(), HashingEncoder.name)):
        assert other != key
    from hseg.segmentation.segmenters import DEFAULT_WEIGHTS

    weights = tmp_path / "mine.pt"
    weights.write_bytes(DEFAULT_WEIGHTS.read_bytes())
    first = settings_key(ChunkerConfig(segmenter=weights), HashingEncoder.name)
    weights.write_bytes(DEFAULT_WEIGHTS.read_bytes() + b"\0")  # other bytes at the same path
    assert settings_key(ChunkerConfig(segmenter=weights), HashingEncoder.name) != first
    from hseg.segmentation.segmenters import TextTilingSegmenter

    assert settings_key(ChunkerConfig(segmenter=TextTilingSegmenter()), HashingEncoder.name) is None  # an object

    real = chunk_settings(hashing_chunker(segmenter="texttiling"))
    lazy = LazyChunker(lambda: hashing_chunker(segmenter="texttiling"), key, real)
    assert chunk_settings(lazy) == real and not lazy.built
    assert chunk_settings(LazyChunker(lambda: hashing_chunker(segmenter="texttiling"), key, None)) == real


def test_a_remembered_fingerprint_the_chunker_contradicts_is_replaced(caplog):
    remembered = "stale fingerprint"
    lazy = LazyChunker(lambda: hashing_chunker(segmenter="texttiling"), "key", remembered)
    assert chunk_settings(lazy) == remembered  # nothing built yet: what the store said
    lazy.chunk_many(["Some text. More text."], ["d"])
    assert chunk_settings(lazy) == chunk_settings(hashing_chunker(segmenter="texttiling"))
    assert "differs from the one the store remembers" in caplog.text
