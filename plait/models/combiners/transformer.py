"""The transformer combiners: each feature's encoding is one token of a transformer encoder; the
FT-Transformer adds a [CLS] token whose output alone goes on."""

from __future__ import annotations

import torch
from torch import nn

from plait.models.combiners.base import Combined, flat_inputs, flat_size
from plait.models.layers import fc_stack, initialize
from plait.models.combiners.reduce import Reduce


def projections(sizes: list[int], width: int, config) -> nn.ModuleList:
    """One linear projection per input, to the token width."""
    layers = nn.ModuleList(nn.Linear(size, width, bias=config.use_bias) for size in sizes)
    for layer in layers:
        initialize(layer.weight, config.weights_initializer)
        if config.use_bias:
            initialize(layer.bias, config.bias_initializer)
    return layers


def transformer_stack(config) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(config.hidden_size, config.num_heads, config.transformer_output_size,
                                       config.dropout, batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False)


class TokensHead(nn.Module):
    """The reduction of the tokens and the fully connected layers after it (none when the
    reduction keeps the tokens)."""

    def __init__(self, tokens: int, extra_size: int, config):
        super().__init__()
        self.reduce = Reduce(config.reduce_output, tokens, config.hidden_size)
        reduced = self.reduce.output_shape
        self.fc = (fc_stack(reduced[-1] + extra_size, config, input_norm=True, residual=config.fc_residual)
                   if len(reduced) == 1 or extra_size else None)
        self.output_shape = (*reduced[:-1], self.fc.output_size) if self.fc else reduced

    def forward(self, tokens: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.reduce(tokens)
        if extra is not None:  # vectors that skipped the transformer join each position
            hidden = torch.cat([hidden, extra.unsqueeze(1).expand(-1, hidden.shape[1], -1) if hidden.dim() == 3
                                else extra], dim=-1)
        return self.fc(hidden) if self.fc is not None else hidden


class TransformerCombiner(nn.Module):
    """Each feature's encoding is projected to one token; a transformer lets features interact."""

    def __init__(self, input_shapes: dict[str, tuple], config, feature_types: dict[str, str] | None = None):
        super().__init__()
        self.projections = projections([flat_size(s) for s in input_shapes.values()], config.hidden_size, config)
        self.feature_embedding = nn.Parameter(torch.zeros(len(input_shapes), config.hidden_size))
        self.transformer = transformer_stack(config)
        self.head = TokensHead(len(input_shapes), 0, config)
        self.output_shape = self.head.output_shape
        self.output_size = self.output_shape[-1]

    def forward(self, encoded: dict[str, torch.Tensor]) -> Combined:
        tokens = torch.stack([p(x) for p, x in zip(self.projections, flat_inputs(encoded))], dim=1)
        return Combined(self.head(self.transformer(tokens + self.feature_embedding)))


class FTTransformerCombiner(nn.Module):
    """FT-Transformer: the feature tokens behind a learned [CLS] token; the transformer's output at
    the [CLS] position is the row's representation (Gorishniy et al., 2021). Each feature has its
    own projection, so its identity needs no extra embedding."""

    def __init__(self, input_shapes: dict[str, tuple], config, feature_types: dict[str, str] | None = None):
        super().__init__()
        self.projections = projections([flat_size(s) for s in input_shapes.values()], config.hidden_size, config)
        self.cls_token = nn.Parameter(torch.randn(1, 1, config.hidden_size))
        self.transformer = transformer_stack(config)
        self.fc = fc_stack(config.hidden_size, config, input_norm=True, residual=config.fc_residual)
        self.output_size = self.fc.output_size
        self.output_shape = (self.output_size,)

    def forward(self, encoded: dict[str, torch.Tensor]) -> Combined:
        tokens = torch.stack([p(x) for p, x in zip(self.projections, flat_inputs(encoded))], dim=1)
        tokens = torch.cat([self.cls_token.expand(tokens.shape[0], -1, -1), tokens], dim=1)
        return Combined(self.fc(self.transformer(tokens)[:, 0]))
