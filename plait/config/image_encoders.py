"""Image encoder settings (Ludwig 0.17's Stacked2DCNN, MLPMixer and UNetEncoder) and the settings
of the U-Net decoder of image outputs (segmentation masks).

An encoder reads the image as [channels, height, width] floats, already scaled, augmented and
standardized. Its ``height``, ``width`` and ``num_channels`` keys are the ones Ludwig writes from
the preprocessing: plait accepts them and takes the sizes from the preprocessing as well.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from plait.config.base import StrictModel, field_error, ludwig_only
from plait.config.decoders import DecoderBase
from plait.config.encoder_settings import EncoderActivation, EncoderBase
from plait.config.fully_connected import (LAYER_KEYS, BiasInitializer, FCLayer, FCStackSection, NoGhostNorm,
                                          WeightsInitializer, check_norm_params)
from plait.config.text_encoders import _fc_once

PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Size2D = PositiveInt | tuple[PositiveInt, PositiveInt]
"""One size for height and width, or [height, width]."""
Offset2D = NonNegativeInt | tuple[NonNegativeInt, NonNegativeInt]
"""One padding for height and width, or [height, width]."""
ConvPadding = Offset2D | Literal["valid", "same"]
PaddingMode = Literal["zeros", "reflect", "replicate", "circular"]
PoolFunction = Literal["max", "average", "avg", "mean"]


class ImageSizeKeys(StrictModel):
    """Ludwig's internal keys, written from the preprocessing into a rendered config."""

    height: int | None = Field(None, ge=0)
    """Accepted as Ludwig writes it; the image height comes from the preprocessing."""
    width: int | None = Field(None, ge=0)
    """Accepted as Ludwig writes it; the image width comes from the preprocessing."""
    num_channels: int | None = Field(None, ge=0)
    """Accepted as Ludwig writes it; the channel count comes from the preprocessing."""


class ImageConvLayer(StrictModel):
    """One entry of ``conv_layers``: what this convolution block sets differently from the
    encoder's defaults. A key left out is the encoder's; ``pool_kernel_size: null`` (written out)
    means no pooling after this block, as in Ludwig."""

    out_channels: PositiveInt = None
    """This convolution's filters; unset: the encoder's out_channels."""
    kernel_size: Size2D = None
    """This convolution's kernel; unset: the encoder's."""
    stride: Size2D = None
    """This convolution's step; unset: the encoder's."""
    padding: ConvPadding = None
    """This convolution's padding; unset: the encoder's."""
    dilation: Size2D = None
    """This convolution's dilation; unset: the encoder's."""
    groups: PositiveInt = None
    """This convolution's groups; unset: the encoder's."""
    use_bias: bool = None
    """This convolution's bias switch; unset: the encoder's conv_use_bias."""
    padding_mode: PaddingMode = None
    """This convolution's padding mode; unset: the encoder's."""
    norm: NoGhostNorm = None
    """This block's norm (null: none); unset: the encoder's conv_norm."""
    norm_params: dict | None = None
    """This block's norm arguments; unset: the encoder's conv_norm_params."""
    activation: EncoderActivation = None
    """This block's activation (null: none); unset: the encoder's conv_activation."""
    dropout: float = Field(None, ge=0, lt=1)
    """This block's dropout; unset: the encoder's conv_dropout."""
    pool_function: PoolFunction = None
    """This block's pooling; unset: the encoder's."""
    pool_kernel_size: Size2D | None = None
    """This block's pooling window (null: no pooling); unset: the encoder's."""
    pool_stride: Size2D | None = None
    """This block's pooling step (null: its window); unset: the encoder's."""
    pool_padding: Offset2D = None
    """This block's pooling padding; unset: the encoder's."""
    pool_dilation: Size2D = None
    """This block's max-pooling dilation; unset: the encoder's."""

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        if key in ONE_D_LAYER_KEYS:
            return (f"a key of Ludwig's 1-D convolution layers; Ludwig 0.17's image stacked_cnn does not read it (its "
                    f"2-D blocks read {ONE_D_LAYER_KEYS[key]}, so there this block trains with the default), and "
                    f"plait says so rather than do the same: write {ONE_D_LAYER_KEYS[key]}")
        return None


ONE_D_LAYER_KEYS = {"num_filters": "out_channels", "filter_size": "kernel_size", "pool_size": "pool_kernel_size"}
"""Keys of Ludwig's 1-D convolution layers (text and sequence stacked_cnn) that configs also give
image conv_layers, with the key the 2-D blocks read."""


