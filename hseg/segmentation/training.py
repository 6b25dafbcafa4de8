"""Training the BiLSTM segmenter: embedding cache, batches, early stopping, threshold choice.

Sentence embeddings dominate the cost (the encoder is far slower than the BiLSTM), so they are computed
once and cached on disk, one ``.npy`` per document keyed by the encoder name and a hash of the
document's sentences: re-running training, evaluation or another seed costs no encoding.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hseg.segmentation.wiki727k import Document

logger = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$HSEG_CACHE_DIR`` or ``$XDG_CACHE_HOME/hseg/embeddings`` (``~/.cache/...``)."""
    if os.environ.get("HSEG_CACHE_DIR"):
        return Path(os.environ["HSEG_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "hseg" / "embeddings"


def _cache_path(cache_dir: Path, encoder: Any, sentences: Sequence[str]) -> Path:
    digest = hashlib.sha1("\n".join(sentences).encode("utf-8")).hexdigest()
    # the two backends agree to cosine 0.9999, but a comparison of them must not read one's cache
    # for the other; torch keeps the folder it has always had
    backend = getattr(encoder, "backend", "torch")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", encoder.name) + ("" if backend == "torch" else f"-{backend}")
    return cache_dir / slug / digest[:2] / f"{digest}.npy"


def embed_documents(
    docs: Sequence[Document],
    encoder,
    *,
    cache_dir: str | Path | None = None,
    quiet: bool = False,
    batch_sentences: int = 4096,
) -> list[np.ndarray]:
    """Embeddings ``(n_i, d)`` float32 for every document, from the disk cache where present.

    Example:
        >>> embs = embed_documents(read_wiki727k("wiki_dev"), as_encoder())  # doctest: +SKIP

    Missing documents are encoded in large batches across documents (better throughput than one
    call per short document); duplicate sentences are encoded once. Stored as float16: halves
    the cache, and cosine features change by < 1e-3.
    """
    from tqdm.auto import tqdm

    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    paths = [_cache_path(cache, encoder, d.sentences) for d in docs]
    todo = [i for i, p in enumerate(paths) if not p.exists()]
    if todo:
        logger.info("encoding %d of %d documents (cache %s)", len(todo), len(docs), cache)
        total = sum(len(docs[i].sentences) for i in todo)
        bar = tqdm(total=total, desc="encoding sentences", unit="sent", disable=quiet)
        group: list[int] = []
        for pos, i in enumerate(todo):
            group.append(i)
            if sum(len(docs[j].sentences) for j in group) >= batch_sentences or pos == len(todo) - 1:
                texts = list(dict.fromkeys(s for j in group for s in docs[j].sentences))
                vectors = dict(zip(texts, encoder.encode(texts)))
                for j in group:
                    paths[j].parent.mkdir(parents=True, exist_ok=True)
                    emb = np.stack([vectors[s] for s in docs[j].sentences]).astype(np.float16)
                    tmp = paths[j].with_suffix(".tmp.npy")
                    np.save(tmp, emb)
                    tmp.replace(paths[j])  # atomic: a killed run never leaves a truncated cache entry
                    bar.update(len(docs[j].sentences))
                group = []
        bar.close()
    return [np.load(p).astype(np.float32) for p in paths]


def _default_gap_windows() -> tuple[int, ...]:
    from hseg.segmentation.bilstm_core import GAP_WINDOWS

    return GAP_WINDOWS


@dataclass
class TrainConfig:
    """Training knobs; defaults are what the shipped weights used."""

    epochs: int = 12
    patience: int = 3
    batch_size: int = 16
    window: int = 128
    lr: float = 1e-3
    weight_decay: float = 1e-4
    dropout: float = 0.3
    hidden: int = 256
    pos_weight: float | None = None  # None: sqrt of the negative/positive ratio
    mixed_ratio: float = 1.0  # synthetic mixed-source documents per natural document, redrawn each epoch
    gap_windows: tuple[int, ...] = field(default_factory=_default_gap_windows)  # TextTiling signals' windows
    seed: int = 0
    device: str | None = None
    quiet: bool = False  # no progress bars; each epoch's dev scores are logged (INFO) either way


@dataclass
class TrainResult:
    segmenter: object
    history: list[dict]
    seconds: float


def _prepare(docs: Sequence[Document], embeddings: Sequence[np.ndarray], windows: Sequence[int]):
    from hseg.segmentation.bilstm_core import sentence_features

    return [(sentence_features(e, windows), np.asarray(d.labels, dtype=np.int64)) for d, e in zip(docs, embeddings)]


def mixed_documents(docs: Sequence[Document], embeddings: Sequence[np.ndarray], count: int,
                    rng: np.random.Generator, *, segments: tuple[int, int] = (3, 12),
                    lengths: tuple[int, int] = (3, 20)) -> tuple[list[Document], list[np.ndarray]]:
    """Choi-style documents built from real sections: 3-12 segments drawn from random training
    documents, each cut to its first 3-20 sentences.

    Natural textbook sections are long (17 sentences on average) and their boundaries mostly
    subtle; these add short segments and clear topic shifts at every scale, so the model learns the
    cohesion rule (what TextTiling does) and not only a segment-length prior. The pieces are real
    section openings, not a synthetic cue such as a lead sentence pattern.
    """
    pool = [(i, start, end) for i, d in enumerate(docs)
            for start, end in zip([0] + [e + 1 for e in d.ends[:-1]], d.ends)]
    out_docs, out_emb = [], []
    for j in range(count):
        pieces = [pool[k] for k in rng.choice(len(pool), size=int(rng.integers(*segments, endpoint=True)))]
        sents, labels, vecs = [], [], []
        for i, start, end in pieces:
            stop = min(end + 1, start + int(rng.integers(*lengths, endpoint=True)))
            sents += docs[i].sentences[start:stop]
            labels += [0] * (stop - start - 1) + [1]
            vecs.append(embeddings[i][start:stop])
        out_docs.append(Document(f"mixed-{j}", sents, labels))
        out_emb.append(np.concatenate(vecs))
    return out_docs, out_emb


def _batches(data, window: int, batch_size: int, rng: np.random.Generator):
    """Random crops of at most ``window`` sentences (a fresh offset each epoch, so every
    sentence is seen with varying context), shuffled, padded into batches."""
    import torch

    pieces = []
    for feats, labels in data:
        n = len(labels)
        offset = int(rng.integers(0, window)) if n > window else 0
        starts = [0] + list(range(offset, n - 1, window)) if offset else list(range(0, n, window))
        for s in sorted(set(starts)):
            e = min(n, s + window) if s else min(n, offset or window)
            if e - s >= 2:
                pieces.append((feats[s:e], labels[s:e], e == n))
    order = rng.permutation(len(pieces))
    for b in range(0, len(order), batch_size):
        chunk = [pieces[i] for i in order[b:b + batch_size]]
        length = max(len(p[1]) for p in chunk)
        x = np.zeros((len(chunk), length, chunk[0][0].shape[1]), dtype=np.float32)
        y = np.zeros((len(chunk), length), dtype=np.int64)
        mask = np.zeros((len(chunk), length), dtype=bool)
        for r, (f, lab, at_end) in enumerate(chunk):
            x[r, :len(lab)] = f
            y[r, :len(lab)] = lab
            # the document's last sentence always ends a segment: nothing to learn there
            mask[r, :len(lab) - (1 if at_end else 0)] = True
        yield torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(mask), torch.tensor([len(p[1]) for p in chunk])


def evaluate_scores(docs: Sequence[Document], scores: Sequence[np.ndarray], threshold: float,
                    groups: Sequence[int] | None = None) -> dict:
    """Pk and WindowDiff of thresholded gap scores: the mean per document, or with ``groups`` (a
    group id per document, e.g. its dev folder) the mean of the per-group means, so that every
    dev folder (domain) weighs the same whatever its size."""
    from hseg.segmentation.bilstm_core import boundaries_from_scores
    from hseg.segmentation.metrics import ends_to_masses, pk, windowdiff

    pks, wds = [], []
    for d, s in zip(docs, scores):
        hyp = ends_to_masses(boundaries_from_scores(s, threshold), len(d.sentences))
        pks.append(pk(d.masses, hyp))
        wds.append(windowdiff(d.masses, hyp))
    g = np.zeros(len(docs), dtype=int) if groups is None else np.asarray(groups)
    if len(g) != len(docs):
        raise ValueError(f"groups: {len(g)} group ids for {len(docs)} documents")
    ids = np.unique(g)
    return {"pk": float(np.mean([np.mean(np.asarray(pks)[g == i]) for i in ids])),
            "windowdiff": float(np.mean([np.mean(np.asarray(wds)[g == i]) for i in ids]))}


def choose_threshold(docs, scores, grid=None, groups=None) -> tuple[float, dict]:
    """The cutoff with the lowest Pk on ``docs`` (ties: lower WindowDiff); see :func:`evaluate_scores`."""
    # fine steps near 1: training on mixed documents (many boundaries) pushes good cutoffs up there
    grid = grid if grid is not None else [*np.round(np.arange(0.1, 0.91, 0.05), 2), 0.93, 0.95, 0.97, 0.98, 0.99]
    results = [(float(t), evaluate_scores(docs, scores, float(t), groups)) for t in grid]
    return min(results, key=lambda r: (r[1]["pk"], r[1]["windowdiff"]))


def train_segmenter(
    train_docs: Sequence[Document],
    train_emb: Sequence[np.ndarray],
    dev_docs: Sequence[Document],
    dev_emb: Sequence[np.ndarray],
    *,
    encoder_name: str,
    config: TrainConfig | None = None,
    card: dict | None = None,
    dev_groups: Sequence[int] | None = None,
    checkpoint: str | Path | None = None,
):
    """Train a :class:`~hseg.segmentation.bilstm.BiLSTMSegmenter`; early stopping and threshold on dev Pk.

    Example:
        >>> docs = read_wiki727k("train_openstax/psychology-2e")  # doctest: +SKIP
        >>> dev = read_wiki727k("train_openstax/business-ethics")  # doctest: +SKIP
        >>> enc = as_encoder()  # doctest: +SKIP
        >>> result = train_segmenter(docs, embed_documents(docs, enc), dev, embed_documents(dev, enc),
        ...                          encoder_name=enc.name, config=TrainConfig(epochs=5))  # doctest: +SKIP
        >>> result.segmenter.save("my_segmenter.pt")  # doctest: +SKIP

    ``dev_groups`` (a group id per dev document, e.g. its folder) makes the dev score the mean over
    groups, so a small out-of-domain dev folder counts as much as a large in-domain one.
    ``checkpoint``: a file written after every epoch (model, optimiser, random states, history);
    when it exists and was written for the same data and settings, training resumes after its
    last epoch instead of starting over, so a killed CPU run loses at most one epoch.
    Returns a :class:`TrainResult` whose segmenter holds the best epoch's weights and a model card.
    """
    import torch
    from tqdm.auto import tqdm

    from hseg.segmentation.bilstm import BiLSTMModel, BiLSTMSegmenter, gap_feature_count

    cfg = config or TrainConfig()
    if not train_docs:
        raise ValueError("train_docs: no training documents")
    if not dev_docs:
        raise ValueError("dev_docs: no dev documents (early stopping and the threshold need them)")
    if cfg.epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {cfg.epochs!r}")
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    start = time.perf_counter()
    train = _prepare(train_docs, train_emb, cfg.gap_windows)  # dev documents are scored by the segmenter itself
    dim = int(train[0][0].shape[1])
    pos = sum(int(lab[:-1].sum()) for _, lab in train)
    neg = sum(len(lab) - 1 for _, lab in train) - pos
    pos_weight = cfg.pos_weight if cfg.pos_weight is not None else float(np.sqrt(neg / max(pos, 1)))
    device = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = BiLSTMModel(dim, hidden=cfg.hidden, dropout=cfg.dropout).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, pos_weight], device=device), reduction="sum")
    base_card = {
        "encoder": {"name": encoder_name, "dimension": dim - gap_feature_count(cfg.gap_windows)},
        "gap_windows": list(cfg.gap_windows),
        "training": dict(card or {}, train_documents=len(train_docs), dev_documents=len(dev_docs),
                         positive_weight=round(pos_weight, 3), seed=cfg.seed),
    }
    seg = BiLSTMSegmenter(model, base_card, window=cfg.window, device=str(device))
    history: list[dict] = []
    best, best_state, bad = None, None, 0
    run_key = _run_key(cfg, train_docs, dev_docs, dev_groups, encoder_name)
    resumed = _load_checkpoint(checkpoint, run_key, model, opt, rng) if checkpoint is not None else None
    if resumed is not None:
        history, best, best_state, bad = resumed["history"], resumed["best"], resumed["best_state"], resumed["bad"]
        start -= resumed["seconds"]  # the card reports the whole run's training time
        logger.info("resuming from %s after epoch %d", checkpoint, len(history))
    for epoch in range(len(history) + 1, cfg.epochs + 1):
        if bad >= cfg.patience:
            break
        model.train()
        total, count = 0.0, 0
        epoch_data = train
        if cfg.mixed_ratio > 0:
            extra = mixed_documents(train_docs, train_emb, int(round(cfg.mixed_ratio * len(train_docs))), rng)
            epoch_data = train + _prepare(*extra, cfg.gap_windows)
        for x, y, mask, lengths in tqdm(_batches(epoch_data, cfg.window, cfg.batch_size, rng), desc=f"epoch {epoch}",
                                        unit="batch", disable=cfg.quiet, leave=False):
            x, y, mask = x.to(device), y.to(device), mask.to(device)
            logits = model(x, lengths)
            loss = loss_fn(logits[mask], y[mask]) / mask.sum()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += float(loss.detach()) * int(mask.sum())
            count += int(mask.sum())
        model.eval()
        scores = [seg.gap_scores(d.sentences, e) for d, e in zip(dev_docs, dev_emb)]
        threshold, metrics = choose_threshold(dev_docs, scores, groups=dev_groups)
        row = {"epoch": epoch, "train_loss": total / max(count, 1), "threshold": threshold, **metrics}
        history.append(row)
        logger.info("epoch %d: train loss %.4f  dev Pk %.4f  WindowDiff %.4f  threshold %.2f", epoch,
                    row["train_loss"], metrics["pk"], metrics["windowdiff"], threshold)
        if best is None or metrics["pk"] < best["pk"]:
            best, bad = row, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
        if checkpoint is not None:
            _save_checkpoint(checkpoint, run_key, model, opt, rng, history=history, best=best, best_state=best_state,
                             bad=bad, seconds=time.perf_counter() - start)
    assert best is not None and best_state is not None  # epochs >= 1, and the first epoch sets both
    model.load_state_dict(best_state)
    seconds = time.perf_counter() - start
    seg.threshold = best["threshold"]
    seg.card["threshold"] = best["threshold"]
    seg.card["dev_metrics"] = {"pk": round(best["pk"], 4), "windowdiff": round(best["windowdiff"], 4),
                               "epoch": best["epoch"]}
    seg.card["training"].update(epochs_run=len(history), seconds=round(seconds, 1),
                                history=[{k: round(v, 4) if isinstance(v, float) else v for k, v in h.items()}
                                         for h in history])
    return TrainResult(seg, history, seconds)


