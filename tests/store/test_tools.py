"""The retrieval tools (hseg.tools) over real stores: every span they return is the document's own
characters, expand gives the clusters the chunker made, lexical hits hold the words, each bad input is
refused with one line naming it, and no tool writes; the MCP server over the same store, driven
in-process by the SDK's own client."""

from __future__ import annotations

import asyncio
import datetime
import json
import time

import numpy as np
import pytest

from hseg.chunking.schema import content_sha256
from hseg.store import HierarchicalStore
from hseg.tools import LIMITS, TOOLS, StoreTools, ToolInputError, as_json
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder

DOC = "example.md"
QUESTIONS = ["What did Galileo see through his telescope?", "What is the ecliptic?", "Why do the planets wander?"]


OTHER = "# Notes\n\nTides rise twice a day. The moon pulls the sea.\n\n## Rivers\n\nA delta forms at the mouth.\n"


@pytest.fixture(scope="module")
def chunked(example_text):
    """The example document and a second, short one, chunked once on the hashing encoder."""
    chunker = small_chunker()
    texts = {DOC: example_text, "notes/other.md": OTHER}
    return {doc: chunker.chunk(text, doc_id=doc) for doc, text in texts.items()}, texts


@pytest.fixture
def tool_store(chroma_client, chroma_collection_name, chunked):
    """The tools over a store of :func:`chunked`'s documents."""
    chunkings, texts = chunked
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder(64))
    store.add(list(chunkings.values()), [{"source": doc, "year": 2024} for doc in chunkings])
    return StoreTools(store), chunkings, texts


def test_search_returns_passages_with_exact_spans(tool_store):
    tools, chunkings, texts = tool_store
    for question in QUESTIONS:
        answer = tools.search(question, budget_tokens=300)
        assert answer.passages and answer.tokens == sum(p.tokens for p in answer.passages) <= 300
        for p in answer.passages:
            assert texts[p.source][p.start:p.end] == p.text
            assert p.metadata == {"source": p.source, "year": 2024}
            cluster = next(c for c in chunkings[p.source].clusters if c.start <= p.start < c.end)
            assert p.cluster_id == cluster.id
            segments = [s for s in chunkings[p.source].segments if s.start < p.end and p.start < s.end]
            # a passage's heading path is the common prefix of its segments' (the schema's rule)
            assert tuple(p.heading_path) == tuple(segments[0].heading_path)[:len(p.heading_path)]
        scores = [p.score for p in answer.passages]
        assert scores == sorted(scores, reverse=True)
    only = tools.search(QUESTIONS[0], budget_tokens=300, where={"source": "notes/other.md"})
    assert {p.source for p in only.passages} == {"notes/other.md"}


def test_read_returns_the_stored_characters(tool_store):
    tools, _, texts = tool_store
    text = texts[DOC]
    rng = np.random.default_rng(3)
    for _ in range(40):
        start = int(rng.integers(0, len(text)))
        end = min(len(text), start + int(rng.integers(0, 3000)))
        got = tools.read(DOC, start, end)
        assert (got.text, got.start, got.end, got.document_chars) == (text[start:end], start, end, len(text))
    whole = "".join(tools.read(DOC, a, min(a + LIMITS.max_read_chars, len(text))).text
                    for a in range(0, len(text), LIMITS.max_read_chars))
    assert whole == text


def test_expand_gives_the_cluster_holding_a_span(tool_store):
    tools, chunkings, texts = tool_store
    clusters = chunkings[DOC].clusters
    for p in tools.search(QUESTIONS[0], budget_tokens=600).passages:
        if p.source != DOC:
            continue
        got = tools.expand(p.source, p.start, p.end)
        held = [c for c in clusters if c.start < p.end and p.start < c.end] or \
            [c for c in clusters if c.start <= p.start < c.end]
        assert got.cluster_ids == [c.id for c in held]
        assert (got.start, got.end) == (held[0].start, held[-1].end)
        assert got.text == texts[DOC][got.start:got.end]
        assert got.tokens == sum(c.token_count for c in held)
        first = clusters.index(held[0])
        assert got.previous == (None if first == 0 else
                                type(got.previous)(clusters[first - 1].start, clusters[first - 1].end))
        if got.next is not None:
            assert got.next.start == got.end
    # a point (an empty span) expands to the cluster holding it; the first and last have no neighbour
    assert tools.expand(DOC, 0, 0).previous is None
    last = tools.expand(DOC, len(texts[DOC]), len(texts[DOC]))
    assert last.next is None and last.end == len(texts[DOC])


def test_lexical_search_hits_hold_the_words(tool_store):
    tools, _, texts = tool_store
    answer = tools.lexical_search("Jupiter moons telescope", limit=5)
    assert answer.terms == ["jupiter", "moons", "telescope"]
    assert 0 < len(answer.hits) <= 5
    for hit in answer.hits:
        assert texts[hit.source][hit.start:hit.end] == hit.text
        assert any(word in hit.text.lower() for word in ("jupiter", "moon", "telescop"))
    assert [h.score for h in answer.hits] == sorted((h.score for h in answer.hits), reverse=True)
    assert tools.lexical_search("delta").hits[0].source == "notes/other.md"


