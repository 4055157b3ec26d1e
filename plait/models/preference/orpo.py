"""Odds ratio preference optimization (Hong et al., 2024): supervised fine-tuning on the chosen
completions plus a loss on the odds of chosen over rejected, with no reference model."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from plait.models.preference import PreferenceObjective, PreferenceScores


class ORPO(PreferenceObjective):
    def __init__(self, trainer):
        super().__init__(trainer)
        self.beta = trainer.orpo_beta

    def loss(self, scores: PreferenceScores, chosen_loss: torch.Tensor) -> torch.Tensor:
        chosen, rejected, _, _ = scores.mean_per_token()
        log_odds = (chosen - rejected) - (_log_one_minus_exp(chosen) - _log_one_minus_exp(rejected))
        return chosen_loss - self.beta * F.logsigmoid(log_odds).mean()


def _log_one_minus_exp(log_p: torch.Tensor) -> torch.Tensor:
    """log(1 - p) from log p, stable where p is near 1 (expm1), and finite at p = 1."""
    return torch.log(-torch.expm1(log_p.clamp(max=-1e-6)))
