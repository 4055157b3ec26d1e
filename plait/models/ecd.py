"""The encoder-combiner-decoder model: a plain ``nn.Module`` with no distributed code."""

from __future__ import annotations

import torch
from torch import nn

from plait.models.combiners import build_combiner
from plait.models.encoders import build_encoder
from plait.models.outputs import build_head


class ECD(nn.Module):
    def __init__(self, config, metadata: dict):
        super().__init__()
        features = metadata["features"]
        self.input_names = [f.name for f in config.input_features]
        self.output_names = [f.name for f in config.output_features]
        self.encoders = nn.ModuleDict({f.name: build_encoder(f, features[f.name]) for f in config.input_features})
        self.combiner = build_combiner(config.combiner, [e.output_size for e in self.encoders.values()])
        self.heads = nn.ModuleDict(
            {f.name: build_head(f, features[f.name], self.combiner.output_size) for f in config.output_features}
        )
        self.loss_weights = {f.name: f.loss.weight for f in config.output_features}

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        encoded = [self.encoders[name](inputs[name]) for name in self.input_names]
        hidden = self.combiner(encoded)
        return {name: head(hidden) for name, head in self.heads.items()}

    def loss(self, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        """The weighted total loss and each output's loss."""
        losses = {name: self.heads[name].loss(logits[name], targets[name]) for name in self.output_names}
        total = sum(self.loss_weights[name] * loss for name, loss in losses.items())
        return total, losses
