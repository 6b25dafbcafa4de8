"""The store's backends (issue 55 item 1): one per shape of Chroma client, chosen once when a store
opens, the only place that looks at the client; the in-memory one is the store's fast test fixture."""

from __future__ import annotations

import uuid

import chromadb
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.errors import ChromaVersionError, ServerUnreachableError
from hseg.store import HierarchicalStore
from hseg.store.backends import (
    EmbeddedBackend,
    ForeignBackend,
    MemoryBackend,
    ServerBackend,
    choose_backend,
)
from hseg_testing.fakes import HashingEncoder, synthetic_book


def fresh_collection(client):
    return client.create_collection(f"t-{uuid.uuid4().hex}", embedding_function=None)


class _Settings:
    is_persistent = False
    persist_directory = "./chroma"


class _HttpApi:
    """A client of a server, as far as hseg looks: its API address and its settings."""

    def get_api_url(self):
        return "http://10.1.2.3:8123/api/v2"

    def get_settings(self):
        return _Settings()

    def get_or_create_collection(self, *args, **kwargs):
        raise AssertionError("not called")


class _Collection:
    name, tenant, database, id = "docs", "default_tenant", "default_database", "c-1"

    def __init__(self, api):
        self._client = api


def test_each_shape_gets_its_backend(tmp_path, monkeypatch):
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "cache"))
    memory = choose_backend(fresh_collection(chromadb.EphemeralClient()))
    embedded = choose_backend(fresh_collection(chromadb.PersistentClient(path=str(tmp_path / "db"))))
    server = choose_backend(_Collection(_HttpApi()))
    foreign = choose_backend(object())
    assert [type(b) for b in (memory, embedded, server, foreign)] == [MemoryBackend, EmbeddedBackend, ServerBackend,
                                                                      ForeignBackend]
    assert [b.kind for b in (memory, embedded, server, foreign)] == ["memory", "embedded", "server", "foreign"]
    assert (memory.path, embedded.path, server.path) == (None, str(tmp_path / "db"), None)
    assert (memory.address, embedded.address, server.address) == (None, None, "10.1.2.3:8123")
    assert memory.units and embedded.units and server.units and not foreign.units

    col = _Collection(None)
    assert memory.lexical_location(col).kind == "memory" and memory.lexical_location(col).key == "c-1"
    assert embedded.lexical_location(col).path == tmp_path / "db" / "hseg-lexical" / "docs.sqlite"
    assert server.lexical_location(col).path == (tmp_path / "cache" / "lexical" / "10.1.2.3_8123" / "default_tenant"
                                                 / "default_database" / "docs.sqlite")
    assert foreign.lexical_location(col) is None


def test_a_new_shape_is_one_subclass_that_claims_its_clients(tmp_path, monkeypatch):
    """What the next maintainer writes for a fourth shape (Chroma Cloud, with its own lexical index):
    a subclass whose claim recognises its clients, placed in SHAPES before the shape it refines."""
    import hseg.store.backends.choose as choose

    class CloudBackend(ServerBackend):
        kind = "cloud"

        @classmethod
        def claim(cls, facts):
            if facts.address is None or not facts.address.startswith("10.1.2.3"):
                return None
            return cls(address=facts.address, units=facts.units, api=facts.api)

        def lexical_index(self, collection):
            return None  # the service's own sparse index would answer here

    monkeypatch.setattr(choose, "SHAPES", (CloudBackend, *choose.SHAPES))
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "cache"))
    cloud = choose_backend(_Collection(_HttpApi()))
    assert type(cloud) is CloudBackend and cloud.address == "10.1.2.3:8123"
    assert cloud.lexical_index(_Collection(None)) is None
    assert choose_backend(fresh_collection(chromadb.EphemeralClient())).kind == "memory"  # the others unchanged


