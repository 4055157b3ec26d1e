"""Input encoder settings, one class per encoder type; each feature type has a union of those it
takes (``encoder: {type: ...}``). Names, types and meanings follow Ludwig 0.17's, so that a config
written for Ludwig (or rendered by it, every default written out) validates unchanged.

The settings several encoders share are in :mod:`plait.config.encoder_settings`; the text
(sequence) encoders are in :mod:`plait.config.text_encoders`.
"""

from __future__ import annotations

import typing
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, field_validator

from plait.config import text_encoders as t
from plait.config.date_encoders import DateEmbedEncoder, DateWaveEncoder
from plait.config.h3_encoders import H3EmbedEncoder, H3RNNEncoder, H3WeightedSumEncoder
from plait.config.base import LUDWIG_DEFAULT, ludwig_only, ludwig_types_not_implemented
from plait.config.encoder_settings import (EMBEDDINGS_ON_CPU, ENCODER_FIELDS, EmbeddingSettings, EncoderBase,
                                           FCSettings, Initializer)
from plait.config.fully_connected import FCLayer
from plait.config.hf_encoders import HF_ENCODER_CLASSES
from plait.config.image_encoders import IMAGE_ENCODER_CLASSES, ImageStackedCNNEncoder
from plait.config.layers import union
from plait.config.torchvision_encoders import TORCHVISION_ENCODER_CLASSES
from plait.config.text_encoders import (CNNRNNEncoder, ConvLayer, ParallelCNNEncoder, RNNEncoder,
                                        StackedCNNEncoder, StackedParallelCNNEncoder, TextEmbedEncoder,
                                        TextTransformerEncoder)

class PassthroughEncoder(EncoderBase):
    """The value itself (a number, 0/1, or the vector)."""

    type: Literal["passthrough"] = "passthrough"


class DenseEncoder(EncoderBase, FCSettings):
    """A number, binary or vector input through fully connected layers."""

    FC_NAMES = {**FCSettings.FC_NAMES, "num_fc_layers": "num_layers"}

    type: Literal["dense"] = "dense"
    num_layers: int = Field(1, ge=1, validation_alias=AliasChoices("num_layers", "num_fc_layers"))
    """Fully connected layers (plait's older name num_fc_layers is accepted too)."""
    output_size: int = Field(256, gt=0)
    """Width of each fully connected layer (unless its fc_layers entry says otherwise). Ludwig's
    256: plait's 32 squeezed a vector of 64 values through 32 and cost about a point of accuracy
    on digits (benchmarks/README.md, "Defaults on 25 datasets")."""


class PeriodicEncoder(EncoderBase):
    """sin(2π f x + φ) for learned frequencies f and phases φ, then a linear projection
    (Gorishniy et al., 2022)."""

    type: Literal["periodic"] = "periodic"
    num_frequencies: int = Field(64, gt=0)
    """Learned frequencies (sine features) per value."""
    output_size: int = Field(256, gt=0)
    """Width of the projection."""
    sigma: float = Field(1.0, gt=0)
    """Standard deviation of the frequencies' initial values."""


class PLEEncoder(EncoderBase):
    """Piecewise linear encoding: per bin, where the value lies inside it (0 below, 1 above),
    then a linear projection. The bins split the training range evenly (Ludwig 0.17 leaves its
    edges at an even split of [0, 1])."""

    type: Literal["ple"] = "ple"
    num_bins: int = Field(64, gt=0)
    """Bins the training range is split into."""
    output_size: int = Field(256, gt=0)
    """Width of the projection."""


class BinsEncoder(EncoderBase):
    """A learned vector per bin of the value; the bins split the training range evenly."""

    type: Literal["bins"] = "bins"
    num_bins: int = Field(32, gt=0)
    """Bins the training range is split into."""
    output_size: int = Field(256, gt=0)
    """Width of each bin's vector."""


class CategoryPassthroughEncoder(EncoderBase):
    """The category's index as a number."""

    type: Literal["passthrough"] = "passthrough"


class CategoryEmbedEncoder(EncoderBase):
    """A learned vector per category value."""

    type: Literal["dense"] = "dense"
    embedding_size: int | None = Field(None, gt=0, json_schema_extra={LUDWIG_DEFAULT: 50})
    """Unset: min(50, (vocabulary size + 1) // 2 + 1), a common rule for tabular data."""
    embedding_initializer: Initializer | None = Field("xavier_uniform", json_schema_extra={LUDWIG_DEFAULT: None})
    """Initializer of the vectors: small ones, as the weights of the layer after a one-hot vector
    would start, so that the values with few training rows add little noise (benchmarks/README.md:
    caschool's 45 counties); null: torch's N(0, 1) (Ludwig's null: uniform on [-1, 1])."""
    embeddings_trainable: bool = True
    """False: the vectors keep their initial (or pretrained) values."""
    pretrained_embeddings: str | None = None
    """A GloVe-format file to start the vectors from (its width replaces embedding_size)."""
    embeddings_on_cpu: Annotated[bool, EMBEDDINGS_ON_CPU] = False
    """Ludwig's placement of the table in CPU memory; plait accepts only false."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the vector."""


