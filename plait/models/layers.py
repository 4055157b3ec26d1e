"""Small building blocks shared by encoders, combiners and decoders."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from plait.config.fully_connected import VECTOR_INITIALIZERS, FCLayer, FCStackSection
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
    """Initialize ``tensor`` in place by a torch.nn.init name or {type: name, ...its arguments}, as
    Ludwig does; None: leave torch's initialization. A bias (a vector) takes only the initializers
    defined for a vector: the config refuses the others, as torch (and Ludwig 0.17) fail on them."""
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
    if tensor.dim() < 2 and name not in VECTOR_INITIALIZERS:
        raise ConfigError(f"the initializer {name} needs a matrix, not a bias (a vector of {tensor.numel()}): use one "
                          f"of {', '.join(sorted(VECTOR_INITIALIZERS))}")
    target = tensor.view(tensor.shape[0], -1) if name in ("eye", "identity") and tensor.dim() > 2 else tensor
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


class DenseLayer(nn.Module):
    """One fully connected layer (Ludwig's FCLayer): linear map, norm, activation, dropout. The
    four modules are always there (the identity where a setting is off), so that a layer's tensors
    have the same names whatever it sets."""

    def __init__(self, input_size: int, layer: FCLayer):
        super().__init__()
        linear = nn.Linear(input_size, layer.output_size, bias=layer.use_bias)
        initialize(linear.weight, layer.weights_initializer)
        if layer.use_bias:
            initialize(linear.bias, layer.bias_initializer)
        self.layers = nn.Sequential(linear, norm_layer(layer.norm, layer.output_size, layer.norm_params),
                                    activation(layer.activation), nn.Dropout(layer.dropout))
        self.output_size = layer.output_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class FCStack(nn.Module):
    """Fully connected layers (Ludwig's FCStack), each set by an FCLayer with every setting given.
    ``input_norm`` and ``input_dropout`` (the combiners') apply to the stack's input first; with
    ``residual``, a layer whose width equals its input's adds its input. A sequence's positions
    are rows. With no layers, the identity."""

    def __init__(self, input_size: int, layers: Sequence[FCLayer], input_norm: str | None = None,
                 input_norm_params: dict | None = None, input_dropout: float = 0.0, residual: bool = False):
        super().__init__()
        self.input_norm = norm_layer(input_norm, input_size, input_norm_params) if layers else nn.Identity()
        self.input_dropout = nn.Dropout(input_dropout) if layers and input_dropout else nn.Identity()
        sizes = [input_size] + [layer.output_size for layer in layers]
        self.stack = nn.ModuleList(DenseLayer(size, layer) for size, layer in zip(sizes, layers))
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


def fc_stack(input_size: int, section, input_norm: bool = False, residual: bool = False) -> FCStack:
    """The fully connected stack of a config section (an FCStackSection; any other has none).
    ``input_norm``: the section's norm and dropout also apply to the stack's input (combiners)."""
    if not isinstance(section, FCStackSection):
        return FCStack(input_size, [])
    layers = section.fc_layer_settings()
    if not input_norm:
        return FCStack(input_size, layers, residual=residual)
    names = section.FC_NAMES
    return FCStack(input_size, layers, getattr(section, names["norm"]), getattr(section, names["norm_params"]),
                   getattr(section, names["dropout"]), residual)
