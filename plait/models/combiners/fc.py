"""The fully connected stack of the combiners, with Ludwig's per-layer settings (``fc_layers``),
initializers, norms (batch, layer, ghost) and residual connections."""

from __future__ import annotations

import math

import torch
from torch import nn

from plait.models.layers import ACTIVATIONS, INITIALIZERS, norm_layer


def initialize(tensor: torch.Tensor, initializer) -> None:
    """Fill ``tensor`` with a named initializer, or ``{type: name, **arguments}``. Unlike
    ``plait.models.layers.initialize``, a matrix-only initializer gives a bias zeros (eye,
    orthogonal, sparse) or a small uniform (xavier, kaiming), as the combiners have always done."""
    arguments = dict(initializer) if isinstance(initializer, dict) else {"type": initializer}
    name = arguments.pop("type")
    if name in ("eye", "identity", "orthogonal", "sparse") and tensor.dim() < 2:
        nn.init.zeros_(tensor)  # matrix-only initializers have no meaning for a bias: start it at zero
        return
    if name in ("xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal") and tensor.dim() < 2:
        nn.init.uniform_(tensor, -1 / math.sqrt(tensor.numel()), 1 / math.sqrt(tensor.numel()))
        return
    with torch.no_grad():
        INITIALIZERS[name](tensor, **arguments)


class FCLayer(nn.Module):
    """linear, norm, activation, dropout."""

    def __init__(self, input_size: int, spec: dict):
        super().__init__()
        linear = nn.Linear(input_size, spec["output_size"], bias=spec["use_bias"])
        initialize(linear.weight, spec["weights_initializer"])
        if spec["use_bias"]:
            initialize(linear.bias, spec["bias_initializer"])
        self.layers = nn.Sequential(linear, norm_layer(spec["norm"], spec["output_size"], spec["norm_params"]),
                                    ACTIVATIONS[spec["activation"]](), nn.Dropout(spec["dropout"]))
        self.output_size = spec["output_size"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class FCStack(nn.Module):
    """As Ludwig's: the input normalized and dropped out with the stack's own norm and dropout,
    then each layer; with ``residual``, a layer whose width equals its input's adds its input.
    Inputs of rank 3 are normalized per position. With no layers and no norm, the identity."""

    def __init__(self, input_size: int, specs: list[dict], norm: str | None, norm_params: dict | None,
                 dropout: float, residual: bool = False):
        super().__init__()
        self.input_norm = norm_layer(norm, input_size, norm_params) if specs else nn.Identity()
        self.input_dropout = nn.Dropout(dropout) if specs and dropout else nn.Identity()
        sizes = [input_size] + [s["output_size"] for s in specs]
        self.stack = nn.ModuleList(FCLayer(size, spec) for size, spec in zip(sizes, specs))
        self.residual = residual
        self.output_size = sizes[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])  # batch norm wants [rows, width]; a sequence's positions are rows
        x = self.input_dropout(self.input_norm(x))
        for layer in self.stack:
            out = layer(x)
            x = x + out if self.residual and out.shape[-1] == x.shape[-1] else out
        return x.reshape(*shape[:-1], x.shape[-1])


def layer_specs(config, activation: str, dropout: float) -> list[dict]:
    """Each layer's settings: ``fc_layers`` entries, their missing keys from the section, or
    ``num_fc_layers`` layers of the section's settings."""
    defaults = {"output_size": config.output_size, "use_bias": config.use_bias,
                "weights_initializer": config.weights_initializer, "bias_initializer": config.bias_initializer,
                "norm": config.norm, "norm_params": config.norm_params, "activation": activation, "dropout": dropout}
    if config.fc_layers is None:
        return [dict(defaults) for _ in range(config.num_fc_layers)]
    return [{key: value if (value := getattr(layer, key)) is not None else default for key, default in defaults.items()}
            for layer in config.fc_layers]


def combiner_fc_stack(input_size: int, config, *, activation: str | None = None, dropout: float | None = None,
                      residual: bool = False) -> FCStack:
    """The FC stack of a combiner section (activation and dropout under their section's names)."""
    activation = config.activation if activation is None else activation
    dropout = config.dropout if dropout is None else dropout
    return FCStack(input_size, layer_specs(config, activation, dropout), config.norm, config.norm_params, dropout,
                   residual)
