"""What a collection remembers of the ``hseg index`` runs that wrote it, in its own metadata: the chunk
options (``--target-tokens``, ``--segmenter``, ...), so that a later run without them chunks as the
earlier one did instead of re-chunking every document to the defaults; and the settings fingerprint of
the last chunker built for it with its settings key (:func:`hseg.ingest.fingerprint.settings_key`), so
that a run that chunks nothing need not build one (:class:`hseg.ingest.lazy.LazyChunker`). The encoder
is remembered the same way (:mod:`hseg.store.encoder_binding`), but binds: one collection holds one
model's vectors.

Example:
    >>> remember_chunk_options(collection, {"target_tokens": 128})  # doctest: +SKIP
    >>> remembered_chunk_options(collection)  # doctest: +SKIP
    {'target_tokens': 128}
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from hseg.chunking.schema import CHUNK_OPTIONS_KEY, FINGERPRINT_KEY
from hseg.store.connection import set_collection_metadata

logger = logging.getLogger(__name__)

# the collection metadata keys (:mod:`hseg.chunking.schema`): the chunk options (a JSON object: Chroma's
# metadata values are scalars) and the last settings fingerprint, ``{"key": settings key, "settings": fingerprint}``


def remembered_chunk_options(collection: Any) -> dict[str, Any] | None:
    """The chunk options the collection remembers (``None``: none, or unreadable, which is logged)."""
    raw = (collection.metadata or {}).get(CHUNK_OPTIONS_KEY)
    if raw is None:
        return None
    try:
        options = json.loads(str(raw))
    except ValueError:
        options = None
    if not isinstance(options, dict):
        logger.warning("collection %r: unreadable %s %r in its metadata; using the defaults", collection.name,
                       CHUNK_OPTIONS_KEY, raw)
        return None
    return options


def remember_chunk_options(collection: Any, options: Mapping[str, Any]) -> None:
    """Remember ``options`` (JSON-ready values) in the collection's metadata; nothing when it holds them."""
    set_collection_metadata(collection, {CHUNK_OPTIONS_KEY: json.dumps(dict(options), sort_keys=True)})


def remembered_fingerprint(collection: Any, key: str | None) -> str | None:
    """The settings fingerprint the collection remembers for the settings key ``key`` (``None``: none)."""
    raw = (collection.metadata or {}).get(FINGERPRINT_KEY)
    if key is None or raw is None:
        return None
    try:
        held = json.loads(str(raw))
    except ValueError:
        return None
    return str(held["settings"]) if isinstance(held, dict) and held.get("key") == key and "settings" in held else None


def remember_fingerprint(collection: Any, key: str | None, settings: str) -> None:
    """Remember ``settings``, the fingerprint of a chunker built for the settings key ``key``."""
    if key is not None:
        set_collection_metadata(collection, {FINGERPRINT_KEY: json.dumps({"key": key, "settings": settings})})
