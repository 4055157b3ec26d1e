"""The package's layering: no import cycle among plait's modules, counting imports inside
functions (a lazy import hides a loop, it does not remove it), and the lower layers import
nothing above them."""

from __future__ import annotations

import ast
from pathlib import Path

import plait

ROOT = Path(plait.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The plait modules a file imports anywhere in it (``from a import b`` counts as ``a.b``
    when that is a module, else as ``a``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                      for a in node.names}
    return {name for name in found if name in modules}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(files)
    graph = {name: imports_of(path, modules) for name, path in files.items()}
    # A package's own __init__ runs when any of its modules is imported: not a dependency back.
    return {name: {d for d in deps if not name.startswith(d + ".")} for name, deps in graph.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_among_plait_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_config_imports_nothing_above_it():
    above = ("plait.training", "plait.backends", "plait.models", "plait.data", "plait.features", "plait.inference",
             "plait.api", "plait.commands")
    for name, deps in import_graph().items():
        if name.startswith("plait.config"):
            assert not [d for d in deps if d.startswith(above)], f"{name} imports {sorted(deps)}"


def test_inference_does_not_import_the_api_or_a_backend():
    for name, deps in import_graph().items():
        if name.startswith("plait.inference"):
            assert not [d for d in deps if d.startswith(("plait.api", "plait.backends", "plait.commands"))], name
