"""The sequence combiners: ``sequence_concat`` joins every encoder output to the main sequence
feature's output, position by position; ``sequence`` then runs a sequence encoder over it."""

from __future__ import annotations

import torch
from torch import nn

from plait.errors import ConfigError
from plait.models.combiners.base import Combined
from plait.models.combiners.reduce import Reduce

SEQUENCE_ENCODER_WIDTH = 256  # Ludwig's default num_filters and state_size


def main_sequence(input_shapes: dict[str, tuple], config) -> str:
    """The main sequence feature: the configured one, else the first with a sequence output."""
    name = config.main_sequence_feature or next((n for n, s in input_shapes.items() if len(s) == 2), None)
    if name is None or len(input_shapes[name]) != 2:
        shown = f"{name!r} outputs a vector" if name else "no input feature outputs a sequence"
        raise ConfigError(f"combiner.main_sequence_feature: {shown}; the {config.type} combiner needs a text "
                          "input whose encoder keeps the sequence (encoder reduce_output: null)")
    length = input_shapes[name][0]
    for other, shape in input_shapes.items():
        if len(shape) == 2 and shape[0] != length:
            raise ConfigError(f"input feature {other!r}: its sequence is {shape[0]} long, the main sequence "
                              f"{name!r} {length}; give both the same max_sequence_length, or reduce {other!r}")
    return name


class SequenceConcat(nn.Module):
    """[batch, length, sum of widths]; positions past the main sequence's end are zeros."""

    def __init__(self, input_shapes: dict[str, tuple]  , config):
        super().__init__()
        self.main = main_sequence(input_shapes, config)
        self.length = input_shapes[self.main][0]
        self.width = sum(s[-1] for s in input_shapes.values())

    def forward(self, encoded: dict[str, torch.Tensor]) -> torch.Tensor:
        main = encoded[self.main]
        parts = [main] + [x if x.dim() == 3 else x.unsqueeze(1).expand(-1, self.length, -1)
                          for name, x in encoded.items() if name != self.main]
        used = (main.abs().amax(-1, keepdim=True) > 0).to(main.dtype)  # padding encodes to zeros
        return torch.cat(parts, dim=-1) * used


class SequenceConcatCombiner(nn.Module):
    def __init__(self, input_shapes: dict[str, tuple], config, feature_types: dict[str, str] | None = None):
        super().__init__()
        self.concat = SequenceConcat(input_shapes, config)
        self.reduce = Reduce(config.reduce_output, self.concat.length, self.concat.width)
        self.output_shape = self.reduce.output_shape
        self.output_size = self.output_shape[-1]

    def forward(self, encoded: dict[str, torch.Tensor]) -> Combined:
        return Combined(self.reduce(self.concat(encoded)))


class ParallelCNN(nn.Module):
    """Convolutions of widths 2, 3, 4 and 5 side by side ("same" padding), ReLU, concatenated."""

    def __init__(self, width: int):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(width, SEQUENCE_ENCODER_WIDTH, k, padding="same") for k in (2, 3, 4, 5))
        self.output_size = 4 * SEQUENCE_ENCODER_WIDTH

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.transpose(1, 2)
        return torch.cat([torch.relu(conv(channels)) for conv in self.convs], dim=1).transpose(1, 2)


class LSTM(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.rnn = nn.LSTM(width, SEQUENCE_ENCODER_WIDTH, batch_first=True)
        self.output_size = SEQUENCE_ENCODER_WIDTH

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


class Passthrough(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.output_size = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


SEQUENCE_ENCODERS = {"parallel_cnn": ParallelCNN, "rnn": LSTM, "passthrough": Passthrough}


class SequenceCombiner(nn.Module):
    def __init__(self, input_shapes: dict[str, tuple], config, feature_types: dict[str, str] | None = None):
        super().__init__()
        self.concat = SequenceConcat(input_shapes, config)
        self.encoder = SEQUENCE_ENCODERS[config.encoder.type](self.concat.width)
        self.reduce = Reduce(config.reduce_output, self.concat.length, self.encoder.output_size)
        self.output_shape = self.reduce.output_shape
        self.output_size = self.output_shape[-1]

    def forward(self, encoded: dict[str, torch.Tensor]) -> Combined:
        return Combined(self.reduce(self.encoder(self.concat(encoded))))