class Conv2DSettings(StrictModel):
    """2-D convolution blocks (convolution, norm, activation, dropout, pooling) one after another;
    an entry of conv_layers overrides these defaults. Unset conv_layers and num_conv_layers give
    Ludwig's two blocks, of 32 and 64 filters."""

    conv_layers: list[ImageConvLayer] | None = None
    """Per-block settings; when given, its length is the number of blocks."""
    num_conv_layers: int | None = Field(None, ge=0)
    """Blocks, each with the defaults below (when conv_layers is not given)."""
    out_channels: PositiveInt = 32
    """Filters (output channels) of each convolution."""
    kernel_size: Size2D = 3
    """Kernel of each convolution: one size, or [height, width]."""
    stride: Size2D = 1
    """Step of each convolution."""
    padding: ConvPadding = "valid"
    """valid: none; same: keep the size (needs stride 1); or pixels on each side ([height, width])."""
    dilation: Size2D = 1
    """Spacing of a kernel's taps."""
    groups: PositiveInt = 1
    """Groups of channels convolved apart (input and output channels must be multiples of it)."""
    padding_mode: PaddingMode = "zeros"
    """What the padding is filled with: zeros, or the image reflected, replicated or wrapped."""
    conv_use_bias: bool = True
    """Whether the convolutions add a bias."""
    conv_norm: NoGhostNorm = None
    """Normalization after each convolution: batch (per channel), layer (over each channel's
    height and width, as Ludwig) or null."""
    conv_norm_params: dict | None = None
    """Keyword arguments of the norm (torch's BatchNorm2d or LayerNorm)."""
    conv_activation: EncoderActivation = "relu"
    """Activation after each convolution."""
    conv_dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout after each activation."""
    pool_function: PoolFunction = "max"
    """Pooling after each block: max, or average (avg, mean)."""
    pool_kernel_size: Size2D | None = 2
    """Pooling window; null: no pooling."""
    pool_stride: Size2D | None = None
    """Pooling step; null: the window."""
    pool_padding: Offset2D = 0
    """Pooling padding on each side (at most half the window)."""
    pool_dilation: Size2D = 1
    """Dilation of max pooling (average pooling has none)."""

    @model_validator(mode="after")
    def _layers_once(self):
        if self.conv_layers is not None and self.num_conv_layers is not None:
            raise field_error("num_conv_layers", "give conv_layers or num_conv_layers, not both (conv_layers "
                                                 "already says how many)")
        check_norm_params(self.conv_norm, self.conv_norm_params, "conv_norm_params")
        for i, layer in enumerate(self.conv_layers or []):
            # A key the entry writes, null included, is its own (as the model builds it).
            written = layer.model_fields_set
            check_norm_params(layer.norm if "norm" in written else self.conv_norm,
                              layer.norm_params if "norm_params" in written else self.conv_norm_params,
                              f"conv_layers[{i}].norm_params")
        return self


class FCPrefixedSettings(FCStackSection):
    """Fully connected layers after an encoder, under the ``fc_``-prefixed names Ludwig gives them
    in its image encoders (its text encoders' unprefixed names are FCSettings)."""

    FC_NAMES = {**{key: f"fc_{key}" for key in LAYER_KEYS}, "output_size": "output_size",
                "num_fc_layers": "num_fc_layers"}

    fc_layers: list[FCLayer] | None = None
    """Per-layer settings; when given, its length is the number of layers."""
    num_fc_layers: int = Field(1, ge=0)
    """Fully connected layers (when fc_layers is not given); 0: the flattened convolutions' output."""
    output_size: PositiveInt = 128
    """Width of each fully connected layer (unless its fc_layers entry says otherwise)."""
    fc_use_bias: bool = True
    """Whether the fully connected layers add a bias."""
    fc_weights_initializer: WeightsInitializer = "xavier_uniform"
    """Initializer of their weights (a name, or {type: name, ...arguments})."""
    fc_bias_initializer: BiasInitializer = "zeros"
    """Initializer of their biases: zeros, ones, constant, uniform or normal."""
    fc_norm: NoGhostNorm = None
    """Normalization after each linear layer: batch, layer or null."""
    fc_norm_params: dict | None = None
    """Keyword arguments of the norm (torch's BatchNorm1d or LayerNorm)."""
    fc_activation: EncoderActivation = "relu"
    """Activation after each fully connected layer."""
    fc_dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout after each fully connected layer."""

    @model_validator(mode="after")
    def _fc_layers_once(self):
        _fc_once(self)
        return self


class ImageStackedCNNEncoder(EncoderBase, ImageSizeKeys, Conv2DSettings, FCPrefixedSettings):
    """Ludwig's Stacked2DCNN: convolution blocks, the result flattened, then fully connected layers."""

    type: Literal["stacked_cnn"] = "stacked_cnn"


class MLPMixerEncoder(EncoderBase, ImageSizeKeys):
    """MLP-Mixer (Tolstikhin et al., 2021): the image cut into square patches, each embedded
    linearly, then blocks that mix across patches and across channels, each an MLP with a residual
    connection. Height and width must be multiples of patch_size."""

    type: Literal["mlp_mixer"] = "mlp_mixer"
    patch_size: PositiveInt = 16
    """Side of a patch, in pixels."""
    embed_size: PositiveInt = 512
    """Width of a patch's embedding (the encoder's output width)."""
    token_size: PositiveInt = 2048
    """Hidden width of the MLP that mixes across patches."""
    channel_dim: PositiveInt = 256
    """Hidden width of the MLP that mixes across channels."""
    num_layers: PositiveInt = 8
    """Mixer blocks."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout in the blocks' MLPs."""
    avg_pool: bool = True
    """true: the mean over patches, one vector of embed_size; false: the patches as a sequence
    [patches, embed_size], for the sequence combiners (or concat with flatten_inputs)."""


class UNetEncoder(EncoderBase, ImageSizeKeys):
    """The contracting path of U-Net (Ronneberger et al., 2015): four stages of two 3x3
    convolutions (64, 128, 256, 512 filters) each followed by 2x2 max pooling, then two more of
    1024. It hands its flattened output and each stage's output (the skip connections) to a unet
    decoder: use it with one image input, the concat combiner without fully connected layers and
    an image output. Height and width must be multiples of 16."""

    type: Literal["unet"] = "unet"
    conv_norm: Literal["batch"] | None = "batch"
    """Normalization after each convolution: batch or null."""


_UNET_STAGES = ludwig_only(4, instead="plait's unet encoder has four stages, as Ludwig's, and the decoder must "
                                      "match them")


class UNetDecoder(DecoderBase):
    """The expanding path of U-Net: four stages, each a 2x2 transposed convolution that doubles
    the height and width, the matching encoder stage's output concatenated, and two 3x3
    convolutions; then a 1x1 convolution to one logit per class and pixel. It needs the unet
    encoder (its skip connections) and the combiner's output unchanged, so it takes no fully
    connected layers."""

    type: Literal["unet"] = "unet"
    input_size: PositiveInt = 1024
    """Computed by Ludwig (the combiner's output width); accepted as Ludwig writes it."""
    height: int | None = Field(None, ge=0)
    """Accepted as Ludwig writes it; the mask height comes from the output's preprocessing."""
    width: int | None = Field(None, ge=0)
    """Accepted as Ludwig writes it; the mask width comes from the output's preprocessing."""
    num_channels: int | None = Field(None, ge=0)
    """Accepted as Ludwig writes it (not used: a mask has one class per pixel)."""
    num_classes: int | None = Field(None, ge=0)
    """Accepted as Ludwig writes it; the class count comes from the output's preprocessing
    (preprocessing.num_classes)."""
    conv_norm: Literal["batch"] | None = "batch"
    """Normalization after each convolution: batch or null."""
    num_stages: Annotated[int, _UNET_STAGES] = Field(4, gt=0)
    """Up-sampling stages; plait accepts only 4 (the unet encoder's stages)."""
    use_bias: bool = True
    """Whether the last 1x1 convolution (to the classes) adds a bias (plait's key; Ludwig's has one)."""
    weights_initializer: WeightsInitializer = None
    """Initializer of that convolution's weights (plait's key); null: torch's default, as Ludwig."""
    bias_initializer: BiasInitializer = None
    """Initializer of that convolution's bias (plait's key); null: torch's default, as Ludwig."""

    @model_validator(mode="after")
    def _no_fc_stack(self):
        # Ludwig runs the fully connected stack before this decoder and then fails to reshape its
        # output into the encoder's feature map; refuse it here rather than at the first batch.
        if self.fc_layers or self.num_fc_layers:
            key = "fc_layers" if self.fc_layers else "num_fc_layers"
            raise field_error(key, "the unet decoder reshapes the combiner's output into the unet encoder's "
                                   "feature map, so it takes no fully connected layers; remove it (or set 0)")
        return self


IMAGE_ENCODER_CLASSES = (ImageStackedCNNEncoder, MLPMixerEncoder, UNetEncoder)
"""The image encoders, for the image feature's encoder union."""
IMAGE_DECODER_CLASSES = (UNetDecoder,)
"""The image output's decoders, for its decoder union."""
DOCUMENTED = [*IMAGE_ENCODER_CLASSES, ImageConvLayer, UNetDecoder]
"""The sections of the config reference these settings add."""
