"""The shapes of Chroma client a store runs on, one :class:`Backend` each, chosen once when the store
opens (:func:`choose_backend`): the only place that looks at a Chroma client.

=========================  ==================================================================
:class:`MemoryBackend`     ``EphemeralClient``: lexical index in memory, nothing to refresh
:class:`EmbeddedBackend`   ``PersistentClient``: lexical index beside the files, fresh views,
                           the writer lock, the chromadb releases it relies on
:class:`ServerBackend`     ``HttpClient``: a lexical cache per machine, errors naming the server
:class:`ForeignBackend`    an object that is not a chromadb collection: none of these
=========================  ==================================================================

A fourth shape (Chroma Cloud, say) is one more module here: its subclass, with the :meth:`Backend.claim`
that recognises its clients and what its shape does differently (a ``lexical_index`` of its own
class where it has a native sparse index), listed in :data:`SHAPES` before the shapes it refines.

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
