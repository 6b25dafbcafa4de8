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
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hseg.encoders import CachingEncoder

__all__ = ["DiskCachingEncoder"]

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
