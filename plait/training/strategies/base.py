"""The strategy interface: all the training loop knows about how (and where) it runs.

A strategy wraps the model and optimizer, runs the backward pass and the optimizer step, sums
tensors across workers, says which worker is the coordinator (the one that writes shared files),
and reads and writes the model and optimizer state for checkpoints. ``local`` is one process;
``ddp``, ``fsdp``, ``deepspeed`` and ``horovod`` implement the same methods, each in its own
module. A new strategy must write the four abstract methods; the others have defaults that suit
any strategy whose model and optimizer are whole on every worker.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from pathlib import Path

import torch
from torch import nn

MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.pt"


class Strategy(ABC):
    name: str = "local"
    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    forward_is_collective: bool = False
    """True where a forward pass talks to the other workers (sharded parameters: fsdp, ZeRO-3):
    then every worker must run the same number of forward passes, in evaluation too."""

    @property
    def is_coordinator(self) -> bool:
        return self.rank == 0

    # ---- what every strategy writes ---------------------------------------------------------

    @abstractmethod
    def prepare(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[nn.Module, torch.optim.Optimizer]:
        """Place and wrap model and optimizer for this strategy."""

    @abstractmethod
    def backward(self, loss: torch.Tensor, sync: bool = True) -> None:
        """Backward pass. ``sync`` is False on the micro-steps of gradient accumulation that are
        not followed by an optimizer step: gradients need not be exchanged yet."""

    @abstractmethod
    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The elementwise sum of ``tensor`` over all workers (returned, not in place)."""

    @abstractmethod
    def barrier(self) -> None:
        """Wait until every worker gets here."""

    # ---- defaults: whole model and optimizer on every worker ------------------------------------

    def optimizer_step(self, optimizer: torch.optim.Optimizer, parameters: list[torch.Tensor],
                       max_norm: float | None = None) -> float | None:
        """Clip the gradients' global norm to ``max_norm`` (when given), update the weights and
        zero the gradients. Returns the norm before clipping (None without clipping); a norm that
        is not finite skips the update, so the weights stay finite for the error that follows."""
        norm = self.clip_grad_norm(parameters, max_norm) if max_norm else None
        if norm is None or math.isfinite(norm):
            self.step(optimizer)
        return norm

    def clip_grad_norm(self, parameters: list[torch.Tensor], max_norm: float) -> float:
        """Clip the global gradient norm; returns the norm before clipping."""
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm).item()

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """Update the weights and zero the gradients."""
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def broadcast_object(self, value):
        """``value`` as the coordinator has it, on every worker (a small picklable object)."""
        return value

    def unwrap(self, model: nn.Module) -> nn.Module:
        """The plain module inside whatever wrapper ``prepare`` added."""
        return getattr(model, "module", model)

    def model_state(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """The full weights, as a plain module's ``state_dict`` names them. Called on every
        worker (gathering sharded weights is a collective); complete on the coordinator."""
        return self.unwrap(model).state_dict()

    def save_state(self, directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Write model and optimizer state into a checkpoint folder every worker can see.
        Called on every worker; by default the coordinator alone writes."""
        from plait.training.checkpoint import save_weights

        weights = self.model_state(model)
        if self.is_coordinator:
            save_weights(weights, directory / MODEL_FILE)
            torch.save(optimizer.state_dict(), directory / OPTIMIZER_FILE)

    def load_state(self, directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Restore what ``save_state`` wrote (on every worker)."""
        from plait.training.checkpoint import load_weights

        self.unwrap(model).load_state_dict(load_weights(directory / MODEL_FILE))
        optimizer.load_state_dict(torch.load(directory / OPTIMIZER_FILE, weights_only=True))

    def shutdown(self) -> None:
        """Release process groups and other resources."""
