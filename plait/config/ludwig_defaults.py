"""The settings whose plait default differs from Ludwig's, and a config with Ludwig's instead.

A field whose default differs declares Ludwig's in its schema extra (``LUDWIG_DEFAULT``). A
config that leaves such a field unset gets plait's value; ``plait validate`` lists those, so a
Ludwig user sees where the same config would train differently, and the benchmarks can train
the same config with Ludwig's defaults (``with_ludwig_defaults``) to show which default wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from pydantic import BaseModel

from plait.config.base import LUDWIG_DEFAULT


@dataclass(frozen=True)
class DefaultDifference:
    path: str
    """Where the setting is, as a dotted path (``trainer.optimizer.type``)."""
    plait: Any
    """The value plait uses (its default)."""
    ludwig: Any
    """The value Ludwig 0.17 would use."""

    def __str__(self) -> str:
        return f"{self.path}: {_plain(self.plait)!r} (Ludwig: {_plain(self.ludwig)!r})"


def differing_defaults(config: BaseModel) -> list[DefaultDifference]:
    """Every setting the config leaves at a plait default that Ludwig's differs from."""
    combiner = _combiner_difference(config)
    # Where Ludwig would pick another combiner, the settings of plait's own are beside the point.
    return [*combiner, *_walk(config, "", skip={"combiner"} if combiner else set())]


LUDWIG_MANY_INPUTS_COMBINER = 3
"""Ludwig 0.17 picks the ft_transformer combiner for a config of this many inputs or more that
names none (concat below); plait keeps concat, which trained better models in
benchmarks/sklearn_compare.py. The one default of Ludwig's that depends on the config, so it is
checked here rather than recorded on a field."""


def _combiner_difference(config: BaseModel) -> list[DefaultDifference]:
    inputs = getattr(config, "input_features", [])
    if "combiner" in config.model_fields_set or len(inputs) < LUDWIG_MANY_INPUTS_COMBINER:
        return []
    return [DefaultDifference("combiner", config.combiner, {"type": "ft_transformer"})]


def summary_lines(differences: list[DefaultDifference]) -> list[str]:
    """One line per setting, the features that share it counted rather than listed (a config may
    have thousands of features): ``input_features[*].encoder.embedding_size: 64 (Ludwig: 256), 12 features``."""
    groups: dict[tuple, int] = {}
    for difference in differences:
        key = (_pattern(difference.path), repr(_plain(difference.plait)), repr(difference.ludwig))
        groups[key] = groups.get(key, 0) + 1
    return [f"{path}: {plait} (Ludwig: {ludwig})" + (f", {count:,} feature{'s' if count > 1 else ''}" if "[*]" in path else "")
            for (path, plait, ludwig), count in groups.items()]


def with_ludwig_defaults(config: BaseModel, only: set[str] | None = None) -> BaseModel:
    """A copy of ``config`` with Ludwig's default wherever it leaves such a setting unset; with
    ``only``, just for those settings (paths as ``summary_lines`` writes them:
    ``input_features[*].encoder.embedding_size``), to measure one default at a time."""
    copy = config.model_copy(deep=True)
    for difference in differing_defaults(copy):
        if only is not None and _pattern(difference.path) not in only:
            continue
        owner, name = _owner(copy, difference.path)
        setattr(owner, name, difference.ludwig)  # validated on assignment
    return copy


def _pattern(path: str) -> str:
    """The path with list indexes as [*]: one name for a setting of every feature."""
    return re.sub(r"\[\d+\]", "[*]", path)


def _walk(model: BaseModel, prefix: str, skip: set[str] = frozenset()) -> Iterator[DefaultDifference]:
    for name, field in type(model).model_fields.items():
        value, path = getattr(model, name), f"{prefix}{name}"
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if LUDWIG_DEFAULT in extra and name not in model.model_fields_set and _plain(value) != extra[LUDWIG_DEFAULT]:
            yield DefaultDifference(path, value, extra[LUDWIG_DEFAULT])
        elif isinstance(value, BaseModel) and name not in skip:
            yield from _walk(value, path + ".")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _walk(item, f"{path}[{i}].")


def _plain(value: Any) -> Any:
    """A section chosen by type as ``{"type": ...}`` (how Ludwig's defaults name one); other
    values as they are."""
    if isinstance(value, BaseModel):
        return {"type": value.type} if "type" in type(value).model_fields else value.model_dump(mode="json")
    return value


def _owner(config: BaseModel, path: str) -> tuple[Any, str]:
    """The section holding the last key of ``path``, and that key."""
    *parents, last = path.split(".")
    node: Any = config
    for part in parents:
        name, _, index = part.partition("[")
        node = getattr(node, name)
        if index:
            node = node[int(index.rstrip("]"))]
    return node, last
