"""A strategy's model and optimizer state: the full weights (for the best evaluation's copy and
the model a run ends with) and the checkpoint files.

It is an object of its own, ``strategy.state``, rather than more methods on the strategy: the
training loop runs steps and talks to the other workers through the strategy, while checkpoints
and best weights only read and write state, and each side stays a small interface. This default
suits strategies whose model and optimizer are whole on every worker (local, ddp, horovod);
fsdp and deepspeed, where they are sharded, provide their own.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from plait.training.checkpoint import MODEL_FILE

OPTIMIZER_FILE = "optimizer.pt"


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module inside whatever wrapper a strategy's ``prepare`` added: ddp's
    ``DistributedDataParallel`` and DeepSpeed's engine keep it as ``.module``; local, fsdp (which
    shards in place) and horovod add no wrapper, so their model is returned as it is.

    A function, not a strategy method: every wrapper plait uses names the plain module alike."""
    return getattr(model, "module", model)


class StateIO:
    """Reads and writes the model and optimizer state of a strategy. Every worker calls each
    method (gathering sharded state is a collective)."""

    shards_weights: bool = False
    """True where no worker holds the whole model while training (fsdp, ZeRO-3): a full copy of
    the weights is then gathered only when needed, and on the coordinator alone."""

    def __init__(self, strategy):
        # The strategy this state belongs to (not annotated: base.py imports this module).
        self.strategy = strategy

    def full_weights(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """The full weights, as a plain module's ``state_dict`` names them; complete on the
        coordinator."""
        return unwrap(model).state_dict()

    def save_full_weights(self, model: nn.Module, path: Path) -> None:
        """Write the full weights to ``path`` (a safetensors file the coordinator writes)."""
        from plait.training.checkpoint import save_weights

        weights = self.full_weights(model)
        if self.strategy.is_coordinator:
            save_weights(weights, path)

    def save(self, directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Write model and optimizer state into a checkpoint folder every worker can see. Here
        the coordinator alone writes: every worker holds the same state."""
        from plait.training.checkpoint import save_weights

        weights = self.full_weights(model)
        if self.strategy.is_coordinator:
            save_weights(weights, directory / MODEL_FILE)
            torch.save(optimizer.state_dict(), directory / OPTIMIZER_FILE)

    def load(self, directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Restore what ``save`` wrote."""
        from plait.training.checkpoint import load_weights

        unwrap(model).load_state_dict(load_weights(directory / MODEL_FILE))
        optimizer.load_state_dict(torch.load(directory / OPTIMIZER_FILE, weights_only=True))
