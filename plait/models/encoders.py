"""Input encoders: one builder per (feature type, encoder type), registered in ``ENCODERS``.

Each module takes the feature's batch tensor and returns [batch, output_size], or, for a text
encoder with ``reduce_output: null``, [batch, length, output_size]; ``output_shape`` is that
shape without the batch: ``(output_size,)`` or ``(length, output_size)``. ``metadata`` is the
feature's preprocessing metadata (vocabulary, sequence length, vector size, number range).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from plait.errors import ModelError
from plait.utils.tokens import CACHED_EMBEDDING
from plait.models import h3_encoders as h3
from plait.models import text_encoders as t
from plait.models.date_encoders import date_embed, date_wave
from plait.models.embeddings import embedding_table
from plait.models.hf_encoders import build_hf_encoder
from plait.models.image_encoders import IMAGE_ENCODERS
from plait.models.image_input import image_input
from plait.models.torchvision_encoders import TORCHVISION_ENCODERS
from plait.utils.hf_models import is_hf_encoder
from plait.models.layers import fc_stack
from plait.models.legacy import LEGACY_ENCODER, LEGACY_ENCODERS
from plait.models.series_encoders import SERIES_ENCODERS, check_tied_channels, fit_steps, steps_of


class Passthrough(nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.output_size = size
        self.output_shape = (size,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1).float()


class Dense(nn.Module):
    """Fully connected layers over a number, 0/1 or vector input."""

    def __init__(self, size: int, config):
        super().__init__()
        self.fc = fc_stack(size, config)
        self.output_size = self.fc.output_size
        self.output_shape = (self.output_size,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.reshape(x.shape[0], -1).float())


class Periodic(nn.Module):
    """sin(2π f x + φ) with learned f and φ, then a linear projection."""

    def __init__(self, config):
        super().__init__()
        self.frequencies = nn.Parameter(torch.randn(config.num_frequencies) * config.sigma)
        self.phases = nn.Parameter(torch.rand(config.num_frequencies) * 2 * math.pi)
        self.projection = nn.Linear(config.num_frequencies, config.output_size)
        self.output_size = config.output_size
        self.output_shape = (self.output_size,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], 1).float()
        return self.projection(torch.sin(2 * math.pi * x * self.frequencies + self.phases))


def _bin_edges(metadata: dict, num_bins: int) -> torch.Tensor:
    """Even bins over the training range, in the normalized units the model reads (the number
    feature's ``model_range``; a model saved without it has its edges in its weights)."""
    if "model_range" in metadata:
        low, high = metadata["model_range"]
    else:
        shift, scale = metadata.get("shift", 0.0), metadata.get("scale", 1.0) or 1.0
        low = (metadata.get("min", 0.0) - shift) / scale
        high = (metadata.get("max", 1.0) - shift) / scale
    if not high > low:  # a constant column
        high = low + 1.0
    return torch.linspace(low, high, num_bins + 1)


class PiecewiseLinear(nn.Module):
    """Per bin, where the value lies inside it (0 below, 1 above), then a linear projection."""

    def __init__(self, config, metadata: dict):
        super().__init__()
        self.register_buffer("edges", _bin_edges(metadata, config.num_bins))
        self.projection = nn.Linear(config.num_bins, config.output_size)
        self.output_size = config.output_size
        self.output_shape = (self.output_size,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], 1).float()
        widths = self.edges[1:] - self.edges[:-1]
        return self.projection(((x - self.edges[:-1]) / widths).clamp(0.0, 1.0))


