"""Loading and validating plait configs.

``load_config`` accepts a path to a YAML file or a dict and returns a :class:`PlaitConfig` with
every default filled in, or raises :class:`~plait.errors.ConfigError` listing every problem.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from plait.config.backend import BACKEND_TYPES, with_backend_type
from plait.config.base import format_errors
from plait.config.schema import PlaitConfig, check_feature_types
from plait.errors import ConfigError

__all__ = ["BACKEND_TYPES", "PlaitConfig", "load_config", "read_yaml", "with_backend_type"]


def read_yaml(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None


def load_config(config: str | os.PathLike | dict | PlaitConfig) -> PlaitConfig:
    if isinstance(config, PlaitConfig):
        return config
    data = read_yaml(config) if isinstance(config, (str, os.PathLike)) else config
    problems = check_feature_types(data)
    if problems and not isinstance(data, dict):
        raise ConfigError(problems)
    try:
        config = PlaitConfig.model_validate(data)
    except ValidationError as err:
        # Report the rest of the config's problems too, minus pydantic's view of the features
        # already explained above.
        flagged = tuple(problem.split(".type:")[0] + "." for problem in problems)
        problems += [line for line in format_errors(err, data, PlaitConfig) if not line.startswith(flagged)]
    if problems:
        raise ConfigError(problems)
    return config
