"""The ``chroma_client`` fixture, one per set of client kinds: ``tests/conftest.py`` gives the tests of
``tests/unit`` and ``tests/store`` the in-process kinds, ``tests/e2e/conftest.py`` gives ``tests/e2e`` the
``chroma run`` server's (so the store tests imported there run once more over HTTP)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

#: every kind of Chroma client: in-memory, on-disk (embedded) and HTTP to ``chroma run``
KINDS = ("ephemeral", "persistent", "http")
#: the kinds that need no server
IN_PROCESS = ("ephemeral", "persistent")


def client_fixture(*kinds: str) -> Any:
    """A ``chroma_client`` fixture parametrised over ``kinds`` (the ``http`` one marked ``integration``)."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown Chroma client kinds {sorted(unknown)}; the kinds are {KINDS}")

    @pytest.fixture(params=[pytest.param(k, marks=pytest.mark.integration) if k == "http" else k for k in kinds])
    def chroma_client(request, tmp_path):
        """A chromadb client of each kind: in-memory, on-disk in ``tmp_path``, and HTTP to ``chroma run``
        (the session's ``chroma_server``).

        Ephemeral clients share state inside a process: use a fresh collection name per test
        (``chroma_collection_name``).
        """
        import chromadb

        if request.param == "ephemeral":
            return chromadb.EphemeralClient()
        if request.param == "persistent":
            return chromadb.PersistentClient(path=str(tmp_path / "chroma"))
        return request.getfixturevalue("chroma_server").client()

    return chroma_client


def client_tests(path: Path) -> set[str]:
    """The tests of the test module at ``path`` that take ``chroma_client``, directly or through a fixture
    of the module, with the module's fixtures they use (read from its source: nothing is imported)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    fixtures: dict[str, set[str]] = {}
    autouse: set[str] = set()
    tests: dict[str, set[str]] = {}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = {a.arg for a in node.args.args}
        decorators = [ast.unparse(d) for d in node.decorator_list]
        if any("fixture" in d for d in decorators):
            fixtures[node.name] = args
            if any("autouse=True" in d for d in decorators):
                autouse.add(node.name)
        elif node.name.startswith("test_"):
            tests[node.name] = args

    def used(args: set[str]) -> set[str]:
        """The fixtures of the module that ``args`` reach, directly or through one another."""
        found: set[str] = set()
        todo = list(args & set(fixtures))
        while todo:
            name = todo.pop()
            if name not in found:
                found.add(name)
                todo.extend(fixtures[name] & set(fixtures))
        return found

    names: set[str] = set()
    for test, args in tests.items():
        reached = used(args | autouse)
        if "chroma_client" in args or any("chroma_client" in fixtures[f] for f in reached):
            names |= {test} | reached
    return names


def server_variants(module: ModuleType) -> dict[str, Any]:
    """:func:`client_tests` of ``module`` (a test module of ``tests/store``), by name.

    A module of ``tests/e2e`` puts them in its namespace (``globals().update(server_variants(...))``):
    pytest collects them there too, where ``chroma_client`` is the ``chroma run`` server's, so each such
    store test runs in ``tests/store`` on the in-process clients and in ``tests/e2e`` over HTTP, and a new
    one joins both without being listed anywhere (``tests/e2e/conftest.py`` checks that every store module
    with such tests has its ``tests/e2e/<module>_server.py``).
    """
    names = client_tests(Path(inspect.getfile(module)))
    return {name: getattr(module, name) for name in sorted(names)}
