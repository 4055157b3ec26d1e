"""Text encoder settings (Ludwig's sequence encoders): each embeds the tokens, runs its layers over
the sequence, then reduces it to one vector (``reduce_output``) and applies fully connected
layers; with ``reduce_output: null`` it hands the whole sequence to the combiner instead."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from plait.config.base import LUDWIG_DEFAULT, StrictModel, field_error, ludwig_only, shown
from plait.config.encoder_settings import EmbeddingSettings, EncoderActivation, EncoderBase, FCSettings, Initializer
from plait.config.fully_connected import BiasInitializer, FCLayer, FCStackSection, NoGhostNorm, check_norm_params
from plait.config.layers import check_heads

Reduction = Literal["sum", "mean", "avg", "max", "concat", "last", "attention"] | None

CELL_TYPES = Literal["rnn", "lstm", "gru"]


def _reduction(value: Any) -> Any:
    """Ludwig also spells "no reduction" as the strings none and None."""
    if value in ("none", "None"):
        return None
    if value == "attention_pooling":
        raise ValueError("got 'attention_pooling'; plait does not implement Ludwig's attention pooling: use "
                         "attention (a learned weighted sum over the sequence), or null to keep the sequence")
    return value


class SequenceEncoderBase(EncoderBase, EmbeddingSettings):
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout after the embedding (and, where the encoder says so, after its layers)."""
    weights_initializer: Initializer = "xavier_uniform"
    """Initializer of the embeddings and of the layers' weights."""
    reduce_output: Reduction = "sum"
    """How the sequence becomes one vector: sum, mean (avg), max, concat (flattened), last (the last
    token that is not padding), attention (a learned weighted sum), or null (keep the sequence,
    for the sequence combiners). Padding is left out of sum, mean, max and last."""

    @field_validator("reduce_output", mode="before")
    @classmethod
    def _reduce_output_spelling(cls, value: Any) -> Any:
        return _reduction(value)


class ConvLayer(StrictModel):
    """One entry of ``conv_layers``: what this convolution sets differently from the encoder's
    defaults (a setting left out, or null, is the encoder's)."""

    filter_size: int | None = Field(None, gt=0)
    """This convolution's filter width; unset: the encoder's."""
    num_filters: int | None = Field(None, gt=0)
    """This convolution's filter count; unset: the encoder's."""
    pool_function: Literal["max", "average", "avg", "mean"] | None = None
    """This convolution's pooling; unset: the encoder's."""
    pool_size: int | None = Field(None, gt=0)
    """Unset or null: the encoder's pool_size."""
    pool_strides: int | None = Field(None, gt=0)
    """This convolution's pooling step; unset: the encoder's."""
    pool_padding: Literal["valid", "same"] | None = None
    """This convolution's pooling padding; unset: the encoder's."""
    strides: int | None = Field(None, gt=0)
    """This convolution's step; unset: the encoder's."""
    padding: Literal["valid", "same"] | None = None
    """This convolution's padding; unset: the encoder's."""
    dilation_rate: int | None = Field(None, gt=0)
    """This convolution's dilation; unset: the encoder's."""
    activation: EncoderActivation = None
    """This convolution's activation; unset: the encoder's."""
    dropout: float | None = Field(None, ge=0, lt=1)
    """This convolution's dropout; unset: the encoder's."""
    norm: NoGhostNorm = None
    """This convolution's norm; unset: the encoder's."""
    norm_params: dict | None = None
    """This convolution's norm arguments; unset: the encoder's."""
    use_bias: bool | None = None
    """This convolution's bias switch; unset: the encoder's."""
    weights_initializer: Initializer | None = None
    """This convolution's weights initializer; unset: the encoder's."""
    bias_initializer: BiasInitializer = None
    """This convolution's bias initializer; unset: the encoder's."""


class ConvSettings(StrictModel):
    """1-D convolutions over the token embeddings; an entry of conv_layers overrides these defaults."""

    conv_layers: list[ConvLayer] | None = None
    """Per-convolution settings; when given, its length is the number of convolutions."""
    num_conv_layers: int | None = Field(None, gt=0)
    """Convolutions, each with the defaults below (when conv_layers is not given)."""
    filter_size: int = Field(3, gt=0)
    """Width, in tokens, of a convolution's filters."""
    num_filters: int = Field(256, gt=0)
    """Filters (output channels) per convolution."""
    pool_function: Literal["max", "average", "avg", "mean"] = "max"
    """Pooling along the sequence after a convolution: max, or average (avg, mean)."""
    pool_size: int | None = Field(None, gt=0)
    """Width of that pooling; null: no pooling."""

    @model_validator(mode="after")
    def _layers_once(self):
        if self.conv_layers is not None and self.num_conv_layers is not None:
            raise field_error("num_conv_layers", "give conv_layers or num_conv_layers, not both (conv_layers "
                                                 "already says how many)")
        _check_conv_norms(self, self.conv_layers, "conv_layers")
        return self


