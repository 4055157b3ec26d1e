"""The transformer combiner: each feature's encoding is one token of a transformer encoder."""

from __future__ import annotations

import torch
from torch import nn

from plait.models.layers import FCStack


class TransformerCombiner(nn.Module):
    """Each feature's encoding is projected to one token; a transformer lets features interact."""

    def __init__(self, input_sizes: list[int], config):
        super().__init__()
        self.projections = nn.ModuleList(nn.Linear(size, config.hidden_size) for size in input_sizes)
        self.feature_embedding = nn.Parameter(torch.zeros(len(input_sizes), config.hidden_size))
        layer = nn.TransformerEncoderLayer(config.hidden_size, config.num_heads, config.transformer_output_size,
                                           config.dropout, batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False)
        self.reduce = config.reduce_output
        pooled = config.hidden_size * (len(input_sizes) if self.reduce == "concat" else 1)
        self.fc = FCStack(pooled, config.num_fc_layers, config.output_size, dropout=config.dropout)
        self.output_size = self.fc.output_size

    def forward(self, encoded: list[torch.Tensor]) -> torch.Tensor:
        tokens = torch.stack([p(x) for p, x in zip(self.projections, encoded)], dim=1) + self.feature_embedding
        mixed = self.transformer(tokens)
        if self.reduce == "concat":
            pooled = mixed.flatten(1)
        elif self.reduce == "sum":
            pooled = mixed.sum(1)
        else:
            pooled = mixed.mean(1)
        return self.fc(pooled)
