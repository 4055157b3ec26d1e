"""Pieces shared by encoder, combiner and decoder settings: fully connected stacks, activations,
and the discriminated union every ``type``-chosen section is declared with."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from plait.config.base import StrictModel, field_error

Activation = Literal["relu", "gelu", "tanh", "sigmoid", "silu", "leaky_relu"]
Norm = Literal["batch", "layer"] | None


class FCStack(StrictModel):
    """Fully connected layers shared by encoders, combiners and decoders."""

    num_fc_layers: int = Field(0, ge=0)
    output_size: int = Field(256, gt=0)
    activation: Activation = "relu"
    dropout: float = Field(0.0, ge=0, lt=1)
    norm: Norm = None



def check_heads(width: int, width_name: str, num_heads: int) -> None:
    """Multi-head attention splits the width evenly between the heads."""
    if width % num_heads:
        raise field_error("num_heads", f"got {num_heads}; {width_name} ({width}) must be a multiple of num_heads: "
                                       f"use a divisor of {width}, such as {largest_divisor(width, num_heads)}")


def largest_divisor(width: int, at_most: int) -> int:
    return max(d for d in range(1, min(width, at_most) + 1) if width % d == 0)


def union(*members):
    return Annotated[Union[members], Field(discriminator="type")]
