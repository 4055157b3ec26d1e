"""Input encoder settings, one class per encoder type; each feature type has a union of those it
takes (``encoder: {type: ...}``). Names follow Ludwig's so existing configs validate unchanged."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from plait.config.base import StrictModel
from plait.config.layers import FCStack, check_heads, union

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
        check_heads(self.embedding_size, "embedding_size", self.num_heads)
        return self


class SetEmbedEncoder(StrictModel):
    """Sum of learned embeddings of the set's elements, then fully connected layers."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(50, gt=0)
    num_fc_layers: int = Field(0, ge=0)
    output_size: int = Field(64, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1)


NumberEncoder = union(PassthroughEncoder, DenseEncoder)
BinaryEncoder = union(PassthroughEncoder, DenseEncoder)
CategoryEncoder = union(CategoryEmbedEncoder, CategorySparseEncoder)
TextEncoder = union(TextEmbedEncoder, ParallelCNNEncoder, RNNEncoder, TextTransformerEncoder)
SetEncoder = union(SetEmbedEncoder)
VectorEncoder = union(DenseEncoder, PassthroughEncoder)

# The encoder each input type gets when the config names none.
DEFAULT_ENCODER = {
    "number": "passthrough",
    "binary": "passthrough",
    "category": "dense",
    "text": "embed",
    "set": "embed",
    "vector": "dense",
}
