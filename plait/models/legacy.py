"""Modules of older saved models that today's modules cannot stand in for.

plait/models/migrate.py translates an old model's config and weights to today's modules; where no
setting of today's reproduces what an old module computed, it names the old module here in the
feature's metadata (``LEGACY_ENCODER``), and the encoder is built from this file instead.
"""

from __future__ import annotations

import torch
from torch import nn

LEGACY_ENCODER = "legacy_encoder"
"""Metadata key of an input feature whose encoder is an old module of this file."""


class LegacyParallelCNN(nn.Module):
    """The parallel_cnn text encoder of format 1: convolutions padded by half their width on
    both sides, each max-pooled over every position (padding included), concatenated."""

    def __init__(self, vocab_size: int, config):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embedding_size, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(config.embedding_size, config.num_filters, k, padding=k // 2)
                                   for k in config.filter_sizes)
        self.dropout = nn.Dropout(config.dropout)
        self.output_size = config.num_filters * len(config.filter_sizes)
        self.output_shape = (self.output_size,)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens.long()).transpose(1, 2)  # [N, D, L] for Conv1d
        return self.dropout(torch.cat([torch.relu(conv(x)).amax(-1) for conv in self.convs], dim=-1))


LEGACY_ENCODERS = {"parallel_cnn": lambda config, metadata: LegacyParallelCNN(len(metadata["vocabulary"]), config)}
"""Old encoder modules by the name ``LEGACY_ENCODER`` records -> builder(encoder config, feature metadata)."""
