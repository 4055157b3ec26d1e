"""The config is the lowest layer: plain data that imports nothing above it, not even inside a
function (a registry in the upper layer turns it into strategies, engines and models)."""

from __future__ import annotations

import ast
from pathlib import Path

import plait.config

ABOVE = ("plait.training", "plait.backends", "plait.models", "plait.data", "plait.features", "plait.api",
         "plait.commands", "plait.cli", "plait.predict")


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_config_module_imports_a_higher_layer():
    folder = Path(plait.config.__file__).parent
    offending = {f"{path.name}: {name}" for path in folder.glob("*.py") for name in imported_modules(path)
                 if name.startswith(ABOVE)}
    assert offending == set()
