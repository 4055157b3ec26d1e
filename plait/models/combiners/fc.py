"""The fully connected stack of the combiners, with Ludwig's per-layer settings (``fc_layers``),
initializers, norms (batch, layer, ghost) and residual connections."""

from __future__ import annotations

import math

import torch
from torch import nn

from plait.models.layers import ACTIVATIONS, INITIALIZERS

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


class GhostBatchNorm(nn.Module):
    """Batch normalization whose training statistics come from virtual batches of at most
    ``virtual_batch_size`` rows (Hoffer et al., 2017), as TabNet uses; evaluation uses the running
    statistics. Vectorized: the batch is cut into chunks as ``torch.chunk`` cuts it, the equal-sized
    chunks normalized in one reshape and a shorter last chunk on its own."""

    def __init__(self, width: int, virtual_batch_size: int | None = 128, momentum: float = 0.05,
                 epsilon: float = 1e-3):
        super().__init__()
        self.virtual_batch_size = virtual_batch_size
        self.bn = nn.BatchNorm1d(width, momentum=momentum, eps=epsilon)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        if not self.training or not self.virtual_batch_size or rows <= self.virtual_batch_size:
            return self.bn(x) if rows > 1 or not self.training else x
        chunks = math.ceil(rows / self.virtual_batch_size)
        chunk = math.ceil(rows / chunks)
        full = rows // chunk * chunk
        parts = [self._normalize(x[:full].reshape(full // chunk, chunk, -1)).reshape(full, -1)]
        if rows > full:
            rest = x[full:]
            parts.append(self._normalize(rest.unsqueeze(0))[0] if rows - full > 1 else rest)
        return torch.cat(parts) if len(parts) > 1 else parts[0]

    def _normalize(self, groups: torch.Tensor) -> torch.Tensor:
        """groups [G, rows, width], each group with its own statistics; the running statistics
        take one update per group, as sequential batch norm calls would (to first order)."""
        bn = self.bn
        mean = groups.mean(1, keepdim=True)
        var = groups.var(1, unbiased=False, keepdim=True)
        with torch.no_grad():
            n = groups.shape[1]
            momentum = 1 - (1 - bn.momentum) ** groups.shape[0]
            bn.running_mean.lerp_(mean.mean((0, 1)), momentum)
            bn.running_var.lerp_(var.mean((0, 1)) * n / max(n - 1, 1), momentum)
            bn.num_batches_tracked += groups.shape[0]
        return (groups - mean) / torch.sqrt(var + bn.eps) * bn.weight + bn.bias


def make_norm(kind: str | None, width: int, params: dict | None) -> nn.Module:
    params = dict(params or {})
    if kind == "batch":
        return nn.BatchNorm1d(width, **params)
    if kind == "layer":
        return nn.LayerNorm(width, **params)
    if kind == "ghost":
        return GhostBatchNorm(width, **params)
    return nn.Identity()


class FCLayer(nn.Module):
    """linear, norm, activation, dropout."""

    def __init__(self, input_size: int, spec: dict):
        super().__init__()
        linear = nn.Linear(input_size, spec["output_size"], bias=spec["use_bias"])
        initialize(linear.weight, spec["weights_initializer"])
        if spec["use_bias"]:
            initialize(linear.bias, spec["bias_initializer"])
        self.layers = nn.Sequential(linear, make_norm(spec["norm"], spec["output_size"], spec["norm_params"]),
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
        self.input_norm = make_norm(norm, input_size, norm_params) if specs else nn.Identity()
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
