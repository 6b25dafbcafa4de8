"""``hseg train-segmenter`` and ``hseg eval-segmenter``.

Examples::

    hseg train-segmenter --train data/train_openstax/us-history data/train_openstax/psychology-2e \\
        --dev data/train_openstax/astronomy-2e --out my_segmenter.pt --epochs 8
    hseg eval-segmenter data/wiki_dev --segmenter bilstm
    hseg eval-segmenter data/choi/1 --segmenter my_segmenter.pt --limit 50
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hseg.cli.options import add_encoder_option, add_segmenter_option, positive_int, segmenter_from_args


def _directory(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"not a directory: {text!r}")
    return path


def register(subparsers) -> None:
    train = subparsers.add_parser(
        "train-segmenter",
        help="train the BiLSTM segmenter on Wiki-727K-format folders (and/or markdown)",
        description="Train the BiLSTM segmenter. Sentence embeddings are cached on disk; early stopping "
                    "and the boundary threshold use the dev folders' Pk.",
    )
    train.add_argument("--train", nargs="+", type=_directory, default=[], metavar="DIR",
                       help="Wiki-727K-format folders (one .txt per document, searched recursively)")
    train.add_argument("--from-markdown", nargs="+", type=_directory, default=[], metavar="DIR",
                       help="folders of markdown files; each heading starts a segment")
    train.add_argument("--dev", nargs="+", type=_directory, required=True, metavar="DIR",
                       help="Wiki-727K-format folder(s) for early stopping and the threshold; the score is "
                            "the mean over folders, so each folder (domain) weighs the same")
    train.add_argument("--out", required=True, type=Path, metavar="PATH", help="weights file to write (.pt)")
    train.add_argument("--epochs", type=positive_int, default=12, help="maximum epochs (default 12)")
    train.add_argument("--patience", type=positive_int, default=3, help="epochs without dev improvement (default 3)")
    train.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_encoder_option(train)
    train.add_argument("--cache-dir", type=Path, default=None,
                       help="embedding cache (default ~/.cache/hseg/embeddings)")
    train.add_argument("--device", default=None, help="torch device (default: cuda when available)")
    train.add_argument("--checkpoint", type=Path, default=None, metavar="PATH",
                       help="written after every epoch; a re-run of the same command resumes from it (default: "
                            "OUT with the suffix .ckpt; removed once OUT is written)")
    train.add_argument("--quiet", action="store_true", help="no progress bars or per-epoch lines")
    train.set_defaults(func=_train)

    ev = subparsers.add_parser(
        "eval-segmenter",
        help="print Pk and WindowDiff of a segmenter (and of TextTiling) on a Wiki-727K-format folder",
        description="Mean per-document Pk and WindowDiff (k = half the mean reference segment length) of the "
                    "segmenter and, on the same documents and sentence vectors, of TextTiling with its defaults.",
    )
    ev.add_argument("directory", type=_directory, metavar="DIR", help="Wiki-727K-format folder")
    add_segmenter_option(ev)
    ev.add_argument("--limit", type=positive_int, default=None, metavar="N", help="first N documents only")
    add_encoder_option(ev)
    ev.add_argument("--cache-dir", type=Path, default=None, help="embedding cache (default ~/.cache/hseg/embeddings)")
    ev.add_argument("--quiet", action="store_true", help="no progress bars")
    ev.set_defaults(func=_evaluate)


@contextmanager
def _epoch_lines(show: bool) -> Iterator[None]:
    """Print what ``hseg.segmentation.training`` logs (one line per epoch) to stdout, like the summary, while training.

    The library logs rather than prints; the command owns the process, so it shows those lines
    unless ``--quiet``. Not propagated meanwhile, else ``--verbose``'s root handler would repeat them.
    """
    if not show:
        yield
        return
    log = logging.getLogger("hseg.segmentation.training")
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    saved = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.level, log.propagate = saved


def _load_docs(dirs) -> list:
    from hseg.segmentation.wiki727k import read_wiki727k

    docs = []
    for d in dirs:
        docs.extend(read_wiki727k(d))
    return docs


def _train(args: argparse.Namespace) -> int:
    from hseg.encoders import as_encoder
    from hseg.segmentation.training import TrainConfig, embed_documents, train_segmenter
    from hseg.segmentation.wiki727k import markdown_to_documents

    if not args.train and not args.from_markdown:
        raise ValueError("give training data with --train DIR... and/or --from-markdown DIR...")
    train_docs = _load_docs(args.train)
    for d in args.from_markdown:
        train_docs.extend(markdown_to_documents(d))
    dev_docs, dev_groups = [], []
    for group, d in enumerate(args.dev):  # each dev folder weighs the same in early stopping
        docs = _load_docs([d])
        dev_docs.extend(docs)
        dev_groups.extend([group] * len(docs))
    if not train_docs:
        raise ValueError("--train/--from-markdown: no documents found")
    if not dev_docs:
        raise ValueError("--dev: no documents found")
    encoder = as_encoder(args.encoder, backend=args.backend)
    train_emb = embed_documents(train_docs, encoder, cache_dir=args.cache_dir, quiet=args.quiet)
    dev_emb = embed_documents(dev_docs, encoder, cache_dir=args.cache_dir, quiet=args.quiet)
    card = {"train": [str(p) for p in args.train], "from_markdown": [str(p) for p in args.from_markdown],
            "dev": [str(p) for p in args.dev],
            "train_sentences": sum(len(d.sentences) for d in train_docs)}
    cfg = TrainConfig(epochs=args.epochs, patience=args.patience, seed=args.seed, device=args.device,
                      quiet=args.quiet)
    checkpoint = args.checkpoint or args.out.with_suffix(".ckpt")
    start = time.perf_counter()
    with _epoch_lines(not args.quiet):
        result = train_segmenter(train_docs, train_emb, dev_docs, dev_emb, encoder_name=encoder.name, config=cfg,
                                 card=card, dev_groups=dev_groups, checkpoint=checkpoint)
    path = result.segmenter.save(args.out)
    checkpoint.unlink(missing_ok=True)
    dev = result.segmenter.card["dev_metrics"]
    print(f"trained on {len(train_docs)} documents in {time.perf_counter() - start:.1f} s "
          f"({len(result.history)} epochs); best dev Pk {dev['pk']:.4f} WindowDiff {dev['windowdiff']:.4f} "
          f"at epoch {dev['epoch']}, threshold {result.segmenter.threshold:.2f}")
    print(f"wrote {path} and {path.with_suffix('.json')}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from hseg.encoders import as_encoder
    from hseg.segmentation.training import embed_documents, evaluate_segmenter
    from hseg.segmentation.wiki727k import read_wiki727k

    docs = read_wiki727k(args.directory, limit=args.limit)
    if not docs:
        raise ValueError(f"{args.directory}: no documents found")
    encoder = as_encoder(args.encoder, backend=args.backend)
    segmenter = segmenter_from_args(args, encoder_name=encoder.name)
    embeddings = embed_documents(docs, encoder, cache_dir=args.cache_dir, quiet=args.quiet)
    name = getattr(segmenter, "name", args.segmenter)
    if args.segmenter and str(args.segmenter).endswith(".pt"):
        name = f"{name} ({args.segmenter})"  # a custom model: which file, not only its kind
    rows = [(name, evaluate_segmenter(segmenter, docs, embeddings))]
    if getattr(segmenter, "name", None) != "texttiling":  # the unsupervised baseline on the same documents
        from hseg.segmentation.segmenters import get_segmenter

        rows.append(("texttiling", evaluate_segmenter(get_segmenter("texttiling"), docs, embeddings)))
    for label, result in rows:
        print(f"{args.directory}  segmenter={label}  documents={result['documents']}  "
              f"Pk={result['pk']:.4f}  WindowDiff={result['windowdiff']:.4f}")
    if len(rows) == 2:
        print(f"{name} - texttiling: Pk {rows[0][1]['pk'] - rows[1][1]['pk']:+.4f}  "
              f"WindowDiff {rows[0][1]['windowdiff'] - rows[1][1]['windowdiff']:+.4f}")
    return 0
