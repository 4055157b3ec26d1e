"""Loading and validating plait configs.

``load_config`` accepts a path to a YAML file or a dict and returns a :class:`PlaitConfig` with
every default filled in, or raises :class:`~plait.errors.ConfigError` listing every problem.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from plait.config.backend import BACKEND_TYPES, with_backend_type, with_command_line
from plait.config.base import format_errors
from plait.config.gbm import GBMConfig
from plait.config.llm import LLMConfig
from plait.config.schema import PlaitConfig, check_feature_types
from plait.config.upgrade import upgrade
from plait.errors import ConfigError

log = logging.getLogger("plait")

__all__ = ["BACKEND_TYPES", "GBMConfig", "LLMConfig", "PlaitConfig", "load_config", "read_yaml", "with_backend_type",
           "with_command_line"]


def read_yaml(path: str | os.PathLike) -> Any:
    """The data of a YAML config file, or of a JSON one (``.json``, such as the
    ``model_hyperparameters.json`` of a saved Ludwig model)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from None
    if path.suffix.lower() == ".json":
        return _parse_json(text, path)
    try:
        return yaml.load(text, Loader=_BoundedLoader)
    except _ExpansionTooLarge as exc:
        raise ConfigError(f"{path}: the YAML aliases (*name) expand to more than {exc.limit:,} values; a "
                          "config is never that large, so this is refused (write the values out, or use "
                          "fewer nested aliases)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None


def _parse_json(text: str, path: Path) -> Any:
    # Read as JSON, not as YAML: YAML 1.1 reads the 1e-08 that JSON writes as a string.
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(f"{path}: the JSON is nested too deeply to be a config") from None


MAX_EXPANDED_VALUES = 10_000_000
"""The most values (scalars, lists and mappings) a config file may hold once its aliases are
expanded. Aliases share one node, so a few lines can stand for billions of values (the
"billion laughs" pattern); validating or echoing such a config would take hours and all memory."""


class _ExpansionTooLarge(yaml.YAMLError):
    def __init__(self, limit: int):
        super().__init__(limit)
        self.limit = limit


class _BoundedLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when installed: 10x faster
    """yaml.safe_load's loader, refusing documents whose aliases expand past MAX_EXPANDED_VALUES."""

    def construct_document(self, node):
        _check_expansion(node, MAX_EXPANDED_VALUES)
        return super().construct_document(node)


def _check_expansion(root: yaml.Node, limit: int) -> None:
    """Count the values the node graph expands to, each shared node once (linear in the file)."""
    sizes: dict[int, int] = {}
    pending = [(root, False)]
    while pending:  # depth-first, children before parents, without recursion
        node, children_done = pending.pop()
        if id(node) in sizes:
            continue
        children = [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else (
            node.value if isinstance(node, yaml.SequenceNode) else [])
        if not children_done:
            pending.append((node, True))
            pending.extend((child, False) for child in children if id(child) not in sizes)
            continue
        sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
        if sizes[id(node)] > limit:
            raise _ExpansionTooLarge(limit)


MODEL_CONFIGS = {"ecd": PlaitConfig, "gbm": GBMConfig, "llm": LLMConfig}
"""Each ``model_type``'s config model (a missing or unknown one is read as ECD's, which reports it)."""


def config_model(model_type: Any) -> type:
    """The config model of ``model_type``."""
    return MODEL_CONFIGS.get(model_type, PlaitConfig) if isinstance(model_type, str) else PlaitConfig


def load_config(config: str | os.PathLike | dict | PlaitConfig | LLMConfig) -> PlaitConfig | LLMConfig:
    """The validated config of a YAML or JSON file, or of a dict (left unmodified): an ECD model's
    (:class:`PlaitConfig`), with ``model_type: gbm`` gradient-boosted trees' (:class:`GBMConfig`), with
    ``model_type: llm`` an LLM's (:class:`LLMConfig`). Ludwig's
    older names are upgraded first, with one warning saying what was renamed."""
    if isinstance(config, (PlaitConfig, LLMConfig)):
        return config
    data = read_yaml(config) if isinstance(config, (str, os.PathLike)) else config
    data, renames = upgrade(data)
    if renames:
        log.warning("upgraded Ludwig names: %s", ", ".join(renames))
    problems = check_feature_types(data)
    if problems and not isinstance(data, dict):
        raise ConfigError(problems)
    model = config_model(data.get("model_type") if isinstance(data, dict) else None)
    try:
        config = model.model_validate(data)
    except ValidationError as err:
        # Report the rest of the config's problems too, minus pydantic's view of the features
        # already explained above.
        flagged = tuple(problem.split(".type:")[0] + "." for problem in problems)
        problems += [line for line in format_errors(err, data, model) if not line.startswith(flagged)]
    if problems:
        raise ConfigError(problems)
    return config
