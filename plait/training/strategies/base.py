"""The strategy interface: all the training loop knows about how (and where) it runs.

A strategy wraps the model and optimizer, runs the backward pass and the optimizer step, sums
tensors across workers, says which worker is the coordinator (the one that writes shared files)
and releases what it holds at the end. ``local`` is one process; ``ddp``, ``fsdp``, ``deepspeed``
and ``horovod`` implement the same methods, each in its own module. A new strategy must write the
four abstract methods; the others have defaults that suit any strategy whose model and optimizer
are whole on every worker.

Reading and writing the model and optimizer state (checkpoints, best weights) is a separate
object, ``strategy.state`` (see ``state.py``), so that neither interface grows past a handful of
methods. The plain module inside a prepared model is ``unwrap(model)``, a function of ``state.py``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from torch import nn

from plait.training.strategies.state import StateIO


@dataclass(frozen=True)
class StepPlan:
    """What a strategy is told of the steps it runs (never the trainer section)."""

    batch_size: int
    """Rows per worker in each forward and backward pass."""
    accumulation: int = 1
    """Backward passes per optimizer step."""
    max_norm: float | None = None
    """The gradients' global norm is clipped to this (None: not clipped)."""
    clip_value: float | None = None
    """Each gradient element is clipped to +-this, in the parameters' ``.grad`` (None: not clipped)."""

    @classmethod
    def of(cls, sizes, clipping) -> StepPlan:
        """From the run's ``TrainingSizes`` and its ``trainer.gradient_clipping`` section."""
        return cls(sizes.batch_size, sizes.accumulation, clipping.max_norm or None, clipping.clipvalue or None)


class Strategy(ABC):
    name: str = "local"
    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    forward_is_collective: bool = False
    """True where a forward pass talks to the other workers (sharded parameters: fsdp, ZeRO-3):
    then every worker must run the same number of forward passes, in evaluation too."""
    whole_parameters_outside_forward: bool = True
    """False where a worker holds only a partition of each weight between forward passes
    (ZeRO-3): a penalty on the weights (``regularization_lambda``) cannot be computed then."""
    whole_gradients_in_step: bool = True
    """True where, at ``optimizer_step``, every worker holds the whole gradients, the same on all
    (local, ddp): a ``torch.amp.GradScaler`` then finds the same overflow on every worker and
    all skip the same steps. Sharded gradients (fsdp, deepspeed) or gradients exchanged inside
    the step (horovod) need a scaler of their own."""

    @property
    def is_coordinator(self) -> bool:
        return self.rank == 0

    @property
    def state(self) -> StateIO:
        """Reads and writes this strategy's model and optimizer state. A strategy whose state is
        sharded over the workers overrides this with its own ``StateIO``. (Made on each use: a
        small object, used at checkpoints and evaluations, and no reference cycle to keep.)"""
        return StateIO(self)

    # ---- what every strategy writes ---------------------------------------------------------

    @abstractmethod
    def prepare(self, model: nn.Module, optimizer: torch.optim.Optimizer, steps: StepPlan
                ) -> tuple[nn.Module, torch.optim.Optimizer]:
        """Place and wrap model and optimizer for this strategy, for the steps ``steps`` describes."""

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
                       max_norm: float | None = None, scaler: torch.amp.GradScaler | None = None) -> float | None:
        """Clip the gradients' global norm to ``max_norm`` (when given), update the weights and
        zero the gradients. Returns the norm before clipping (None without clipping); a norm that
        is not finite skips the update, so the weights stay finite for the error that follows.
        With float16's ``scaler`` (its ``unscale_`` called already), the scaler decides the skip
        (an overflow is expected then: it lowers the scale) and updates its scale.

        A template: a strategy changes how the norm is computed (``_clip_grad_norm``) or how the
        weights are updated (``_step``) and keeps this order and the skip."""
        norm = self._clip_grad_norm(parameters, max_norm) if max_norm else None
        if scaler is not None:
            scaler.step(optimizer)  # optimizer.step(), unless unscale_ found inf or NaN
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        elif norm is None or math.isfinite(norm):
            self._step(optimizer)
        return norm

    def broadcast_object(self, value):
        """``value`` as the coordinator has it, on every worker (a small picklable object)."""
        return value

    def release_model(self) -> None:
        """Drop this strategy's references to the model and optimizer it prepared (training is
        over), so that their memory goes before the final model is built; the workers stay
        connected."""

    def shutdown(self) -> None:
        """Release process groups and other resources."""

    # ---- hooks of optimizer_step (not called from outside) ----------------------------------------

    def _clip_grad_norm(self, parameters: list[torch.Tensor], max_norm: float) -> float:
        """Clip the global gradient norm; returns the norm before clipping."""
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm).item()

    def _step(self, optimizer: torch.optim.Optimizer) -> None:
        """Update the weights and zero the gradients."""
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
