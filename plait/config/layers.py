"""Pieces shared by encoder, combiner and decoder settings: the check of attention heads, and the
discriminated union every ``type``-chosen section is declared with (fully connected stacks are
plait.config.fully_connected)."""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field

from plait.config.base import field_error


def check_heads(width: int, width_name: str, num_heads: int) -> None:
    """Multi-head attention splits the width evenly between the heads."""
    if width % num_heads:
        raise field_error("num_heads", f"got {num_heads}; {width_name} ({width}) must be a multiple of num_heads: "
                                       f"use a divisor of {width}, such as {largest_divisor(width, num_heads)}")


def largest_divisor(width: int, at_most: int) -> int:
    return max(d for d in range(1, min(width, at_most) + 1) if width % d == 0)


def union(*members):
    return Annotated[Union[members], Field(discriminator="type")]
