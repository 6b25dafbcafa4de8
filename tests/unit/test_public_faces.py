"""One public face per package, private modules, short module docstrings (issue 55 item 6).

The public API is what the package faces export (each package's ``__init__`` and its ``__all__``:
``hseg``, ``hseg.store``, ``hseg.chunking``, ``hseg.ingest``, both adapters, ...); every other module
is private by contract and may change without deprecation (docs/api.md, "Public API"). Read from the
source with :mod:`ast`:

- no module but a face declares ``__all__``, and every name a face exports is there (a lazy face's
  names are also those it imports for type checkers);
- README, docs/ and the example notebooks import hseg's names only from faces, and only names the face
  exports; so do the adapters, which use nothing a third framework's adapter could not;
- a module docstring says what the module holds in at most :data:`MAX_DOC_LINES` lines; the longer
  argument lives in docs/design.md;
- no module outside ``hseg/store/`` reaches into a store's parts (``store._parts``): what the tools,
  the CLI and the adapters read of a store, they read through its public methods.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("hseg", "langchain_hseg", "llama_index_hseg")

#: the most lines a module docstring may have
MAX_DOC_LINES = 15


def modules() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))]


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def faces() -> list[str]:
    """The dotted names of the packages (each ``__init__`` is one face)."""
    return [".".join(p.parent.relative_to(REPO).parts) for p in modules() if p.name == "__init__.py"]


def declares_all(tree: ast.Module) -> bool:
    return any(isinstance(t, ast.Name) and t.id == "__all__" for node in tree.body
               for t in (node.targets if isinstance(node, ast.Assign) else
                         [node.target] if isinstance(node, ast.AnnAssign) else []))


def test_no_module_but_a_face_declares_all():
    found = {rel(p) for p in modules() if p.name != "__init__.py" and declares_all(ast.parse(p.read_text("utf-8")))}
    assert not found, f"modules (not package faces) that declare __all__: {sorted(found)}"


def type_checking_names(tree: ast.Module) -> set[str]:
    """The names a face imports under ``if TYPE_CHECKING:``."""
    return {alias.asname or alias.name for node in tree.body if isinstance(node, ast.If)
            and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            for child in node.body if isinstance(child, ast.ImportFrom) for alias in child.names}


@pytest.mark.parametrize("face", faces())
def test_every_name_a_face_exports_is_there(face):
    module = importlib.import_module(face)
    assert [n for n in module.__all__ if not hasattr(module, n)] == []
    assert len(set(module.__all__)) == len(module.__all__), f"{face} exports a name twice"
    if hasattr(module, "_HOME"):  # a lazy face: what type checkers see is what it exports
        tree = ast.parse(Path(module.__file__).read_text("utf-8"))
        assert type_checking_names(tree) == set(module.__all__)
        assert all(importlib.import_module(home).__name__.startswith(face + ".") for home in module._HOME.values())


def house_imports(source: str) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of each import of hseg or an adapter in ``source`` (names empty for ``import m``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a snippet with a placeholder: read its import lines alone
        lines = [line.strip() for line in source.splitlines() if re.match(r"\s*(from|import)\s", line)]
        tree = ast.parse("\n".join(line for line in lines if not line.endswith(("(", ","))))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.module, [a.name for a in node.names]))
    return [(m, names) for m, names in found if m.split(".")[0] in PACKAGES]


def not_from_a_face(imports: list[tuple[str, list[str]]]) -> list[str]:
    known = set(faces())
    bad = []
    for module, names in imports:
        if module not in known:
            bad.append(module)
        else:
            exported = set(importlib.import_module(module).__all__)
            bad += [f"{module}.{n}" for n in names if n not in exported and f"{module}.{n}" not in known]
    return bad


def documentation() -> dict[str, str]:
    """The Python code of README.md, docs/*.md and the example notebooks, by file."""
    code = {}
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        code[rel(path)] = "\n".join(re.findall(r"```python\n(.*?)```", path.read_text("utf-8"), re.S))
    for path in sorted((REPO / "examples").glob("*.ipynb")):
        cells = json.loads(path.read_text("utf-8"))["cells"]
        code[rel(path)] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    for path in sorted((REPO / "examples").rglob("*.py")):
        code[rel(path)] = path.read_text("utf-8")
    return code


def test_the_documentation_imports_from_faces_only():
    found = {f"{doc}: {bad}" for doc, code in documentation().items() for bad in not_from_a_face(house_imports(code))}
    assert not found, f"documentation imports of private modules or unexported names: {sorted(found)}"
    assert sum(len(house_imports(code)) for code in documentation().values()) > 10  # it reads them


def test_the_adapters_import_hseg_from_faces_only():
    found = set()
    for package in ("langchain_hseg", "llama_index_hseg"):
        for path in sorted((REPO / package).rglob("*.py")):
            imports = [(m, n) for m, n in house_imports(path.read_text("utf-8")) if m.split(".")[0] == "hseg"]
            found |= {f"{rel(path)}: {bad}" for bad in not_from_a_face(imports)}
    assert not found, f"adapter imports of private hseg modules or unexported names: {sorted(found)}"


def test_module_docstrings_are_short():
    found = set()
    for path in modules():
        doc = ast.get_docstring(ast.parse(path.read_text("utf-8")))
        if doc and len(doc.splitlines()) > MAX_DOC_LINES:
            found.add(rel(path))
    assert not found, f"module docstrings longer than {MAX_DOC_LINES} lines (move the argument to docs/design.md): " \
        f"{sorted(found)}"


def reaches_into_parts(source: str) -> list[int]:
    """Lines reading ``x._parts`` of anything but ``self`` (a class's own ``_parts`` is its own business)."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute)
            and node.attr == "_parts" and not (isinstance(node.value, ast.Name) and node.value.id == "self")]


def test_nothing_outside_the_store_reaches_into_its_parts():
    found = {f"{rel(p)}:{line}" for p in modules() if not rel(p).startswith("hseg/store/")
             for line in reaches_into_parts(p.read_text("utf-8"))}
    assert not found, f"reads of a store's private parts outside hseg/store (add a store method instead): " \
        f"{sorted(found)}"


def test_the_readers_find_what_they_look_for():
    """The checks above can fail: a deep import, an unexported name and a long docstring are seen."""
    imports = house_imports("from hseg.store.maintenance import Expected\nfrom hseg import Nope\nimport hseg.text\n")
    assert not_from_a_face(imports) == ["hseg.store.maintenance", "hseg.Nope"]
    assert declares_all(ast.parse("x = 1\n__all__ = ['x']\n")) and not declares_all(ast.parse("x = 1\n"))
    assert type_checking_names(ast.parse("if TYPE_CHECKING:\n    from a.b import C, d\n")) == {"C", "d"}
    assert reaches_into_parts("i = store._parts.lexical\nj = self.store._parts.units\nk = self._parts\n") == [1, 2]
