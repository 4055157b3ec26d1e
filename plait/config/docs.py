"""The config reference (docs/config.md), generated from the field declarations.

Each field is documented once, in the docstring under its declaration; this module renders those
docstrings and defaults, and a test checks that the committed file matches.
Regenerate with: ``python -m plait.config.docs > docs/config.md``.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from plait.config.base import LUDWIG_DEFAULT, LUDWIG_TYPES_NOT_IMPLEMENTED
from plait.config.gbm import GBMConfig
from plait.config.llm import LLMConfig
from plait.config.schema import PlaitConfig

TITLES = {"input_features": "Input features and their encoders", "output_features": "Output features, decoders and losses",
          "preprocessing": "Preprocessing", "defaults": "Defaults", "combiner": "Combiners", "trainer": "Trainer",
          "backend": "Backend", "hyperopt": "Hyperparameter search", "serve": "Serving",
          "tracking": "Experiment tracking"}
"""The top-level sections, in reference order; every settings class reachable from one is
documented under the first section that reaches it, so no class list needs keeping by hand."""


def sections() -> list[tuple[str, list[type[BaseModel]]]]:
    seen: set[type] = {PlaitConfig}
    found = [("Top level", [PlaitConfig])]
    for name, title in TITLES.items():
        found.append((title, _reachable(PlaitConfig.model_fields[name].annotation, seen)))
    found.append(("Gradient-boosted trees (`model_type: gbm`)", _reachable(GBMConfig, seen)))
    found.append(("LLM (`model_type: llm`)", _reachable(LLMConfig, seen)))
    return found


def _reachable(annotation: Any, seen: set[type]) -> list[type[BaseModel]]:
    """The settings classes an annotation reaches, depth first, each once."""
    found: list[type[BaseModel]] = []
    pending = [annotation]
    while pending:
        current = pending.pop(0)
        if isinstance(current, type) and issubclass(current, BaseModel):
            if current in seen:
                continue
            seen.add(current)
            found.append(current)
            pending[:0] = [field.annotation for field in current.model_fields.values()]
        else:
            pending[:0] = list(typing.get_args(current))
    return found


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " / ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None)) + (" or null" if type(None) in args else "")
    if origin in (list, tuple, dict):
        return f"{origin.__name__} of " + ", ".join(_type_name(a) for a in args)
    return getattr(annotation, "__name__", str(annotation))


def _default(field) -> str:
    """plait's default, and Ludwig's beside it where they differ."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    ludwig = f" (Ludwig: `{extra[LUDWIG_DEFAULT]!r}`)" if LUDWIG_DEFAULT in extra else ""
    if field.default is not PydanticUndefined:
        return f"`{field.default!r}`{ludwig}"
    if field.default_factory is not None:
        value = field.default_factory()
        return (f"`{value.type}`" if hasattr(value, "type") else "(section)") + ludwig
    return "required"


def render() -> str:
    lines = ["# plait config reference", "", "Generated from the field declarations by "
             "`python -m plait.config.docs`; do not edit by hand.", ""]
    for title, models in sections():
        lines += [f"## {title}", ""]
        for cls in models:
            lines += [f"### {cls.__name__}", ""]
            if cls.__doc__ and not cls.__doc__.startswith(("A base", "Usage docs")):
                lines += [" ".join(cls.__doc__.split()), ""]
            lines += ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
            for name, field in cls.model_fields.items():
                doc = " ".join((_not_implemented(field) + (field.description or "")).split()).replace("|", "\\|")
                kind = _type_name(field.annotation).replace("|", "\\|")
                lines.append(f"| `{name}` | {kind} | {_default(field)} | {doc} |")
            lines.append("")
    return "\n".join(lines + _refused_types())


def _not_implemented(field) -> str:
    """For a Ludwig setting plait accepts only at the values that mean what it does anyway."""
    for meta in field.metadata:
        accepted, instead = getattr(getattr(meta, "func", None), "ludwig_only", (None, None))
        if accepted is not None:
            values = " or ".join(f"`{value!r}`" for value in accepted)
            return f"**Ludwig setting plait does not implement: only {values} accepted** ({instead}). "
    return ""


def _refused_types() -> list[str]:
    lines = ["## Ludwig types plait refuses", "",
             "These Ludwig names are refused by name, with what to use instead (the same advice the error gives).", "",
             "| section | Ludwig type | instead |", "| --- | --- | --- |"]
    for section, advice in sorted(LUDWIG_TYPES_NOT_IMPLEMENTED.items()):
        for name, instead in sorted(advice.items()):
            lines.append(f"| `{section}` | `{name}` | {instead.replace('|', chr(92) + '|')} |")
    return lines + [""]


if __name__ == "__main__":
    print(render(), end="")