class CategorySparseEncoder(EncoderBase):
    """A one-hot vector, fixed unless embeddings_trainable."""

    type: Literal["sparse"] = "sparse"
    embedding_initializer: Initializer | None = None
    """Accepted as in Ludwig; the one-hot start is what a sparse encoder means."""
    embeddings_trainable: bool = False
    """True: the one-hot vectors are a starting point that training changes."""
    pretrained_embeddings: Annotated[str | None, ludwig_only(None, instead="use the dense encoder for pretrained "
                                                                          "embeddings")] = None
    """Ludwig's pretrained vectors; a sparse encoder accepts only null."""
    embeddings_on_cpu: Annotated[bool, EMBEDDINGS_ON_CPU] = False
    """Ludwig's placement of the table in CPU memory; plait accepts only false."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the vector."""


class CategoryOneHotEncoder(EncoderBase):
    """A fixed one-hot vector."""

    type: Literal["onehot"] = "onehot"


class CategoryHashEncoder(EncoderBase):
    """Feature hashing: category index modulo num_hash_buckets picks a learned vector, so that
    rare values share vectors (Ludwig's hash encoder)."""

    type: Literal["hash"] = "hash"
    num_hash_buckets: int = Field(1024, gt=0)
    """Learned vectors; category indices share them modulo this number."""
    embedding_size: int = Field(50, gt=0)
    """Width of each vector."""


class SetEmbedEncoder(EncoderBase, FCSettings, EmbeddingSettings):
    """The sum of the set's elements' embeddings, then fully connected layers."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(50, gt=0)
    """Width of a dense embedding."""
    num_fc_layers: int = Field(0, ge=0)
    """Fully connected layers after the sum (unless fc_layers is given)."""
    output_size: int = Field(64, gt=0, json_schema_extra={LUDWIG_DEFAULT: 10})
    """Width of each fully connected layer (unless its fc_layers entry says otherwise)."""
    weights_initializer: Initializer = "xavier_uniform"
    """Initializer of the embeddings and the layers' weights."""


class BagEmbedEncoder(EncoderBase, FCSettings, EmbeddingSettings):
    """The sum of the bag's tokens' embeddings, each weighted by its count (Ludwig's
    BagEmbedWeighted), then fully connected layers."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(50, gt=0)
    """Width of a dense embedding."""
    force_embedding_size: bool = False
    """Ludwig's switch to keep embedding_size above the vocabulary size; plait never caps the
    width, so either value gives embedding_size."""
    num_fc_layers: int = Field(0, ge=0)
    """Fully connected layers after the sum (unless fc_layers is given)."""
    output_size: int = Field(10, gt=0)
    """Width of each fully connected layer (unless its fc_layers entry says otherwise)."""


class TimeseriesPassthroughEncoder(EncoderBase):
    """The series itself, one number per step."""

    type: Literal["passthrough"] = "passthrough"
    reduce_output: t.Reduction = Field("concat", json_schema_extra={LUDWIG_DEFAULT: None})
    """concat: the steps as one vector (plait's default, which any combiner takes); null (Ludwig's
    default): the sequence [steps, 1], for the sequence combiners (the concat combiner needs
    flatten_inputs for it); sum, mean, max, last, attention: one number per row."""
    encoding_size: Annotated[int | None, ludwig_only(None, instead="a timeseries step is one number")] = None
    """Ludwig's width of a step; plait accepts only null (a step is one number)."""

    @field_validator("reduce_output", mode="before")
    @classmethod
    def _reduce_output_spelling(cls, value):
        return t._reduction(value)


class SequencePassthroughEncoder(TimeseriesPassthroughEncoder):
    """The token ids themselves as numbers, one per step (padding left out of the reductions)."""


NumberEncoder = union(PassthroughEncoder, DenseEncoder, PeriodicEncoder, PLEEncoder, BinsEncoder)
BinaryEncoder = union(PassthroughEncoder, DenseEncoder)
CategoryEncoder = union(CategoryEmbedEncoder, CategorySparseEncoder, CategoryOneHotEncoder,
                        CategoryPassthroughEncoder, CategoryHashEncoder)
TextEncoder = union(t.TextEmbedEncoder, t.ParallelCNNEncoder, t.StackedCNNEncoder, t.StackedParallelCNNEncoder,
                    t.RNNEncoder, t.CNNRNNEncoder, t.TextTransformerEncoder, *HF_ENCODER_CLASSES)
SetEncoder = union(SetEmbedEncoder)
VectorEncoder = union(DenseEncoder, PassthroughEncoder)
TimeseriesEncoder = union(TimeseriesPassthroughEncoder, DenseEncoder, t.ParallelCNNEncoder, t.StackedCNNEncoder,
                          t.StackedParallelCNNEncoder, t.RNNEncoder, t.CNNRNNEncoder, t.TextTransformerEncoder)
AudioEncoder = union(t.ParallelCNNEncoder, t.StackedCNNEncoder, t.StackedParallelCNNEncoder, t.RNNEncoder,
                     t.CNNRNNEncoder)