def _check_conv_norms(encoder, layers: list[ConvLayer] | None, path: str) -> None:
    """Each convolution's norm_params fit its norm (the encoder's norm and norm_params, where the
    convolution sets none)."""
    for i, layer in enumerate(layers or []):
        check_norm_params(encoder.norm if layer.norm is None else layer.norm,
                          encoder.norm_params if layer.norm_params is None else layer.norm_params,
                          f"{path}[{i}].norm_params")


class StridedConvSettings(ConvSettings):
    strides: int = Field(1, gt=0)
    """Step of the convolution along the sequence."""
    padding: Literal["valid", "same"] = "same"
    """same: pad so that the sequence keeps its length (divided by strides); valid: no padding."""
    dilation_rate: int = Field(1, gt=0)
    """Spacing of a filter's taps (1: adjacent tokens)."""
    pool_strides: int | None = Field(None, gt=0)
    """Step of the pooling; null: pool_size."""
    pool_padding: Literal["valid", "same"] = "same"
    """same: pad the pooling (by (pool_size - 1) // 2 each side); valid: none."""


class SequenceFCSettings(FCStackSection):
    """Fully connected layers after the reduction, for encoders whose ``activation`` and
    ``dropout`` belong to their recurrent or attention layers."""

    FC_NAMES = {**FCStackSection.FC_NAMES, "activation": "fc_activation", "dropout": "fc_dropout"}

    fc_layers: list[FCLayer] | None = None
    """Per-layer settings; when given, its length is the number of layers."""
    num_fc_layers: int = Field(0, ge=0)
    """Fully connected layers after the reduction (when fc_layers is not given)."""
    output_size: int = Field(256, gt=0)
    """Width of each fully connected layer (unless its fc_layers entry says otherwise)."""
    use_bias: bool = True
    """Whether the fully connected (and recurrent) layers add a bias."""
    bias_initializer: BiasInitializer = "zeros"
    """Initializer of the biases: zeros, ones, constant, uniform or normal."""
    norm: NoGhostNorm = None
    """Normalization after each fully connected layer: batch, layer or null."""
    norm_params: dict | None = None
    """Keyword arguments of the norm (torch's BatchNorm1d or LayerNorm)."""
    fc_activation: EncoderActivation = "relu"
    """Activation after each fully connected layer."""
    fc_dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout after each fully connected layer."""


class RecurrentSettings(StrictModel):
    cell_type: CELL_TYPES = "rnn"
    """rnn (Elman), lstm or gru."""
    state_size: int = Field(256, gt=0)
    """Width of the recurrent state (twice that comes out when bidirectional)."""
    bidirectional: bool = False
    """Also read the sequence backwards; the two states are concatenated."""
    recurrent_dropout: float = Field(0.0, ge=0, le=1)
    """Dropout between stacked recurrent layers (as Ludwig's torch encoders apply it)."""
    activation: EncoderActivation = "tanh"
    """The rnn cell's activation: tanh or relu (lstm and gru cells have fixed activations)."""
    recurrent_activation: Annotated[EncoderActivation, ludwig_only(
        "sigmoid", instead="lstm and gru gates use the sigmoid")] = "sigmoid"
    """The gates' activation; plait accepts only sigmoid."""
    unit_forget_bias: bool = True
    """Start an lstm's forget-gate bias at 1 (it remembers by default early in training)."""
    recurrent_initializer: Initializer = "orthogonal"
    """Initializer of the state-to-state weights."""

    @model_validator(mode="after")
    def _cell_activation(self):
        allowed = ("tanh", "relu") if self.cell_type == "rnn" else ("tanh",)
        if self.activation not in allowed:
            raise field_error("activation", f"got {shown(self.activation)}; a {self.cell_type} cell takes "
                                            f"{' or '.join(allowed)}" + ("" if self.cell_type == "rnn" else
                                                                         " (its activations are fixed)"))
        return self


def _fc_once(model) -> None:
    """Ludwig refuses fc_layers together with num_fc_layers; num_fc_layers at its default (as a
    rendered config writes it) or null is no conflict."""
    default = type(model).model_fields["num_fc_layers"].default
    if model.fc_layers is not None and model.num_fc_layers not in (None, default):
        raise field_error("num_fc_layers", "give fc_layers or num_fc_layers, not both (fc_layers already says "
                                           "how many)")


class TextEmbedEncoder(SequenceEncoderBase):
    """Bag of embeddings: token embeddings reduced over the sequence."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(256, gt=0)
    """Width of the token embeddings (Ludwig's default; measured better than 64:
    benchmarks/text_defaults.py)."""
    reduce_output: Reduction = Field("mean", json_schema_extra={LUDWIG_DEFAULT: "sum"})
    """How the sequence becomes one vector (see the reduce_output of the other text encoders);
    mean trained better than Ludwig's sum (benchmarks/text_defaults.py)."""
    weights_initializer: Initializer | None = "uniform"
    """Initializer of the embeddings (Ludwig's uniform; measured much better than torch's N(0, 1)
    for a bag of embeddings); null: torch's N(0, 1)."""


class ParallelCNNEncoder(SequenceEncoderBase, FCSettings, ConvSettings):
    """Convolutions of several widths side by side over the token embeddings (Kim, 2014),
    concatenated, reduced over the sequence, then fully connected layers."""

    type: Literal["parallel_cnn"] = "parallel_cnn"
    embedding_size: int = Field(64, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    """Width of the token embeddings."""
    num_filters: int = Field(64, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    """Filters (output channels) per convolution."""
    filter_sizes: list[Annotated[int, Field(gt=0)]] | None = Field(None, min_length=1)
    """plait's shorthand for conv_layers: one convolution per width. Unset (and no conv_layers or
    num_conv_layers): widths 2, 3, 4 and 5."""
    reduce_output: Reduction = Field("max", json_schema_extra={LUDWIG_DEFAULT: "sum"})
    """How the sequence becomes one vector: sum, mean (avg), max, concat, last, attention, or null (keep it)."""
    num_fc_layers: int | None = Field(0, ge=0, json_schema_extra={LUDWIG_DEFAULT: None})
    """Fully connected layers after the reduction; null (with no fc_layers): two, of 512 and 256."""

    @model_validator(mode="after")
    def _one_layout(self):
        _fc_once(self)
        if self.filter_sizes is not None and (self.conv_layers is not None or self.num_conv_layers is not None):
            raise field_error("filter_sizes", "give filter_sizes, conv_layers or num_conv_layers, one of them")
        return self


class StackedCNNEncoder(SequenceEncoderBase, FCSettings, StridedConvSettings):
    """Convolutions one after another (each reading the previous one's output), with optional
    pooling between them; unset conv_layers gives Ludwig's six (widths 7, 7, 3, 3, 3, 3)."""

    type: Literal["stacked_cnn"] = "stacked_cnn"
    num_fc_layers: int | None = Field(None, ge=0)
    """Fully connected layers after the reduction; null (with no fc_layers): two, of 512 and 256."""

    @model_validator(mode="after")
    def _fc_layers_once(self):
        _fc_once(self)
        return self


class StackedParallelCNNEncoder(SequenceEncoderBase, FCSettings):
    """Layers of side-by-side convolutions, one layer after another; unset stacked_layers gives
    three layers of widths 2, 3, 4 and 5."""

    type: Literal["stacked_parallel_cnn"] = "stacked_parallel_cnn"
    stacked_layers: list[list[ConvLayer]] | None = None
    """Per layer, its side-by-side convolutions' settings."""
    num_stacked_layers: int | None = Field(None, gt=0)
    """Layers, each of four convolutions (widths 2 to 5) with the defaults below."""
    filter_size: int = Field(3, gt=0)
    """Filter width of a convolution whose entry sets none."""
    num_filters: int = Field(256, gt=0)
    """Filters (output channels) per convolution."""
    pool_function: Literal["max", "average", "avg", "mean"] = "max"
    """Pooling after a convolution: max, or average (avg, mean)."""
    pool_size: int | None = Field(None, gt=0)
    """Width of that pooling; null: no pooling."""
    num_fc_layers: int | None = Field(None, ge=0)
    """Fully connected layers after the reduction; null (with no fc_layers): two, of 512 and 256."""

    @model_validator(mode="after")
    def _one_layout(self):
        _fc_once(self)
        if self.stacked_layers is not None and self.num_stacked_layers is not None:
            raise field_error("num_stacked_layers", "give stacked_layers or num_stacked_layers, not both")
        for i, layers in enumerate(self.stacked_layers or []):
            _check_conv_norms(self, layers, f"stacked_layers[{i}]")
        return self


class RNNEncoder(SequenceEncoderBase, SequenceFCSettings, RecurrentSettings):
    """Stacked recurrent layers over the token embeddings."""

    type: Literal["rnn"] = "rnn"
    embedding_size: int = Field(64, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    """Width of the token embeddings."""
    cell_type: CELL_TYPES = Field("lstm", json_schema_extra={LUDWIG_DEFAULT: "rnn"})
    """rnn (Elman), lstm or gru."""
    state_size: int = Field(64, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    """Width of the recurrent state (twice that comes out when bidirectional)."""
    num_layers: int = Field(1, gt=0)
    """Stacked recurrent layers."""
    reduce_output: Reduction = Field("mean", json_schema_extra={LUDWIG_DEFAULT: "last"})
    """How the sequence becomes one vector: sum, mean (avg), max, concat, last, attention, or null (keep it)."""

    @model_validator(mode="after")
    def _fc_layers_once(self):
        _fc_once(self)
        return self


class CNNRNNEncoder(SequenceEncoderBase, SequenceFCSettings, RecurrentSettings, StridedConvSettings):
    """Convolutions (unset conv_layers: two, the first pooled by 3), then recurrent layers."""

    type: Literal["cnnrnn"] = "cnnrnn"
    filter_size: int = Field(5, gt=0)
    """Width, in tokens, of a convolution's filters."""
    pool_size: int | None = Field(2, gt=0)
    """Width of the pooling after a convolution; null: no pooling."""
    conv_activation: EncoderActivation = "relu"
    """Activation after each convolution."""
    conv_dropout: float = Field(0.0, ge=0, le=1)
    """Dropout after each convolution."""
    num_rec_layers: int = Field(1, gt=0)
    """Stacked recurrent layers after the convolutions."""
    reduce_output: Reduction = "last"
    """How the sequence becomes one vector: sum, mean (avg), max, concat, last, attention, or null (keep it)."""

    @model_validator(mode="after")
    def _fc_layers_once(self):
        _fc_once(self)
        return self


class TextTransformerEncoder(SequenceEncoderBase, SequenceFCSettings):
    """Transformer layers trained from scratch over token and (learned) position embeddings."""

    type: Literal["transformer"] = "transformer"
    embedding_size: int = Field(64, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    """Width of the token (and position) embeddings."""
    num_layers: int = Field(2, gt=0, json_schema_extra={LUDWIG_DEFAULT: 1})
    """Transformer layers."""
    num_heads: int = Field(4, gt=0, json_schema_extra={LUDWIG_DEFAULT: 8})
    """Attention heads; each attends over hidden_size / num_heads dimensions."""
    hidden_size: int | None = Field(None, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    """Width of the transformer layers (the embeddings are projected to it); unset: embedding_size."""
    transformer_output_size: int = Field(128, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    """Inner width of each layer's feed-forward block."""
    dropout: float = Field(0.1, ge=0, lt=1)
    """Dropout after the embedding and inside each layer."""
    reduce_output: Reduction = Field("mean", json_schema_extra={LUDWIG_DEFAULT: "last"})
    """How the sequence becomes one vector: sum, mean (avg), max, concat, last, attention, or null (keep it)."""
    use_rope: Annotated[bool, ludwig_only(False, instead="plait's transformer learns position embeddings")] = False
    """Ludwig's rotary position embeddings; plait accepts only false."""

    @model_validator(mode="after")
    def _heads_divide_width(self):
        _fc_once(self)
        width_name = "hidden_size" if self.hidden_size is not None else "embedding_size"
        check_heads(self.hidden_size or self.embedding_size, width_name, self.num_heads)
        return self


TEXT_ENCODERS = [TextEmbedEncoder, ParallelCNNEncoder, StackedCNNEncoder, StackedParallelCNNEncoder, RNNEncoder,
                 CNNRNNEncoder, TextTransformerEncoder]
