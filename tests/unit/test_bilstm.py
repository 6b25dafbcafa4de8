"""The BiLSTM segmenter: reader, training, persistence, encoder checks, CLI parsers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hseg.cli import main  # noqa: E402
from hseg.segmentation.bilstm import BiLSTMSegmenter, boundaries_from_scores, sentence_features, window_starts  # noqa: E402
from hseg.segmentation.training import TrainConfig, embed_documents, train_segmenter  # noqa: E402
from hseg.segmentation.wiki727k import parse_wiki727k, read_wiki727k  # noqa: E402

DIM = 16


class FakeEncoder:
    """Sentences 'tK ...' map to topic K's direction plus hash noise: segments are separable."""

    name = "fake-encoder"
    dimension = DIM

    def __init__(self):
        self.topics = np.random.default_rng(1).normal(size=(50, DIM))
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = []
        for t in texts:
            seed = int(hashlib.md5(t.encode()).hexdigest()[:8], 16)
            v = self.topics[int(t.split()[0][1:])] + 0.8 * np.random.default_rng(seed).normal(size=DIM)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)

    def encode_query(self, text):  # the chunker takes any hseg.encoders.Encoder
        return self.encode([text])[0]


def _write_corpus(root: Path, n_docs: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    for d in range(n_docs):
        lines = ["========,1,preface."]
        for s in range(int(rng.integers(3, 6))):
            topic = int(rng.integers(0, 50))
            if s == 1:
                lines.append("========,1,Parent.")  # an empty parent section: no boundary of its own
            lines.append(f"========,{1 + (s == 1)},Section {s}.")
            lines += [f"t{topic} sentence {d} {s} {i}." for i in range(int(rng.integers(2, 7)))]
        (root / f"{d:03d}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seg")
    train = read_wiki727k(_write_corpus(tmp / "train", 24, 0))
    dev = read_wiki727k(_write_corpus(tmp / "dev", 6, 1))
    enc = FakeEncoder()
    cache = tmp / "cache"
    te = embed_documents(train, enc, cache_dir=cache, quiet=True)
    de = embed_documents(dev, enc, cache_dir=cache, quiet=True)
    cfg = TrainConfig(epochs=4, patience=4, hidden=32, window=16, batch_size=8, quiet=True, device="cpu")
    result = train_segmenter(train, te, dev, de, encoder_name=enc.name, config=cfg)
    return result, dev, de, tmp, enc, cache, train


def test_reader_skips_empty_parent_sections_and_blank_lines():
    doc = parse_wiki727k("========,1,preface.\nA.\n\nB.\n========,1,X.\n========,2,Y.\nC.\nD.\n")
    assert doc.sentences == ["A.", "B.", "C.", "D."]
    assert doc.labels == [0, 1, 0, 1]
    assert doc.masses == [2, 2]


def test_embedding_cache_is_reused(trained):
    _, dev, de, _, enc, cache, _ = trained
    calls = enc.calls
    again = embed_documents(dev, enc, cache_dir=cache, quiet=True)
    assert enc.calls == calls  # everything came from disk
    assert all(np.allclose(a, b) for a, b in zip(again, de))


def test_training_lowers_the_loss(trained):
    result = trained[0]
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < losses[0]
    card = result.segmenter.card
    assert card["encoder"] == {"name": "fake-encoder", "dimension": DIM}
    assert 0 < card["threshold"] < 1 and "pk" in card["dev_metrics"]


def test_training_resumes_from_its_checkpoint_as_if_never_stopped(trained, tmp_path, monkeypatch):
    import hseg.segmentation.training as training

    _, dev, de, tmp, enc, cache, train = trained
    te = embed_documents(train, enc, cache_dir=cache, quiet=True)
    cfg = TrainConfig(epochs=4, patience=4, hidden=32, window=16, batch_size=8, quiet=True, device="cpu", seed=3)
    whole = train_segmenter(train, te, dev, de, encoder_name=enc.name, config=cfg)

    ckpt = tmp_path / "run.ckpt"
    real_save = training._save_checkpoint

    def killed_after_epoch_2(*args, **kwargs):
        real_save(*args, **kwargs)
        if len(kwargs["history"]) == 2:
            raise KeyboardInterrupt  # the process dies right after the second checkpoint

    monkeypatch.setattr(training, "_save_checkpoint", killed_after_epoch_2)
    with pytest.raises(KeyboardInterrupt):
        train_segmenter(train, te, dev, de, encoder_name=enc.name, config=cfg, checkpoint=ckpt)
    monkeypatch.setattr(training, "_save_checkpoint", real_save)
    resumed = train_segmenter(train, te, dev, de, encoder_name=enc.name, config=cfg, checkpoint=ckpt)
    assert [h["epoch"] for h in resumed.history] == [1, 2, 3, 4]
    assert [round(h["train_loss"], 6) for h in resumed.history] == [round(h["train_loss"], 6) for h in whole.history]
    assert resumed.segmenter.threshold == whole.segmenter.threshold
    for a, b in zip(resumed.segmenter.model.state_dict().values(), whole.segmenter.model.state_dict().values()):
        assert torch.allclose(a, b)
    # a checkpoint of another run (other settings) is not resumed: training starts over
    other = TrainConfig(epochs=1, patience=4, hidden=32, window=16, batch_size=8, quiet=True, device="cpu", seed=4)
    assert len(train_segmenter(train, te, dev, de, encoder_name=enc.name, config=other,
                               checkpoint=ckpt).history) == 1


def test_save_load_gives_identical_predictions(trained):
    result, dev, de, tmp, *_ = trained
    seg = result.segmenter
    path = seg.save(tmp / "model.pt", half=False)
    assert path.with_suffix(".json").is_file()
    loaded = BiLSTMSegmenter.load(path, device="cpu")
    for d, e in zip(dev, de):
        np.testing.assert_allclose(loaded.gap_scores(d.sentences, e), seg.gap_scores(d.sentences, e), atol=1e-6)
        assert loaded.boundaries(d.sentences, e) == seg.boundaries(d.sentences, e)


def test_encoder_mismatch_is_refused(trained):
    result, dev, _, tmp, *_ = trained
    path = result.segmenter.save(tmp / "model16.pt")
    with pytest.raises(ValueError, match="trained on"):
        BiLSTMSegmenter.load(path, encoder=type("E", (), {"name": "other-model", "dimension": DIM})())
    loaded = BiLSTMSegmenter.load(path, encoder=FakeEncoder())
    with pytest.raises(ValueError, match="dimension 8"):
        loaded.boundaries(dev[0].sentences, np.zeros((len(dev[0].sentences), 8), dtype=np.float32))


def test_long_documents_run_in_windows(trained):
    seg = trained[0].segmenter
    docs = trained[6]
    sentences = [s for d in docs for s in d.sentences]
    emb = FakeEncoder().encode(sentences)
    assert len(sentences) > 2 * seg.window
    scores = seg.gap_scores(sentences, emb)
    assert scores.shape == (len(sentences) - 1,) and np.all((scores >= 0) & (scores <= 1))
    ends = seg.boundaries(sentences, emb)
    assert ends[-1] == len(sentences) - 1 and ends == sorted(ends)
    assert window_starts(10, 4, 1) == [0, 3, 6]
    assert boundaries_from_scores(np.array([0.2, 0.9, 0.8, 0.1, 0.7]), 0.5) == [1, 4]


def test_the_gap_windows_a_model_was_trained_on_travel_with_it(trained):
    from hseg.segmentation.bilstm import GAP_WINDOWS, LEGACY_GAP_WINDOWS, gap_feature_count

    result, dev, de, tmp, *_ = trained
    seg = result.segmenter
    assert seg.gap_windows == GAP_WINDOWS and seg.card["gap_windows"] == list(GAP_WINDOWS)
    assert seg.model.config["input_dim"] == DIM + gap_feature_count(GAP_WINDOWS)
    loaded = BiLSTMSegmenter.load(seg.save(tmp / "windows.pt"), device="cpu")
    assert loaded.gap_windows == GAP_WINDOWS
    # weights whose card names no set (the first shipped model) read the legacy signals
    card = {k: v for k, v in seg.card.items() if k != "gap_windows"}
    legacy = BiLSTMSegmenter(type(seg.model)(DIM + gap_feature_count(LEGACY_GAP_WINDOWS), hidden=32), card,
                             device="cpu")
    assert legacy.gap_windows == LEGACY_GAP_WINDOWS
    assert legacy.gap_scores(dev[0].sentences, de[0]).shape == (len(dev[0].sentences) - 1,)


def test_features_shape_and_bad_input():
    assert sentence_features(np.eye(5, dtype=np.float32)).shape[0] == 5
    assert sentence_features(np.eye(5, dtype=np.float32), windows=(1, 2)).shape == (5, 5 + 8)
    with pytest.raises(ValueError, match="embeddings"):
        sentence_features(np.zeros(3))


def test_cli_parsers(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train-segmenter", "--help"])
    assert exc.value.code == 0
    with pytest.raises(SystemExit) as exc:
        main(["eval-segmenter", "--help"])
    assert exc.value.code == 0
    with pytest.raises(SystemExit) as exc:
        main(["train-segmenter", "--dev", "/nonexistent-dir", "--out", "x.pt"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--dev" in err
    with pytest.raises(SystemExit) as exc:
        main(["eval-segmenter", str(Path(__file__).parent), "--limit", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--limit" in err


def test_cli_train_and_eval_end_to_end(tmp_path, monkeypatch, capsys):
    from hseg_testing.fakes import fake_encoder_factory

    fake_encoder_factory(monkeypatch, FakeEncoder)
    monkeypatch.setenv("HSEG_CACHE_DIR", str(tmp_path / "cache"))
    train = _write_corpus(tmp_path / "train", 6, 2)
    dev = _write_corpus(tmp_path / "dev", 3, 3)
    md = tmp_path / "md"
    md.mkdir()
    (md / "a.md").write_text("# One\nt1 alpha. t1 beta.\n# Two\nt2 gamma. t2 delta.\n", encoding="utf-8")
    out = tmp_path / "m.pt"
    assert main(["train-segmenter", "--train", str(train), "--from-markdown", str(md), "--dev", str(dev),
                 "--out", str(out), "--epochs", "1", "--quiet"]) == 0
    captured = capsys.readouterr().out
    assert out.is_file() and "trained on 7 documents" in captured and "epoch 1:" not in captured
    # without --quiet the per-epoch lines the library logs are shown on stdout, once even with -v
    assert main(["-v", "train-segmenter", "--train", str(train), "--dev", str(dev), "--out", str(tmp_path / "v.pt"),
                 "--epochs", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("epoch 1: train loss") == 1 and "train loss" not in captured.err
    assert main(["eval-segmenter", str(dev), "--segmenter", str(out), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the trained model, then TextTiling on the same documents, then their difference
    # a custom .pt is named by its file, not only as "bilstm" (the shipped weights)
    assert f"segmenter=bilstm ({out})" in lines[0] and "segmenter=texttiling" in lines[1] and len(lines) == 3
    pk = [float(line.split("Pk=")[1].split()[0]) for line in lines[:2]]
    assert lines[2].startswith(f"bilstm ({out}) - texttiling: Pk ") and float(lines[2].split()[5]) == pytest.approx(
        pk[0] - pk[1], abs=1e-4)
    assert main(["eval-segmenter", str(dev), "--segmenter", "texttiling", "--quiet"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # no baseline row for the baseline itself


def test_markdown_folder_becomes_training_documents(tmp_path):
    from hseg.segmentation.wiki727k import markdown_to_documents

    (tmp_path / "a.md").write_text("Intro line one. Intro two.\n\n# First\nAlpha is here. Beta follows.\n\n"
                                   "```\ncode. not. sentences.\n```\n## Second\nGamma ends.\n", encoding="utf-8")
    (tmp_path / "single.md").write_text("# Only\nOne section. Nothing to learn.\n", encoding="utf-8")
    docs = markdown_to_documents(tmp_path)
    assert [d.name for d in docs] == ["a.md"]
    doc = docs[0]
    assert doc.sentences == ["Intro line one.", "Intro two.", "Alpha is here.", "Beta follows.", "Gamma ends."]
    assert doc.ends == [1, 3, 4]


def test_fallback_for_other_encoders_and_registry_default(trained):
    from hseg.segmentation.segmenters import DEFAULT_SEGMENTER, TextTilingSegmenter, get_segmenter

    result, dev, _, tmp, *_ = trained
    path = result.segmenter.save(tmp / "fb.pt")
    tt = TextTilingSegmenter()
    seg = BiLSTMSegmenter.load(path, fallback=tt)
    emb = np.random.default_rng(0).normal(size=(len(dev[0].sentences), 8)).astype(np.float32)
    assert seg.boundaries(dev[0].sentences, emb) == tt.boundaries(dev[0].sentences, emb)
    assert get_segmenter("bilstm").name == "bilstm"  # the shipped weights load without an encoder
    assert DEFAULT_SEGMENTER in ("bilstm", "texttiling")


# ------------------------------------------------------------------------- segmenter names and paths

TOPICS_TEXT = "".join(f"T{topic} sentence {i} about topic {topic}. " for topic in (3, 17, 42) for i in range(12))


class OtherEncoder(FakeEncoder):
    name = "other-encoder"


def test_chunker_resolves_a_weights_path_in_the_core(trained):
    from hseg.chunking.chunker import HierarchicalChunker

    result, *_ = trained
    path = result.segmenter.save(trained[3] / "core.pt")
    for spec in (str(path), path):  # a string, as the CLI passes it, or a Path
        chunker = HierarchicalChunker(encoder=FakeEncoder(), segmenter=spec, target_tokens=64, min_segment_tokens=4)
        assert isinstance(chunker.segmenter, BiLSTMSegmenter)
        assert chunker.segmenter.card["encoder"]["name"] == "fake-encoder"
    chunking = chunker.chunk(TOPICS_TEXT, "topics")
    assert chunking.segments and chunking.info["segmenter"] == "bilstm"
    # weights record their encoder: another one is refused, as for an explicit "bilstm"
    with pytest.raises(ValueError, match="trained on"):
        HierarchicalChunker(encoder=OtherEncoder(), segmenter=str(path))


def test_segmenter_names_paths_and_encoders_resolve_by_one_rule(trained, tmp_path):
    from hseg.segmentation.segmenters import TextTilingSegmenter, get_segmenter, segmenter_spec

    path = trained[0].segmenter.save(tmp_path / "rule.pt")
    assert segmenter_spec("texttiling") == "texttiling" and segmenter_spec(str(path)) == path
    assert isinstance(get_segmenter(str(path), encoder_name="fake-encoder"), BiLSTMSegmenter)
    with pytest.raises(ValueError, match="trained on"):
        get_segmenter(str(path), encoder_name="other-encoder")
    # the default follows the encoder (shipped BiLSTM for MiniLM, TextTiling otherwise); a name is refused
    assert isinstance(get_segmenter(None, encoder_name="other-encoder"), TextTilingSegmenter)
    assert get_segmenter(None, encoder_name="sentence-transformers/all-MiniLM-L6-v2").name == "bilstm"
    with pytest.raises(ValueError, match="trained on"):
        get_segmenter("bilstm", encoder_name="other-encoder")
    assert get_segmenter("texttiling", encoder_name="other-encoder").name == "texttiling"


def test_a_bogus_segmenter_is_a_clear_value_error(tmp_path):
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.segmentation.segmenters import get_segmenter

    with pytest.raises(ValueError, match=r"segmenter: unknown name 'bilstmm'; choose one of \['bilstm', "
                                         r"'texttiling'\] or give the path of weights"):
        HierarchicalChunker(encoder=FakeEncoder(), segmenter="bilstmm")
    with pytest.raises(ValueError, match=r"segmenter: no weights file at '.*missing\.pt'"):
        get_segmenter(str(tmp_path / "missing.pt"))
    notes = tmp_path / "notes.txt"
    notes.write_text("not weights\n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no segmenter saved by BiLSTMSegmenter.save"):
        get_segmenter(str(notes))
    with pytest.raises(ValueError, match="segmenter: .* has no boundaries"):
        get_segmenter(object())


def test_cli_chunk_takes_a_weights_path(trained, tmp_path, monkeypatch, capsys):
    import json

    from hseg.chunking import chunker as chunker_module

    monkeypatch.setattr(chunker_module, "as_encoder", lambda enc, **kw: FakeEncoder() if enc is None else enc)
    path = trained[0].segmenter.save(tmp_path / "cli.pt")
    doc = tmp_path / "topics.txt"
    doc.write_text(TOPICS_TEXT, encoding="utf-8")
    argv = ["chunk", str(doc), "--segmenter", str(path), "--target-tokens", "64", "--format", "json", "--quiet"]
    assert main(argv) == 0
    [got] = json.loads(capsys.readouterr().out)
    want = chunker_module.HierarchicalChunker(encoder=FakeEncoder(), segmenter=str(path),
                                              target_tokens=64).chunk(TOPICS_TEXT, str(doc))
    assert got["segments"] and [(s["start"], s["end"]) for s in got["segments"]] == \
        [(s.start, s.end) for s in want.segments]
    # a mistyped path is a usage error naming it, before any model loads
    with pytest.raises(SystemExit) as exc:
        main(["chunk", str(doc), "--segmenter", str(tmp_path / "typo.pt"), "--quiet"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "typo.pt" in err and "no weights file" in err