def test_only_the_servers_backend_names_the_server_in_its_errors():
    with pytest.raises(ServerUnreachableError, match=r"^Chroma server at 10\.1\.2\.3:8123: search failed "
                                                     r"\(ConnectionError: reset\)$"):
        with ServerBackend(address="10.1.2.3:8123").errors("search"):
            raise ConnectionError("reset")
    with pytest.raises(ConnectionError, match="^reset$") as err:
        with MemoryBackend().errors("search"):
            raise ConnectionError("reset")
    assert not isinstance(err.value, ServerUnreachableError)
    with pytest.raises(ValueError, match="^bad$"):  # not a lost connection: passed on as it is
        with ServerBackend(address="10.1.2.3:8123").errors("search"):
            raise ValueError("bad")


@pytest.mark.parametrize("version", ["1.2.9", "2.0.0", "0.6.3", "dev"])
def test_an_embedded_store_refuses_a_chromadb_outside_its_range(tmp_path, monkeypatch, version):
    collection = fresh_collection(chromadb.PersistentClient(path=str(tmp_path / "db")))
    monkeypatch.setattr(chromadb, "__version__", version)
    with pytest.raises(ChromaVersionError, match=rf"^chromadb {version}: an embedded store .* needs "
                                                 r"chromadb>=1\.3,<2\.0"):
        choose_backend(collection)
    assert choose_backend(fresh_collection(chromadb.EphemeralClient())).kind == "memory"  # only the embedded


@pytest.mark.parametrize("version", ["1.3.0", "1.5.9", "1.99.1rc1"])
def test_an_embedded_store_accepts_a_chromadb_inside_its_range(tmp_path, monkeypatch, version):
    collection = fresh_collection(chromadb.PersistentClient(path=str(tmp_path / "db")))
    monkeypatch.setattr(chromadb, "__version__", version)
    assert choose_backend(collection).kind == "embedded"


@pytest.fixture
def fresh_store():
    """A store on the memory backend, new for each test (sqlite-utils' ``fresh_db``): no folder, no server."""
    return HierarchicalStore(f"t-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(), encoder=HashingEncoder())


def test_the_memory_backend_is_a_fast_store_fixture(fresh_store):
    enc = fresh_store.encoder
    chunking = HierarchicalChunker(encoder=enc, segmenter="texttiling").chunk(synthetic_book(1_500, seed=4), "a.md")
    assert fresh_store.add(chunking) > 0
    hits = fresh_store.search(chunking.segments[2].text, k=2)
    assert hits and hits[0].doc_id == "a.md"
    parts = fresh_store._parts
    assert parts.backend.kind == "memory" and fresh_store.writer_turn() is None and not hasattr(parts.backend, "fresh")
    assert parts.lexical.location.kind == "memory" and parts.units is not None


def test_a_store_chooses_its_backend_once(tmp_path, monkeypatch):
    import hseg.store.parts as parts_module

    chosen = []

    def counting(collection):
        chosen.append(collection.name)
        return choose_backend(collection)

    monkeypatch.setattr(parts_module, "choose_backend", counting)
    enc = HashingEncoder()
    chunking = HierarchicalChunker(encoder=enc, segmenter="texttiling").chunk(synthetic_book(1_500, seed=5), "b.md")
    for client in (chromadb.EphemeralClient(), chromadb.PersistentClient(path=str(tmp_path / "db"))):
        chosen.clear()
        store = HierarchicalStore(f"t-{uuid.uuid4().hex}", client=client, encoder=enc)
        store.add(chunking)
        store.search(chunking.segments[1].text, k=2)
        store.sync_unit_index()
        store.stats()
        store.delete("b.md")
        assert chosen == [store.collection.name]
        wrapped = HierarchicalStore.from_collection(store.collection, enc)
        wrapped.search("tides", k=1)
        assert chosen == [store.collection.name] * 2 and type(wrapped._parts.backend) is type(store._parts.backend)
        assert wrapped.client is store.collection._client  # the collection's own connection
