"""The objectives of an LLM's preference trainers (``trainer.type`` dpo, kto, orpo).

Each row pairs a prompt with a chosen completion (the output feature's column) and a rejected one
(``trainer.rejected_column``). The LLM scores both in one teacher-forced pass and hands the
objective each completion's log-probability under the model being trained (the policy) and, for
the objectives that need one, under the reference model: the base with the adapter switched off,
so no second copy of the model is held. One module per objective, chosen by ``OBJECTIVES``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

PREFERENCE = "__preference__"
"""The key of the forward pass's per-row log-probabilities (PreferenceScores' columns)."""


@dataclass(frozen=True)
class PreferenceScores:
    """Per-row log-probabilities of a batch's completions (sums over their tokens), and their
    token counts. ``reference_*`` are zero where the objective needs no reference; ``mismatched_*``
    (each prompt with another row's chosen completion: KTO's estimate of the policy's divergence
    from the reference) zero where it needs none."""

    chosen: torch.Tensor
    rejected: torch.Tensor
    chosen_tokens: torch.Tensor
    rejected_tokens: torch.Tensor
    reference_chosen: torch.Tensor
    reference_rejected: torch.Tensor
    mismatched: torch.Tensor
    reference_mismatched: torch.Tensor

    def columns(self) -> torch.Tensor:
        """``[rows, 8]``: the tensor the forward pass returns (a dict of tensors crosses DDP)."""
        return torch.stack([getattr(self, name) for name in self.__dataclass_fields__], dim=1)

    @classmethod
    def of(cls, columns: torch.Tensor) -> PreferenceScores:
        return cls(*columns.float().unbind(1))

    def margins(self) -> torch.Tensor:
        """Each pair's implicit reward margin: how much more the policy prefers the chosen
        completion than the reference does (without a reference: than indifference)."""
        return (self.chosen - self.reference_chosen) - (self.rejected - self.reference_rejected)

    def mean_per_token(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(chosen, rejected, reference chosen, reference rejected) per token: IPO's and ORPO's
        completions are compared by their mean token log-probability."""
        chosen, rejected = self.chosen_tokens.clamp(min=1), self.rejected_tokens.clamp(min=1)
        return (self.chosen / chosen, self.rejected / rejected,
                self.reference_chosen / chosen, self.reference_rejected / rejected)


class PreferenceObjective(ABC):
    needs_mismatched: bool = False
    """Whether the loss reads ``mismatched`` log-probabilities (another pass of the batch)."""

    def __init__(self, trainer):
        self.needs_reference = trainer.compares_with_reference
        """Whether the loss compares the policy with the reference model (the config says, which
        requires an adapter for it)."""

    @abstractmethod
    def loss(self, scores: PreferenceScores, chosen_loss: torch.Tensor) -> torch.Tensor:
        """The batch's loss, from its scores and the chosen completions' mean token cross-entropy."""


def preference_objective(trainer) -> PreferenceObjective | None:
    """The objective of an LLM trainer config; None for finetune and none."""
    from plait.models.preference.dpo import DPO
    from plait.models.preference.kto import KTO
    from plait.models.preference.orpo import ORPO

    objectives = {"dpo": DPO, "kto": KTO, "orpo": ORPO}
    return objectives[trainer.type](trainer) if trainer.type in objectives else None
