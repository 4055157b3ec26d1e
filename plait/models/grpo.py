"""Group relative policy optimization (``trainer.type: grpo``; Shao et al., 2024).

At each training step the LLM samples ``grpo_num_generations`` completions of every prompt,
rewards each, and scores them under the policy (with gradients) and the reference model (the
base with the adapter off, without). This module holds what is GRPO's own: the reward, the
advantages (each reward against its group's mean and spread) and the loss, PPO's clipped
policy gradient plus a KL penalty towards the reference (the k3 estimator, per token).
"""

from __future__ import annotations

from collections import Counter

import torch

GRPO = "__grpo__"
"""The key of a training pass's per-completion losses (``GRPOObjective.losses``)."""
REWARD = "__reward__"
"""The key of an evaluation pass's per-row rewards of the model's greedy completions."""


class GRPOObjective:
    def __init__(self, trainer):
        self.beta, self.epsilon = trainer.grpo_beta, trainer.grpo_epsilon
        self.generations = trainer.grpo_num_generations
        self.needs_reference = trainer.compares_with_reference

    def advantages(self, rewards: torch.Tensor) -> torch.Tensor:
        """Each completion's reward against its group's: (reward - mean) / (std + 1e-4)."""
        groups = rewards.view(-1, self.generations)  # two or more per group (the config's rule)
        return ((groups - groups.mean(dim=1, keepdim=True)) / (groups.std(dim=1, keepdim=True) + 1e-4)).view(-1)

    def losses(self, log_probs: torch.Tensor, reference: torch.Tensor, counted: torch.Tensor,
               rewards: torch.Tensor) -> torch.Tensor:
        """Each completion's loss (the mean over its tokens), from the per-token log-probabilities
        of its sampled tokens under the policy and the reference (``[completions, steps]``; zero
        where ``counted`` is false) and its reward."""
        advantages = self.advantages(rewards).unsqueeze(1)
        # One policy update per sampling: the ratio is 1 in value, its gradient the log-probability's.
        ratio = torch.exp(log_probs - log_probs.detach())
        clipped = ratio.clamp(1 - self.epsilon, 1 + self.epsilon)
        gain = torch.minimum(ratio * advantages, clipped * advantages)
        drift = reference - log_probs
        kl = drift.exp() - drift - 1 if self.needs_reference else torch.zeros_like(log_probs)
        tokens = counted.to(log_probs.dtype)
        per_token = -(gain - self.beta * kl) * tokens
        return per_token.sum(1) / tokens.sum(1).clamp(min=1)


def token_f1(completions: list[list[int]], answers: list[list[int]]) -> torch.Tensor:
    """plait's reward of each completion: the F1 of its tokens against its answer's (a bag of
    tokens each; 1 for the same tokens, 0 for none shared)."""
    rewards = []
    for completion, answer in zip(completions, answers):
        shared = sum((Counter(completion) & Counter(answer)).values())
        if not completion or not answer:
            rewards.append(float(completion == answer))
            continue
        precision, recall = shared / len(completion), shared / len(answer)
        rewards.append(0.0 if shared == 0 else 2 * precision * recall / (precision + recall))
    return torch.tensor(rewards)