def _run_key(cfg: TrainConfig, train_docs: Sequence[Document], dev_docs: Sequence[Document],
             dev_groups: Sequence[int] | None, encoder_name: str) -> str:
    """What a checkpoint must have been written for to be resumed: settings, encoder and data."""
    digest = hashlib.sha256()
    for part in (repr(sorted(vars(cfg).items())), encoder_name, repr(list(dev_groups or []))):
        digest.update(part.encode())
    for d in (*train_docs, *dev_docs):
        digest.update(f"{len(d.sentences)}:{d.masses}:{d.sentences[0] if d.sentences else ''}".encode())
    return digest.hexdigest()


def _save_checkpoint(path: str | Path, run_key: str, model: Any, opt: Any, rng: np.random.Generator,
                     **state: Any) -> None:
    import torch

    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    torch.save({"run_key": run_key, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "numpy_rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(), **state}, tmp)
    tmp.replace(path)  # atomic: a run killed while saving keeps the previous epoch's checkpoint


def _load_checkpoint(path: str | Path, run_key: str, model: Any, opt: Any,
                     rng: np.random.Generator) -> dict[str, Any] | None:
    """The saved state (model, optimiser and random states restored in place); ``None`` when there
    is no checkpoint or it belongs to another run (then it is left alone and overwritten later)."""
    import torch

    path = Path(path)
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("run_key") != run_key:
        logger.warning("checkpoint %s was written for other data or settings; starting over", path)
        return None
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    rng.bit_generator.state = state["numpy_rng"]
    torch.set_rng_state(state["torch_rng"])
    return state


def evaluate_segmenter(segmenter, docs: Sequence[Document], embeddings: Sequence[np.ndarray]) -> dict:
    """Mean per-document Pk and WindowDiff of any :class:`~hseg.segmentation.segmenters.Segmenter`."""
    from hseg.segmentation.metrics import ends_to_masses, pk, windowdiff

    pks, wds = [], []
    for d, e in zip(docs, embeddings):
        hyp = ends_to_masses(segmenter.boundaries(d.sentences, e), len(d.sentences))
        pks.append(pk(d.masses, hyp))
        wds.append(windowdiff(d.masses, hyp))
    return {"pk": float(np.mean(pks)), "windowdiff": float(np.mean(wds)), "documents": len(docs)}