class Bins(nn.Module):
    """A learned vector per bin of the value."""

    def __init__(self, config, metadata: dict):
        super().__init__()
        self.register_buffer("inner_edges", _bin_edges(metadata, config.num_bins)[1:-1].contiguous())
        self.embedding = nn.Embedding(config.num_bins, config.output_size)
        self.output_size = config.output_size
        self.output_shape = (self.output_size,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.embedding(torch.bucketize(x.reshape(-1).float(), self.inner_edges))


class CategoryEmbed(nn.Module):
    """A vector per category value: learned (dense, hash) or one-hot (sparse)."""

    def __init__(self, table: nn.Embedding, dropout: float = 0.0, buckets: int | None = None):
        super().__init__()
        self.embedding = table
        self.dropout = nn.Dropout(dropout)
        self.buckets = buckets
        self.output_size = table.embedding_dim
        self.output_shape = (self.output_size,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        index = x.long().reshape(-1)
        return self.dropout(self.embedding(index % self.buckets if self.buckets else index))


def _category_dense(config, vocabulary: list[str]) -> CategoryEmbed:
    size = config.embedding_size or min(50, (len(vocabulary) + 1) // 2 + 1)
    table = embedding_table(vocabulary, size, "dense", config.embeddings_trainable, config.pretrained_embeddings,
                            config.embedding_initializer)
    return CategoryEmbed(table, config.dropout)


class OneHot(nn.Module):
    def __init__(self, vocab_size: int):
        super().__init__()
        self.output_size = vocab_size
        self.output_shape = (vocab_size,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.one_hot(x.long().reshape(-1), self.output_size).float()


class SetEmbed(nn.Module):
    """The sum of the set's elements' embeddings (multi-hot times the table), then fully connected layers."""

    def __init__(self, vocabulary: list[str], config):
        super().__init__()
        self.embedding = embedding_table(vocabulary, config.embedding_size, config.representation,
                                         config.embeddings_trainable and config.representation == "dense",
                                         config.pretrained_embeddings, config.weights_initializer)
        self.dropout = nn.Dropout(config.dropout)
        self.fc = fc_stack(self.embedding.embedding_dim, config)
        self.output_size = self.fc.output_size
        self.output_shape = (self.output_size,)

    def forward(self, multi_hot: torch.Tensor) -> torch.Tensor:
        return self.fc(self.dropout(multi_hot.float() @ self.embedding.weight))


def _vocab(meta: dict) -> list[str]:
    return list(meta["vocabulary"])


# (feature type, encoder type) -> builder(encoder config, feature metadata)
ENCODERS: dict[tuple[str, str], Callable[..., nn.Module]] = {
    ("number", "passthrough"): lambda c, m: Passthrough(1),
    ("number", "dense"): lambda c, m: Dense(1, c),
    ("number", "periodic"): lambda c, m: Periodic(c),
    ("number", "ple"): lambda c, m: PiecewiseLinear(c, m),
    ("number", "bins"): lambda c, m: Bins(c, m),
    ("binary", "passthrough"): lambda c, m: Passthrough(1),
    ("binary", "dense"): lambda c, m: Dense(1, c),
    ("category", "dense"): lambda c, m: _category_dense(c, _vocab(m)),
    ("category", "sparse"): lambda c, m: CategoryEmbed(
        embedding_table(_vocab(m), 0, "sparse", c.embeddings_trainable), c.dropout),
    ("category", "onehot"): lambda c, m: OneHot(len(_vocab(m))),
    ("category", "passthrough"): lambda c, m: Passthrough(1),
    ("category", "hash"): lambda c, m: CategoryEmbed(nn.Embedding(c.num_hash_buckets, c.embedding_size),
                                                     buckets=c.num_hash_buckets),
    ("set", "embed"): lambda c, m: SetEmbed(_vocab(m), c),
    ("vector", "dense"): lambda c, m: Dense(m["vector_size"], c),
    ("vector", "passthrough"): lambda c, m: Passthrough(m["vector_size"]),
    **{("text", name): builder for name, builder in t.TEXT_BUILDERS.items()},
    **SERIES_ENCODERS,
    ("date", "embed"): date_embed,
    ("date", "wave"): date_wave,
    ("h3", "embed"): lambda c, m: h3.H3Embed(c),
    ("h3", "weighted_sum"): lambda c, m: h3.H3WeightedSum(c),
    ("h3", "rnn"): lambda c, m: h3.H3RNN(c),
    ("bag", "embed"): lambda c, m: SetEmbed(_vocab(m), c),  # multi-hot or counts: the same weighted sum
    **{("sequence", name): builder for name, builder in t.TEXT_BUILDERS.items()},
    # An image encoder's body: build_encoder puts it inside the pixel scaling and augmentation.
    **{("image", name): builder for name, builder in {**IMAGE_ENCODERS, **TORCHVISION_ENCODERS}.items()},
}


def build_encoder(feature, metadata: dict, load_pretrained: bool = False) -> nn.Module:
    if LEGACY_ENCODER in metadata:  # a module of an old saved model (plait/models/legacy.py)
        return LEGACY_ENCODERS[metadata[LEGACY_ENCODER]](feature.encoder, metadata)
    if feature.type == "image":
        return image_input(feature, metadata, ENCODERS[("image", feature.encoder.type)], load_pretrained)
    if CACHED_EMBEDDING in metadata:  # the encoder ran at preprocessing: its output is the input
        return Passthrough(metadata[CACHED_EMBEDDING])
    if is_hf_encoder(feature.encoder):
        return build_hf_encoder(feature.encoder, metadata, load_pretrained, feature.name)
    return ENCODERS[(feature.type, feature.encoder.type)](feature.encoder, metadata)


def build_encoders(features: list, metadata: dict, load_pretrained: bool = False) -> dict[str, nn.Module]:
    """Every input feature's encoder by name; a ``tied`` feature shares its target's module (one
    set of weights), reading its own values through the target's vocabulary. ``load_pretrained``:
    see :class:`~plait.models.ecd.ECD`."""
    encoders = {f.name: build_encoder(f, metadata[f.name], load_pretrained) for f in features if f.tied is None}
    for f in features:
        if f.tied is not None:
            encoders[f.name] = TiedInput(encoders[f.tied], f.type, metadata[f.name], metadata[f.tied])
    return encoders


class TiedInput(nn.Module):
    """Another feature's encoder, fed this feature's values translated into that feature's
    vocabulary (and, for text, its sequence length).

    The encoder is held, not registered as a child: its weights belong to the other feature's
    entry of the model, once, so that a saved state (safetensors refuses tensors stored twice),
    the optimizer and the strategies see each weight once."""

    def __init__(self, shared: nn.Module, ftype: str, own: dict, target: dict):
        super().__init__()
        self._shared = (shared,)  # a tuple: nn.Module registers a module attribute, not a tuple
        self.ftype = ftype
        self.output_size, self.output_shape = shared.output_size, shared.output_shape
        self.length = target.get("sequence_length")
        self.steps = steps_of(target)  # timeseries and audio
        self.target_size = len(target.get("vocabulary") or [])
        mapping = _vocabulary_map(own.get("vocabulary"), target.get("vocabulary"))
        self.register_buffer("mapping", mapping if mapping is not None else torch.zeros(0, dtype=torch.long))
        _check_vector_sizes(ftype, own, target)
        check_tied_channels(ftype, own, target)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mapping.numel():
            if self.ftype in ("set", "bag"):  # multi-hot (counts) columns of this vocabulary onto the target's
                x = torch.zeros(x.shape[0], self.target_size, device=x.device).index_add_(1, self.mapping, x.float())
                x = x.clamp(max=1.0) if self.ftype == "set" else x
            else:
                x = self.mapping[x.long()]
        if self.ftype in ("text", "sequence") and self.length is not None and x.shape[1] != self.length:
            x = nn.functional.pad(x, (0, self.length - x.shape[1])) if x.shape[1] < self.length else x[:, :self.length]
        if self.steps is not None and x.shape[1] != self.steps:
            x = fit_steps(x, self.steps)
        return self.shared(x)

    @property
    def shared(self) -> nn.Module:
        return self._shared[0]


def _vocabulary_map(own: list | None, target: list | None) -> torch.Tensor | None:
    """For each entry of ``own``, its index in ``target`` (unknown words: the target's <UNK>, or
    0); None where the vocabularies are the same or there are none."""
    if own is None or target is None or list(own) == list(target):
        return None
    index = {word: i for i, word in enumerate(target)}
    unknown = index.get("<UNK>", 0)
    return torch.tensor([index.get(word, unknown) for word in own], dtype=torch.long)


def _check_vector_sizes(ftype: str, own: dict, target: dict) -> None:
    if ftype == "vector" and own.get("vector_size") != target.get("vector_size"):
        raise ModelError(f"tied: a vector input of size {own.get('vector_size')} cannot share the encoder of one of "
                         f"size {target.get('vector_size')}; tie vectors of the same size")

