"""Date encoders: [batch, 9] integers (year, month, day, weekday, day of the year, hour, minute,
second, second of the day) to [batch, output_size] (Ludwig's DateEmbed and DateWave)."""

from __future__ import annotations

import math

import torch
from torch import nn

from plait.models.embeddings import embedding_table
from plait.models.layers import fc_stack, linear

CYCLES = (("month", 1, 12, 1), ("day", 2, 31, 1), ("weekday", 3, 7, 0), ("yearday", 4, 366, 1),
          ("hour", 5, 24, 0), ("minute", 6, 60, 0), ("second", 7, 60, 0))
"""(name, column, values, first value) of the seven cyclic parts: month runs 1 to 12, weekday 0 to 6."""
SECONDS_PER_DAY = 86400


class DateEncoder(nn.Module):
    """The year through a linear map, the cyclic parts through ``cycles``, the second of the day as
    cos(2π s / 86400), concatenated, then fully connected layers."""

    def __init__(self, config, metadata: dict, cycles: nn.Module):
        super().__init__()
        low, high = metadata["year_range"]
        # The year scaled to [0, 1] over the training years: Ludwig feeds the raw year (about 2000)
        # to the linear map, whose output then swamps the other parts.
        self.year_low, self.year_span = float(low), float(max(high - low, 1))
        self.year = linear(1, 1, config.use_bias, config.weights_initializer, config.bias_initializer)
        self.dropout = nn.Dropout(config.dropout)
        self.cycles = cycles
        self.fc = fc_stack(1 + cycles.output_size + 1, config)
        self.output_size = self.fc.output_size
        self.output_shape = (self.output_size,)

    def forward(self, parts: torch.Tensor) -> torch.Tensor:
        parts = parts.long()
        year = self.year((parts[:, 0:1].float() - self.year_low) / self.year_span)
        second_of_day = torch.cos(parts[:, 8:9].float() * (2 * math.pi / SECONDS_PER_DAY))
        return self.fc(torch.cat([self.dropout(year), self.cycles(parts), second_of_day], dim=1))


class CycleEmbeddings(nn.Module):
    """DateEmbed's cyclic parts: a learned vector for each value of each."""

    def __init__(self, config):
        super().__init__()
        self.tables = nn.ModuleList(embedding_table([str(v) for v in range(values)], config.embedding_size,
                                                    initializer=config.weights_initializer)
                                    for _, _, values, _ in CYCLES)
        self.dropout = nn.Dropout(config.dropout)
        self.output_size = len(CYCLES) * config.embedding_size

    def forward(self, parts: torch.Tensor) -> torch.Tensor:
        return self.dropout(torch.cat([table(parts[:, column] - first)
                                       for table, (_, column, _, first) in zip(self.tables, CYCLES)], dim=1))


class CycleWaves(nn.Module):
    """DateWave's cyclic parts: each the point (sin, cos) of its angle 2π value / period."""

    def __init__(self):
        super().__init__()
        self.register_buffer("periods", torch.tensor([float(values) for _, _, values, _ in CYCLES]))
        self.columns = [column for _, column, _, _ in CYCLES]
        self.output_size = 2 * len(CYCLES)

    def forward(self, parts: torch.Tensor) -> torch.Tensor:
        angles = parts[:, self.columns].float() * (2 * math.pi) / self.periods
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


def date_embed(config, metadata: dict) -> DateEncoder:
    return DateEncoder(config, metadata, CycleEmbeddings(config))


def date_wave(config, metadata: dict) -> DateEncoder:
    return DateEncoder(config, metadata, CycleWaves())
