"""Text encoders: token embeddings, then a body (convolutions, recurrent or transformer layers)
over the sequence, then a reduction to one vector and fully connected layers. Timeseries and
audio inputs take the same encoders, with steps of floats in place of the token embeddings.

Every body takes and returns ``(x [batch, length, width], mask [batch, length])``: the mask
marks real tokens (token id 0 is padding; a float step stored as NaN is padding), and follows
the sequence through strides and pooling, so that reductions leave padding out. With
``reduce_output: null`` the encoder returns the sequence, padding zeroed, and ``output_shape`` is
``(length, width)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
import math

import torch
import torch.nn.functional as F
from torch import nn

from plait.errors import ModelError
from plait.models.embeddings import embedding_table
from plait.models.layers import activation, fc_stack, initialize, masked_mean, norm_layer

PARALLEL_WIDTHS = [2, 3, 4, 5]
"""Filter widths of Ludwig's default side-by-side convolutions."""
STACKED_CNN_LAYERS = [{"filter_size": 7, "pool_size": 3}, {"filter_size": 7, "pool_size": 3},
                      {"filter_size": 3, "pool_size": None}, {"filter_size": 3, "pool_size": None},
                      {"filter_size": 3, "pool_size": None}, {"filter_size": 3, "pool_size": 3}]
"""Ludwig's default stacked_cnn convolutions."""
CNNRNN_LAYERS = [{"pool_size": 3}, {"pool_size": None}]


class Reducer(nn.Module):
    """[batch, length, width] -> [batch, width] (concat: [batch, length * width]), over real tokens."""

    def __init__(self, mode: str, width: int, length: int):
        super().__init__()
        self.mode = "mean" if mode == "avg" else mode
        self.output_size = width * length if mode == "concat" else width
        if mode == "attention":
            self.attention = nn.Sequential(nn.Linear(width, 256), nn.Tanh(), nn.Linear(256, 1, bias=False))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.mode == "sum":
            return (x * mask.unsqueeze(-1)).sum(1)
        if self.mode == "mean":
            return masked_mean(x, mask)
        if self.mode == "max":
            return x.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(1).nan_to_num(0.0, neginf=0.0)
        if self.mode == "last":  # the last real token, wherever padding sits; an empty row: position 0
            positions = torch.arange(x.shape[1], device=x.device).expand_as(mask)
            last = torch.where(mask, positions, -1).amax(1).clamp(min=0)
            return x[torch.arange(x.shape[0], device=x.device), last]
        if self.mode == "concat":
            return x.reshape(x.shape[0], -1)
        scores = self.attention(x).squeeze(-1).masked_fill(~mask, -1e9)  # attention
        return (torch.softmax(scores, dim=1).unsqueeze(-1) * x).sum(1)


class ConvLayer(nn.Module):
    """Convolution, norm, activation, dropout, then optional pooling, on [batch, length, channels]."""

    def __init__(self, in_channels: int, spec: dict):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, spec["num_filters"], spec["filter_size"], stride=spec.get("strides", 1),
                              dilation=spec.get("dilation_rate", 1), bias=spec["use_bias"])
        initialize(self.conv.weight, spec["weights_initializer"])
        if self.conv.bias is not None:
            initialize(self.conv.bias, spec["bias_initializer"])
        self.same = spec.get("padding", "same") == "same"
        self.norm = norm_layer(spec["norm"], spec["num_filters"], spec["norm_params"])
        self.activation, self.dropout = activation(spec["activation"]), nn.Dropout(spec["dropout"])
        self.pool_size = spec["pool_size"]
        self.pool_stride = spec.get("pool_strides") or self.pool_size
        same_pooling = self.pool_size and spec.get("pool_padding", "same") == "same"
        self.pool_padding = (self.pool_size - 1) // 2 if same_pooling else 0
        self.average = spec["pool_function"] in ("average", "avg", "mean")
        self.output_size = spec["num_filters"]

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        span, stride = self.conv.dilation[0] * (self.conv.kernel_size[0] - 1) + 1, self.conv.stride[0]
        pads = _same_padding(x.shape[1], span, stride) if self.same else (0, 0)
        x = self.conv(F.pad(x.transpose(1, 2), pads))
        mask = F.max_pool1d(F.pad(mask.float().unsqueeze(1), pads), span, stride)  # real if it saw a real token
        x = self.dropout(self.activation(self._norm(x)))
        if self.pool_size:
            pool = F.avg_pool1d if self.average else F.max_pool1d
            x = pool(x, self.pool_size, self.pool_stride, self.pool_padding)
            mask = F.max_pool1d(mask, self.pool_size, self.pool_stride, self.pool_padding)
        return x.transpose(1, 2), mask.squeeze(1) > 0

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) if isinstance(self.norm, nn.BatchNorm1d) else self.norm(x.transpose(1, 2)).transpose(1, 2)


