"""The tabtransformer combiner (Huang et al., 2020): the encodings of the non-numeric features
are tokens of a transformer; number and binary encodings skip it, layer-normalized, and join the
reduced tokens before the fully connected layers."""

from __future__ import annotations

import torch
from torch import nn

from plait.models.combiners.base import Combined, flat_size
from plait.models.layers import fc_stack
from plait.models.combiners.transformer import TokensHead, projections, transformer_stack

SKIPS_TRANSFORMER = {"number", "binary"}


class TabTransformerCombiner(nn.Module):
    def __init__(self, input_shapes: dict[str, tuple], config, feature_types: dict[str, str] | None = None):
        super().__init__()
        types = feature_types or {}
        self.tokens = [n for n in input_shapes if types.get(n) not in SKIPS_TRANSFORMER]
        self.skipped = [n for n in input_shapes if types.get(n) in SKIPS_TRANSFORMER]
        name_size = config.embed_input_feature_name
        self.add_name = name_size == "add"
        name_width = config.hidden_size if self.add_name else name_size or 0
        projected = config.hidden_size if self.add_name else config.hidden_size - name_width
        self.projections = projections([flat_size(input_shapes[n]) for n in self.tokens], projected, config)
        # A learned vector per feature that says which feature a token is.
        self.name_embedding = nn.Parameter(torch.randn(len(self.tokens), name_width) * 0.02) if name_width else None
        self.transformer = transformer_stack(config) if self.tokens else None
        skipped_size = sum(flat_size(input_shapes[n]) for n in self.skipped)
        # Layer norm of a single value is always zero: skip it then, as Ludwig does.
        self.skipped_norm = nn.LayerNorm(skipped_size) if skipped_size > 1 else nn.Identity()
        self.head = TokensHead(len(self.tokens), skipped_size, config) if self.tokens else None
        if self.head is None:  # only numbers and binaries: no tokens
            self.fc = fc_stack(skipped_size, config, input_norm=True, residual=config.fc_residual)
        self.output_shape = self.head.output_shape if self.head else (self.fc.output_size,)
        self.output_size = self.output_shape[-1]

    def forward(self, encoded: dict[str, torch.Tensor]) -> Combined:
        skipped = self.skipped_norm(torch.cat([encoded[n].flatten(1) for n in self.skipped], -1)) if self.skipped else None
        if self.head is None:
            return Combined(self.fc(skipped))
        tokens = torch.stack([p(encoded[n].flatten(1)) for p, n in zip(self.projections, self.tokens)], dim=1)
        if self.name_embedding is not None:
            names = self.name_embedding.expand(tokens.shape[0], -1, -1)
            tokens = tokens + names if self.add_name else torch.cat([tokens, names], dim=-1)
        return Combined(self.head(self.transformer(tokens), skipped))
