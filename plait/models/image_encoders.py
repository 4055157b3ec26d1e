"""Image encoder bodies: each reads float32 [batch, channels, height, width] (scaled, augmented
and standardized by the image input before it) and returns [batch, output_size].

``IMAGE_ENCODERS`` maps Ludwig's encoder names to ``builder(config, metadata)``; the metadata is
the feature's preprocessing metadata ("height", "width", "num_channels"). The U-Net encoder also
returns its skip connections (``returns_state``), which a unet decoder reads.
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import nn

from plait.errors import ModelError
from plait.models.layers import activation, fc_stack

STACKED_CNN_LAYERS = [{"out_channels": 32}, {"out_channels": 64}]
"""Ludwig's convolution blocks when neither conv_layers nor num_conv_layers is set."""
UNET_STAGES = 4
"""Down-sampling stages of Ludwig's U-Net (its height and width must be multiples of 2 ** 4)."""
UNET_BASE_CHANNELS = 64
"""Filters of the U-Net's first stage; each later stage doubles them (the bottleneck: 1024)."""

_SIZE_KEYS = "preprocessing.height and preprocessing.width"


def _conv_block_specs(config) -> list[dict]:
    """One dict per convolution block: conv_layers entries (keys the user wrote, a written null
    included) over the encoder's defaults, as Ludwig's Conv2DStack fills them."""
    base = {"out_channels": config.out_channels, "kernel_size": config.kernel_size, "stride": config.stride,
            "padding": config.padding, "dilation": config.dilation, "groups": config.groups,
            "use_bias": config.conv_use_bias, "padding_mode": config.padding_mode, "norm": config.conv_norm,
            "norm_params": config.conv_norm_params, "activation": config.conv_activation,
            "dropout": config.conv_dropout, "pool_function": config.pool_function,
            "pool_kernel_size": config.pool_kernel_size, "pool_stride": config.pool_stride,
            "pool_padding": config.pool_padding, "pool_dilation": config.pool_dilation}
    if config.conv_layers is not None:
        overrides = [layer.model_dump(exclude_unset=True) for layer in config.conv_layers]
    elif config.num_conv_layers is not None:
        overrides = [{}] * config.num_conv_layers
    else:
        overrides = STACKED_CNN_LAYERS
    return [{**base, **layer} for layer in overrides]


def _pair(value) -> tuple[int, int] | str:
    return value if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else (value, value)


def _probe(module: nn.Module, shape: tuple[int, int, int], what: str) -> tuple[int, int]:
    """Height and width of ``module``'s output for one [channels, height, width] input: torch's own
    arithmetic, and its refusals (a window larger than the image) as a ModelError."""
    try:
        with torch.no_grad():
            out = module(torch.zeros(1, *shape))
    except RuntimeError as err:
        raise ModelError(f"image stacked_cnn encoder: {what} does not fit a {shape[1]}x{shape[2]} input ({err}); "
                         f"use smaller kernel_size, stride or pool_kernel_size, padding: same, fewer conv_layers, "
                         f"or larger {_SIZE_KEYS}") from None
    return out.shape[2], out.shape[3]


class ConvBlock2D(nn.Module):
    """Convolution, norm, activation, dropout, then optional pooling (Ludwig's Conv2DLayer)."""

    def __init__(self, shape: tuple[int, int, int], spec: dict, index: int):
        super().__init__()
        channels, out_channels = shape[0], spec["out_channels"]
        padding = _pair(spec["padding"])
        stride = _pair(spec["stride"])
        if padding == "same" and stride != (1, 1):
            raise ModelError(f"image stacked_cnn encoder: convolution block {index} has padding: same with stride "
                             f"{spec['stride']}; same padding needs stride 1: set stride to 1 or padding to valid")
        try:
            self.conv = nn.Conv2d(channels, out_channels, _pair(spec["kernel_size"]), stride=stride, padding=padding,
                                  dilation=_pair(spec["dilation"]), groups=spec["groups"], bias=spec["use_bias"],
                                  padding_mode=spec["padding_mode"])
        except ValueError as err:  # groups that do not divide the channels, for instance
            raise ModelError(f"image stacked_cnn encoder: convolution block {index} cannot take {channels} input "
                             f"channels: {err}") from None
        height, width = _probe(self.conv, shape, f"the convolution of block {index}")
        self.norm = _norm_2d(spec["norm"], out_channels, (height, width), spec["norm_params"])
        self.activation = activation(spec["activation"])
        self.dropout = nn.Dropout(spec["dropout"])
        self.pool = _pool(spec)
        if self.pool is not None:
            height, width = _probe(self.pool, (out_channels, height, width), f"the pooling of block {index}")
        self.output_shape = (out_channels, height, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.activation(self.norm(self.conv(x))))
        return self.pool(x) if self.pool is not None else x


def _norm_2d(norm: str | None, channels: int, height_width: tuple[int, int], params: dict | None) -> nn.Module:
    """batch: per channel; layer: over each channel's height and width (as Ludwig normalizes)."""
    if norm == "batch":
        return nn.BatchNorm2d(channels, **(params or {}))
    if norm == "layer":
        return nn.LayerNorm(height_width, **(params or {}))
    return nn.Identity()


def _pool(spec: dict) -> nn.Module | None:
    size = spec["pool_kernel_size"]
    if size is None:
        return None
    stride = _pair(spec["pool_stride"] or size)
    if spec["pool_function"] in ("average", "avg", "mean"):
        return nn.AvgPool2d(_pair(size), stride=stride, padding=_pair(spec["pool_padding"]))
    return nn.MaxPool2d(_pair(size), stride=stride, padding=_pair(spec["pool_padding"]),
                        dilation=_pair(spec["pool_dilation"]))