def test_list_documents_gives_sources_sizes_and_when_indexed(tool_store):
    tools, chunkings, texts = tool_store
    listed = tools.list_documents()
    assert (listed.total, listed.offset, listed.next_offset) == (2, 0, None)
    assert [d.source for d in listed.documents] == sorted(texts)
    stored = {m["hseg_doc_id"]: m["hseg_indexed_at"] for _, m in tools.store.iter_metadatas()}
    for d in listed.documents:
        assert d.chars == len(texts[d.source])
        assert d.tokens == sum(s.token_count for s in chunkings[d.source].segments)
        assert d.clusters == len(chunkings[d.source].clusters)
        assert d.content_sha256 == content_sha256(texts[d.source])
        assert d.metadata == {"source": d.source, "year": 2024}
        at = datetime.datetime.strptime(d.indexed_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
        assert at.timestamp() == stored[d.source] and abs(time.time() - stored[d.source]) < 600
    first = tools.list_documents(limit=1)
    assert ([d.source for d in first.documents], first.next_offset, first.next_after) == \
        ([sorted(texts)[0]], 1, sorted(texts)[0])
    second = tools.list_documents(limit=1, offset=first.next_offset)
    assert (second.total, second.documents, second.next_offset, second.next_after) == \
        (2, listed.documents[1:], None, None)
    by_cursor = tools.list_documents(limit=1, after=first.next_after)  # the same page, by its cursor
    assert (by_cursor.documents, by_cursor.next_after) == (second.documents, None)
    assert tools.list_documents(after=sorted(texts)[0][:-1]).documents == listed.documents  # any string: ids after it
    assert tools.list_documents(offset=5).documents == tools.list_documents(after="zzz").documents == []


def test_a_store_without_a_lexical_index_lists_the_same_documents(tool_store):
    """The store's reads behind list_documents, the "did you mean" and lexical_search: from the lexical
    index, and from the segment records where a store has none (one over an object that is not a
    chromadb collection)."""
    tools, _, texts = tool_store
    store = tools.store
    pages = [(0, 1, None), (1, 1, None), (0, 5, sorted(texts)[0]), (5, 5, None)]
    indexed = [store.document_page(*page) for page in pages]
    assert store.document_ids_near("notes/a", n=1) == [DOC, "notes/other.md"]
    assert [row.doc_id for row, *_ in store.lexical_top(["delta"], 3)] == ["notes/other.md"]
    store._parts.lexical = None  # what a store over a non-chromadb collection holds
    assert [store.document_page(*page) for page in pages] == indexed
    assert store.document_ids_near("notes/a", n=1) == sorted(texts)  # every id
    assert store.lexical_top(["delta"], 3) is None
    with pytest.raises(ToolInputError, match="this store has no lexical index"):
        tools.lexical_search("delta")


@pytest.mark.parametrize(("call", "names"), [
    (lambda t: t.read("example.mdx", 0, 5), ["source", "'example.mdx'", "did you mean 'example.md'"]),
    (lambda t: t.read(DOC, 10, 10**7), ["span [10, 10000000)", "outside document 'example.md'"]),
    (lambda t: t.read(DOC, 50, 40), ["span [50, 40)"]),
    (lambda t: t.read(DOC, -1, 40), ["span [-1, 40)"]),
    (lambda t: t.read(DOC, 0, LIMITS.max_read_chars + 1), ["characters, more than one read returns"]),
    (lambda t: t.read(DOC, 0.5, 9), ["start must be an integer"]),
    (lambda t: t.expand(DOC, 0, 40_000), ["more than one expand returns"]),
    (lambda t: t.expand("nowhere.md", 0, 1), ["source: no document 'nowhere.md'"]),
    (lambda t: t.search("tides", budget_tokens=0), ["budget_tokens must be from 1 to 8,192, got 0"]),
    (lambda t: t.search("tides", budget_tokens=LIMITS.max_budget_tokens + 1), ["budget_tokens must be from"]),
    (lambda t: t.search("   "), ["question must be a non-empty string"]),
    (lambda t: t.search("tides", where="source=a"), ["where must be a JSON object"]),
    (lambda t: t.lexical_search("!!! ???"), ["terms: '!!! ???' has no words"]),
    (lambda t: t.lexical_search("tides", limit=51), ["limit must be from 1 to 50"]),
    (lambda t: t.list_documents(limit=0), ["limit must be from 1 to 1,000"]),
    (lambda t: t.list_documents(offset=-2), ["offset must be from 0"]),
    (lambda t: t.list_documents(after=""), ["after must be a non-empty string"]),
])
def test_each_bad_input_is_refused_with_one_line_naming_it(tool_store, call, names):
    tools, _, _ = tool_store
    with pytest.raises(ToolInputError) as caught:
        call(tools)
    message = str(caught.value)
    assert "\n" not in message
    for name in names:
        assert name in message, message


def test_a_filter_chroma_refuses_names_where(tool_store):
    tools, _, _ = tool_store
    with pytest.raises(ValueError, match=r"where=\{'\$bad': 1\}: Chroma refused the filter"):
        tools.search("tides", where={"$bad": 1})


def test_pages_of_a_paged_document(chroma_client, chroma_collection_name, example_text):
    """A document chunked with a source map (a PDF's pages): each passage, expanded cluster and lexical
    hit names the pages its text lies on."""
    from hseg.text.provenance import SourceMap

    paragraphs = [p for p in example_text.split("\n\n") if p.strip()][:60]
    text, pages = SourceMap.from_pages(["\n\n".join(paragraphs[i:i + 6]) for i in range(0, 60, 6)],
                                       list(range(3, 13)))
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder(64))
    store.add(small_chunker().chunk(text, doc_id="book.pdf", source_map=pages), {"source": "book.pdf"})
    tools = StoreTools(store)

    def on(start, end):
        found = pages.pages_of(text, start, end)
        return list(range(found[0], found[-1] + 1)) if found else None

    passages = tools.search(QUESTIONS[0], budget_tokens=600).passages
    assert passages and any(p.pages for p in passages)
    for p in passages:
        assert p.pages == on(p.start, p.end)
        cluster = tools.expand(p.source, p.start, p.end)
        assert cluster.pages is not None and set(p.pages or []) <= set(cluster.pages)
    for hit in tools.lexical_search("telescope Galileo").hits:
        assert hit.pages == on(hit.start, hit.end)
    assert tools.search(QUESTIONS[0], budget_tokens=100, where={"source": "none"}).passages == []


