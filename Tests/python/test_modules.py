"""The package's modules import each other without a cycle, and share only
public names: no module imports another's private names or reaches into an
engine's private attributes."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set

from conftest import BINDINGS

PACKAGE = BINDINGS / "tickgate"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Import nodes that run (those under `if TYPE_CHECKING:` do not)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from (n for child in node.orelse for n in _imports_in(child))
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    elif not (isinstance(node, ast.If) and _is_type_checking(node)):
        yield from _imports(node)


def _graph() -> Dict[str, Set[str]]:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    graph: Dict[str, Set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        edges: Set[str] = set()
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    edges.add(node.module.split(".")[0])
                else:  # from . import a, b
                    edges.update(alias.name for alias in node.names if alias.name in modules)
        graph[path.stem] = edges & modules
    return graph


def test_the_graph_is_read() -> None:
    graph = _graph()
    assert "_callbacks" in graph["_engine"] and "_subscription" in graph["_gate"]


def test_no_import_cycle() -> None:
    graph = _graph()
    state: Dict[str, int] = {}

    def visit(module: str, path: list) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            assert state.get(dep) != 1, "import cycle: " + " -> ".join(path + [module, dep])
            if dep not in state:
                visit(dep, path + [module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_no_private_names_across_modules() -> None:
    bad = []
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                bad += [f"{path.name}: from .{node.module} import {a.name}"
                        for a in node.names if a.name.startswith("_") and a.name != "__version__"]
            if isinstance(node, ast.Attribute) and node.attr in ("_lib", "_h"):
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id == "self"):
                    bad.append(f"{path.name}:{node.lineno}: .{node.attr} of {ast.unparse(owner)}")
    assert not bad, bad
