"""The public entry points say what they take, give and raise (issue 55 item 6): the chunker, the
store, both adapters and ``hseg.ingest``, in Google style (``Args:``, ``Returns:``/``Yields:``,
``Raises:``), and each package declares its public names.

The rules, read from the signature and the source, so that a docstring cannot fall behind its
function unnoticed:

- ``Args:`` names every parameter (``self``/``cls`` aside; ``*args``/``**kwargs`` by their name,
  stars optional) and nothing else. A class documents its constructor's parameters.
- ``Returns:`` (or ``Yields:`` for a generator) wherever a value comes back: a return annotation other
  than ``None``. Properties and constructors give none.
- ``Raises:`` wherever the entry point raises on its own (a ``raise`` in its body) or takes arguments
  it checks (every entry point with ``Args:`` says what bad arguments raise, or that it raises nothing
  of its own).

The framework hooks the adapters implement (LangChain's ``split_text``, LlamaIndex's ``retrieve``, ...)
keep their framework's documentation and are not listed; nor are the async twins of listed methods.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: the entry points: module, then the dotted name in it (a class alone: its constructor)
ENTRY_POINTS = [
    ("hseg.chunking.chunker", "HierarchicalChunker"),
    ("hseg.chunking.chunker", "HierarchicalChunker.chunk"),
    ("hseg.chunking.chunker", "HierarchicalChunker.chunk_many"),
    ("hseg.store.store", "HierarchicalStore"),
    ("hseg.store.store", "HierarchicalStore.from_collection"),
    ("hseg.store.store", "HierarchicalStore.add"),
    ("hseg.store.store", "HierarchicalStore.add_records"),
    ("hseg.store.store", "HierarchicalStore.delete"),
    ("hseg.store.store", "HierarchicalStore.delete_where"),
    ("hseg.store.store", "HierarchicalStore.count"),
    ("hseg.store.store", "HierarchicalStore.iter_metadatas"),
    ("hseg.store.store", "HierarchicalStore.document_page"),
    ("hseg.store.store", "HierarchicalStore.document_ids_near"),
    ("hseg.store.store", "HierarchicalStore.lexical_top"),
    ("hseg.store.store", "HierarchicalStore.get_records"),
    ("hseg.store.store", "HierarchicalStore.search"),
    ("hseg.store.store", "HierarchicalStore.search_many"),
    ("hseg.store.store", "HierarchicalStore.use_encoder"),
    ("langchain_hseg.text_splitter", "HierarchicalSegmentTextSplitter"),
    ("langchain_hseg.text_splitter", "cluster_documents"),
    ("langchain_hseg.text_splitter", "segment_documents"),
    ("langchain_hseg.retriever", "HierarchicalSegmentRetriever.from_documents"),
    ("langchain_hseg.retriever", "HierarchicalSegmentRetriever.from_vectorstore"),
    ("langchain_hseg.retriever", "HierarchicalSegmentRetriever.add_documents"),
    ("langchain_hseg.retriever", "hit_to_document"),
    ("langchain_hseg.tools", "hseg_tools"),
    ("llama_index_hseg.node_parser", "HierarchicalSegmentNodeParser.from_defaults"),
    ("llama_index_hseg.retriever", "HierarchicalSegmentRetriever"),
    ("llama_index_hseg.retriever", "HierarchicalSegmentRetriever.from_documents"),
    ("llama_index_hseg.tools", "hseg_tools"),
    ("hseg.ingest.files", "discover"),
    ("hseg.ingest.files", "read_text_file"),
    ("hseg.ingest.files", "read_files"),
    ("hseg.ingest.fingerprint", "chunk_settings"),
    ("hseg.ingest.fingerprint", "token_counter_name"),
    ("hseg.ingest.fingerprint", "segmenter_config"),
    ("hseg.store.completeness", "is_complete"),
    ("hseg.ingest.run", "ingest"),
    ("hseg.ingest.run", "ingest_batch"),
    ("hseg.ingest.prune", "prune_scope"),
    ("hseg.ingest.prune", "stored_sources"),
    ("hseg.ingest.prune", "stale_documents"),
    ("hseg.ingest.prune", "prune"),
]

SECTION = re.compile(r"^(Args|Arguments|Returns|Yields|Raises|Example|Examples|Note|Notes|Attributes):\s*$")


def sections(doc: str) -> dict[str, list[str]]:
    """The Google-style sections of a docstring: header -> its indented lines (dedented)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in doc.splitlines():
        match = SECTION.match(line)
        if match:
            current = found.setdefault(match.group(1).replace("Arguments", "Args"), [])
        elif current is not None and (line.startswith(" ") or not line.strip()):
            current.append(line)
        else:
            current = None
    return {name: textwrap.dedent("\n".join(lines)).strip("\n").splitlines() for name, lines in found.items()}


