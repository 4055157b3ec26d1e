"""Input and output feature declarations, one class per feature type.

A feature names a column (``column``, default: its ``name``), how that column is preprocessed,
and how the model encodes it (inputs) or predicts it (outputs).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from plait.config import model as m
from plait.config import preprocessing as p
from plait.config.base import StrictModel

INPUT_TYPES = ("binary", "number", "category", "text", "set", "vector")
OUTPUT_TYPES = ("binary", "category", "number", "set")


def _typed(value, default_type: str):
    """Accept ``encoder: dense`` and ``encoder: {...}`` without a type, as Ludwig does."""
    if value is None:
        return {"type": default_type}
    if isinstance(value, str):
        return {"type": value}
    if isinstance(value, dict) and "type" not in value:
        return {"type": default_type, **value}
    return value


class FeatureBase(StrictModel):
    name: str = Field(min_length=1)
    """The feature's name, used in outputs and metrics."""
    column: str | None = None
    """The dataset column to read; defaults to ``name``."""

    @model_validator(mode="before")
    @classmethod
    def _column_defaults_to_name(cls, data):
        if isinstance(data, dict) and data.get("column") is None and isinstance(data.get("name"), str):
            return {**data, "column": data["name"]}
        return data

    @property
    def source_column(self) -> str:
        return self.column or self.name


class InputFeatureBase(FeatureBase):
    @field_validator("encoder", mode="before", check_fields=False)
    @classmethod
    def _encoder(cls, value, info):
        return _typed(value, m.DEFAULT_ENCODER[cls.model_fields["type"].default])


class BinaryInputFeature(InputFeatureBase):
    type: Literal["binary"] = "binary"
    preprocessing: p.BinaryPreprocessing = Field(default_factory=p.BinaryPreprocessing)
    encoder: m.BinaryEncoder = Field(default_factory=m.PassthroughEncoder)


class NumberInputFeature(InputFeatureBase):
    type: Literal["number"] = "number"
    preprocessing: p.NumberPreprocessing = Field(default_factory=p.NumberPreprocessing)
    encoder: m.NumberEncoder = Field(default_factory=m.PassthroughEncoder)


class CategoryInputFeature(InputFeatureBase):
    type: Literal["category"] = "category"
    preprocessing: p.CategoryPreprocessing = Field(default_factory=p.CategoryPreprocessing)
    encoder: m.CategoryEncoder = Field(default_factory=m.CategoryEmbedEncoder)


class TextInputFeature(InputFeatureBase):
    type: Literal["text"] = "text"
    preprocessing: p.TextPreprocessing = Field(default_factory=p.TextPreprocessing)
    encoder: m.TextEncoder = Field(default_factory=m.TextEmbedEncoder)


class SetInputFeature(InputFeatureBase):
    type: Literal["set"] = "set"
    preprocessing: p.SetPreprocessing = Field(default_factory=p.SetPreprocessing)
    encoder: m.SetEncoder = Field(default_factory=m.SetEmbedEncoder)


class VectorInputFeature(InputFeatureBase):
    type: Literal["vector"] = "vector"
    preprocessing: p.VectorPreprocessing = Field(default_factory=p.VectorPreprocessing)
    encoder: m.VectorEncoder = Field(default_factory=m.DenseEncoder)


class OutputFeatureBase(FeatureBase):
    @field_validator("decoder", mode="before", check_fields=False)
    @classmethod
    def _decoder(cls, value):
        return _typed(value, m.DEFAULT_DECODER[cls.model_fields["type"].default])

    @field_validator("preprocessing", mode="before", check_fields=False)
    @classmethod
    def _output_preprocessing(cls, value):
        """Settings given for an output (its own, or from defaults) keep the output default of
        dropping rows whose target is missing, unless they name a missing_value_strategy."""
        if isinstance(value, dict):
            return {**p.OUTPUT_PREPROCESSING_DEFAULTS, **value}
        return value


class BinaryOutputFeature(OutputFeatureBase):
    type: Literal["binary"] = "binary"
    preprocessing: p.BinaryPreprocessing = Field(default_factory=lambda: p.BinaryPreprocessing(missing_value_strategy="drop_row"))
    decoder: m.BinaryDecoder = Field(default_factory=m.RegressorDecoder)
    loss: m.BinaryCrossEntropyLoss = Field(default_factory=m.BinaryCrossEntropyLoss)
    threshold: float = Field(0.5, gt=0, lt=1)
    """Probability above which the prediction is true."""


class CategoryOutputFeature(OutputFeatureBase):
    type: Literal["category"] = "category"
    preprocessing: p.CategoryPreprocessing = Field(default_factory=lambda: p.CategoryPreprocessing(missing_value_strategy="drop_row"))
    decoder: m.CategoryDecoder = Field(default_factory=m.ClassifierDecoder)
    loss: m.SoftmaxCrossEntropyLoss = Field(default_factory=m.SoftmaxCrossEntropyLoss)
    top_k: int = Field(3, gt=0)
    """k of the hits_at_k metric."""


class NumberOutputFeature(OutputFeatureBase):
    type: Literal["number"] = "number"
    preprocessing: p.NumberPreprocessing = Field(default_factory=lambda: p.NumberPreprocessing(missing_value_strategy="drop_row"))
    decoder: m.NumberDecoder = Field(default_factory=m.RegressorDecoder)
    loss: m.RegressionLoss = Field(default_factory=m.RegressionLoss)


class SetOutputFeature(OutputFeatureBase):
    type: Literal["set"] = "set"
    preprocessing: p.SetPreprocessing = Field(default_factory=lambda: p.SetPreprocessing(missing_value_strategy="drop_row"))
    decoder: m.SetDecoder = Field(default_factory=m.ClassifierDecoder)
    loss: m.SigmoidCrossEntropyLoss = Field(default_factory=m.SigmoidCrossEntropyLoss)
    threshold: float = Field(0.5, gt=0, lt=1)


InputFeature = Annotated[
    Union[BinaryInputFeature, NumberInputFeature, CategoryInputFeature, TextInputFeature, SetInputFeature, VectorInputFeature],
    Field(discriminator="type"),
]
OutputFeature = Annotated[
    Union[BinaryOutputFeature, CategoryOutputFeature, NumberOutputFeature, SetOutputFeature],
    Field(discriminator="type"),
]
AnyFeature = Union[
    BinaryInputFeature, NumberInputFeature, CategoryInputFeature, TextInputFeature, SetInputFeature,
    VectorInputFeature, BinaryOutputFeature, CategoryOutputFeature, NumberOutputFeature, SetOutputFeature,
]


class TypeDefaults(StrictModel):
    """``defaults.<type>``: settings every feature of that type starts from."""

    preprocessing: dict | None = None
    encoder: dict | str | None = None
    decoder: dict | str | None = None
    loss: dict | None = None


class Defaults(StrictModel):
    binary: TypeDefaults | None = None
    number: TypeDefaults | None = None
    category: TypeDefaults | None = None
    text: TypeDefaults | None = None
    set: TypeDefaults | None = None
    vector: TypeDefaults | None = None
