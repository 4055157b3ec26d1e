"""Model settings: an encoder per input feature, a combiner, a decoder and loss per output.

Every encoder, combiner and decoder is chosen by ``type``; its other fields are its options.
The names follow Ludwig's so existing configs validate unchanged.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import AfterValidator, Field, model_validator

from plait.config.base import StrictModel, field_error, shown

Activation = Literal["relu", "gelu", "tanh", "sigmoid", "silu", "leaky_relu"]
Norm = Literal["batch", "layer"] | None


class FCStack(StrictModel):
    """Fully connected layers shared by encoders, combiners and decoders."""

    num_fc_layers: int = Field(0, ge=0)
    output_size: int = Field(256, gt=0)
    activation: Activation = "relu"
    dropout: float = Field(0.0, ge=0, lt=1)
    norm: Norm = None


# ---- input encoders ------------------------------------------------------------------------

class PassthroughEncoder(StrictModel):
    type: Literal["passthrough"] = "passthrough"


class DenseEncoder(FCStack):
    """A number, binary or vector input through fully connected layers."""

    type: Literal["dense"] = "dense"
    num_fc_layers: int = Field(1, ge=0)
    output_size: int = Field(32, gt=0)


class CategoryEmbedEncoder(StrictModel):
    """A learned embedding per category value."""

    type: Literal["dense"] = "dense"
    embedding_size: int | None = Field(None, gt=0)
    """Unset: min(50, (vocabulary size + 1) // 2), a common rule for tabular data."""
    dropout: float = Field(0.0, ge=0, lt=1)


class CategorySparseEncoder(StrictModel):
    """A one-hot vector (no trained weights)."""

    type: Literal["sparse", "onehot"] = "sparse"


class TextEmbedEncoder(StrictModel):
    """Bag of embeddings: token embeddings reduced by mean (or sum/max) over the sequence."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(64, gt=0)
    reduce_output: Literal["mean", "sum", "max"] = "mean"
    dropout: float = Field(0.0, ge=0, lt=1)


class ParallelCNNEncoder(StrictModel):
    """Convolutions of several widths over the token embeddings, max-pooled and concatenated."""

    type: Literal["parallel_cnn"] = "parallel_cnn"
    embedding_size: int = Field(64, gt=0)
    num_filters: int = Field(64, gt=0)
    filter_sizes: list[Annotated[int, Field(gt=0)]] = Field([2, 3, 4, 5], min_length=1)
    """Widths (in tokens) of the convolutions; one set of num_filters filters per width."""
    dropout: float = Field(0.0, ge=0, lt=1)


class RNNEncoder(StrictModel):
    type: Literal["rnn"] = "rnn"
    embedding_size: int = Field(64, gt=0)
    cell_type: Literal["lstm", "gru"] = "lstm"
    state_size: int = Field(64, gt=0)
    num_layers: int = Field(1, gt=0)
    bidirectional: bool = False
    dropout: float = Field(0.0, ge=0, lt=1)


class TextTransformerEncoder(StrictModel):
    """A small transformer trained from scratch, mean-pooled over non-padding tokens."""

    type: Literal["transformer"] = "transformer"
    embedding_size: int = Field(64, gt=0)
    num_layers: int = Field(2, gt=0)
    num_heads: int = Field(4, gt=0)
    """Attention heads; each attends over embedding_size / num_heads dimensions."""
    hidden_size: int = Field(128, gt=0)
    dropout: float = Field(0.1, ge=0, lt=1)

    @model_validator(mode="after")
    def _heads_divide_width(self):
        _check_heads(self.embedding_size, "embedding_size", self.num_heads)
        return self


class SetEmbedEncoder(StrictModel):
    """Sum of learned embeddings of the set's elements, then fully connected layers."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(50, gt=0)
    num_fc_layers: int = Field(0, ge=0)
    output_size: int = Field(64, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1)


def _check_heads(width: int, width_name: str, num_heads: int) -> None:
    """Multi-head attention splits the width evenly between the heads."""
    if width % num_heads:
        raise field_error("num_heads", f"got {num_heads}; {width_name} ({width}) must be a multiple of num_heads: "
                                       f"use a divisor of {width}, such as {_largest_divisor(width, num_heads)}")


def _largest_divisor(width: int, at_most: int) -> int:
    return max(d for d in range(1, min(width, at_most) + 1) if width % d == 0)


def _union(*members):
    return Annotated[Union[members], Field(discriminator="type")]


NumberEncoder = _union(PassthroughEncoder, DenseEncoder)
BinaryEncoder = _union(PassthroughEncoder, DenseEncoder)
CategoryEncoder = _union(CategoryEmbedEncoder, CategorySparseEncoder)
TextEncoder = _union(TextEmbedEncoder, ParallelCNNEncoder, RNNEncoder, TextTransformerEncoder)
SetEncoder = _union(SetEmbedEncoder)
VectorEncoder = _union(DenseEncoder, PassthroughEncoder)

# The encoder each input type gets when the config names none.
DEFAULT_ENCODER = {
    "number": "passthrough",
    "binary": "passthrough",
    "category": "dense",
    "text": "embed",
    "set": "embed",
    "vector": "dense",
}


# ---- combiners -------------------------------------------------------------------------------

class ConcatCombiner(FCStack):
    """Concatenate every encoder output, then fully connected layers."""

    type: Literal["concat"] = "concat"
    num_fc_layers: int = Field(1, ge=0)
    """Hidden layers after the concatenation. One suits small tabular data (there it matches
    logistic/ridge regression and gradient boosting); more can pay off on large data."""
    output_size: int = Field(128, gt=0)
    dropout: float = Field(0.1, ge=0, lt=1)
    norm: Norm = None
    """Normalization in each hidden layer; none by default: layer norm makes each row's hidden
    vector scale-free, which costs accuracy on regression."""


class TransformerCombiner(StrictModel):
    """Each feature's encoding becomes one token; a transformer mixes them (tabular transformer
    style); the tokens are pooled and passed through fully connected layers."""

    type: Literal["transformer"] = "transformer"
    hidden_size: int = Field(64, gt=0)
    num_layers: int = Field(2, gt=0)
    num_heads: int = Field(4, gt=0)
    """Attention heads; each attends over hidden_size / num_heads dimensions."""
    transformer_output_size: int = Field(128, gt=0)
    dropout: float = Field(0.1, ge=0, lt=1)
    reduce_output: Literal["mean", "sum", "concat"] = "mean"
    num_fc_layers: int = Field(1, ge=0)
    output_size: int = Field(128, gt=0)

    @model_validator(mode="after")
    def _heads_divide_width(self):
        _check_heads(self.hidden_size, "hidden_size", self.num_heads)
        return self


CombinerConfig = _union(ConcatCombiner, TransformerCombiner)


# ---- decoders and losses ---------------------------------------------------------------------

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


BinaryDecoder = _union(RegressorDecoder)
CategoryDecoder = _union(ClassifierDecoder)
NumberDecoder = _union(RegressorDecoder)
SetDecoder = _union(ClassifierDecoder)

DEFAULT_DECODER = {"binary": "regressor", "number": "regressor", "category": "classifier", "set": "classifier"}
