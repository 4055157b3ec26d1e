"""The package's layering: no import cycle among plait's modules, counting imports inside
functions (a lazy import hides a loop, it does not remove it), and each package imports only the
packages below it in ``LAYERS``, the one place the order is written down."""

from __future__ import annotations

import ast
import functools
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


@functools.lru_cache(maxsize=1)
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


LAYERS = [
    {"errors"},
    {"utils", "callbacks"},        # callbacks: the hooks a run calls, no plait imports
    {"config", "run_directory"},
    {"models", "synthesize"},      # torch modules; synthesize writes data for a config
    {"features"},                  # preprocessing per type (a cached embedding runs a model)
    {"data"},                      # reading, splitting, the pipeline and its cache, columns as tensors
    {"evaluation"},                # metrics from mergeable statistics
    {"tracking"},                  # experiment trackers: callbacks that log a run's config, metrics and files
    {"training", "inference"},     # siblings: neither imports the other
    {"explain"},                   # attributions per row and feature: batch functions a backend maps, as inference's
    {"backends"},                  # where work runs
    {"export", "collect"},         # a trained model outside plait; its layers, weights and activations
    {"api", "serving"},
    {"search", "check_install"},   # runs of the public API: a search's trials, a check of the install
    {"automl", "kfold"},           # searched configs (Ludwig's AutoML); k-fold's folds, as trials sized as a search's
    {"visualize"},                 # plots of what runs and searches wrote
    {"report"},                    # one HTML page of a run or a search, drawn by visualize
    {"commands"},
    {"cli"},
    {"__main__"},
]
"""plait's packages (and top-level modules) from the bottom up: each may import only those in a
lower layer, never a sibling in its own."""


def package_of(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_every_package_has_a_layer():
    layered = set().union(*LAYERS)
    packages = {package_of(m) for m in import_graph() if m != "plait"}
    assert packages <= layered, f"add {sorted(packages - layered)} to LAYERS"


def test_packages_import_only_the_layers_below_them():
    level = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    upward = sorted(f"{module} imports {dep}" for module, deps in import_graph().items() if module != "plait"
                    for dep in deps if package_of(dep) != package_of(module)
                    and level[package_of(dep)] >= level[package_of(module)])
    assert not upward, "imports against LAYERS:\n" + "\n".join(upward)
