"""The concat combiner: every encoder output side by side, then fully connected layers."""

from __future__ import annotations

import torch
from torch import nn

from plait.models.layers import fc_stack


class ConcatCombiner(nn.Module):
    def __init__(self, input_sizes: list[int], config):
        super().__init__()
        self.fc = fc_stack(sum(input_sizes), config)
        self.output_size = self.fc.output_size

    def forward(self, encoded: list[torch.Tensor]) -> torch.Tensor:
        return self.fc(torch.cat(encoded, dim=-1))
