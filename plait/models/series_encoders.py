"""Timeseries and audio encoders: a series as it is (passthrough) or through fully connected
layers (dense), and the text encoders over steps of floats (:func:`float_encoder`).

An input's padded steps come as NaN (plait.features.timeseries): each encoder reads them as
``padding_value``, and the sequence encoders mask them out.
"""

from __future__ import annotations

import torch
from torch import nn

from plait.errors import ModelError
from plait.models.layers import fc_stack
from plait.models.text_encoders import BODIES, FloatSteps, Reducer, float_encoder


class SeriesPassthrough(nn.Module):
    """The steps as they are: [steps, 1] with reduce_output null, else reduced (concat: the
    steps side by side, one number each)."""

    def __init__(self, steps: int, padding_value: float, reduce_output: str | None):
        super().__init__()
        self.steps = FloatSteps(1, padding_value)
        self.reducer = Reducer(reduce_output, 1, steps) if reduce_output else None
        self.output_shape = (self.reducer.output_size,) if self.reducer else (steps, 1)
        self.output_size = self.output_shape[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, mask = self.steps(x)
        return x if self.reducer is None else self.reducer(x, mask)


class TokenPassthrough(nn.Module):
    """A sequence input's token ids as numbers, one per step (Ludwig's sequence passthrough):
    padding (id 0) is a padded step, left out of the reductions."""

    def __init__(self, steps: int, reduce_output: str | None):
        super().__init__()
        self.series = SeriesPassthrough(steps, 0.0, reduce_output)
        self.output_shape, self.output_size = self.series.output_shape, self.series.output_size

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.series(tokens.float().masked_fill(tokens == 0, float("nan")))


class SeriesDense(nn.Module):
    """Fully connected layers over the steps of a series."""

    def __init__(self, steps: int, padding_value: float, config):
        super().__init__()
        self.padding_value = padding_value
        self.fc = fc_stack(steps, config)
        self.output_size = self.fc.output_size
        self.output_shape = (self.output_size,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float().reshape(x.shape[0], -1)
        return self.fc(x.masked_fill(torch.isnan(x), self.padding_value))


def _timeseries(name: str):
    return lambda c, m: float_encoder(name, c, m["timeseries_length"], 1, m["padding_value"])


def _audio(name: str):
    return lambda c, m: float_encoder(name, c, m["frames"], m["channels"], m["padding_value"])


SERIES_ENCODERS = {
    ("timeseries", "passthrough"): lambda c, m: SeriesPassthrough(m["timeseries_length"], m["padding_value"],
                                                                  c.reduce_output),
    ("timeseries", "dense"): lambda c, m: SeriesDense(m["timeseries_length"], m["padding_value"], c),
    ("sequence", "passthrough"): lambda c, m: TokenPassthrough(m["sequence_length"], c.reduce_output),
    **{("timeseries", name): _timeseries(name) for name in BODIES if name != "embed"},
    # Ludwig gives audio neither the embed encoder nor the transformer.
    **{("audio", name): _audio(name) for name in BODIES if name not in ("embed", "transformer")},
}
"""(feature type, encoder type) -> builder(encoder config, feature metadata), for plait.models.encoders."""


def steps_of(metadata: dict) -> int | None:
    """The steps of a timeseries or audio input; None for other types."""
    return metadata.get("timeseries_length") or metadata.get("frames")


def fit_steps(x: torch.Tensor, steps: int) -> torch.Tensor:
    """A batch of float steps cut, or padded at the end (NaN: padding), to ``steps``."""
    if x.shape[1] >= steps:
        return x[:, :steps]
    padding = x.new_full((x.shape[0], steps - x.shape[1], *x.shape[2:]), float("nan"))
    return torch.cat([x, padding], dim=1)


def check_tied_channels(ftype: str, own: dict, target: dict) -> None:
    if ftype == "audio" and own.get("channels") != target.get("channels"):
        raise ModelError(f"tied: an audio input of {own.get('channels')} features per step cannot share the encoder "
                         f"of one of {target.get('channels')}; tie audio inputs of the same preprocessing type, "
                         f"window and filter bands")
