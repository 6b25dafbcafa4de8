"""``hseg mcp`` end to end: a store indexed with the real model, the server started as a child process
(over stdio, and over streamable HTTP on 127.0.0.1), driven by the ``mcp`` SDK's own client: it
initialises, lists the tools, calls each one, and every span it gets back is checked against the
file's characters; a document another process indexes while the server runs is found by its next
search."""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hseg.chunking.schema import content_sha256
from hseg.cli import main
from hseg.encoders import factory
from hseg.tools import TOOLS
from tests.support import REPO

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

#: what the child needs of this environment: offline model, the test run's lexical cache
_PASSED = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HSEG_CACHE", "ANONYMIZED_TELEMETRY", "PYTHONPATH", "HOME", "PATH")
TIDES = "# Tides\n\nThe tides rise and fall twice a day because the moon's gravity pulls on the oceans.\n"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, encoder):
    """example.md indexed with the real encoder by ``hseg index`` (the session's model, loaded once)."""
    root = tmp_path_factory.mktemp("mcp")
    (root / "docs").mkdir()
    shutil.copy(REPO / "examples" / "data" / "example.md", root / "docs" / "example.md")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: encoder)
        mp.chdir(root)
        assert main(["index", "docs", "--db", "db", "--quiet"]) == 0
    return root


def _env() -> dict[str, str]:
    env = {k: os.environ[k] for k in _PASSED if k in os.environ}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def _file(root: Path, source: str) -> str:
    return (root / source).read_text(encoding="utf-8")


def _seconds(iso: str) -> float:
    """An ``indexed_at`` (ISO 8601 UTC) in seconds since the epoch."""
    return datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


async def _every_tool(client: Client, root: Path) -> None:
    listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == [t.name for t in TOOLS]
    assert all(t.output_schema and t.annotations.read_only_hint for t in listed)

    found = await client.call_tool("search", {"question": "What did Galileo see through his telescope?",
                                              "budget_tokens": 400})
    assert not found.is_error, found.content
    passages = found.structured_content["passages"]
    assert passages and found.structured_content["tokens"] <= 400
    for p in passages:
        assert _file(root, p["source"])[p["start"]:p["end"]] == p["text"]
    assert any("Galileo" in " ".join(p["heading_path"]) for p in passages)

    p = passages[0]
    text = _file(root, p["source"])
    read = (await client.call_tool("read", {"source": p["source"], "start": p["start"] - 50,
                                            "end": p["end"] + 50})).structured_content
    assert read["text"] == text[p["start"] - 50:p["end"] + 50] and read["document_chars"] == len(text)

    expand = (await client.call_tool("expand", {"source": p["source"], "start": p["start"],
                                                "end": p["end"]})).structured_content
    assert expand["start"] <= p["start"] < p["end"] <= expand["end"]
    assert expand["text"] == text[expand["start"]:expand["end"]]
    assert expand["previous"]["end"] == expand["start"] and expand["next"]["start"] == expand["end"]
    assert expand["heading_path"] and expand["heading_path"] == p["heading_path"][:len(expand["heading_path"])]

    lexical = (await client.call_tool("lexical_search", {"terms": "Milky Way", "limit": 3})).structured_content
    assert lexical["hits"]
    for hit in lexical["hits"]:
        assert _file(root, hit["source"])[hit["start"]:hit["end"]] == hit["text"]
    assert "Milky Way" in lexical["hits"][0]["text"]

    docs = (await client.call_tool("list_documents", {})).structured_content
    assert docs["documents"][0]["source"] == "docs/example.md" and docs["documents"][0]["chars"] == len(text)
    assert docs["documents"][0]["content_sha256"] == content_sha256(text) and docs["next_offset"] is None
    assert abs(_seconds(docs["documents"][0]["indexed_at"]) - (root / "db").stat().st_mtime) < 3600

    refused = await client.call_tool("read", {"source": "docs/example.md", "start": 0, "end": len(text) + 1})
    assert refused.is_error and "outside document 'docs/example.md'" in refused.content[0].text
    unknown = await client.call_tool("expand", {"source": "docs/exampel.md", "start": 0, "end": 1})
    assert unknown.is_error and "did you mean 'docs/example.md'" in unknown.content[0].text


