"""No import cycle in ``src/paysign``: the module graph, read statically, has no strongly
connected component of more than one module and no module importing itself.

The graph is built from the source with :mod:`ast`, without importing anything, so a module
that fails to import still shows its edges. What counts as an edge:

- ``import x.y`` and ``from x import y`` (absolute or relative) naming a paysign module, or a
  name inside one (``from paysign.client.wire import format_usdc`` is an edge to ``wire``);
- imports anywhere in the module, inside functions and methods too: an import deferred into a
  function still needs the other module to be importable, and hides the cycle rather than
  breaking it;
- not imports under ``if TYPE_CHECKING:``: they never run, and annotations naming a type
  declared elsewhere are not a dependency at import time.

Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; those implicit edges are
left out, as every import linter does, or each package's re-exports would be a cycle with the
modules they re-export.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_files(src: Path) -> dict[str, Path]:
    """Every module of the ``paysign`` package under ``src``, by dotted name."""
    modules: dict[str, Path] = {}
    for path in sorted((src / "paysign").rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _imports_in(other)
            continue
        yield from _imports_in(child)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _imports(node)


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest paysign module ``name`` names or lies in (``pkg.mod.func`` → ``pkg.mod``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module → the paysign modules it imports."""
    modules = module_files(src)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module or ""
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved is not None:
                    graph[name].add(resolved)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, and self-imports (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative: a recursive walk would meet Python's recursion limit on a long chain.
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)


def test_src_has_no_import_cycle() -> None:
    graph = import_graph()
    found = cycles(graph)
    report = "\n".join(
        " <-> ".join(component)
        + "\n"
        + "\n".join(
            f"    {module} -> {', '.join(sorted(graph[module] & set(component)))}"
            for module in component
        )
        for component in found
    )
    assert not found, f"import cycles in src/paysign:\n{report}"


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_graph_resolves_absolute_relative_and_deferred_imports(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "paysign/__init__.py": "",
            "paysign/a/__init__.py": "from paysign.a.b import thing\n",
            "paysign/a/b.py": "from . import c\nfrom .c import x\n",
            "paysign/a/c.py": "def f():\n    from ..d import y\n    import json\n",
            "paysign/d.py": "import paysign.a.b\nimport os\n",
        },
    )
    assert import_graph(src) == {
        "paysign": set(),
        "paysign.a": {"paysign.a.b"},
        "paysign.a.b": {"paysign.a.c"},
        "paysign.a.c": {"paysign.d"},
        "paysign.d": {"paysign.a.b"},
    }


def test_cycles_reports_components_and_self_imports(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "paysign/__init__.py": "",
            "paysign/a.py": "from paysign import b\n",
            "paysign/b.py": "def f():\n    from paysign.a import g\n",
            "paysign/c.py": "from paysign.c import x\n",
            "paysign/d.py": "from paysign import a\n",
        },
    )
    assert cycles(import_graph(src)) == [["paysign.a", "paysign.b"], ["paysign.c"]]


def test_type_checking_imports_are_not_edges(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "paysign/__init__.py": "",
            "paysign/a.py": "import typing\nif typing.TYPE_CHECKING:\n    from paysign import b\n",
            "paysign/b.py": (
                "from typing import TYPE_CHECKING\nfrom paysign import a\n"
                "if TYPE_CHECKING:\n    from paysign.a import x\nelse:\n    from paysign import c\n"
            ),
            "paysign/c.py": "",
        },
    )
    assert import_graph(src)["paysign.a"] == set()
    assert import_graph(src)["paysign.b"] == {"paysign.a", "paysign.c"}
    assert cycles(import_graph(src)) == []


def test_shared_leaves_depend_on_no_other_paysign_module() -> None:
    graph = import_graph()
    # Shared by the buyer SDK, the catalog, the services and every entry point.
    assert graph["paysign.protocol.usdc"] == set()
    assert graph["paysign.protocol.untrusted"] == set()
    assert graph["paysign.protocol.payment_required"] == {
        "paysign.protocol.networks",
        "paysign.protocol.untrusted",
    }