def test_no_tool_writes(tool_store):
    tools, _, texts = tool_store
    collection = tools.store.collection

    def state():
        got = collection.get(include=["metadatas", "documents"])
        return sorted(zip(got["ids"], got["documents"], (json.dumps(m, sort_keys=True) for m in got["metadatas"])))

    before, count = state(), collection.count()
    tools.search(QUESTIONS[0])
    tools.read(DOC, 0, 100)
    tools.expand(DOC, 0, 100)
    tools.lexical_search("telescope")
    tools.list_documents()
    assert (state(), collection.count()) == (before, count)


def test_results_are_json(tool_store):
    tools, _, _ = tool_store
    p = tools.search(QUESTIONS[1], budget_tokens=200).passages[0]
    for result in (tools.search(QUESTIONS[1], budget_tokens=200), tools.read(p.source, p.start, p.end),
                   tools.expand(p.source, p.start, p.end), tools.lexical_search("ecliptic"), tools.list_documents()):
        assert json.loads(json.dumps(as_json(result))) == as_json(result)


def test_mcp_server_in_process(tool_store):
    """The server of ``hseg mcp`` over the same store, through the SDK's own client in this process:
    its tools, their schemas, a call of each and a refused one."""
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import Client

    from hseg.tools.server import build_server

    tools, _, texts = tool_store

    async def drive():
        async with Client(build_server(tools)) as client:
            listed = (await client.list_tools()).tools
            assert [t.name for t in listed] == [t.name for t in TOOLS]
            assert all(t.annotations.read_only_hint and not t.annotations.destructive_hint for t in listed)
            search = next(t for t in listed if t.name == "search")
            assert search.input_schema["properties"]["budget_tokens"]["maximum"] == LIMITS.max_budget_tokens
            assert search.input_schema["required"] == ["question"]
            found = await client.call_tool("search", {"question": QUESTIONS[0], "budget_tokens": 200})
            assert not found.is_error
            p = found.structured_content["passages"][0]
            assert texts[p["source"]][p["start"]:p["end"]] == p["text"] and p["pages"] is None
            assert json.loads(found.content[0].text) == found.structured_content
            read = await client.call_tool("read", {"source": p["source"], "start": p["start"], "end": p["end"]})
            assert read.structured_content["text"] == p["text"]
            expand = await client.call_tool("expand", {"source": p["source"], "start": p["start"], "end": p["end"]})
            assert expand.structured_content["start"] <= p["start"] < p["end"] <= expand.structured_content["end"]
            lexical = await client.call_tool("lexical_search", {"terms": "telescope"})
            assert lexical.structured_content["hits"]
            docs = await client.call_tool("list_documents", {})
            assert docs.structured_content["total"] == 2
            refused = await client.call_tool("read", {"source": DOC, "start": 0, "end": 10**7})
            assert refused.is_error and "outside document 'example.md'" in refused.content[0].text
            bad_filter = await client.call_tool("search", {"question": "tides", "where": {"$bad": 1}})
            assert bad_filter.is_error and "Chroma refused the filter" in bad_filter.content[0].text

    asyncio.run(drive())
