"""Small building blocks shared by encoders, combiners and decoders."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from plait.errors import ConfigError

ACTIVATIONS = {
    "relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "silu": nn.SiLU,
    "leaky_relu": nn.LeakyReLU,
    # Ludwig's spellings and the rest of its activations
    "leakyRelu": nn.LeakyReLU, "swish": nn.SiLU, "elu": nn.ELU, "selu": nn.SELU, "celu": nn.CELU,
    "logSigmoid": nn.LogSigmoid, "softplus": nn.Softplus, "mish": nn.Mish, "prelu": nn.PReLU, "relu6": nn.ReLU6,
    "hardswish": nn.Hardswish, "hardsigmoid": nn.Hardsigmoid, "softmax": lambda: nn.Softmax(dim=-1),
}

def linear(input_size: int, output_size: int, use_bias: bool = True, weights_initializer: str | dict | None = None,
           bias_initializer: str | dict | None = None) -> nn.Linear:
    """A linear map with its bias and initializers chosen."""
    layer = nn.Linear(input_size, output_size, bias=use_bias)
    initialize(layer.weight, weights_initializer)
    if use_bias:
        initialize(layer.bias, bias_initializer)
    return layer


@dataclass(frozen=True)
class DenseLayer:
    """One fully connected layer: linear map, then norm, activation and dropout."""

    output_size: int
    activation: str | None = "relu"
    dropout: float = 0.0
    norm: str | None = None
    norm_params: dict[str, Any] = field(default_factory=dict)
    use_bias: bool = True
    weights_initializer: str | dict | None = None
    bias_initializer: str | dict | None = None


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

    @classmethod
    def from_layers(cls, input_size: int, layers: list[DenseLayer]) -> "FCStack":
        """A stack of layers each set on its own (the same module layout as ``__init__``'s, so that
        weights saved from either load into the other)."""
        stack = cls(input_size, 0, 1)
        modules: list[nn.Module] = []
        size = input_size
        for layer in layers:
            modules.append(linear(size, layer.output_size, layer.use_bias, layer.weights_initializer, layer.bias_initializer))
            if layer.norm == "batch":
                modules.append(nn.BatchNorm1d(layer.output_size, **layer.norm_params))
            elif layer.norm == "layer":
                modules.append(nn.LayerNorm(layer.output_size, **layer.norm_params))
            if layer.activation is not None:
                modules.append(ACTIVATIONS[layer.activation]())
            if layer.dropout:
                modules.append(nn.Dropout(layer.dropout))
            size = layer.output_size
        stack.layers = nn.Sequential(*modules)
        stack.output_size = size
        return stack

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class SequenceReducer(nn.Module):
    """Reduces [rows, steps, width] to one vector per row by Ludwig's ``reduce_*`` modes; a
    [rows, width] input passes unchanged, whatever the mode."""

    MODES = ("sum", "mean", "avg", "max", "concat", "last", "attention_pooling")

    def __init__(self, mode: str | None, steps: int | None, width: int):
        super().__init__()
        self.mode, self.steps = mode, steps
        self.output_size = width * steps if mode == "concat" and steps else width
        if mode == "attention_pooling" and steps:
            # A learned query scores each step (scaled dot product); the steps' softmax weighs them.
            self.query = nn.Parameter(torch.randn(width))

    @classmethod
    def build(cls, mode: str | None, input_shape: int | tuple[int, ...], path: str) -> "SequenceReducer":
        """The reducer of an input of ``input_shape`` per row, (width,) or (steps, width)."""
        shape = (input_shape,) if isinstance(input_shape, int) else tuple(input_shape)
        if len(shape) == 1:
            return cls(mode, None, shape[0])
        if mode not in cls.MODES:
            raise ConfigError(f"{path}: got {mode!r}, but the combiner gives a sequence {list(shape)} per row, "
                              f"which must be reduced to one vector: use one of {', '.join(cls.MODES)}")
        return cls(mode, shape[0], shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 3:
            return x
        if self.mode == "sum":
            return x.sum(1)
        if self.mode in ("mean", "avg"):
            return x.mean(1)
        if self.mode == "max":
            return x.amax(1)
        if self.mode == "concat":
            return x.flatten(1)
        if self.mode == "last":
            # As Ludwig: the step at the count of non-zero steps, so trailing padding is skipped.
            last = ((x != 0).any(-1).sum(1) - 1).clamp(min=0)
            return x[torch.arange(x.shape[0], device=x.device), last]
        weights = torch.softmax(x @ self.query * x.shape[-1] ** -0.5, dim=1)
        return (weights.unsqueeze(-1) * x).sum(1)


def fc_stack(input_size: int, config) -> FCStack:
    return FCStack(input_size, config.num_fc_layers, config.output_size, config.activation, config.dropout, config.norm)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x [N, L, D] over positions where mask [N, L] is true (zeros for empty rows)."""
    weights = mask.unsqueeze(-1).to(x.dtype)
    return (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def activation(name: str | None) -> nn.Module:
    """The activation module called ``name``; None: the identity."""
    return nn.Identity() if name is None else ACTIVATIONS[name]()


INITIALIZERS = {
    "uniform": nn.init.uniform_, "normal": nn.init.normal_, "constant": nn.init.constant_, "ones": nn.init.ones_,
    "zeros": nn.init.zeros_, "eye": nn.init.eye_, "dirac": nn.init.dirac_, "xavier_uniform": nn.init.xavier_uniform_,
    "xavier_normal": nn.init.xavier_normal_, "kaiming_uniform": nn.init.kaiming_uniform_,
    "kaiming_normal": nn.init.kaiming_normal_, "orthogonal": nn.init.orthogonal_, "sparse": nn.init.sparse_,
    "identity": nn.init.eye_,
}
"""Initializers by Ludwig's names (torch.nn.init's functions)."""


@torch.no_grad()
def initialize(tensor: torch.Tensor, spec: str | dict | None) -> None:
    """Initialize ``tensor`` in place by a torch.nn.init name or {type: name, ...its arguments}.
    Initializers defined only for matrices (xavier, kaiming, orthogonal, eye) treat a vector as
    a one-row matrix, so that the same setting serves weights and biases."""
    if spec is None:
        return
    if isinstance(spec, dict):
        name, kwargs = spec["type"], {k: v for k, v in spec.items() if k != "type"}
    else:
        name, kwargs = spec, {}
    if "stddev" in kwargs:  # Ludwig's documentation spells normal's std so
        kwargs["std"] = kwargs.pop("stddev")
    if name == "constant" and not kwargs:
        kwargs = {"val": 0.0}
    if name == "sparse" and not kwargs:
        kwargs = {"sparsity": 0.1}
    target = tensor.view(1, -1) if tensor.dim() == 1 and name not in ("uniform", "normal", "constant", "ones",
                                                                      "zeros") else tensor
    if name in ("eye", "identity") and target.dim() > 2:
        target = target.view(target.shape[0], -1)
    INITIALIZERS[name](target, **kwargs)


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


def norm_layer(norm: str | None, size: int, params: dict | None) -> nn.Module:
    """Batch, layer or ghost batch normalization over the last dimension of [N, size] (params: the
    module's keyword arguments); None: the identity."""
    if norm == "batch":
        return nn.BatchNorm1d(size, **(params or {}))
    if norm == "layer":
        return nn.LayerNorm(size, **(params or {}))
    if norm == "ghost":
        return GhostBatchNorm(size, **(params or {}))
    return nn.Identity()


FC_DEFAULT_LAYERS = [{"output_size": 512}, {"output_size": 256}]
"""Ludwig's fully connected layers after a sequence encoder that sets neither fc_layers nor num_fc_layers."""


def fc_layer_specs(config, num_layers: int | None, activation_name: str | None, dropout: float) -> list[dict]:
    """One dict per fully connected layer: ``config.fc_layers`` entries over the encoder's defaults
    (output_size, use_bias, initializers, norm) and the given activation and dropout."""
    if getattr(config, "fc_layers", None) is None and num_layers == 0:
        return []
    defaults = {"output_size": config.output_size, "use_bias": getattr(config, "use_bias", True),
                "weights_initializer": getattr(config, "weights_initializer", None),
                "bias_initializer": getattr(config, "bias_initializer", None), "norm": config.norm,
                "norm_params": config.norm_params, "activation": activation_name, "dropout": dropout}
    if config.fc_layers is not None:
        overrides = [layer.model_dump(exclude_none=True) for layer in config.fc_layers]
    elif num_layers is None:
        overrides = FC_DEFAULT_LAYERS
    else:
        overrides = [{}] * num_layers
    return [{**defaults, **layer} for layer in overrides]


class FCLayers(nn.Module):
    """Fully connected layers each set by a dict of fc_layer_specs; with none, the identity."""

    def __init__(self, input_size: int, specs: list[dict]):
        super().__init__()
        layers: list[nn.Module] = []
        size = input_size
        for spec in specs:
            linear = nn.Linear(size, spec["output_size"], bias=spec["use_bias"])
            initialize(linear.weight, spec["weights_initializer"])
            if linear.bias is not None:
                initialize(linear.bias, spec["bias_initializer"])
            layers += [linear, norm_layer(spec["norm"], spec["output_size"], spec["norm_params"]),
                       activation(spec["activation"]), nn.Dropout(spec["dropout"])]
            size = spec["output_size"]
        self.layers = nn.Sequential(*layers)
        self.output_size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)
