"""Output decoder and loss settings, one class per type; each output feature type has a union of
the decoders and the loss it takes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from plait.config.base import StrictModel, shown
from plait.config.layers import FCStack, union

class RegressorDecoder(FCStack):
    type: Literal["regressor"] = "regressor"


class ClassifierDecoder(FCStack):
    type: Literal["classifier"] = "classifier"


def _non_negative_weights(weights):
    values = weights.values() if isinstance(weights, dict) else weights or []
    if any(w < 0 for w in values):
        raise ValueError(f"got {shown(weights)}; class weights must be 0 or more (0 ignores a class)")
    return weights


class BinaryCrossEntropyLoss(StrictModel):
    type: Literal["binary_weighted_cross_entropy"] = "binary_weighted_cross_entropy"
    positive_class_weight: float | None = Field(None, gt=0)
    """Weight of the positive class (for imbalanced data)."""
    weight: float = Field(1.0, ge=0)
    """This output's weight in the total loss."""


class SoftmaxCrossEntropyLoss(StrictModel):
    type: Literal["softmax_cross_entropy"] = "softmax_cross_entropy"
    class_weights: Annotated[list[float] | dict[str, float] | None, AfterValidator(_non_negative_weights)] = None
    """Per-class weights, as a list in vocabulary order or a mapping from label to weight."""
    weight: float = Field(1.0, ge=0)


class RegressionLoss(StrictModel):
    type: Literal["mean_squared_error", "mean_absolute_error", "huber"] = "mean_squared_error"
    delta: float = Field(1.0, gt=0)
    """Huber's threshold between the squared and the absolute part."""
    weight: float = Field(1.0, ge=0)


class SigmoidCrossEntropyLoss(StrictModel):
    type: Literal["sigmoid_cross_entropy"] = "sigmoid_cross_entropy"
    weight: float = Field(1.0, ge=0)


BinaryDecoder = union(RegressorDecoder)
CategoryDecoder = union(ClassifierDecoder)
NumberDecoder = union(RegressorDecoder)
SetDecoder = union(ClassifierDecoder)

DEFAULT_DECODER = {"binary": "regressor", "number": "regressor", "category": "classifier", "set": "classifier"}
