"""The errors hseg raises on purpose, by kind: catch :class:`HsegError` for all of them, or one kind.

How and why: docs/design.md, ``hseg.errors``.

Example:
    >>> from hseg import EncoderMismatchError, HsegError
    >>> try:
    ...     store.search("tides")  # doctest: +SKIP
    ... except EncoderMismatchError as exc:  # the collection holds another model's vectors
    ...     print(exc)
    >>> issubclass(EncoderMismatchError, (HsegError, ValueError))
    True
"""

from __future__ import annotations


class HsegError(Exception):
    """The base of every error of this module: something hseg refused or could not do, said in one
    message that names the fix."""


class EncoderMismatchError(HsegError, ValueError):
    """Vectors of another model than the collection's: an encoder, a chunking, a query vector or stored
    records whose model (or dimension) is not the one the collection was built with."""


class SchemaTooNewError(HsegError, ValueError):
    """A collection written with a newer (or unreadable) record schema than this hseg reads."""


class IndexOutOfStepError(HsegError, LookupError):
    """What a search read disagrees with the collection: a record the unit index lists is gone, a
    cluster record is missing beside its segments, or a record lacks a key the search needs. Adding
    the documents again (or rebuilding the unit index) puts them back in step."""


class ServerUnreachableError(HsegError, ConnectionError):
    """The Chroma server could not be reached, or the connection failed during a call; the message
    names the server (``host:port``) and the call."""


class DatabaseStorageError(HsegError, OSError):
    """The disk of an embedded Chroma database is full (or, :class:`DatabaseReadOnlyError`, read-only);
    the message names the folder and the fix."""


class DatabaseReadOnlyError(DatabaseStorageError, PermissionError):
    """The embedded Chroma database is on a read-only folder or disk (Chroma cannot even read it there)."""


class WriterBusyError(HsegError, RuntimeError):
    """Another process kept the writer lock of an embedded store longer than we could wait."""


class StoreMovedError(HsegError, ValueError):
    """The store's document ids are relative to another folder than the one that holds it now."""


class StoreReplacedError(HsegError, RuntimeError):
    """The folder of an embedded store was renamed or replaced after the store object opened it: its
    parts that follow the path and those that follow the open files would read two stores. Open the
    store again in a new process (chromadb keeps one client per folder and process)."""


class ChromaVersionError(HsegError, RuntimeError):
    """The installed chromadb is outside the releases whose internals an embedded store relies on
    (:data:`hseg.store.backends.embedded.CHROMADB_RANGE`); the message names the range."""


class CollectionNotFoundError(HsegError, ValueError):
    """A store opened to read (``create=False``) names a collection that is not there; ``existing``
    lists the collections that are."""

    def __init__(self, message: str, *, existing: list[str] | None = None) -> None:
        super().__init__(message)
        self.existing = list(existing or [])


class StoreNotFoundError(CollectionNotFoundError):
    """No store where one was named: no Chroma database at a ``path`` opened to read (nothing is created
    there), or a search of a collection that opening the store created just now (a mistyped path or
    collection name, not an index that found nothing)."""


class LexicalIndexStorageError(HsegError, OSError):
    """The lexical index's file cannot be written: its folder is read-only, or its disk is full. Not the
    Chroma database beside it, which may be fine (a dense search still works)."""


class LexicalIndexUnavailable(HsegError, RuntimeError):
    """The lexical index cannot be read and could not be built again (a read-only folder, a full disk);
    a search then ranks by the dense side alone (:class:`~hseg.store.searching.SearchPlanner`)."""


class EncoderLoadError(HsegError, RuntimeError):
    """A model given by name could not be loaded; the message names it, says why and how to fix it."""


class IngestWriteError(HsegError, RuntimeError):
    """Writing a batch to the store failed; earlier batches are complete, this one may be partial.

    ``written``: documents of the batch whose records were all stored before the failure; the other
    ``unsure`` may be stored in part (Chroma can fail after its log took a write, e.g. on a full disk).
    """

    def __init__(self, message: str, *, written: int = 0, unsure: int = 0) -> None:
        super().__init__(message)
        self.written = written
        self.unsure = unsure


class CliError(HsegError, ValueError):
    """A complete one-line message for the user of the ``hseg`` command (printed as is, exit code 1)."""


class FormatSupportMissing(HsegError, ImportError):
    """A file's format needs a converter library that is not installed; the message names the package and
    the install command (``pip install "hseg[formats]"``)."""

    def __init__(self, message: str, *, module: str | None = None) -> None:
        super().__init__(message)
        self.module = module


class UnreadableDocumentError(HsegError, ValueError):
    """A document hseg cannot read as text: binary content (raw PDF bytes given as text, NUL bytes),
    a file its converter cannot open (damaged, encrypted) or one with no text layer (a scanned PDF)."""