def _same_padding(length: int, span: int, stride: int) -> tuple[int, int]:
    """Left and right padding that makes a strided convolution's output ceil(length / stride) long."""
    total = max((math.ceil(length / stride) - 1) * stride + span - length, 0)
    return total // 2, total - total // 2


def conv_specs(config, layers: list | None, count: int | None, default_layers: list[dict], **defaults) -> list[dict]:
    """One dict per convolution: ``layers`` entries (or ``count`` plain ones, or ``default_layers``)
    over the encoder's defaults."""
    base = {"num_filters": config.num_filters, "filter_size": config.filter_size, "pool_size": config.pool_size,
            "pool_function": config.pool_function, "use_bias": getattr(config, "use_bias", True),
            "weights_initializer": config.weights_initializer, "bias_initializer": config.bias_initializer,
            "norm": config.norm, "norm_params": config.norm_params, "activation": config.activation,
            "dropout": config.dropout, **{k: getattr(config, k) for k in
                                          ("strides", "padding", "dilation_rate", "pool_strides", "pool_padding")
                                          if hasattr(config, k)}, **defaults}
    if layers is not None:
        overrides = [layer.model_dump(exclude_none=True) for layer in layers]
    else:
        overrides = [{}] * count if count is not None else default_layers
    return [{**base, **layer} for layer in overrides]


class ConvStack(nn.Module):
    """Convolutions one after another."""

    def __init__(self, in_channels: int, specs: list[dict]):
        super().__init__()
        self.layers = nn.ModuleList()
        for spec in specs:
            self.layers.append(ConvLayer(in_channels, spec))
            in_channels = spec["num_filters"]
        self.output_size = in_channels

    def forward(self, x, mask):
        for layer in self.layers:
            x, mask = layer(x, mask)
        return x, mask


class ParallelConv(nn.Module):
    """Convolutions side by side over the same input, concatenated along the channels."""

    def __init__(self, in_channels: int, specs: list[dict]):
        super().__init__()
        self.layers = nn.ModuleList(ConvLayer(in_channels, spec) for spec in specs)
        self.output_size = sum(layer.output_size for layer in self.layers)

    def forward(self, x, mask):
        outputs = [layer(x, mask) for layer in self.layers]
        return torch.cat([out for out, _ in outputs], dim=-1), outputs[0][1]


class StackedParallelConv(nn.Module):
    def __init__(self, in_channels: int, spec_layers: list[list[dict]]):
        super().__init__()
        self.layers = nn.ModuleList()
        for specs in spec_layers:
            self.layers.append(ParallelConv(in_channels, specs))
            in_channels = self.layers[-1].output_size
        self.output_size = in_channels

    def forward(self, x, mask):
        for layer in self.layers:
            x, mask = layer(x, mask)
        return x, mask


class Recurrent(nn.Module):
    """Stacked rnn, lstm or gru layers, initialized as the config says."""

    def __init__(self, input_size: int, config, num_layers: int):
        super().__init__()
        cell = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}[config.cell_type]
        extra = {"nonlinearity": config.activation} if config.cell_type == "rnn" else {}
        self.rnn = cell(input_size, config.state_size, num_layers=num_layers, bias=config.use_bias, batch_first=True,
                        bidirectional=config.bidirectional, dropout=config.recurrent_dropout if num_layers > 1 else 0.0,
                        **extra)
        for name, weights in self.rnn.named_parameters():
            initialize(weights, config.weights_initializer if name.startswith("weight_ih") else
                       config.recurrent_initializer if name.startswith("weight_hh") else config.bias_initializer)
            if config.cell_type == "lstm" and config.unit_forget_bias and name.startswith("bias_ih"):
                with torch.no_grad():  # torch orders an lstm's gates input, forget, cell, output
                    weights[config.state_size:2 * config.state_size] = 1.0
        self.output_size = config.state_size * (2 if config.bidirectional else 1)

    def forward(self, x, mask):
        return self.rnn(x)[0], mask


