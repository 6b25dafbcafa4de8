"""The retrieval tools' pure parts: a span's characters from a document's clusters, the one declaration
(tools, schemas, bounds), inputs refused before the store is touched, and ``hseg mcp``'s own checks
(its install hint, ``--bind``, loopback addresses)."""

from __future__ import annotations

import sys
from typing import get_type_hints

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hseg.tools import LIMITS, TOOLS, StoreTools, ToolInputError, arguments_model, as_json, json_schema
from hseg.tools.documents import StoredCluster, covering, text_of
from hseg.tools.results import Span


@st.composite
def tiled(draw):
    """A text, clusters tiling it, and a span inside it."""
    text = draw(st.text(min_size=1, max_size=300))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(text)), max_size=8))) | {len(text)})
    clusters, at = [], 0
    for i, end in enumerate(cuts):
        clusters.append(StoredCluster(f"c{i}", at, end, end - at, (), text[at:end]))
        at = end
    start = draw(st.integers(0, len(text)))
    return text, clusters, start, draw(st.integers(start, len(text)))


@given(tiled())
def test_a_span_is_the_documents_characters(case):
    text, clusters, start, end = case
    assert text_of(clusters, start, end) == text[start:end]
    held = covering(clusters, start, end)
    assert held == [c for c in clusters if c.start < end and start < c.end] or \
        (start == end and held == [next(c for c in reversed(clusters) if c.start <= start)])


def test_each_tool_is_declared_once():
    assert [t.name for t in TOOLS] == ["search", "read", "expand", "lexical_search", "list_documents"]
    for declaration in TOOLS:
        method = getattr(StoreTools, declaration.name)
        assert get_type_hints(method)["return"] is declaration.result
        assert declaration.description and "\n" not in declaration.description
        assert json_schema(declaration.result)["type"] == "object"


def test_the_schemas_carry_the_limits():
    tools = StoreTools(Untouchable())
    search = arguments_model(tools.search).model_json_schema()
    assert search["required"] == ["question"]
    assert (search["properties"]["budget_tokens"]["maximum"], search["properties"]["budget_tokens"]["default"]) == \
        (LIMITS.max_budget_tokens, 1024)
    assert search["properties"]["question"]["maxLength"] == LIMITS.max_question_chars
    assert tools.input_schema("read")["required"] == ["source", "start", "end"]
    assert tools.input_schema("lexical_search")["properties"]["limit"]["maximum"] == LIMITS.max_lexical_hits
    assert tools.input_schema("list_documents")["properties"]["limit"]["maximum"] == LIMITS.max_documents
    with pytest.raises(ValueError, match="name must be one of"):
        tools.input_schema("delete")


def test_results_are_json_objects():
    assert as_json(Span(1, 4)) == {"start": 1, "end": 4}
    with pytest.raises(ValueError, match="result must be a dataclass instance"):
        as_json({"start": 1})


class _Refusing:
    def __getattr__(self, name):
        raise AssertionError(f"the store's collection was touched ({name})")


class Untouchable:
    """A store that fails any test reaching it: inputs must be refused before any read."""

    collection = _Refusing()
    lexical_index = _Refusing()

    def search(self, *args, **kwargs):
        raise AssertionError("the store was searched")

    def iter_metadatas(self, *args, **kwargs):
        raise AssertionError("the store was read")


@pytest.mark.parametrize(("call", "message"), [
    (lambda t: t.search("", budget_tokens=10), "question must be a non-empty string, got ''"),
    (lambda t: t.search(None), "question must be a non-empty string, got None"),
    (lambda t: t.search("x" * (LIMITS.max_question_chars + 1)), "question has 4,001 characters, more than 4,000"),
    (lambda t: t.search("tides", budget_tokens=10**6), "budget_tokens must be from 1 to 8,192, got 1,000,000"),
    (lambda t: t.search("tides", budget_tokens="many"), "budget_tokens must be an integer"),
    (lambda t: t.search("tides", budget_tokens=True), "budget_tokens must be an integer"),
    (lambda t: t.search("tides", where=["source"]), "where must be a JSON object"),
    (lambda t: t.read("a.md", "0", 5), "start must be an integer character offset, got '0'"),
    (lambda t: t.read("a.md", 0, 2.5), "end must be an integer character offset, got 2.5"),
    (lambda t: t.read("", 0, 5), "source must be a non-empty string"),
    (lambda t: t.expand(3, 0, 5), "source must be a non-empty string, got 3"),
    (lambda t: t.lexical_search("..."), "terms: '...' has no words to search for"),
    (lambda t: t.lexical_search("tides", limit=0), "limit must be from 1 to 50, got 0"),
    (lambda t: t.list_documents(limit=5000), "limit must be from 1 to 1,000, got 5,000"),
])
def test_bad_input_is_refused_before_the_store_is_touched(call, message):
    with pytest.raises(ToolInputError) as caught:
        call(StoreTools(Untouchable()))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_tools_need_a_store():
    with pytest.raises(ValueError, match="store must be an hseg.store.HierarchicalStore, got dict"):
        StoreTools({})


def test_mcp_without_the_sdk_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    from hseg.cli import main
    from hseg.tools.server import require_mcp

    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'hseg\[mcp\]'"):
        require_mcp()
    assert main(["mcp", "--db", str(tmp_path / "db")]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "hseg mcp: error: hseg mcp needs the Model Context Protocol SDK: pip install 'hseg[mcp]'"
    assert not (tmp_path / "db").exists()


def test_bind_needs_http(tmp_path, capsys):
    from hseg.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["mcp", "--db", str(tmp_path / "db"), "--bind", "0.0.0.0"])
    assert exited.value.code == 2 and "--bind needs --http" in capsys.readouterr().err


@pytest.mark.parametrize(("address", "loopback"), [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                                   ("127.0.0.2", True), ("0.0.0.0", False), ("10.1.2.3", False),
                                                   ("example.org", False)])
def test_loopback_addresses(address, loopback):
    from hseg.cli.mcp import is_loopback

    assert is_loopback(address) is loopback
