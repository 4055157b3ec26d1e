"""Input and output feature declarations, one class per feature type.

A feature names a column (``column``, default: its ``name``), how that column is preprocessed,
and how the model encodes it (inputs) or predicts it (outputs).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from plait.config import decoders as d
from plait.config import encoders as e
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
        return _typed(value, e.DEFAULT_ENCODER[cls.model_fields["type"].default])


class BinaryInputFeature(InputFeatureBase):
    type: Literal["binary"] = "binary"
    preprocessing: p.BinaryPreprocessing = Field(default_factory=p.BinaryPreprocessing)
    encoder: e.BinaryEncoder = Field(default_factory=e.PassthroughEncoder)


class NumberInputFeature(InputFeatureBase):
    type: Literal["number"] = "number"
    preprocessing: p.NumberPreprocessing = Field(default_factory=p.NumberPreprocessing)
    encoder: e.NumberEncoder = Field(default_factory=e.PassthroughEncoder)


class CategoryInputFeature(InputFeatureBase):
    type: Literal["category"] = "category"
    preprocessing: p.CategoryPreprocessing = Field(default_factory=p.CategoryPreprocessing)
    encoder: e.CategoryEncoder = Field(default_factory=e.CategoryEmbedEncoder)


class TextInputFeature(InputFeatureBase):
    type: Literal["text"] = "text"
    preprocessing: p.TextPreprocessing = Field(default_factory=p.TextPreprocessing)
    encoder: e.TextEncoder = Field(default_factory=e.TextEmbedEncoder)


class SetInputFeature(InputFeatureBase):
    type: Literal["set"] = "set"
    preprocessing: p.SetPreprocessing = Field(default_factory=p.SetPreprocessing)
    encoder: e.SetEncoder = Field(default_factory=e.SetEmbedEncoder)


class VectorInputFeature(InputFeatureBase):
    type: Literal["vector"] = "vector"
    preprocessing: p.VectorPreprocessing = Field(default_factory=p.VectorPreprocessing)
    encoder: e.VectorEncoder = Field(default_factory=e.DenseEncoder)


class OutputFeatureBase(FeatureBase):
    @field_validator("decoder", mode="before", check_fields=False)
    @classmethod
    def _decoder(cls, value):
        return _typed(value, d.DEFAULT_DECODER[cls.model_fields["type"].default])

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
    decoder: d.BinaryDecoder = Field(default_factory=d.RegressorDecoder)
    loss: d.BinaryCrossEntropyLoss = Field(default_factory=d.BinaryCrossEntropyLoss)
    threshold: float = Field(0.5, gt=0, lt=1)
    """Probability above which the prediction is true."""


class CategoryOutputFeature(OutputFeatureBase):
    type: Literal["category"] = "category"
    preprocessing: p.CategoryPreprocessing = Field(default_factory=lambda: p.CategoryPreprocessing(missing_value_strategy="drop_row"))
    decoder: d.CategoryDecoder = Field(default_factory=d.ClassifierDecoder)
    loss: d.SoftmaxCrossEntropyLoss = Field(default_factory=d.SoftmaxCrossEntropyLoss)
    top_k: int = Field(3, gt=0)
    """k of the hits_at_k metric."""


class NumberOutputFeature(OutputFeatureBase):
    type: Literal["number"] = "number"
    preprocessing: p.NumberPreprocessing = Field(default_factory=lambda: p.NumberPreprocessing(missing_value_strategy="drop_row"))
    decoder: d.NumberDecoder = Field(default_factory=d.RegressorDecoder)
    loss: d.RegressionLoss = Field(default_factory=d.RegressionLoss)


class SetOutputFeature(OutputFeatureBase):
    type: Literal["set"] = "set"
    preprocessing: p.SetPreprocessing = Field(default_factory=lambda: p.SetPreprocessing(missing_value_strategy="drop_row"))
    decoder: d.SetDecoder = Field(default_factory=d.ClassifierDecoder)
    loss: d.SigmoidCrossEntropyLoss = Field(default_factory=d.SigmoidCrossEntropyLoss)
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

