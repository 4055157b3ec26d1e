"""Direct preference optimization (Rafailov et al., 2023), and its IPO variant (Azar et al., 2023)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from plait.models.preference import PreferenceObjective, PreferenceScores


class DPO(PreferenceObjective):
    def __init__(self, trainer):
        super().__init__(trainer)
        self.beta, self.kind, self.smoothing = trainer.dpo_beta, trainer.dpo_loss_type, trainer.dpo_label_smoothing

    def loss(self, scores: PreferenceScores, chosen_loss: torch.Tensor) -> torch.Tensor:
        if self.kind == "ipo":
            # IPO regresses the margin of mean token log-probabilities onto 1 / (2 beta).
            chosen, rejected, reference_chosen, reference_rejected = scores.mean_per_token()
            margin = (chosen - rejected) - (reference_chosen - reference_rejected)
            return ((margin - 1 / (2 * self.beta)) ** 2).mean()
        margin = (scores.chosen - scores.rejected) - (scores.reference_chosen - scores.reference_rejected)
        # Label smoothing: each pair's preference is taken to be wrong with this probability.
        losses = (-F.logsigmoid(self.beta * margin) * (1 - self.smoothing)
                  - F.logsigmoid(-self.beta * margin) * self.smoothing)
        return losses.mean()
