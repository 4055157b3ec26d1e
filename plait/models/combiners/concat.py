"""The concat combiner: every encoder output side by side, then fully connected layers."""

from __future__ import annotations

import torch
from torch import nn

from plait.errors import ConfigError
from plait.models.combiners.base import Combined, flat_size
from plait.models.layers import fc_stack


class ConcatCombiner(nn.Module):
    def __init__(self, input_shapes: dict[str, tuple], config, feature_types: dict[str, str] | None = None):
        super().__init__()
        sequences = [name for name, shape in input_shapes.items() if len(shape) > 1]
        if sequences and not config.flatten_inputs:
            raise ConfigError(f"combiner.flatten_inputs: false, but the encoders of {', '.join(sequences)} output "
                              "sequences; set combiner.flatten_inputs: true, or a reduce_output in those encoders")
        self.flatten = config.flatten_inputs
        self.fc = fc_stack(sum(flat_size(s) for s in input_shapes.values()), config, input_norm=True,
                           residual=config.residual)
        self.output_size = self.fc.output_size
        self.output_shape = (self.output_size,)

    def forward(self, encoded: dict[str, torch.Tensor]) -> Combined:
        parts = [x.flatten(1) for x in encoded.values()] if self.flatten else list(encoded.values())
        return Combined(self.fc(torch.cat(parts, dim=-1)))