class Transformer(nn.Module):
    """Learned positions, a projection to hidden_size where it differs, then transformer layers."""

    def __init__(self, input_size: int, length: int, config):
        super().__init__()
        width = config.hidden_size or input_size
        self.position = nn.Parameter(torch.randn(length, input_size) / math.sqrt(input_size))
        self.project = nn.Linear(input_size, width) if width != input_size else nn.Identity()
        layer = nn.TransformerEncoderLayer(width, config.num_heads, config.transformer_output_size, config.dropout,
                                           batch_first=True, norm_first=True)
        self.layers = nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False)
        self.output_size = width

    def forward(self, x, mask):
        x = self.project(x + self.position[: x.shape[1]])
        padding = ~mask.clone()
        padding[:, 0] = False  # a row of only padding would attend to nothing; let it attend to position 0
        return self.layers(x, src_key_padding_mask=padding), mask


class Identity(nn.Module):
    def forward(self, x, mask):
        return x, mask


class FloatSteps(nn.Module):
    """The first stage of a timeseries or audio encoder, in place of token embeddings: the steps
    of floats as [batch, steps, channels] (projected to ``width`` when given), and the mask of real
    steps. Padded steps come stored as NaN (plait.features.timeseries); they are read as
    ``padding_value``, as Ludwig pads, and masked out."""

    def __init__(self, channels: int, padding_value: float, width: int | None = None):
        super().__init__()
        self.channels, self.padding_value = channels, padding_value
        self.project = nn.Linear(channels, width) if width else None
        self.embedding_dim = width or channels  # the width the body reads, as a token table's

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.float().reshape(x.shape[0], -1, self.channels)
        padding = torch.isnan(x).any(-1)
        x = x.masked_fill(padding.unsqueeze(-1), self.padding_value)
        return (self.project(x) if self.project is not None else x), ~padding

    def padding_row(self, steps: int) -> torch.Tensor:
        return torch.full((1, steps, self.channels), float("nan"))


