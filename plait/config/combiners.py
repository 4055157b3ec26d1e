"""Combiner settings (the ``combiner`` section), one class per combiner type."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from plait.config.base import StrictModel
from plait.config.layers import FCStack, Norm, check_heads, union

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
        check_heads(self.hidden_size, "hidden_size", self.num_heads)
        return self


CombinerConfig = union(ConcatCombiner, TransformerCombiner)
