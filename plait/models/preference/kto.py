"""Kahneman-Tversky optimization (Ethayarajh et al., 2024) on pairs: each chosen completion is a
desirable example of its prompt, each rejected one an undesirable example."""

from __future__ import annotations

import torch

from plait.models.preference import PreferenceObjective, PreferenceScores


class KTO(PreferenceObjective):
    needs_mismatched = True

    def __init__(self, trainer):
        super().__init__(trainer)
        self.beta = trainer.kto_beta

    def loss(self, scores: PreferenceScores, chosen_loss: torch.Tensor) -> torch.Tensor:
        # The reference point: how far the policy has drifted from the reference, estimated on
        # completions that do not belong to their prompts (no gradient flows through it).
        drift = (scores.mismatched - scores.reference_mismatched).mean().clamp(min=0).detach()
        chosen = 1 - torch.sigmoid(self.beta * (scores.chosen - scores.reference_chosen - drift))
        rejected = 1 - torch.sigmoid(self.beta * (drift - (scores.rejected - scores.reference_rejected)))
        return torch.cat([chosen, rejected]).mean()
