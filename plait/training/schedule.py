"""Optimizer, learning-rate schedule and the auto defaults for batch size and learning rate."""

from __future__ import annotations

import math

import torch


def auto_batch_size(rows: int) -> int:
    """About 20 steps per epoch on small data, between 16 and 256 rows, a power of two."""
    target = max(1, rows // 20)
    return int(min(256, max(16, 2 ** round(math.log2(target)))))


def learning_rate(trainer, world_size: int) -> float:
    base = 1e-3 if trainer.learning_rate == "auto" else float(trainer.learning_rate)
    factor = {"constant": 1.0, "sqrt": math.sqrt(world_size), "linear": float(world_size)}
    return base * factor[trainer.learning_rate_scaling]


def warmup_steps(trainer, total_steps: int, steps_per_epoch: int, scaled_for_workers: bool) -> int:
    """Steps of linear warmup: ``warmup_fraction`` of the run; when unset and the learning rate
    was scaled up for several workers, the first epoch (at most a tenth of the run). A learning
    rate multiplied by the workers diverges easily in the first steps, while the weights are
    far from any minimum (Goyal et al., 2017, "Accurate, large minibatch SGD")."""
    fraction = trainer.learning_rate_scheduler.warmup_fraction
    if fraction == 0 and scaled_for_workers and trainer.learning_rate_scaling != "constant":
        return max(1, min(steps_per_epoch, total_steps // 10))
    return int(fraction * total_steps)


def build_optimizer(params, trainer, lr: float) -> torch.optim.Optimizer:
    opt = trainer.optimizer
    if opt.type == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=opt.momentum, weight_decay=opt.weight_decay)
    cls = torch.optim.AdamW if opt.type == "adamw" else torch.optim.Adam
    return cls(params, lr=lr, betas=opt.betas, eps=opt.eps, weight_decay=opt.weight_decay)


def build_scheduler(optimizer, trainer, total_steps: int, steps_per_epoch: int, scaled_for_workers: bool = False):
    """Linear warmup over ``warmup_fraction`` of the run, then the configured decay."""
    config = trainer.learning_rate_scheduler
    warmup = warmup_steps(trainer, total_steps, steps_per_epoch, scaled_for_workers)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total_steps - warmup)
        if config.decay == "cosine":
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        if config.decay == "linear":
            return max(0.0, 1 - progress)
        if config.decay == "exponential":
            return config.decay_rate ** ((step - warmup) / max(1, steps_per_epoch))
        return 1.0

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