class StackedCNN(nn.Module):
    """Ludwig's Stacked2DCNN: convolution blocks, flattened, then fully connected layers."""

    def __init__(self, config, metadata: dict):
        super().__init__()
        shape = (metadata["num_channels"], metadata["height"], metadata["width"])
        blocks = []
        for index, spec in enumerate(_conv_block_specs(config)):
            blocks.append(ConvBlock2D(shape, spec, index))
            shape = blocks[-1].output_shape
        self.conv = nn.Sequential(*blocks)
        self.flattened_size = shape[0] * shape[1] * shape[2]
        self.fc = fc_stack(self.flattened_size, config)
        self.output_size = self.fc.output_size
        self.output_shape = (self.output_size,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x).flatten(1))


class MixerMLP(nn.Sequential):
    """Linear, GELU, dropout, linear, dropout: the MLP of a mixer block."""

    def __init__(self, width: int, hidden: int, dropout: float):
        super().__init__(nn.Linear(width, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, width),
                         nn.Dropout(dropout))


class MixerBlock(nn.Module):
    """Mixing across patches (each channel on its own), then across channels (each patch on its
    own); each MLP reads a layer-normed input and adds to it."""

    def __init__(self, patches: int, width: int, token_size: int, channel_dim: int, dropout: float):
        super().__init__()
        self.token_norm, self.channel_norm = nn.LayerNorm(width), nn.LayerNorm(width)
        self.token_mlp = MixerMLP(patches, token_size, dropout)
        self.channel_mlp = MixerMLP(width, channel_dim, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.token_norm(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.channel_norm(x))


class MLPMixer(nn.Module):
    """Patches embedded by a strided convolution, mixer blocks, a layer norm, then the mean over
    patches (avg_pool) or the patches as a sequence."""

    def __init__(self, config, metadata: dict):
        super().__init__()
        height, width, size = metadata["height"], metadata["width"], config.patch_size
        if height % size or width % size:
            raise ModelError(f"image mlp_mixer encoder: a {height}x{width} image does not split into patches of "
                             f"patch_size {size}; set encoder.patch_size to a divisor of both, or {_SIZE_KEYS} to "
                             f"multiples of {size}")
        patches = (height // size) * (width // size)
        self.patch_embedding = nn.Conv2d(metadata["num_channels"], config.embed_size, size, stride=size)
        self.blocks = nn.Sequential(*(MixerBlock(patches, config.embed_size, config.token_size, config.channel_dim,
                                                 config.dropout) for _ in range(config.num_layers)))
        self.norm = nn.LayerNorm(config.embed_size)
        self.avg_pool = config.avg_pool
        self.output_size = config.embed_size
        self.output_shape = (config.embed_size,) if config.avg_pool else (patches, config.embed_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.blocks(self.patch_embedding(x).flatten(2).transpose(1, 2)))
        return x.mean(1) if self.avg_pool else x


class DoubleConv(nn.Sequential):
    """Two 3x3 convolutions that keep the height and width, each with its norm and a ReLU."""

    def __init__(self, in_channels: int, out_channels: int, norm: str | None):
        layers: list[nn.Module] = []
        for channels in (in_channels, out_channels):
            layers.append(nn.Conv2d(channels, out_channels, 3, padding=1))
            if norm == "batch":
                layers.append(nn.BatchNorm2d(out_channels))
            layers.append(nn.ReLU())
        super().__init__(*layers)


def check_unet_size(height: int, width: int, stages: int, where: str) -> None:
    """Each stage halves the height and width, so both must be multiples of 2 ** stages."""
    step = 2 ** stages
    if height % step or width % step:
        raise ModelError(f"{where}: a {height}x{width} image cannot be halved {stages} times; set {_SIZE_KEYS} "
                         f"to multiples of {step}")


class UNetDown(nn.Module):
    """The contracting path of U-Net: per stage two convolutions, kept as a skip connection, then
    2x2 max pooling; then the bottleneck's two convolutions. Returns (the bottleneck flattened,
    the skips from the first stage to the last)."""

    returns_state = True

    def __init__(self, in_channels: int, height: int, width: int, norm: str | None,
                 base_channels: int = UNET_BASE_CHANNELS, stages: int = UNET_STAGES):
        super().__init__()
        check_unet_size(height, width, stages, "image unet encoder")
        self.stages = nn.ModuleList()
        channels = base_channels
        for _ in range(stages):
            self.stages.append(DoubleConv(in_channels, channels, norm))
            in_channels, channels = channels, channels * 2
        self.bottleneck = DoubleConv(in_channels, channels, norm)
        self.output_size = channels * (height >> stages) * (width >> stages)
        self.output_shape = (self.output_size,)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        skips = []
        for stage in self.stages:
            x = stage(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        return self.bottleneck(x).flatten(1), skips


def stacked_cnn(config, metadata: dict) -> StackedCNN:
    return StackedCNN(config, metadata)


def mlp_mixer(config, metadata: dict) -> MLPMixer:
    return MLPMixer(config, metadata)


def unet(config, metadata: dict) -> UNetDown:
    return UNetDown(metadata["num_channels"], metadata["height"], metadata["width"], config.conv_norm)


IMAGE_ENCODERS = {"stacked_cnn": stacked_cnn, "mlp_mixer": mlp_mixer, "unet": unet}
"""Image encoder type (Ludwig's name) -> builder(encoder config, feature metadata)."""
