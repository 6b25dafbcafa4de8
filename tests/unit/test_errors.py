"""Errors by type (issue 45 item 6): one base class, each kind also the built-in it was raised as,
found where it was imported before, and told apart by type, not by its text."""

from __future__ import annotations

import argparse
import inspect

import pytest

import hseg.errors as errors
from hseg.errors import HsegError

#: each kind and the built-in error it was before it had a type of its own (``except ValueError`` keeps working)
BUILT_IN = {
    "EncoderMismatchError": ValueError, "SchemaTooNewError": ValueError, "IndexOutOfStepError": LookupError,
    "ServerUnreachableError": ConnectionError, "DatabaseStorageError": OSError,
    "DatabaseReadOnlyError": PermissionError, "WriterBusyError": RuntimeError, "StoreMovedError": ValueError,
    "StoreReplacedError": RuntimeError, "ChromaVersionError": RuntimeError,
    "CollectionNotFoundError": ValueError, "StoreNotFoundError": ValueError,
    "LexicalIndexStorageError": OSError, "LexicalIndexUnavailable": RuntimeError, "EncoderLoadError": RuntimeError,
    "IngestWriteError": RuntimeError, "CliError": ValueError,
    "FormatSupportMissing": ImportError, "UnreadableDocumentError": ValueError,
}


def test_every_kind_is_an_hseg_error_and_the_built_in_it_was():
    kinds = {name for name, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, HsegError)}
    assert kinds == set(BUILT_IN) | {"HsegError"}
    import hseg  # every kind is public from the package's face

    assert kinds <= set(hseg.__all__) and all(getattr(hseg, kind) is getattr(errors, kind) for kind in kinds)
    for name, built_in in BUILT_IN.items():
        assert issubclass(getattr(errors, name), (HsegError, built_in)), name
        assert issubclass(getattr(errors, name), built_in), name


def test_the_kinds_are_found_where_they_were_imported_before():
    import hseg
    from hseg.cli.chroma import CliError
    from hseg.encoders import EncoderLoadError
    from hseg.ingest import IngestWriteError
    from hseg.ingest.relocation import StoreMovedError
    from hseg.store import WriterBusyError
    from hseg.store.connection import LexicalIndexStorageError
    from hseg.store.lexical import LexicalIndexUnavailable

    assert (CliError, EncoderLoadError, IngestWriteError, StoreMovedError, WriterBusyError, LexicalIndexStorageError,
            LexicalIndexUnavailable) == (errors.CliError, errors.EncoderLoadError, errors.IngestWriteError,
                                         errors.StoreMovedError, errors.WriterBusyError,
                                         errors.LexicalIndexStorageError, errors.LexicalIndexUnavailable)
    assert hseg.HsegError is HsegError


def test_the_checks_raise_their_kind():
    from hseg.store.connection import check_encoder, check_schema, storage_error

    with pytest.raises(errors.SchemaTooNewError, match="newer than the schema"):
        check_schema("docs", 99)
    with pytest.raises(ValueError, match="unreadable hseg_schema"):  # still a ValueError to its old callers
        check_schema("docs", "x")
    with pytest.raises(errors.EncoderMismatchError, match="was built with encoder 'a'"):
        check_encoder("docs", "a", "b")
    assert isinstance(storage_error("db", OSError(30, "Read-only file system")), errors.DatabaseReadOnlyError)
    assert isinstance(storage_error("db", OSError(28, "No space left on device")), errors.DatabaseStorageError)
    assert storage_error("db", ValueError("no")) is None


class _Api:
    def get_api_url(self):
        return "http://10.1.2.3:8123/api/v2"


class _Collection:
    _client = _Api()


def test_a_server_error_is_named_once_by_its_type():
    from hseg.store.backends import remote_errors

    with pytest.raises(errors.ServerUnreachableError) as err:
        with remote_errors(_Collection(), "search"), remote_errors(_Collection(), "reading the records"):
            raise ConnectionError("connection reset")
    assert str(err.value) == ("Chroma server at 10.1.2.3:8123: reading the records failed (ConnectionError: "
                              "connection reset)")


def test_the_command_line_passes_hsegs_errors_as_they_are():
    from hseg.cli.chroma import server_errors

    args = argparse.Namespace(host="10.1.2.3", port=8123, db=None)
    with pytest.raises(errors.EncoderMismatchError, match="^collection 'docs'"):
        with server_errors(args):
            raise errors.EncoderMismatchError("collection 'docs' was built with encoder 'a'")
    with pytest.raises(errors.CliError, match=r"^Chroma server at 10\.1\.2\.3:8123: refused"):  # Chroma's: named
        with server_errors(args):
            raise RuntimeError("refused")