@pytest.mark.model
def test_mcp_over_stdio_with_the_sdk_client(indexed):
    params = StdioServerParameters(command=sys.executable, args=["-m", "hseg.cli", "mcp", "--db", "db"],
                                   env=_env(), cwd=str(indexed))

    async def drive() -> None:
        # mode="legacy": the initialize handshake, as the clients configured by a JSON file do
        async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
            assert client.server_info.name == "hseg"
            assert "exact character span" in (client.instructions or "")
            await _every_tool(client, indexed)
            # another process indexes a file while the server runs: its next search sees it
            (indexed / "docs" / "tides.md").write_text(TIDES, encoding="utf-8")
            child = subprocess.run([sys.executable, "-m", "hseg.cli", "index", "docs", "--db", "db", "--quiet"],
                                   cwd=indexed, env=_env(), capture_output=True, text=True, timeout=300)
            assert child.returncode == 0, child.stderr
            found = (await client.call_tool("search", {"question": "Why do the tides rise twice a day?",
                                                       "budget_tokens": 100})).structured_content
            assert found["passages"][0]["source"] == "docs/tides.md"
            assert found["passages"][0]["text"] in TIDES
            docs = (await client.call_tool("list_documents", {})).structured_content
            assert [d["source"] for d in docs["documents"]] == ["docs/example.md", "docs/tides.md"]
            first = (await client.call_tool("list_documents", {"limit": 1})).structured_content
            assert (first["total"], first["next_offset"], first["documents"]) == (2, 1, docs["documents"][:1])
            rest = (await client.call_tool("list_documents", {"limit": 1, "offset": 1})).structured_content
            assert (rest["next_offset"], rest["documents"]) == (None, docs["documents"][1:])
            after = (await client.call_tool("list_documents", {"limit": 1, "after": first["next_after"]}))
            assert after.structured_content["documents"] == docs["documents"][1:]
            # written just now by the other process, after example.md (the index's clock is whole seconds)
            assert _seconds(docs["documents"][0]["indexed_at"]) <= _seconds(docs["documents"][1]["indexed_at"])
            assert abs(_seconds(docs["documents"][1]["indexed_at"]) - time.time()) < 600
            hits = (await client.call_tool("lexical_search", {"terms": "oceans gravity"})).structured_content
            assert hits["hits"][0]["source"] == "docs/tides.md"

    try:
        asyncio.run(drive())
    finally:
        (indexed / "docs" / "tides.md").unlink(missing_ok=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.model
def test_mcp_over_streamable_http_on_loopback(indexed, tmp_path):
    port = _free_port()
    log = (tmp_path / "server.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "hseg.cli", "mcp", "--db", "db", "--http", str(port)],
                            cwd=indexed, env=_env(), stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, Path(log.name).read_text()
                assert time.monotonic() < deadline, "hseg mcp --http did not listen"
                time.sleep(0.5)

        async def drive() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=120) as client:
                await _every_tool(client, indexed)

        asyncio.run(drive())
        assert f"at http://127.0.0.1:{port}/mcp" in Path(log.name).read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_bind_needs_http_and_a_missing_store_is_one_line(tmp_path):
    usage = subprocess.run([sys.executable, "-m", "hseg.cli", "mcp", "--db", str(tmp_path / "db"), "--bind",
                            "0.0.0.0"], env=_env(), capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "--bind needs --http" in usage.stderr
    missing = subprocess.run([sys.executable, "-m", "hseg.cli", "mcp", "--db", str(tmp_path / "none")], env=_env(),
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr


@pytest.mark.model
def test_mcp_latency_benchmark_smoke(indexed, tmp_path):
    out = tmp_path / "mcp_latency.md"
    done = subprocess.run([sys.executable, "-m", "benchmarks.mcp_latency", "--db", str(indexed / "db"), "--searches",
                           "10", "--rounds", "1", "--cold-runs", "1", "--out", str(out)], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = out.read_text(encoding="utf-8")
    assert report in done.stdout
    for row in ("| in-process `StoreTools.search` |", "| through `hseg mcp` (stdio, SDK client) |",
                "| cold `hseg query` (fresh process) |", "Ratios: MCP / in-process"):
        assert row in report


@pytest.mark.model
@pytest.mark.integration
def test_mcp_on_a_chroma_run_server(chroma_server, encoder, tmp_path):
    """``hseg mcp --host/--port``: the store on a ``chroma run`` server, its lexical index a cache on this
    machine that follows the server's write log, so a document another process writes while the
    MCP server runs is found by its next search and lexical search."""
    where = ["--host", chroma_server.host, "--port", str(chroma_server.port), "--collection", "mcp-server-test"]
    first = tmp_path / "galileo.md"
    text = (REPO / "examples" / "data" / "example.md").read_text(encoding="utf-8")
    first.write_text(text[text.index("## Galileo"):][:6000], encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: encoder)
        assert main(["index", str(first), *where, "--quiet"]) == 0
    params = StdioServerParameters(command=sys.executable, args=["-m", "hseg.cli", "mcp", *where], env=_env(),
                                   cwd=str(tmp_path))

    async def drive() -> None:
        async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
            found = (await client.call_tool("search", {"question": "What did Galileo see through his telescope?",
                                                       "budget_tokens": 300})).structured_content
            for p in found["passages"]:
                assert Path(p["source"]).read_text(encoding="utf-8")[p["start"]:p["end"]] == p["text"]
            second = tmp_path / "tides.md"
            second.write_text(TIDES, encoding="utf-8")
            child = subprocess.run([sys.executable, "-m", "hseg.cli", "index", str(second), *where, "--quiet"],
                                   env=_env(), capture_output=True, text=True, timeout=300)
            assert child.returncode == 0, child.stderr
            hits = (await client.call_tool("lexical_search", {"terms": "oceans gravity"})).structured_content
            assert Path(hits["hits"][0]["source"]) == second
            found = (await client.call_tool("search", {"question": "Why do the tides rise twice a day?",
                                                       "budget_tokens": 100})).structured_content
            assert Path(found["passages"][0]["source"]) == second
            listed = (await client.call_tool("list_documents", {})).structured_content
            assert listed["total"] == 2 and all(abs(_seconds(d["indexed_at"]) - time.time()) < 600
                                                for d in listed["documents"])

    asyncio.run(drive())
