"""The strategy interface: all the training loop knows about how (and where) it runs.

A strategy wraps the model and optimizer, runs the backward pass, sums tensors across
workers, and says which worker is the coordinator (the one that writes files). ``local`` is one
process; distributed strategies (ddp, fsdp, deepspeed, horovod) implement the same methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import nn


class Strategy(ABC):
    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_coordinator(self) -> bool:
        return self.rank == 0

    @abstractmethod
    def prepare(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[nn.Module, torch.optim.Optimizer]:
        """Place and wrap model and optimizer for this strategy."""

    @abstractmethod
    def backward(self, loss: torch.Tensor) -> None:
        """Backward pass (gradient synchronization included, where the strategy has one)."""

    @abstractmethod
    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The elementwise sum of ``tensor`` over all workers (returned, not in place)."""

    @abstractmethod
    def barrier(self) -> None:
        """Wait until every worker gets here."""

    def broadcast_object(self, value):
        """``value`` as the coordinator has it, on every worker (a small picklable object)."""
        return value

    def unwrap(self, model: nn.Module) -> nn.Module:
        """The plain module inside whatever wrapper ``prepare`` added."""
        return getattr(model, "module", model)

    def shutdown(self) -> None:
        """Release process groups and other resources."""