class TextEncoder(nn.Module):
    """First stage (token embeddings, or float steps), body, then (unless reduce_output is null)
    reduction and fully connected layers. The first stage is ``embedding`` either way, so that
    the weights of text models saved before float steps existed keep their names."""

    def __init__(self, first_stage: nn.Embedding | FloatSteps, length: int, config, body_builder):
        super().__init__()
        self.embedding = first_stage
        self.embedding_dropout = nn.Dropout(config.dropout)
        self.body = body_builder(self.embedding.embedding_dim)
        self.reducer = self.fc = None
        body_length, width = self._body_shape(length)
        if config.reduce_output is None:
            self.output_shape = (body_length, width)
        else:
            self.reducer = Reducer(config.reduce_output, width, body_length)
            self.fc = fc_stack(self.reducer.output_size, config)
            self.output_shape = (self.fc.output_size,)
        self.output_size = self.output_shape[-1]

    @property
    def length_free(self) -> bool:
        """Whether a row's encoding is the same whatever padding follows its tokens, so that a batch
        may be padded to its own longest row rather than to the sequence length: true for token
        embeddings whose body reads only the real tokens (embed, transformer, a one-way rnn) and
        whose reduction leaves padding out."""
        if isinstance(self.embedding, FloatSteps) or self.reducer is None or self.reducer.mode == "concat":
            return False
        body = self.body
        if isinstance(body, Recurrent):
            return not body.rnn.bidirectional
        return isinstance(body, (Identity, Transformer))

    def _body_shape(self, length: int) -> tuple[int, int]:
        """The body's output length and width, from a dry run on one all-padding row."""
        floats = isinstance(self.embedding, FloatSteps)
        what, unit = ("sequence", "steps") if floats else ("text", "tokens")
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                out, _ = self.body(*self._first_stage(self.embedding.padding_row(length) if floats else
                                                      torch.zeros(1, length, dtype=torch.long)))
        except RuntimeError as err:
            longer = "" if floats else ", or a longer preprocessing.max_sequence_length"
            raise ModelError(f"{what} encoder: its layers do not fit sequences of {length} {unit} ({err}); use "
                             f"smaller filter_size or pool_size, padding: same{longer}")
        finally:
            self.train(was_training)
        if out.shape[1] < 1:
            raise ModelError(f"{what} encoder: its strides and pooling shrink sequences of {length} {unit} to "
                             f"nothing; use smaller strides or pool_size")
        return out.shape[1], out.shape[2]

    def _first_stage(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[batch, length, width] and the mask of real steps (token id 0 is padding)."""
        if isinstance(self.embedding, FloatSteps):
            return self.embedding(inputs)
        tokens = inputs.long()
        return self.embedding_dropout(self.embedding(tokens)), tokens != 0

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x, mask = self.body(*self._first_stage(inputs))
        if self.reducer is None:
            return x * mask.unsqueeze(-1)
        return self.fc(self.reducer(x, mask))


def _token_embedding(config, metadata: dict) -> nn.Embedding:
    return embedding_table(list(metadata["vocabulary"]), config.embedding_size, config.representation,
                           config.embeddings_trainable and config.representation == "dense",
                           config.pretrained_embeddings, config.weights_initializer)


def _parallel_cnn(c, length: int) -> Callable[[int], nn.Module]:
    widths = c.filter_sizes or PARALLEL_WIDTHS
    specs = conv_specs(c, c.conv_layers, c.num_conv_layers, [{"filter_size": k} for k in widths])
    return lambda width: ParallelConv(width, specs)


def _stacked_cnn(c, length: int) -> Callable[[int], nn.Module]:
    specs = conv_specs(c, c.conv_layers, c.num_conv_layers, STACKED_CNN_LAYERS)
    return lambda width: ConvStack(width, specs)


def _stacked_parallel_cnn(c, length: int) -> Callable[[int], nn.Module]:
    parallel = [{"filter_size": k} for k in PARALLEL_WIDTHS]
    if c.stacked_layers is not None:
        layers = [conv_specs(c, layer, None, []) for layer in c.stacked_layers]
    else:
        layers = [conv_specs(c, None, None, parallel) for _ in range(c.num_stacked_layers or 3)]
    return lambda width: StackedParallelConv(width, layers)


def _rnn(c, length: int) -> Callable[[int], nn.Module]:
    return lambda width: Recurrent(width, c, c.num_layers)


def _cnnrnn(c, length: int) -> Callable[[int], nn.Module]:
    specs = conv_specs(c, c.conv_layers, c.num_conv_layers, CNNRNN_LAYERS, activation=c.conv_activation,
                       dropout=c.conv_dropout)

    def body(width: int) -> nn.Module:
        convolutions = ConvStack(width, specs)
        return Chain(convolutions, Recurrent(convolutions.output_size, c, c.num_rec_layers))

    return body


def _transformer(c, length: int) -> Callable[[int], nn.Module]:
    return lambda width: Transformer(width, length, c)


class Chain(nn.Module):
    """Bodies one after another."""

    def __init__(self, *bodies: nn.Module):
        super().__init__()
        self.bodies = nn.ModuleList(bodies)

    def forward(self, x, mask):
        for body in self.bodies:
            x, mask = body(x, mask)
        return x, mask


BODIES = {
    "embed": lambda c, length: lambda width: Identity(),
    "parallel_cnn": _parallel_cnn,
    "stacked_cnn": _stacked_cnn,
    "stacked_parallel_cnn": _stacked_parallel_cnn,
    "rnn": _rnn,
    "cnnrnn": _cnnrnn,
    "transformer": _transformer,
}
"""Sequence encoder type -> (config, sequence length) -> body builder, given the first stage's
width."""


def token_encoder(name: str, c, m: dict) -> TextEncoder:
    """The ``name`` encoder over token ids (text, sequence)."""
    return TextEncoder(_token_embedding(c, m), m["sequence_length"], c, BODIES[name](c, m["sequence_length"]))


def float_encoder(name: str, c, steps: int, channels: int, padding_value: float) -> TextEncoder:
    """The ``name`` encoder over steps of floats (timeseries, audio). The transformer projects each
    step to its width (hidden_size, unset: embedding_size), as Ludwig's does for these types."""
    width = (c.hidden_size or c.embedding_size) if name == "transformer" else None
    return TextEncoder(FloatSteps(channels, padding_value, width), steps, c, BODIES[name](c, steps))


TEXT_BUILDERS = {name: functools.partial(token_encoder, name) for name in BODIES}
"""Text encoder type -> builder(encoder config, feature metadata)."""
