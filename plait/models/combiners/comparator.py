"""The comparator combiner: two entities (groups of input features) each through its own fully
connected layers, then compared."""

from __future__ import annotations

import torch
from torch import nn

from plait.models.combiners.base import Combined, flat_size
from plait.models.layers import fc_stack


class ComparatorCombiner(nn.Module):
    """Output per row: [e1 . e2, e1 * e2, |e1 - e2|, e1^T W e2], 2 * width + 2 wide."""

    def __init__(self, input_shapes: dict[str, tuple], config, feature_types: dict[str, str] | None = None):
        super().__init__()
        self.entities = (list(config.entity_1), list(config.entity_2))
        self.fc = nn.ModuleList(fc_stack(sum(flat_size(input_shapes[n]) for n in names), config, input_norm=True)
                                for names in self.entities)
        width = self.fc[0].output_size  # both stacks have the same layers
        # Ludwig keeps this matrix random and fixed (a buffer); here it is learned, from the same start.
        self.bilinear = nn.Parameter(torch.randn(width, width) / width**0.5)
        self.output_size = 2 * width + 2
        self.output_shape = (self.output_size,)

    def forward(self, encoded: dict[str, torch.Tensor]) -> Combined:
        e1, e2 = (stack(torch.cat([encoded[n].flatten(1) for n in names], dim=-1))
                  for stack, names in zip(self.fc, self.entities))
        product = e1 * e2
        bilinear = ((e1 @ self.bilinear) * e2).sum(1, keepdim=True)
        return Combined(torch.cat([product.sum(1, keepdim=True), product, (e1 - e2).abs(), bilinear], dim=-1))
