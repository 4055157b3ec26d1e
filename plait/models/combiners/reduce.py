"""Reductions of a sequence [batch, length, width] to a vector, by the names Ludwig uses."""

from __future__ import annotations

import torch
from torch import nn


def nonzero_length(x: torch.Tensor) -> torch.Tensor:
    """Positions per row up to the last one that is not all zeros (padding is zeros)."""
    used = x.abs().amax(-1) > 0  # [batch, length]
    positions = torch.arange(1, x.shape[1] + 1, device=x.device)
    return (used * positions).amax(1)


class Reduce(nn.Module):
    """One of sum, mean (avg), max, concat, last, attention, attention_pooling; None/none keeps
    the sequence."""

    def __init__(self, mode: str | None, length: int, width: int):
        super().__init__()
        self.mode = {"avg": "mean", "None": None, "none": None}.get(mode, mode)
        if self.mode == "attention":  # a small feed-forward network scores each position
            self.score = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 1, bias=False))
        elif self.mode == "attention_pooling":  # one learned query attends over the positions
            self.query = nn.Parameter(torch.randn(width) / width**0.5)
        self.output_shape = (length * width,) if self.mode == "concat" else (width,) if self.mode else (length, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode is None:
            return x
        if self.mode in ("sum", "mean"):
            return x.sum(1) if self.mode == "sum" else x.mean(1)
        if self.mode == "max":
            return x.amax(1)
        if self.mode == "concat":
            return x.flatten(1)
        if self.mode == "last":
            last = (nonzero_length(x) - 1).clamp(min=0)
            return x[torch.arange(x.shape[0], device=x.device), last]
        scores = self.score(x).squeeze(-1) if self.mode == "attention" else x @ self.query / x.shape[-1] ** 0.5
        return (torch.softmax(scores, dim=1).unsqueeze(-1) * x).sum(1)
