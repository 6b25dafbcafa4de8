"""The shapes of Chroma client a store runs on, one :class:`Backend` each, chosen once when the store
opens (:func:`choose_backend`): the only place that looks at a Chroma client.

How and why: docs/design.md, ``hseg.store.backends``.

Example:
    >>> import chromadb, uuid
    >>> collection = chromadb.EphemeralClient().create_collection(f"c-{uuid.uuid4().hex}", embedding_function=None)
    >>> backend = choose_backend(collection)
    >>> backend.kind, backend.path, backend.writer_turn()
    ('memory', None, None)
"""

from hseg.errors import ChromaVersionError
from hseg.store.backends.base import Backend, ClientFacts
from hseg.store.backends.choose import SHAPES, choose_backend, opening_errors, remote_errors, server_address
from hseg.store.backends.embedded import CHROMADB_RANGE, EmbeddedBackend
from hseg.store.backends.foreign import ForeignBackend
from hseg.store.backends.memory import MemoryBackend
from hseg.store.backends.server import ServerBackend

__all__ = ["Backend", "ClientFacts", "SHAPES", "choose_backend", "opening_errors", "remote_errors", "server_address",
           "MemoryBackend", "EmbeddedBackend", "ServerBackend", "ForeignBackend", "CHROMADB_RANGE",
           "ChromaVersionError"]
