"""No import circles in the house (issue 55): the modules of hseg, langchain_hseg and
llama_index_hseg import each other as a tree (a directed acyclic graph), so each can be read, tested
and replaced from the ones below it. And the benchmarks import nothing from ``tests`` (what they share
with the tests is ``hseg_testing``).

The graph is read from the source with :mod:`ast`, nothing is imported. Every import statement
anywhere in a module counts, under ``if TYPE_CHECKING:`` and inside functions included: a module
typed against its caller, or importing it on first use, is still tied to it. Edges:

- ``import a.b.c`` is an edge to ``a.b.c``;
- ``from P import n`` (``P`` absolute, or relative and resolved against the importing module) is an
  edge to the submodule ``P.n`` when ``n`` is one, and to ``P`` itself for every other name (a name
  read from a package is read from its ``__init__``, the package's public face).
- The parent packages Python runs first (``hseg/store/__init__.py`` before ``hseg.store.lock``) are
  not edges: a package's ``__init__`` re-exports its modules, so counting them would tie every module
  to every sibling the face names, which says nothing about the module. A module that imports from its
  own package's face does get the edge, and with it the circle through the ``__init__``: inside a
  package, import from the module that holds the name.

The allow-list names the circles a known refactor removes; it may only shrink: a listed circle that
is gone fails the test too, so the entry is deleted with the fix.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("hseg", "langchain_hseg", "llama_index_hseg")

#: circles a known refactor removes (it may only shrink: a listed circle that is gone fails the test);
#: the house has none
ALLOWED: dict[frozenset[str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def house_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))}


def imported(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules one import statement of ``importer`` ties it to (see the module docstring)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if node.level:  # relative: from the package (an __init__ is its own package)
        base = importer.split(".") if is_package else importer.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    submodules = {f"{source}.{alias.name}" for alias in node.names} & modules
    return submodules if len(submodules) == len(node.names) else submodules | {source}


def import_graph() -> nx.DiGraph:
    modules = house_modules()
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in imported(node, name, path.name == "__init__.py", set(modules)):
                    if target in modules and target != name:
                        graph.add_edge(name, target)
    return graph


def circles(graph: nx.DiGraph) -> set[frozenset[str]]:
    return {frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1}


def test_the_graph_sees_every_kind_of_import():
    """The reader finds function-level, TYPE_CHECKING and relative imports (else the test below
    could pass by not looking)."""
    source = ("from typing import TYPE_CHECKING\nimport hseg.errors\nif TYPE_CHECKING:\n"
              "    from hseg.store.store import HierarchicalStore\n"
              "def f():\n    from . import lock, HierarchicalStore\n    from ..ingest import run\n")
    modules = {"hseg", "hseg.errors", "hseg.store", "hseg.store.store", "hseg.store.lock", "hseg.ingest",
               "hseg.ingest.run", "hseg.store.x"}
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= imported(node, "hseg.store.x", False, modules)
    assert found == {"typing", "hseg.errors", "hseg.store.store", "hseg.store.lock", "hseg.store",
                     "hseg.ingest.run"}
    graph = import_graph()
    assert graph.number_of_nodes() > 50 and graph.has_edge("hseg.ingest.lazy", "hseg.ingest.fingerprint")


def test_no_import_circles_outside_the_allow_list():
    graph = import_graph()
    found = circles(graph)
    new = [sorted(c) for c in found - set(ALLOWED)]
    assert not new, "import circles: " + "; ".join(
        " <-> ".join(c) + f" (edges {sorted(graph.subgraph(c).edges)})" for c in new)
    gone = [sorted(c) for c in set(ALLOWED) - found]
    assert not gone, f"no longer circles, delete them from ALLOWED: {gone}"


def test_benchmarks_import_nothing_from_tests():
    """What the benchmarks share with the tests is ``hseg_testing``; ``tests`` is the tests' own."""
    found = []
    for path in sorted((REPO / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names if n.split(".")[0] == "tests"]
    assert not found, found
