"""One process, one device: the identity of every distributed operation."""

from __future__ import annotations

import torch

from plait.training.strategies.base import Strategy


class LocalStrategy(Strategy):
    name = "local"

    def __init__(self, device: str | None = None):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))

    def prepare(self, model, optimizer, steps):
        return model.to(self.device), optimizer

    def backward(self, loss, sync=True):
        loss.backward()

    def all_reduce_sum(self, tensor):
        return tensor

    def barrier(self):
        pass
