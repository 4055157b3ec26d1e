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

from plait.config import backend, combiners, decoders, encoders, features, preprocessing, schema, trainer

SECTIONS: list[tuple[str, list[type[BaseModel]]]] = [
    ("Top level", [schema.PlaitConfig]),
    ("Input features", [features.BinaryInputFeature, features.NumberInputFeature, features.CategoryInputFeature,
                        features.TextInputFeature, features.SetInputFeature, features.VectorInputFeature]),
    ("Output features", [features.BinaryOutputFeature, features.CategoryOutputFeature,
                         features.NumberOutputFeature, features.SetOutputFeature]),
    ("Preprocessing", [preprocessing.GlobalPreprocessing, preprocessing.RandomSplit, preprocessing.FixedSplit,
                       preprocessing.StratifySplit, preprocessing.BinaryPreprocessing, preprocessing.NumberPreprocessing,
                       preprocessing.CategoryPreprocessing, preprocessing.TextPreprocessing,
                       preprocessing.SetPreprocessing, preprocessing.VectorPreprocessing]),
    ("Encoders", encoders.DOCUMENTED),
    ("Combiners", [combiners.ConcatCombiner, combiners.TransformerCombiner]),
    ("Decoders and losses", [decoders.RegressorDecoder, decoders.ClassifierDecoder, decoders.BinaryCrossEntropyLoss,
                             decoders.SoftmaxCrossEntropyLoss, decoders.RegressionLoss, decoders.SigmoidCrossEntropyLoss]),
    ("Trainer", [trainer.TrainerConfig, trainer.OptimizerConfig, trainer.SchedulerConfig, trainer.GradientClipping]),
    ("Backend", [backend.AutoBackendConfig, backend.LocalBackendConfig, backend.RayBackendConfig,
                 backend.LaunchedBackendConfig, backend.ProcessorConfig, backend.DistributedTrainerConfig,
                 backend.DDPConfig, backend.FSDPConfig, backend.DeepSpeedConfig, backend.ZeroOptimization,
                 backend.HorovodConfig, backend.LoaderConfig]),
]


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
    if field.default is not PydanticUndefined:
        return f"`{field.default!r}`"
    if field.default_factory is not None:
        value = field.default_factory()
        return f"`{value.type}`" if hasattr(value, "type") else "(section)"
    return "required"


def render() -> str:
    lines = ["# plait config reference", "", "Generated from the field declarations by "
             "`python -m plait.config.docs`; do not edit by hand.", ""]
    for title, models in SECTIONS:
        lines += [f"## {title}", ""]
        for cls in models:
            lines += [f"### {cls.__name__}", ""]
            if cls.__doc__ and not cls.__doc__.startswith(("A base", "Usage docs")):
                lines += [" ".join(cls.__doc__.split()), ""]
            lines += ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
            for name, field in cls.model_fields.items():
                doc = " ".join((field.description or "").split()).replace("|", "\\|")
                kind = _type_name(field.annotation).replace("|", "\\|")
                lines.append(f"| `{name}` | {kind} | {_default(field)} | {doc} |")
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
