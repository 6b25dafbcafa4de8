"""The retrieval tools in the frameworks, driven by agents with fake models that call them: a LangChain
tool-calling loop (``GenericFakeChatModel`` emitting tool calls, ``ToolMessage`` artifacts with the
spans) and a LlamaIndex ``FunctionAgent`` on ``MockFunctionCallingLLM``, which reads a span from the
search result it was given and cites it. Each result is checked against the document's characters."""

from __future__ import annotations

import asyncio
import json

import pytest

from hseg.tools import TOOLS, StoreTools, arguments_model
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder, ephemeral_store

DOC = "example.md"
QUESTION = "What did Galileo see through his telescope?"


@pytest.fixture(scope="module")
def agent_store(example_text):
    store = ephemeral_store(HashingEncoder(64))
    store.add(small_chunker().chunk(example_text, doc_id=DOC), {"source": DOC})
    return store


def test_langchain_tools_carry_the_declaration(agent_store):
    from langchain_hseg import hseg_tools

    tools = hseg_tools(agent_store)
    assert [t.name for t in tools] == [d.name for d in TOOLS]
    core = StoreTools(agent_store)
    for tool, declaration in zip(tools, TOOLS):
        assert tool.description == declaration.description
        assert tool.response_format == "content_and_artifact"
        expected = arguments_model(getattr(core, declaration.name)).model_json_schema()["properties"]
        assert tool.tool_call_schema.model_json_schema()["properties"] == expected


def test_langchain_agent_loop_with_a_fake_model(agent_store, example_text):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from langchain_hseg import hseg_tools

    tools = {t.name: t for t in hseg_tools(agent_store)}
    first = StoreTools(agent_store).search(QUESTION, budget_tokens=300).passages[0]
    span = {"source": first.source, "start": first.start, "end": first.end}
    script = [
        AIMessage("", tool_calls=[{"id": "c1", "name": "search",
                                   "args": {"question": QUESTION, "budget_tokens": 300}}]),
        AIMessage("", tool_calls=[{"id": "c2", "name": "expand", "args": span},
                                  {"id": "c3", "name": "read", "args": {**span, "end": first.end + 10**6}}]),
        AIMessage("", tool_calls=[{"id": "c4", "name": "read", "args": span}]),
        AIMessage(f"Galileo saw moons of Jupiter [{first.source}:{first.start}-{first.end}]."),
    ]
    model = GenericFakeChatModel(messages=iter(script))
    messages: list = [HumanMessage(QUESTION)]
    while True:  # the agent loop: the model asks, the tools answer, until the model answers
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            break
        messages.extend(tools[call["name"]].invoke({**call, "type": "tool_call"}) for call in reply.tool_calls)

    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.name for m in results] == ["search", "expand", "read", "read"]
    search, expand, refused, read = results
    assert search.status == "success" and json.loads(search.content) == search.artifact
    for p in search.artifact["passages"]:
        assert example_text[p["start"]:p["end"]] == p["text"]
    assert search.artifact["passages"][0]["start"] == first.start
    assert expand.artifact["start"] <= first.start < first.end <= expand.artifact["end"]
    assert example_text[expand.artifact["start"]:expand.artifact["end"]] == expand.artifact["text"]
    # a refused call comes back to the model as the tool's error, and the loop goes on
    assert refused.status == "error" and "outside document 'example.md'" in refused.content
    assert read.artifact["text"] == example_text[first.start:first.end]
    assert messages[-1].content.endswith(f"[{first.source}:{first.start}-{first.end}].")


def test_langchain_tools_run_async(agent_store, example_text):
    from langchain_hseg import hseg_tools

    read = next(t for t in hseg_tools(agent_store) if t.name == "read")
    message = asyncio.run(read.ainvoke({"type": "tool_call", "id": "r", "name": "read",
                                        "args": {"source": DOC, "start": 5, "end": 90}}))
    assert message.artifact["text"] == example_text[5:90]


def test_llama_index_function_agent_with_a_fake_llm(agent_store, example_text):
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    from llama_index_hseg import hseg_tools

    def respond(messages, **kwargs):
        """The fake model: search, then read the first passage's span from the search's JSON result,
        then answer citing it."""
        done = [m for m in messages if m.role == MessageRole.TOOL]
        if not done:
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
                tool_call_id="s", tool_name="search", tool_kwargs={"question": QUESTION, "budget_tokens": 300})])
        if len(done) == 1:
            p = json.loads(done[0].content)["passages"][0]
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
                tool_call_id="r", tool_name="read",
                tool_kwargs={"source": p["source"], "start": p["start"], "end": p["end"]})])
        got = json.loads(done[-1].content)
        return ChatMessage(role=MessageRole.ASSISTANT,
                           content=f"Cited [{got['source']}:{got['start']}-{got['end']}]: {got['text'][:40]}")

    tools = hseg_tools(agent_store)
    assert [t.metadata.name for t in tools] == [d.name for d in TOOLS]
    agent = FunctionAgent(tools=tools, llm=MockFunctionCallingLLM(response_generator=respond))

    async def ask():
        return await agent.run(QUESTION)

    response = asyncio.run(ask())
    calls = response.tool_calls
    assert [c.tool_name for c in calls] == ["search", "read"]
    search, read = (c.tool_output.raw_output for c in calls)
    first = search.passages[0]
    for p in search.passages:
        assert example_text[p.start:p.end] == p.text
    assert (read.source, read.start, read.end, read.text) == (first.source, first.start, first.end, first.text)
    assert str(response).startswith(f"Cited [{DOC}:{first.start}-{first.end}]")


def test_llama_index_tool_refuses_with_one_line(agent_store):
    from hseg.tools import ToolInputError
    from llama_index_hseg import hseg_tools

    expand = next(t for t in hseg_tools(agent_store) if t.metadata.name == "expand")
    with pytest.raises(ToolInputError, match="source: no document 'exampel.md' is stored; did you mean 'example.md'"):
        expand.call(source="exampel.md", start=0, end=3)
    out = asyncio.run(expand.acall(source=DOC, start=0, end=3))
    assert json.loads(out.content)["start"] == 0 and out.raw_output.start == 0
