"""Small building blocks shared by encoders, combiners and decoders."""

from __future__ import annotations

import torch
from torch import nn

ACTIVATIONS = {
    "relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "silu": nn.SiLU,
    "leaky_relu": nn.LeakyReLU,
}


class FCStack(nn.Module):
    """``num_layers`` x (linear, norm, activation, dropout); with zero layers, the identity."""

    def __init__(self, input_size: int, num_layers: int, output_size: int, activation: str = "relu",
                 dropout: float = 0.0, norm: str | None = None):
        super().__init__()
        layers: list[nn.Module] = []
        size = input_size
        for _ in range(num_layers):
            layers.append(nn.Linear(size, output_size))
            if norm == "batch":
                layers.append(nn.BatchNorm1d(output_size))
            elif norm == "layer":
                layers.append(nn.LayerNorm(output_size))
            layers.append(ACTIVATIONS[activation]())
            if dropout:
                layers.append(nn.Dropout(dropout))
            size = output_size
        self.layers = nn.Sequential(*layers)
        self.output_size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def fc_stack(input_size: int, config) -> FCStack:
    return FCStack(input_size, config.num_fc_layers, config.output_size, config.activation, config.dropout, config.norm)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x [N, L, D] over positions where mask [N, L] is true (zeros for empty rows)."""
    weights = mask.unsqueeze(-1).to(x.dtype)
    return (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)
