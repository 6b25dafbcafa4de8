"""The chunker's settings, declared once: :class:`ChunkerConfig`.

:class:`hseg.chunking.chunker.HierarchicalChunker`, the LangChain splitter, the LlamaIndex node parser and
the command line take the same fields with the same defaults; each derives its own signature,
fields or options from :func:`dataclasses.fields` of this class. Validation is pure (nothing is
loaded), so an adapter can refuse bad arguments at construction without building an encoder.

Example:
    >>> cfg = ChunkerConfig(target_tokens=256)
    >>> cfg.effective_max_segment_tokens, cfg.effective_max_cluster_tokens
    (128, 384)
    >>> ChunkerConfig(k=1.0, target_tokens=256)
    Traceback (most recent call last):
    ...
    ValueError: give k or target_tokens, not both (k=1.0, target_tokens=256)
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from hseg.encoders import BACKENDS, DEFAULT_BACKEND, check_backend
from hseg.segmentation.segmenters import segmenter_spec
from hseg.text.structure import STRUCTURES

#: the default parent size: a parent holds a whole discussion, which a budget buys when several of its
#: segments rank high (rule 3 of :mod:`hseg.retrieval.selection`); on questions whose answer is a stretch of
#: a transcript it beats 256-token parents, elsewhere it loses nothing beyond noise (docs/decisions.md, issue 56)
DEFAULT_TARGET_TOKENS = 1024
#: segments longer than this are cut: the budget's passages are made of segments, so finer ones spend a small
#: budget better (48–192 measured best for segments as retrieval units; 128 beside 1024-token parents)
MAX_SEGMENT_TOKENS = 128
SEGMENT_VECTORS = ("mean", "encode")
#: what a segment's vector holds beside its text: nothing, or its heading path (issue 48; measured, off by
#: default: docs/decisions.md, "Chunking")
SEGMENT_CONTEXTS = ("none", "heading")
#: how a cluster's vector is made: the token-weighted mean of its segments' vectors, or its text encoded
CLUSTER_VECTORS = ("mean", "encode")
#: settings that change how chunking runs, not the chunks it makes
RUNTIME_FIELDS = ("cache", "show_progress", "backend", "device", "batch_size")
CLIQUE_METHODS = ("edges", "cliques", "none")


def default_max_segment_tokens(target_tokens: int | None, min_segment_tokens: int) -> int:
    """``max_segment_tokens`` when not given: :data:`MAX_SEGMENT_TOKENS`, at most half the target.

    A parent of about two segments gives the paper's segment vectors little to add to its cluster
    vector, so a small target cuts its segments finer (docs/decisions.md, "Chunking").
    """
    if target_tokens is None:
        return MAX_SEGMENT_TOKENS
    return min(MAX_SEGMENT_TOKENS, max(int(min_segment_tokens), int(target_tokens) // 2))


def setting(default: Any, doc: str) -> Any:
    """A field with its one-line description, which every entry point shows (help, field docs)."""
    return dataclasses.field(default=default, metadata={"doc": doc})


def is_int(value: Any) -> bool:
    """A real integer (numpy's too), not a bool."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer))


@dataclass(frozen=True)
class ChunkerConfig:
    """Everything that configures a :class:`~hseg.chunking.chunker.HierarchicalChunker`.

    Attributes:
        encoder: model name, ``SentenceTransformer``, LangChain ``Embeddings``, LlamaIndex
            ``BaseEmbedding`` or an :class:`hseg.encoders.Encoder`; ``None`` = all-MiniLM-L6-v2, offline.
        segmenter: a segmenter name (``"texttiling"``, ``"bilstm"``), a saved BiLSTM ``.pt`` path
            or an instance; ``None`` = the default for the encoder.
        k: clustering threshold τ = μ + k·σ; excludes ``target_tokens``.
        target_tokens: mean cluster size to aim for (k searched per document);
            :data:`DEFAULT_TARGET_TOKENS` when ``k`` is not given.
        max_cluster_tokens: hard cap on a cluster; ``None`` = 1.5 × the target.
        min_segment_tokens, max_segment_tokens: segment length limits after the segmenter;
            ``max_segment_tokens=None`` = :data:`MAX_SEGMENT_TOKENS`, at most half the target.
        tokenizer: what sizes are measured in: a tiktoken encoding name (``None`` = ``cl100k_base``)
            or a ``str -> int`` callable.
        segment_vector: ``"mean"`` (token-weighted mean of sentence vectors) or ``"encode"``.
        segment_context: ``"none"`` or ``"heading"``: a segment under a markdown heading is embedded with
            its heading path as context (with ``"mean"`` the path is one more sentence of the mean, weighted
            by its tokens; with ``"encode"`` the path, a blank line and the text are encoded). Only the
            vector changes: the segment's text and span stay exact; a segment without a heading path
            keeps its plain vector.
        cluster_vector: ``"mean"`` (token-weighted mean of its segments' vectors) or ``"encode"`` (the
            cluster's text encoded, cut at the encoder's window).
        clique_method: ``"edges"`` (exact, no clique enumeration), ``"cliques"`` (networkx), or ``"none"``:
            no relatedness graph, parents made by joining each segment to its more similar neighbour and the cap.
        structure: whether markdown headings shape the chunks (:mod:`hseg.text.structure`): ``"auto"``
            reads every document as markdown except a ``.txt``/``.text`` source, ``"markdown"``
            every document, ``"none"`` none. Read as markdown, a heading starts a segment,
            clusters stay within the top sections, and units carry their heading path.
        cache: keep an in-memory text → vector cache across calls.
        show_progress: tqdm bars, drawn only when stderr is a terminal (progress of long work is also
            logged, with or without it: :mod:`hseg.progress`).
        backend: how a model given by name runs, ``"onnx"`` or ``"torch"`` (same vectors).
        device, batch_size: for an encoder given by name; ``device`` also for the BiLSTM segmenter
            (``None``: the shipped one runs in numpy on the CPU).
    """

    encoder: Any = setting(None, "model name, SentenceTransformer, LangChain Embeddings, LlamaIndex BaseEmbedding "
                                  "or hseg Encoder (None: all-MiniLM-L6-v2, offline)")
    segmenter: Any = setting(None, "segmenter name ('texttiling', 'bilstm'), a saved BiLSTM .pt path or an "
                                    "instance (None: the default for the encoder)")
    k: float | None = setting(None, "explicit clustering threshold tau = mu + k*sigma (larger k: smaller "
                                     "clusters); excludes target_tokens")
    target_tokens: int | None = setting(None, "mean cluster size to aim for, k searched per document "
                                               f"({DEFAULT_TARGET_TOKENS} when k is not given)")
    max_cluster_tokens: int | None = setting(None, "hard cap on a cluster, cut at its weakest adjacent "
                                                    "similarity (None: 1.5 x the target)")
    min_segment_tokens: int = setting(48, "smallest segment after the segmenter")
    max_segment_tokens: int | None = setting(None, f"largest segment after the segmenter (None: {MAX_SEGMENT_TOKENS}, "
                                                    "at most half the target)")
    tokenizer: Any = setting(None, "what sizes are measured in: a tiktoken encoding name (None: cl100k_base) or "
                                    "a str -> int callable")
    segment_vector: str = setting("mean", "'mean': token-weighted mean of sentence vectors; 'encode': embed the "
                                           "segment text")
    segment_context: str = setting("none", "'heading': a segment under a markdown heading is embedded with its "
                                            "heading path as context (the stored text stays exact); 'none'")
    cluster_vector: str = setting("mean", "'mean': token-weighted mean of the cluster's segment vectors; 'encode': "
                                          "embed the cluster text")
    clique_method: str = setting("edges", "'edges' (exact, no clique enumeration), 'cliques' (networkx) or 'none' "
                                          "(no graph: neighbour-joining and the cap alone)")
    structure: str = setting("auto", "markdown headings start segments, bound clusters and give heading paths: "
                                      "'auto' (every document but a .txt/.text source), 'markdown' (all) or 'none'")
    cache: bool = setting(True, "keep an in-memory text -> vector cache across calls")
    show_progress: bool = setting(False, "tqdm progress bars (only when stderr is a terminal)")
    backend: str = setting(DEFAULT_BACKEND, f"how a model given by name runs: {' or '.join(map(repr, BACKENDS))} "
                                             "(same vectors; onnx starts fast and needs no torch to serve)")
    device: str | None = setting(None, "device of an encoder given by name and of the BiLSTM segmenter (None: the "
                                       "encoder's best available; the shipped segmenter in numpy on the CPU)")
    batch_size: int | None = setting(None, "encoder batch size (None: fastest measured on CPU, onnx 16, torch 32)")

    def __post_init__(self) -> None:
        k, target = self.k, self.target_tokens
        if k is not None and target is not None:
            raise ValueError(f"give k or target_tokens, not both (k={k!r}, target_tokens={target!r})")
        for name in ("target_tokens", "max_cluster_tokens", "min_segment_tokens", "max_segment_tokens"):
            value = getattr(self, name)
            if value is not None and not is_int(value):
                raise ValueError(f"{name} must be an int, got {value!r}")
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, float, np.number)) or not np.isfinite(k)):
            raise ValueError(f"k must be a finite number, got {k!r}")
        if target is not None and target <= 0:
            raise ValueError(f"target_tokens must be > 0, got {target!r}")
        if self.max_segment_tokens is not None and self.max_segment_tokens <= 0:
            raise ValueError(f"max_segment_tokens must be > 0, got {self.max_segment_tokens!r}")
        if not 0 <= self.min_segment_tokens <= self.effective_max_segment_tokens:
            raise ValueError(f"min_segment_tokens must be in [0, max_segment_tokens], got {self.min_segment_tokens!r}")
        if self.effective_target_tokens is not None and self.effective_target_tokens < self.min_segment_tokens:
            raise ValueError(f"target_tokens must be >= min_segment_tokens ({self.min_segment_tokens}), got {target!r}")
        if self.effective_max_cluster_tokens < self.effective_max_segment_tokens:
            raise ValueError(f"max_cluster_tokens must be >= max_segment_tokens ({self.effective_max_segment_tokens}), "
                             f"got {self.max_cluster_tokens!r}")
        if self.segment_vector not in SEGMENT_VECTORS:
            raise ValueError(f"segment_vector must be one of {SEGMENT_VECTORS}, got {self.segment_vector!r}")
        if self.segment_context not in SEGMENT_CONTEXTS:
            raise ValueError(f"segment_context must be one of {SEGMENT_CONTEXTS}, got {self.segment_context!r}")
        if self.cluster_vector not in CLUSTER_VECTORS:
            raise ValueError(f"cluster_vector must be one of {CLUSTER_VECTORS}, got {self.cluster_vector!r}")
        if self.clique_method not in CLIQUE_METHODS:
            raise ValueError(f"clique_method must be one of {CLIQUE_METHODS}, got {self.clique_method!r}")
        if self.structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}, got {self.structure!r}")
        if self.batch_size is not None and (not is_int(self.batch_size) or self.batch_size <= 0):
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}")
        check_backend(self.backend)
        for name in ("cache", "show_progress"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if isinstance(self.segmenter, (str, os.PathLike)):
            segmenter_spec(self.segmenter)  # a registered name or a weights file; loads nothing
        elif self.segmenter is not None and not isinstance(self.segmenter, str) \
                and not hasattr(self.segmenter, "boundaries") and not hasattr(self.segmenter, "__fspath__"):
            raise ValueError(f"segmenter must be a name, a .pt path or an object with boundaries(), "
                             f"got {type(self.segmenter).__name__}")

    # ------------------------------------------------------------------ effective values

    @property
    def effective_target_tokens(self) -> int | None:
        """The target: as given, :data:`DEFAULT_TARGET_TOKENS` without ``k``, ``None`` with an explicit ``k``."""
        if self.target_tokens is None and self.k is None:
            return DEFAULT_TARGET_TOKENS
        return self.target_tokens

    @property
    def effective_max_segment_tokens(self) -> int:
        if self.max_segment_tokens is not None:
            return int(self.max_segment_tokens)
        return default_max_segment_tokens(self.effective_target_tokens, self.min_segment_tokens)

    @property
    def effective_max_cluster_tokens(self) -> int:
        if self.max_cluster_tokens is not None:
            return int(self.max_cluster_tokens)
        # 1.5x keeps parents near the target size, which matters when a reader budget is filled
        # with whole parents (docs/decisions.md: 2x let 1000-token parents crowd out others)
        return (3 * (self.effective_target_tokens or DEFAULT_TARGET_TOKENS)) // 2

    # ------------------------------------------------------------------ description

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The settings, in declaration order (what every entry point accepts)."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """``{name: default}`` of every setting.

        Example:
            >>> ChunkerConfig.defaults()["min_segment_tokens"]
            48
        """
        return {f.name: f.default for f in dataclasses.fields(cls)}

    @classmethod
    def docs(cls) -> dict[str, str]:
        """``{name: one-line description}`` of every setting."""
        return {f.name: str(f.metadata.get("doc", "")) for f in dataclasses.fields(cls)}

    @classmethod
    def table(cls) -> str:
        """The settings as the Markdown table of ``docs/api.md`` (a test keeps the two equal).

        Example:
            >>> ChunkerConfig.table().splitlines()[0]
            '| setting | default | what it does |'
        """
        rows = ["| setting | default | what it does |", "|---|---|---|"]
        for name, default in cls.defaults().items():
            rows.append(f"| `{name}` | `{default!r}` | {cls.docs()[name]} |")
        return "\n".join(rows) + "\n"

    @classmethod
    def resolve(cls, config: ChunkerConfig | None = None, **settings: Any) -> ChunkerConfig:
        """``config`` (default: all defaults) with ``settings`` replacing its fields: what every
        entry point taking a config and keyword settings builds; names no setting -> ``ValueError``.

        Example:
            >>> ChunkerConfig.resolve(ChunkerConfig(target_tokens=256), min_segment_tokens=16).target_tokens
            256
        """
        if config is not None and not isinstance(config, ChunkerConfig):
            raise ValueError(f"config must be a ChunkerConfig, got {type(config).__name__}")
        unknown = sorted(set(settings) - set(cls.field_names()))
        if unknown:
            raise ValueError(f"unknown chunker settings {unknown}; the settings are {list(cls.field_names())}")
        if config is None:
            return cls(**settings)
        return config.replace(**settings) if settings else config

    def replace(self, **changes: Any) -> ChunkerConfig:
        """A validated copy with some settings changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self, *, runtime: bool = True) -> dict[str, Any]:
        """JSON-ready settings with the effective sizes; objects (an encoder, a segmenter, a
        tokenizer callable) are described by their names (see :func:`describe`).
        ``runtime=False`` leaves out :data:`RUNTIME_FIELDS`, which do not change the chunks.

        Example:
            >>> ChunkerConfig(target_tokens=256).to_dict()["max_cluster_tokens"]
            384
        """
        names = [n for n in self.field_names() if runtime or n not in RUNTIME_FIELDS]
        out = {name: describe(getattr(self, name)) for name in names}
        out.update(target_tokens=self.effective_target_tokens, max_segment_tokens=self.effective_max_segment_tokens,
                   max_cluster_tokens=self.effective_max_cluster_tokens)
        return out


def describe(value: Any) -> Any:
    """A stable, JSON-ready stand-in for a setting in dumps, fingerprints and cache keys.

    Scalars stay as they are; an object is its repr when that names its settings (a dataclass such
    as ``TextTilingSegmenter(window=6, ...)``, so two differently configured segmenters differ),
    else its name (``encoder.name``, ``model_name``, a tiktoken encoding), else its qualified class
    name. A repr with a memory address is never used: it would make every key unique.

    Example:
        >>> describe(3), describe(None)
        (3, None)
        >>> describe(len)
        'builtins.len'
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "__fspath__"):
        return str(value)
    text = repr(value)
    if " at 0x" not in text and not text.startswith("<"):
        return text
    for attr in ("name", "model_name", "encoding"):
        named = getattr(value, attr, None)
        if isinstance(named, str) and named:
            return named
    kind = value if isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")) else type(value)
    return f"{kind.__module__}.{kind.__qualname__}"
