"""Options shared by the ``hseg`` subcommands: argparse value types (a bad value → exit 2, one line),
the chunker options declared once for every command that chunks, and the objects built from them.

Example::

    >>> parser = argparse.ArgumentParser()
    >>> add_chunker_options(parser)
    >>> args = parser.parse_args(["--target-tokens", "256", "--segmenter", "my_segmenter.pt"])
    >>> chunker = chunker_from_args(args)  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from hseg.chunking.config import CLUSTER_VECTORS, SEGMENT_CONTEXTS, ChunkerConfig
from hseg.encoders import BACKENDS
from hseg.segmentation.segmenters import SEGMENTERS, WEIGHTS_SUFFIX, get_segmenter, segmenter_spec
from hseg.text.structure import STRUCTURES


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """A finite number (no nan or inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def quiet_model_loading() -> None:
    """Silence transformers' weight-loading bar (the CLI owns the process, so this is its call).

    Without importing transformers (slow to import): a query served by the onnx backend never needs it.
    transformers reads huggingface_hub's switch when it is first imported.
    """
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    elif "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    else:
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"


class _ProgressLines(logging.Handler):
    """The lines of :mod:`hseg.progress` on stderr as ``hseg <command>: <line>``, written through
    tqdm so that a bar drawn on a terminal is not torn (without bars, a plain line)."""

    def __init__(self, command: str) -> None:
        super().__init__(logging.INFO)
        self.command = command

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm.auto import tqdm

            tqdm.write(f"hseg {self.command}: {record.getMessage()}", file=sys.stderr)
        except Exception:  # logging's rule: a handler that fails reports it and lets the work go on
            self.handleError(record)


def progress_lines(command: str, quiet: bool) -> Callable[[], None]:
    """Show the progress lines of long work (:mod:`hseg.progress`) on stderr unless ``quiet``, with or
    without a terminal (the model's weight-loading bar only on a terminal), for one run of ``command``;
    returns what puts the logger back as it was (a process may run several commands: tests, an
    application calling :func:`hseg.cli.main`)."""
    if not sys.stderr.isatty():  # bars only on a terminal: the model's weight-loading bar too
        quiet_model_loading()
    log = logging.getLogger("hseg.progress")
    level, propagate = log.level, log.propagate
    handler = None
    if quiet:  # not even under --verbose
        log.setLevel(logging.WARNING)
    else:
        handler = _ProgressLines(command)
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False  # --verbose's root handler would write each line twice

    def restore() -> None:
        if handler is not None:
            log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate

    return restore


def option_help(doc: str, flags: Mapping[str, str]) -> str:
    """A setting's description (written for Python callers) as an option's help: the settings' names as
    their options (``flags``: name -> option) and ``None:`` (what not giving it means) as ``default:``.

    Example:
        >>> option_help("results (default 4); excludes budget_tokens", {"budget_tokens": "--budget-tokens"})
        'results (default 4); excludes --budget-tokens'
        >>> option_help("cut it (None: 1.5 x the target); instead of k", {"k": "-k"})
        'cut it (default: 1.5 x the target); instead of -k'
    """
    for name, flag in flags.items():
        # a one-letter name only where a sentence names it as a setting, not in a formula (mu + k*sigma)
        pattern = rf"\b{name}\b" if len(name) > 1 else rf"\b(?<=of |en |es ){name}\b"
        doc = re.sub(pattern, flag, doc)
    return re.sub(r"\bNone: ", "default: ", doc)


def _flags(names: Iterable[str], **special: str) -> dict[str, str]:
    return {name: special.get(name, "--" + name.replace("_", "-")) for name in names}


def chunk_option_docs() -> dict[str, str]:
    """The help of each chunker setting's option: its :class:`~hseg.chunking.config.ChunkerConfig`
    description through :func:`option_help`."""
    flags = _flags(CHUNK_OPTIONS)
    return {name: option_help(doc, flags) for name, doc in ChunkerConfig.docs().items()}


def search_option_docs() -> dict[str, str]:
    """The help of each search setting's option: its :class:`~hseg.retrieval.settings.SearchSettings`
    description through :func:`option_help`."""
    from hseg.retrieval.settings import SearchSettings

    flags = _flags(SearchSettings.field_names(), k="-k")
    return {name: option_help(doc, flags) for name, doc in SearchSettings.docs().items()}


def add_segmenter_option(parser: argparse.ArgumentParser) -> None:
    """``--segmenter NAME|PATH``: a registered name or saved BiLSTM weights, resolved by
    :func:`hseg.segmentation.segmenters.get_segmenter` (see :func:`segmenter_from_args`)."""
    parser.add_argument("--segmenter", default=ChunkerConfig.defaults()["segmenter"], metavar="NAME|PATH",
                        help=f"{' or '.join(sorted(SEGMENTERS))}, or the path of a {WEIGHTS_SUFFIX} file saved by "
                             "'hseg train-segmenter' (default bilstm; texttiling with an encoder it was not "
                             "trained on)")
    parser.set_defaults(_parser=parser)


#: the chunker settings :func:`add_chunker_options` gives options for (``hseg index`` remembers them in the
#: store: :func:`chunk_options`); ``target_tokens`` and ``k`` are one choice, the size
CHUNK_OPTIONS = ("target_tokens", "k", "max_cluster_tokens", "structure", "segment_context", "cluster_vector",
                 "segmenter")
_SIZE = ("target_tokens", "k")


def add_chunker_options(parser: argparse.ArgumentParser) -> None:
    """The chunker's size, structure, vector and segmenter options: ``--target-tokens N | --k K``,
    ``--max-cluster-tokens N``, ``--structure auto|markdown|none``, ``--segment-context none|heading``,
    ``--cluster-vector mean|encode`` and ``--segmenter`` (build the
    chunker with :func:`chunker_from_args`). An option not given is ``None`` (the chunker's default, or
    what the store remembers for ``hseg index``: :func:`chunk_options`)."""
    # names, defaults and help come from the one declaration of the settings (hseg.chunking.config)
    defaults, docs = ChunkerConfig.defaults(), chunk_option_docs()
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--target-tokens", type=positive_int, default=None, metavar="N", help=docs["target_tokens"])
    size.add_argument("--k", type=finite_float, default=None, metavar="K", help=docs["k"])
    parser.add_argument("--max-cluster-tokens", type=positive_int, default=None, metavar="N",
                        help=docs["max_cluster_tokens"])
    # a FILE's path is its document id, so with 'auto' a .txt file is plain text, a .md file markdown
    parser.add_argument("--structure", choices=STRUCTURES, default=None,
                        help=docs["structure"] + f" (default {defaults['structure']})")
    # what is embedded (issue 48): measured, off by default (docs/decisions.md, "Chunking")
    parser.add_argument("--segment-context", choices=SEGMENT_CONTEXTS, default=None,
                        help=docs["segment_context"] + f" (default {defaults['segment_context']})")
    parser.add_argument("--cluster-vector", choices=CLUSTER_VECTORS, default=None,
                        help=docs["cluster_vector"] + f" (default {defaults['cluster_vector']})")
    add_segmenter_option(parser)


def given_chunk_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :data:`CHUNK_OPTIONS` given on the command line (a segmenter file as an absolute path, so
    that a run from another folder finds it)."""
    given: dict[str, Any] = {name: getattr(args, name, None) for name in CHUNK_OPTIONS}
    given = {name: value for name, value in given.items() if value is not None}
    try:
        if "segmenter" in given and isinstance(segmenter_spec(given["segmenter"]), os.PathLike):
            given["segmenter"] = os.path.abspath(given["segmenter"])
    except ValueError as exc:  # a mistyped name or a missing file
        _usage_error(args, exc)
    return given


def chunk_options(args: argparse.Namespace, remembered: dict[str, Any] | None) -> dict[str, Any]:
    """The chunk options of this run: those given, the rest as ``remembered`` (a store's, from an earlier
    ``hseg index``); the size (``--target-tokens`` or ``--k``) is taken whole from one or the other.
    Sets them on ``args`` for :func:`chunker_from_args`; returns them.

    Example:
        >>> args = argparse.Namespace(target_tokens=None, k=None, max_cluster_tokens=None, structure="none",
        ...                           segmenter=None)
        >>> chunk_options(args, {"target_tokens": 128, "structure": "auto"})
        {'target_tokens': 128, 'structure': 'none'}
    """
    given = given_chunk_options(args)
    kept = {name: value for name, value in (remembered or {}).items() if name in CHUNK_OPTIONS}
    if any(name in given for name in _SIZE):
        kept = {name: value for name, value in kept.items() if name not in _SIZE}
    options = {**kept, **given}
    for name in CHUNK_OPTIONS:
        setattr(args, name, options.get(name))
    return options


def _chunk_option(args: argparse.Namespace, name: str) -> Any:
    value = getattr(args, name, None)
    return ChunkerConfig.defaults()[name] if value is None else value


def add_encoder_option(parser: argparse.ArgumentParser, *, default: str = "all-MiniLM-L6-v2") -> None:
    """``--encoder MODEL`` and ``--backend``; ``default`` says in the help what the command uses without it."""
    parser.add_argument("--encoder", default=None, metavar="MODEL",
                        help=f"sentence-transformers model name (default: {default})")
    parser.add_argument("--backend", choices=BACKENDS, default=ChunkerConfig.defaults()["backend"],
                        help=ChunkerConfig.docs()["backend"] + " (default %(default)s)")


def _usage_error(args: argparse.Namespace, exc: ValueError) -> NoReturn:
    # an option value the library refuses is the user's to fix: exit 2 like argparse's own checks
    parser: argparse.ArgumentParser = args._parser
    parser.error(str(exc))


def chunker_config_from_args(args: argparse.Namespace, *, encoder: Any = None, progress: bool = False
                             ) -> ChunkerConfig:
    """The :class:`~hseg.chunking.config.ChunkerConfig` of the :func:`add_chunker_options` options (pure:
    nothing is loaded); a value it refuses exits 2 with its message. See :func:`chunker_from_args`."""
    try:
        if args.segmenter is not None:
            segmenter_spec(args.segmenter)  # a mistyped name or path fails before the encoder loads
        return ChunkerConfig(encoder=encoder, show_progress=progress,
                             backend=getattr(args, "backend", ChunkerConfig.defaults()["backend"]),
                             **{name: _chunk_option(args, name) for name in CHUNK_OPTIONS})
    except ValueError as exc:
        _usage_error(args, exc)


def chunker_from_args(args: argparse.Namespace, *, encoder: Any = None, progress: bool = False) -> Any:
    """The ``HierarchicalChunker`` of the :func:`add_chunker_options` options.

    ``encoder`` goes to the chunker as is (``None``: the default model); ``progress`` shows its
    progress bars. A value the chunker refuses (a target below the segment minimum, a segmenter
    trained on another encoder, ...) exits 2 with its message.
    """
    from hseg.chunking.chunker import HierarchicalChunker

    config = chunker_config_from_args(args, encoder=encoder, progress=progress)
    try:
        return HierarchicalChunker(config)
    except ValueError as exc:
        _usage_error(args, exc)


def segmenter_from_args(args: argparse.Namespace, *, encoder_name: str | None = None) -> Any:
    """The segmenter of :func:`add_segmenter_option`, checked against ``encoder_name`` like the
    chunker checks it (:func:`hseg.segmentation.segmenters.get_segmenter`); a refused value exits 2."""
    try:
        return get_segmenter(args.segmenter, encoder_name=encoder_name)
    except ValueError as exc:
        _usage_error(args, exc)


def json_object(text: str) -> dict[str, Any]:
    """argparse type: a JSON object (a Chroma filter), e.g. '{"source": "a.md"}'."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


#: how each SearchSettings field is read from the command line (its help and default come from the field)
_SEARCH_OPTION_TYPES: dict[str, dict[str, Any]] = {
    "k": {"flags": ("-k",), "type": positive_int, "metavar": "K"},
    "budget_tokens": {"type": positive_int, "metavar": "B"},
    "unit": {"choices": None},
    "mode": {"choices": None},
    "cluster_weight": {"type": finite_float, "metavar": "W"},
    "neighbour_weight": {"type": finite_float, "metavar": "V"},
    "lexical_weight": {"type": finite_float, "metavar": "L"},
    "lexical_weighting": {"choices": None},
    "whole_cluster_min": {"type": positive_int, "metavar": "N"},
    "whole_cluster_share": {"type": finite_float, "metavar": "S"},
    "read_on_share": {"type": finite_float, "metavar": "S"},
    "read_on_margin": {"type": finite_float, "metavar": "M"},
    "where": {"type": json_object, "metavar": "JSON"},
    "where_document": {"type": json_object, "metavar": "JSON"},
}


def add_search_options(parser: argparse.ArgumentParser) -> None:
    """One option per :class:`~hseg.retrieval.settings.SearchSettings` field, with its help and default."""
    from hseg.retrieval.settings import LEXICAL_WEIGHTINGS, MODES, UNITS, SearchSettings

    choices = {"unit": UNITS, "mode": MODES, "lexical_weighting": LEXICAL_WEIGHTINGS}
    defaults, docs = SearchSettings.defaults(), search_option_docs()
    if set(_SEARCH_OPTION_TYPES) != set(defaults):  # a new setting must get an option here
        raise AssertionError(f"search options {sorted(_SEARCH_OPTION_TYPES)} != settings {sorted(defaults)}")
    amount = parser.add_mutually_exclusive_group()
    for name, how in _SEARCH_OPTION_TYPES.items():
        kwargs = {k: v for k, v in how.items() if k != "flags"}
        if "choices" in kwargs:
            kwargs["choices"] = choices[name]
        default = defaults[name]
        shown = "" if default is None else f" (default {default})"
        target = amount if name in ("k", "budget_tokens") else parser
        target.add_argument(*how.get("flags", ("--" + name.replace("_", "-"),)), dest=name, default=None,
                            help=docs[name] + shown, **kwargs)


def search_settings_from_args(args: argparse.Namespace, **extra: Any) -> Any:
    """The :class:`~hseg.retrieval.settings.SearchSettings` of the options given (the rest default);
    a bad combination is a usage error naming the options."""
    from hseg.retrieval.settings import SearchSettings

    given = {name: getattr(args, name) for name in SearchSettings.field_names() if getattr(args, name) is not None}
    try:
        return SearchSettings(**{**given, **extra})
    except ValueError as exc:
        names = "|".join(SearchSettings.field_names())
        args._parser.error(re.sub(rf"\b({names})\b", lambda m: "--" + m[1].replace("_", "-") if m[1] != "k"
                                  else "-k", str(exc)))
