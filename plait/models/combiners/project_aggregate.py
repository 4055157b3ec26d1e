"""The project_aggregate combiner: each encoder output projected to one width, the projections
averaged, then fully connected layers."""

from __future__ import annotations

import torch
from torch import nn

from plait.models.combiners.base import Combined, flat_inputs, flat_size
from plait.models.layers import fc_stack, initialize


class ProjectAggregateCombiner(nn.Module):
    def __init__(self, input_shapes: dict[str, tuple], config, feature_types: dict[str, str] | None = None):
        super().__init__()
        self.projections = nn.ModuleList(nn.Linear(flat_size(s), config.projection_size, bias=config.use_bias)
                                         for s in input_shapes.values())
        for projection in self.projections:
            initialize(projection.weight, config.weights_initializer)
            if config.use_bias:
                initialize(projection.bias, config.bias_initializer)
        self.fc = fc_stack(config.projection_size, config, input_norm=True, residual=config.residual)
        self.output_size = self.fc.output_size
        self.output_shape = (self.output_size,)

    def forward(self, encoded: dict[str, torch.Tensor]) -> Combined:
        projected = torch.stack([p(x) for p, x in zip(self.projections, flat_inputs(encoded))], dim=1)
        return Combined(self.fc(projected.mean(1)))