"""The text encoders that Ludwig gives audio (no transformer), over the frames' features."""
SequenceEncoder = union(t.TextEmbedEncoder, t.ParallelCNNEncoder, t.StackedCNNEncoder, t.StackedParallelCNNEncoder,
                        t.RNNEncoder, t.CNNRNNEncoder, t.TextTransformerEncoder, SequencePassthroughEncoder)
DateEncoder = union(DateEmbedEncoder, DateWaveEncoder)
H3Encoder = union(H3EmbedEncoder, H3WeightedSumEncoder, H3RNNEncoder)
BagEncoder = union(BagEmbedEncoder)
ImageEncoder = union(*IMAGE_ENCODER_CLASSES, *TORCHVISION_ENCODER_CLASSES)

# The encoder each input type gets when the config names none.
DEFAULT_ENCODER = {
    "number": "passthrough",
    "binary": "passthrough",
    "category": "dense",
    "text": "parallel_cnn",  # Ludwig's; measured better than embed (benchmarks/text_defaults.py)
    "set": "embed",
    "vector": "dense",
    "timeseries": "parallel_cnn",  # Ludwig's
    "audio": "parallel_cnn",  # Ludwig's
    "sequence": "embed",  # Ludwig's
    "date": "embed",
    "h3": "embed",
    "bag": "embed",
    "image": "stacked_cnn",  # Ludwig's
}

DOCUMENTED = [PassthroughEncoder, DenseEncoder, PeriodicEncoder, PLEEncoder, BinsEncoder, CategoryEmbedEncoder,
              CategorySparseEncoder, CategoryOneHotEncoder, CategoryPassthroughEncoder, CategoryHashEncoder,
              SetEmbedEncoder, TextEmbedEncoder, ParallelCNNEncoder, StackedCNNEncoder, StackedParallelCNNEncoder,
              RNNEncoder, CNNRNNEncoder, TextTransformerEncoder, DateEmbedEncoder, DateWaveEncoder, H3EmbedEncoder,
              H3WeightedSumEncoder, H3RNNEncoder, BagEmbedEncoder, TimeseriesPassthroughEncoder,
              SequencePassthroughEncoder, FCLayer, ConvLayer]
"""The encoder sections of the config reference (docs/config.md), in its order."""

_ENCODERS_BY_INPUT_TYPE = {"number": NumberEncoder, "binary": BinaryEncoder, "category": CategoryEncoder,
                           "text": TextEncoder, "set": SetEncoder, "vector": VectorEncoder,
                           "sequence": SequenceEncoder, "date": DateEncoder, "h3": H3Encoder, "bag": BagEncoder,
                           "timeseries": TimeseriesEncoder, "audio": AudioEncoder, "image": ImageEncoder}
_input_types: dict[type, list[str]] = {}
for _ftype, _union in _ENCODERS_BY_INPUT_TYPE.items():
    _members = typing.get_args(_union)[0]  # a union of one class is that class
    for _cls in typing.get_args(_members) or (_members,):
        _input_types.setdefault(_cls, []).append(_ftype)
for _cls, _ftypes in _input_types.items():
    _name = _cls.model_fields["type"].default
    _shared = sum(c.model_fields["type"].default == _name for c in _input_types) > 1
    # A name several classes share (dense, embed, passthrough) is told apart by its feature types.
    ENCODER_FIELDS[f"{'/'.join(_ftypes)} {_name}" if _shared else _name] = set(_cls.model_fields) - {"type"}

ENCODER_FIELDS_ANY = frozenset().union(*ENCODER_FIELDS.values())
"""Every encoder setting, to tell one written beside the encoder rather than under it."""

ludwig_types_not_implemented("encoder", {
    **{name: f"Ludwig 0.17 does not register the {name} encoder either; use auto_transformer with "
             f"pretrained_model_name_or_path" for name in ("mt5", "xlm")},
    "llm": "an LLM as an ECD encoder is not implemented; use auto_transformer (any Hugging Face model), or "
           "model_type: llm to fine-tune the LLM itself",
    **{name: f"{name} needs pretrained Hugging Face weights, which plait does not load yet (#20); use the "
             f"parallel_cnn, stacked_cnn or rnn encoder over the audio features" for name in ("wav2vec2", "whisper",
                                                                                              "hubert")},
    "patchtst": "use the transformer (one token per step), parallel_cnn or rnn encoder over the series",
    "nbeats": "use the dense, parallel_cnn or rnn encoder over the series",
    "tf_idf": "tf_idf needs a TF-IDF preprocessing plait does not have; use the embed encoder (a bag of words)",
    "mamba": "state-space encoders are not implemented; use the rnn or transformer encoder",
    "mamba2": "state-space encoders are not implemented; use the rnn or transformer encoder",
    "jamba": "state-space encoders are not implemented; use the rnn or transformer encoder",
    "target": "target encoding is not implemented; use the dense (embedding) or hash encoder",
    **{name: f"Hugging Face vision models ({name}) are not implemented as image encoders; use a torchvision "
             f"encoder (vit, resnet, convnext, ...: pretrained ImageNet weights read from a local file)"
       for name in ("dinov2", "clip", "siglip")},
})
