"""What every combiner shares: its output type and the flattening of encoder outputs."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch


class Combined(NamedTuple):
    """A combiner's output: the hidden representation ([batch, width], or [batch, length, width]
    where the combiner keeps a sequence) and the combiner's own loss term (TabNet's sparsity
    loss), None for most. The loss comes out of the same forward pass so that it is part of the
    autograd graph every distributed wrapper sees."""

    hidden: torch.Tensor
    auxiliary_loss: torch.Tensor | None = None


def flat_size(shape: tuple) -> int:
    return math.prod(shape)


def flat_inputs(encoded: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Each encoder output as [batch, everything else] (sequences flattened), in input order."""
    return [x.flatten(1) for x in encoded.values()]
