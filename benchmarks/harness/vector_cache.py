"""Vectors kept on disk between benchmark runs, so that a rerun encodes only what is new.

A run of :mod:`benchmarks.retrieval` or :mod:`benchmarks.paired` on a large set spends most of its time
encoding the same sentences, segments and chunks it encoded the run before. With ``--vector-cache DIR``
the run's :class:`DiskCachingEncoder` reads ``DIR/<encoder>.npz`` (vectors by the SHA-1 of their text,
queries apart from passages: an encoder may prompt them differently) and writes back what it encoded.
Nothing else changes: a text's vector is the one the encoder gave it in an earlier run.

Example:
    >>> enc = DiskCachingEncoder(as_encoder(), ".hseg_cache/bench_vectors")  # doctest: +SKIP
    >>> _ = enc.encode(["a sentence"]); enc.save()  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hseg.encoders import CachingEncoder

__all__ = ["DiskCachingEncoder", "MemoSegmenter"]

logger = logging.getLogger(__name__)


def _key(kind: str, text: str) -> str:
    return hashlib.sha1(f"{kind}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


class DiskCachingEncoder(CachingEncoder):
    """A :class:`~hseg.encoders.CachingEncoder` whose vectors also come from, and go to, a file."""

    def __init__(self, encoder: Any, directory: str | os.PathLike[str]) -> None:
        super().__init__(encoder, max_items=None)
        name = re.sub(r"[^\w.+-]", "_", f"{encoder.name}")
        self.path = Path(directory) / f"{name}.npz"
        self._disk: dict[str, np.ndarray] = {}
        self._new: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as data:
                self._disk = dict(zip(data["keys"].tolist(), data["vectors"]))
            logger.info("%s: %d vectors", self.path, len(self._disk))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        for t in dict.fromkeys(texts):
            if t not in self._cache:
                v = self._disk.get(_key("p", t))
                if v is not None:
                    self._cache[t] = v
        out = super().encode(texts)
        for t, v in zip(texts, out):
            key = _key("p", t)
            if key not in self._disk and key not in self._new:
                self._new[key] = v
        return out

    def encode_query(self, text: str) -> np.ndarray:
        key = _key("q", text)
        v = self._disk.get(key, self._new.get(key))
        if v is None:
            v = np.asarray(self.encoder.encode_query(text), dtype=np.float32)
            self._new[key] = v
        return v

    def save(self) -> None:
        """Write the file with what this run encoded added (atomically: a run killed while saving
        leaves the previous file)."""
        if not self._new:
            return
        self._disk.update(self._new)
        self._new = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        keys = np.array(list(self._disk), dtype="U40")
        np.savez(tmp, keys=keys, vectors=np.stack(list(self._disk.values())).astype(np.float32))
        os.replace(tmp, self.path)


class MemoSegmenter:
    """A segmenter whose answers (boundaries, gap scores) are kept by the text of the sentences, so
    that every hseg method of a run, and with a :class:`DiskCachingEncoder` every later run, segments
    a document once: the segmenter's answer depends on the sentences and their vectors alone, and the
    vectors on the sentences and the run's encoder. Anything else is the wrapped segmenter's."""

    def __init__(self, inner: Any, directory: str | os.PathLike[str] | None = None) -> None:
        self.inner = inner
        name = re.sub(r"[^\w.+-]", "_", str(getattr(inner, "name", type(inner).__name__)))
        self.path = Path(directory) / f"segmenter-{name}.pkl" if directory is not None else None
        self.memo: dict[tuple[str, str], Any] = _MEMOS.setdefault(str(self.path) if self.path else name, {})
        if self.path is not None and self.path.exists() and not self.memo:
            with open(self.path, "rb") as fh:
                self.memo.update(pickle.load(fh))
        self.added = False

    def _key(self, kind: str, sentences: Sequence[str], vectors: Any) -> tuple[str, str]:
        digest = hashlib.sha1("\0".join(sentences).encode("utf-8", "surrogatepass"))
        digest.update(str(np.shape(vectors)).encode())
        return kind, digest.hexdigest()

    def _call(self, kind: str, fn: Any, sentences: Sequence[str], vectors: Any) -> Any:
        key = self._key(kind, sentences, vectors)
        if key not in self.memo:
            self.memo[key] = fn(sentences, vectors)
            self.added = True
        return self.memo[key]

    def boundaries(self, sentences: Sequence[str], vectors: Any) -> Any:
        return self._call("boundaries", self.inner.boundaries, sentences, vectors)

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self.inner, attr)
        if attr == "gap_scores":
            return lambda sentences, vectors: self._call("gap_scores", value, sentences, vectors)
        return value

    def save(self) -> None:
        if self.path is None or not self.added:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(self.memo, fh)
        os.replace(tmp, self.path)
        self.added = False


#: one memo per file (or segmenter name), shared by the run's chunkers
_MEMOS: dict[str, dict[tuple[str, str], Any]] = {}
