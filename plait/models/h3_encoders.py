"""H3 encoders: [batch, 19] integers (mode, edge, resolution, base cell, 15 digits) to
[batch, output_size], or with ``reduce_output: null`` to [batch, 19, width] (Ludwig's H3Embed,
H3WeightedSum and H3RNN)."""

from __future__ import annotations

import torch
from torch import nn

from plait.models.embeddings import embedding_table
from plait.models.layers import fc_stack, initialize
from plait.models.text_encoders import Recurrent, Reducer

PARTS = 19
DIGITS = 15
TABLE_SIZES = (3, 7, 16, 122)
"""Values of mode, edge, resolution and base cell, each with its own table (Ludwig's sizes)."""
DIGIT_VALUES = 8


class H3Components(nn.Module):
    """The 19 parts as 19 vectors, and the mask of those that count: the digits past the cell's
    resolution are zeroed and masked out."""

    def __init__(self, config):
        super().__init__()
        size, init = config.embedding_size, config.weights_initializer
        self.tables = nn.ModuleList(embedding_table([str(v) for v in range(n)], size, initializer=init)
                                    for n in TABLE_SIZES)
        # One table for all 15 digits, as in Ludwig: a digit's position is not in its vector.
        self.digits = embedding_table([str(v) for v in range(DIGIT_VALUES)], size, initializer=init)
        self.dropout = nn.Dropout(config.dropout)
        self.width = size

    def forward(self, parts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        parts = parts.long()
        header = torch.stack([table(parts[:, i]) for i, table in enumerate(self.tables)], dim=1)
        resolution = parts[:, 2:3]
        mask = torch.cat([torch.ones_like(parts[:, :4], dtype=torch.bool),
                          torch.arange(1, DIGITS + 1, device=parts.device) <= resolution], dim=1)
        x = torch.cat([header, self.digits(parts[:, 4:])], dim=1) * mask.unsqueeze(-1)
        return self.dropout(x), mask


class H3Embed(nn.Module):
    """The 19 vectors reduced to one (sum by default), then fully connected layers."""

    def __init__(self, config):
        super().__init__()
        self.components = H3Components(config)
        self.reducer = self.fc = None
        if config.reduce_output is None:
            self.output_shape = (PARTS, self.components.width)
        else:
            self.reducer = Reducer(config.reduce_output, self.components.width, PARTS)
            self.fc = fc_stack(self.reducer.output_size, config)
            self.output_shape = (self.fc.output_size,)
        self.output_size = self.output_shape[-1]

    def forward(self, parts: torch.Tensor) -> torch.Tensor:
        x, mask = self.components(parts)
        return x if self.reducer is None else self.fc(self.reducer(x, mask))


class H3WeightedSum(nn.Module):
    """The 19 vectors summed with one learned weight each (softmax-normalized if asked), then
    fully connected layers."""

    def __init__(self, config):
        super().__init__()
        self.components = H3Components(config)
        self.weights = nn.Parameter(torch.empty(PARTS, 1))
        initialize(self.weights, config.weights_initializer)
        self.should_softmax = config.should_softmax
        self.fc = fc_stack(self.components.width, config)
        self.output_size = self.fc.output_size
        self.output_shape = (self.output_size,)

    def forward(self, parts: torch.Tensor) -> torch.Tensor:
        x, _ = self.components(parts)  # masked parts are already zero
        weights = torch.softmax(self.weights, dim=0) if self.should_softmax else self.weights
        return self.fc((x * weights).sum(1))


class H3RNN(nn.Module):
    """A recurrent network over the 19 vectors, reduced (last real step by default)."""

    def __init__(self, config):
        super().__init__()
        self.components = H3Components(config)
        self.recurrent = Recurrent(self.components.width, config, config.num_layers)
        self.reducer = None
        if config.reduce_output is None:
            self.output_shape = (PARTS, self.recurrent.output_size)
        else:
            self.reducer = Reducer(config.reduce_output, self.recurrent.output_size, PARTS)
            self.output_shape = (self.reducer.output_size,)
        self.output_size = self.output_shape[-1]

    def forward(self, parts: torch.Tensor) -> torch.Tensor:
        x, mask = self.recurrent(*self.components(parts))
        return x * mask.unsqueeze(-1) if self.reducer is None else self.reducer(x, mask)
