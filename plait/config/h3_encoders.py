"""H3 encoder settings (Ludwig 0.17's H3Embed, H3WeightedSum and H3RNN).

An H3 input is nineteen numbers: mode, edge, resolution, base cell, and the cell's digit at each
of the 15 resolutions (7 past its own). Each encoder first gives every one of them a learned
vector (one table per kind; the 15 digits share one) and zeroes the digits past the cell's
resolution, then combines the 19 vectors: a sum (embed), a learned weighted sum (weighted_sum)
or a recurrent network read from mode to the finest digit (rnn).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from plait.config.base import ludwig_only
from plait.config.encoder_settings import EMBEDDINGS_ON_CPU, EncoderActivation, EncoderBase, FCSettings, Initializer
from plait.config.fully_connected import BiasInitializer
from plait.config.text_encoders import CELL_TYPES, RecurrentSettings, Reduction, _reduction


class H3EmbedEncoder(EncoderBase, FCSettings):
    """The sum (or another reduction) of the 19 components' vectors, then fully connected layers."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(10, gt=0)
    """Width of each component's vectors."""
    embeddings_on_cpu: Annotated[bool, EMBEDDINGS_ON_CPU] = False
    """Ludwig's placement of the tables in CPU memory; plait accepts only false."""
    reduce_output: Reduction = "sum"
    """How the 19 vectors become one: sum, mean (avg), max, concat, last, attention (the digits
    past the cell's resolution left out), or null (keep them, for the sequence combiners; no
    fully connected layers then)."""
    output_size: int = Field(10, gt=0)
    """Width of each fully connected layer (unless its fc_layers entry says otherwise)."""
    num_fc_layers: int = Field(0, ge=0)
    """Fully connected layers after the reduction (unless fc_layers is given)."""

    @field_validator("reduce_output", mode="before")
    @classmethod
    def _reduce_output_spelling(cls, value: Any) -> Any:
        return _reduction(value)


class H3WeightedSumEncoder(EncoderBase, FCSettings):
    """A weighted sum of the 19 components' vectors, one learned weight per component (Ludwig
    keeps its weights at their initial values), then fully connected layers."""

    type: Literal["weighted_sum"] = "weighted_sum"
    embedding_size: int = Field(10, gt=0)
    """Width of each component's vectors."""
    embeddings_on_cpu: Annotated[bool, EMBEDDINGS_ON_CPU] = False
    """Ludwig's placement of the tables in CPU memory; plait accepts only false."""
    should_softmax: bool = False
    """Pass the 19 weights through a softmax first (they then sum to 1)."""
    output_size: int = Field(10, gt=0)
    """Width of each fully connected layer (unless its fc_layers entry says otherwise)."""
    num_fc_layers: int = Field(0, ge=0)
    """Fully connected layers after the sum (unless fc_layers is given)."""


class H3RNNEncoder(EncoderBase):
    """A recurrent network over the 19 components' vectors, from mode to the finest digit; its
    output at the last real step (reduce_output) is the encoding."""

    type: Literal["rnn"] = "rnn"
    embedding_size: int = Field(10, gt=0)
    """Width of each component's vectors."""
    embeddings_on_cpu: Annotated[bool, EMBEDDINGS_ON_CPU] = False
    """Ludwig's placement of the tables in CPU memory; plait accepts only false."""
    cell_type: CELL_TYPES = "rnn"
    """rnn (Elman), lstm or gru (Ludwig's schema lists more names, which its H3 encoder cannot build)."""
    num_layers: int = Field(1, gt=0)
    """Stacked recurrent layers."""
    hidden_size: int = Field(10, gt=0)
    """Width of the recurrent state (twice that comes out when bidirectional)."""
    bidirectional: bool = False
    """Also read the components backwards; the two states are concatenated."""
    activation: EncoderActivation = "tanh"
    """The rnn cell's activation: tanh or relu (lstm and gru cells have fixed activations)."""
    recurrent_activation: Annotated[EncoderActivation, ludwig_only(
        "sigmoid", instead="lstm and gru gates use the sigmoid")] = "sigmoid"
    """The gates' activation; plait accepts only sigmoid."""
    dropout: float = Field(0.0, ge=0, le=1)
    """Dropout on the components' vectors."""
    recurrent_dropout: float = Field(0.0, ge=0, le=1)
    """Dropout between stacked recurrent layers."""
    use_bias: bool = True
    """Whether the recurrent layers add a bias."""
    unit_forget_bias: bool = True
    """Start an lstm's forget-gate bias at 1."""
    weights_initializer: Initializer = "xavier_uniform"
    """Initializer of the vectors and of the input-to-state weights."""
    recurrent_initializer: Initializer = "orthogonal"
    """Initializer of the state-to-state weights."""
    bias_initializer: BiasInitializer = "zeros"
    """Initializer of the biases: zeros, ones, constant, uniform or normal."""
    reduce_output: Reduction = "last"
    """How the 19 outputs become one: last (the finest digit of the cell's resolution), sum,
    mean, max, concat, attention, or null (keep them, for the sequence combiners)."""

    @property
    def state_size(self) -> int:
        """The recurrent layers' width under the name plait's text rnn gives it (one builder)."""
        return self.hidden_size

    @field_validator("reduce_output", mode="before")
    @classmethod
    def _reduce_output_spelling(cls, value: Any) -> Any:
        return _reduction(value)

    @model_validator(mode="after")
    def _cell_activation(self):
        return RecurrentSettings._cell_activation(self)