def documented_names(lines: list[str]) -> list[str]:
    """The parameter names of an ``Args:`` section: its unindented ``name:`` / ``name (type):`` lines."""
    names = []
    for line in lines:
        match = re.match(r"^(\*{0,2}\w+)(?: \([^)]*\))?:", line)
        if match:
            names.append(match.group(1).lstrip("*"))
    return names


def resolve(module: str, dotted: str):
    obj = importlib.import_module(module)
    for part in dotted.split("."):
        obj = inspect.getattr_static(obj, part) if inspect.isclass(obj) else getattr(obj, part)
    return obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj


def own_raise(function) -> bool:
    """Whether the function's own body (nested functions aside) has a ``raise``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    body = tree.body[0]
    stack = list(ast.iter_child_nodes(body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Raise):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def problems(module: str, dotted: str) -> list[str]:
    obj = resolve(module, dotted)
    is_class = inspect.isclass(obj)
    function = obj.__init__ if is_class else obj
    doc = inspect.getdoc(obj) or ""
    found = sections(doc)
    params = [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]
    out = []
    if params:
        names = documented_names(found.get("Args", []))
        if "Args" not in found:
            out.append("no Args: section")
        else:
            missing, extra = [p for p in params if p not in names], [n for n in names if n not in params]
            out += [f"Args: misses {missing}"] if missing else []
            out += [f"Args: names no parameter {extra}"] if extra else []
        if "Raises" not in found:
            out.append("no Raises: section (what bad arguments raise, or that it raises nothing of its own)")
    elif not is_class and own_raise(function) and "Raises" not in found:
        out.append("raises, but has no Raises: section")
    annotation = inspect.signature(function).return_annotation
    gives = not is_class and annotation not in (None, "None", inspect.Signature.empty)
    if gives and not ({"Returns", "Yields"} & set(found)):
        out.append("no Returns: section")
    if not gives and not is_class and ({"Returns", "Yields"} & set(found)):
        out.append("a Returns: section, but the annotation says it returns nothing")
    return out


@pytest.mark.parametrize(("module", "dotted"), ENTRY_POINTS, ids=[f"{m}.{d}" for m, d in ENTRY_POINTS])
def test_public_entry_points_document_args_returns_and_raises(module, dotted):
    assert not problems(module, dotted), f"{module}.{dotted}: {problems(module, dotted)}"


def test_the_section_reader_reads_google_style():
    doc = inspect.cleandoc('''Summary.

        Args:
            text: the text.
            doc_id (str): its id; a long
                description.
            **settings: more.

        Returns:
            A chunking.

        Example:
            >>> f(x)
        ''')
    found = sections(doc)
    assert documented_names(found["Args"]) == ["text", "doc_id", "settings"]
    assert found["Returns"] == ["A chunking."] and "Raises" not in found


def package_inits() -> list[Path]:
    return sorted(p for package in ("hseg", "langchain_hseg", "llama_index_hseg")
                  for p in (REPO / package).rglob("__init__.py"))


@pytest.mark.parametrize("path", package_inits(), ids=lambda p: str(p.parent.relative_to(REPO)))
def test_every_package_declares_its_public_names(path):
    """Each package's ``__init__`` says which names are its public face (``__all__``; an empty one for a
    stage folder whose modules are imported by their own names), and each of them is there."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    declared = [node for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                and any(isinstance(t, ast.Name) and t.id == "__all__"
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))]
    assert declared, f"{path.relative_to(REPO)} declares no __all__"
    package = importlib.import_module(".".join(path.parent.relative_to(REPO).parts))
    assert [n for n in package.__all__ if not hasattr(package, n)] == []
