"""Chunking, the paper's step 2: the chunker's settings, segments and clusters with exact spans,
clique clustering, the metadata schema of a chunk's records, and the HTML viewer of a chunking."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hseg.faces import lazy_names

if TYPE_CHECKING:  # the names of _HOME, for type checkers
    from hseg.chunking.chunker import HierarchicalChunker  # noqa: F401
    from hseg.chunking.chunks import Chunking, Cluster, Segment  # noqa: F401
    from hseg.chunking.clustering import mean_vector  # noqa: F401
    from hseg.chunking.config import ChunkerConfig, describe  # noqa: F401
    from hseg.chunking.records import Record, check_unicode, flatten_metadata, records_for  # noqa: F401
    from hseg.chunking.schema import (  # noqa: F401
        CLUSTER,
        CLUSTER_ID_KEY,
        DOC_ID_KEY,
        ENCODER_KEY,
        END_KEY,
        LEVEL_KEY,
        METADATA_KEYS,
        NEXT_ID_KEY,
        PREV_ID_KEY,
        SCHEMA_VERSION,
        SEGMENT,
        SEGMENT_IDS_KEY,
        START_KEY,
        TOKENS_KEY,
        chunk_metadata,
        chunk_pages,
        encode_segment_ids,
        heading_path,
        hidden_from_model,
        listed_segment_ids,
        metadata_table,
        page_range,
        source_metadata,
    )
    from hseg.chunking.viewer import render_html  # noqa: F401

#: each public name and the module that holds it, imported on first use
#: (the chunker pulls in the segmenters and encoders; `import hseg` stays light)
_HOME = {
    "HierarchicalChunker": "hseg.chunking.chunker", "ChunkerConfig": "hseg.chunking.config",
    "describe": "hseg.chunking.config", "Chunking": "hseg.chunking.chunks", "Cluster": "hseg.chunking.chunks",
    "Segment": "hseg.chunking.chunks", "mean_vector": "hseg.chunking.clustering", "Record": "hseg.chunking.records",
    "records_for": "hseg.chunking.records", "flatten_metadata": "hseg.chunking.records",
    "check_unicode": "hseg.chunking.records", "render_html": "hseg.chunking.viewer",
    "SCHEMA_VERSION": "hseg.chunking.schema", "METADATA_KEYS": "hseg.chunking.schema",
    "metadata_table": "hseg.chunking.schema", "CLUSTER": "hseg.chunking.schema", "SEGMENT": "hseg.chunking.schema",
    "DOC_ID_KEY": "hseg.chunking.schema", "LEVEL_KEY": "hseg.chunking.schema",
    "CLUSTER_ID_KEY": "hseg.chunking.schema", "ENCODER_KEY": "hseg.chunking.schema",
    "START_KEY": "hseg.chunking.schema", "END_KEY": "hseg.chunking.schema", "TOKENS_KEY": "hseg.chunking.schema",
    "PREV_ID_KEY": "hseg.chunking.schema", "NEXT_ID_KEY": "hseg.chunking.schema",
    "SEGMENT_IDS_KEY": "hseg.chunking.schema", "chunk_metadata": "hseg.chunking.schema",
    "chunk_pages": "hseg.chunking.schema", "source_metadata": "hseg.chunking.schema",
    "hidden_from_model": "hseg.chunking.schema", "heading_path": "hseg.chunking.schema",
    "encode_segment_ids": "hseg.chunking.schema", "listed_segment_ids": "hseg.chunking.schema",
    "page_range": "hseg.chunking.schema",
}

__all__ = list(_HOME)

__getattr__ = lazy_names(__name__, _HOME)
