"""Test doubles that keep property tests fast: a deterministic bag-of-words encoder."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np


class HashingEncoder:
    """Deterministic bag-of-words vectors (hashed words), L2-normalised: fast, no model.

    Related texts share words and so get related vectors, which is enough to exercise the
    segmenter and the clustering on arbitrary input.
    """

    name = "test-hashing-encoder"

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.dimension = dim
        self.calls = 0

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()) or [text]:
            h = int.from_bytes(hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        norm = np.linalg.norm(v)
        if norm == 0:
            v[0] = 1.0
            norm = 1.0
        return v / norm

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def encode_query(self, text: str) -> np.ndarray:
        return self._vector(text)
