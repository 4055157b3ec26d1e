"""Optimizer, learning-rate schedule, reductions on a plateau, the regularization penalty, and the
auto default of the learning rate (batch sizes: ``sizes.py``).

The schedule is one ``LambdaLR`` whose factor is a pure function of the step (``lr_factor``),
times ``reduce_on_plateau_rate`` per reduction so far: a checkpoint's scheduler state stays the
step count, and every worker computes the same learning rate from the same step and reductions.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from plait.config.metrics import HIGHER_IS_BETTER
from plait.errors import TrainingError


def learning_rate(trainer, world_size: int) -> float:
    base = 1e-3 if trainer.learning_rate == "auto" else float(trainer.learning_rate)
    factor = {"constant": 1.0, "sqrt": math.sqrt(world_size), "linear": float(world_size)}
    return base * factor[trainer.learning_rate_scaling]


# ---- optimizer ----------------------------------------------------------------------------------

OPTIMIZER_CLASSES = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD,
                     "adadelta": torch.optim.Adadelta, "adagrad": torch.optim.Adagrad, "adamax": torch.optim.Adamax,
                     "nadam": torch.optim.NAdam, "rmsprop": torch.optim.RMSprop, "radam": torch.optim.RAdam}


def build_optimizer(params, trainer, lr: float) -> torch.optim.Optimizer:
    """The torch optimizer of ``trainer.optimizer.type``; its other settings are the optimizer's
    own keyword arguments (Ludwig's names are torch's)."""
    settings = trainer.optimizer.model_dump()
    cls = OPTIMIZER_CLASSES[settings.pop("type")]
    return cls(params, lr=lr, **settings)


# ---- the schedule -----------------------------------------------------------------------------

OWN_WARMUP = ("one_cycle", "wsd")
"""Decays that warm up by their own settings: the shared warmup does not apply to them."""


def warmup_steps(trainer, total_steps: int, steps_per_epoch: int, scaled_for_workers: bool,
                 steps_per_evaluation: int | None = None) -> int:
    """Steps of linear warmup: the longer of ``warmup_fraction`` of the run and
    ``warmup_evaluations`` evaluation intervals. When neither is set and the learning rate was
    scaled up for several workers, the first epoch (at most a tenth of the run): a learning rate
    multiplied by the workers diverges easily in the first steps, while the weights are far from
    any minimum (Goyal et al., 2017, "Accurate, large minibatch SGD")."""
    config = trainer.learning_rate_scheduler
    if config.decay in OWN_WARMUP:
        return 0
    interval = steps_per_evaluation or steps_per_epoch
    steps = max(int(config.warmup_fraction * total_steps), int(config.warmup_evaluations * interval))
    if steps == 0 and scaled_for_workers and trainer.learning_rate_scaling != "constant":
        return max(1, min(steps_per_epoch, total_steps // 10))
    return min(steps, total_steps)


def lr_factor(config, total_steps: int, warmup: int, steps_per_epoch: int, steps_per_evaluation: int,
              base_lr: float) -> Callable[[int], float]:
    """The learning rate of step ``step`` (0 for the first) as a multiple of ``base_lr``: linear
    warmup over ``warmup`` steps, then ``config.decay`` counted from the end of warmup."""
    if config.decay == "one_cycle":
        return _one_cycle(config, total_steps, base_lr)
    decay = _DECAYS[config.decay]
    after_warmup = max(1, total_steps - warmup)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return decay(config, step - warmup, after_warmup, steps_per_epoch, steps_per_evaluation, base_lr)

    return factor


def _constant(config, step, length, steps_per_epoch, steps_per_evaluation, base_lr) -> float:
    return 1.0


def _linear(config, step, length, steps_per_epoch, steps_per_evaluation, base_lr) -> float:
    return max(0.0, (length - step) / length)


def _exponential(config, step, length, steps_per_epoch, steps_per_evaluation, base_lr) -> float:
    exponent = 1 + step / (config.decay_steps or max(1, steps_per_epoch))
    return config.decay_rate ** (math.ceil(exponent) if config.staircase else exponent)


def _cosine(config, step, length, steps_per_epoch, steps_per_evaluation, base_lr) -> float:
    """Cosine annealing with warm restarts (Loshchilov & Hutter, 2017): periods of t_0, t_0 x
    t_mult, ... steps, each falling from the full rate to eta_min."""
    period = config.t_0 or max(1, steps_per_evaluation)
    if config.t_mult == 1:
        into = step % period
    else:
        restarts = int(math.log(step / period * (config.t_mult - 1) + 1, config.t_mult))
        into = step - period * (config.t_mult ** restarts - 1) // (config.t_mult - 1)
        period *= config.t_mult ** restarts
    floor = min(1.0, config.eta_min / base_lr)
    return floor + (1 - floor) * (1 + math.cos(math.pi * into / period)) / 2


def _inverse_sqrt(config, step, length, steps_per_epoch, steps_per_evaluation, base_lr) -> float:
    """As Ludwig computes it: 1/sqrt(max(step, inverse_sqrt_warmup_steps)), not normalized to 1."""
    return 1 / math.sqrt(max(step, config.inverse_sqrt_warmup_steps))


def _polynomial(config, step, length, steps_per_epoch, steps_per_evaluation, base_lr) -> float:
    progress = min(1.0, step / length)
    end = config.polynomial_end_lr
    return (1 - end) * (1 - progress) ** config.polynomial_power + end


def _wsd(config, step, length, steps_per_epoch, steps_per_evaluation, base_lr) -> float:
    """Warmup, stable, decay over the whole run (no shared warmup: ``step`` counts from 0)."""
    warmup_end = config.wsd_warmup_fraction * length
    stable_end = warmup_end + config.wsd_stable_fraction * length
    if step < warmup_end:
        return step / max(1.0, warmup_end)
    if step < stable_end:
        return 1.0
    progress = min(1.0, (step - stable_end) / max(1.0, length - stable_end))
    return (1 + math.cos(math.pi * progress)) / 2


_DECAYS = {None: _constant, "linear": _linear, "exponential": _exponential, "cosine": _cosine,
           "inverse_sqrt": _inverse_sqrt, "polynomial": _polynomial, "wsd": _wsd}


def _one_cycle(config, total_steps: int, base_lr: float) -> Callable[[int], float]:
    """The 1cycle policy (Smith & Topin, 2018) as torch's OneCycleLR computes it with cosine
    annealing: from max_lr/div_factor up to max_lr over pct_start of the run, then down to
    max_lr/div_factor/final_div_factor at the last step."""
    peak = config.max_lr or base_lr
    start, end = peak / config.div_factor, peak / config.div_factor / config.final_div_factor
    rise_end, last = float(config.pct_start * total_steps) - 1, max(1, total_steps - 1)

    def anneal(a: float, b: float, pct: float) -> float:
        return b + (a - b) / 2 * (math.cos(math.pi * min(1.0, pct)) + 1)

    def factor(step: int) -> float:
        if rise_end > 0 and step <= rise_end:
            return anneal(start, peak, step / rise_end) / base_lr
        fall_start = max(0.0, rise_end)
        return anneal(peak, end, (step - fall_start) / max(1e-9, last - fall_start)) / base_lr

    return factor


def build_scheduler(optimizer, trainer, total_steps: int, steps_per_epoch: int, scaled_for_workers: bool = False,
                    steps_per_evaluation: int | None = None,
                    reductions: Callable[[], int] = lambda: 0) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning-rate schedule: ``lr_factor`` times ``reduce_on_plateau_rate`` to the power
    ``reductions()`` (the reductions on a plateau so far)."""
    config = trainer.learning_rate_scheduler
    interval = min(steps_per_evaluation or steps_per_epoch, steps_per_epoch, total_steps)
    warmup = warmup_steps(trainer, total_steps, steps_per_epoch, scaled_for_workers, interval)
    base_lr = optimizer.param_groups[0]["lr"]
    factor = lr_factor(config, total_steps, warmup, steps_per_epoch, interval, base_lr)
    rate = config.reduce_on_plateau_rate
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: factor(step) * rate ** reductions())


def apply_now(scheduler: torch.optim.lr_scheduler.LambdaLR) -> None:
    """Set the learning rate of the current step again (after a reduction on a plateau, which
    then takes effect at the next optimizer step, not only after the next scheduler step)."""
    for group, base, factor in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
        group["lr"] = base * factor(scheduler.last_epoch)


# ---- reductions on a plateau ---------------------------------------------------------------------

PLATEAU_THRESHOLD = 1e-4
"""A relative improvement smaller than this is no improvement (torch's ReduceLROnPlateau default,
which Ludwig uses)."""


class PlateauReduction:
    """Ludwig's ``reduce_on_plateau``: after more than ``reduce_on_plateau_patience`` evaluations
    without improvement of ``reduce_eval_metric`` on ``reduce_eval_split``, one more reduction of
    the learning rate, at most ``reduce_on_plateau`` of them. Its state (best value, evaluations
    without improvement, reductions) lives in the trainer's ``Progress``, which checkpoints save.
    Every worker decides alike: the metrics it is given are all-reduced."""

    def __init__(self, trainer_config):
        config = trainer_config.learning_rate_scheduler
        self.limit, self.patience = config.reduce_on_plateau, config.reduce_on_plateau_patience
        self.split, self.metric = config.reduce_eval_split, config.reduce_eval_metric
        self.field = trainer_config.validation_field or "combined"
        self.higher_is_better = self.metric in HIGHER_IS_BETTER

    @property
    def active(self) -> bool:
        return self.limit > 0

    def observe(self, progress, record: dict) -> bool:
        """Count one evaluation ``record`` into ``progress``; True if it reduced the learning rate."""
        if progress.lr_reductions >= self.limit:
            return False
        value = self._value(record)
        best = progress.plateau_best
        if best is None or self._better(value, best):
            progress.plateau_best, progress.plateau_evals_without_improvement = value, 0
            return False
        progress.plateau_evals_without_improvement += 1
        if progress.plateau_evals_without_improvement <= self.patience:
            return False
        progress.lr_reductions += 1
        progress.plateau_evals_without_improvement = 0
        return True

    def _better(self, value: float, best: float) -> bool:
        if self.higher_is_better:
            return value > best * (1 + PLATEAU_THRESHOLD) if best >= 0 else value > best * (1 - PLATEAU_THRESHOLD)
        return value < best * (1 - PLATEAU_THRESHOLD) if best >= 0 else value < best * (1 + PLATEAU_THRESHOLD)

    def _value(self, record: dict) -> float:
        value = record.get(self.split, {}).get(self.field, {}).get(self.metric)
        if value is None:
            known = {f: sorted(m) for f, m in record.get(self.split, {}).items()}
            hint = (" (training metrics other than the combined loss need trainer.evaluate_training_set: true)"
                    if self.split == "training" else "")
            raise TrainingError(f"trainer.learning_rate_scheduler.reduce_eval_metric: no {self.split} metric "
                                f"{self.field}.{self.metric}; available: {known}{hint}")
        return value


# ---- regularization ---------------------------------------------------------------------------


def regularization_penalty(parameters: list[torch.Tensor], kind: str, strength: float) -> torch.Tensor:
    """``strength`` times the l1 norm, the squared l2 norm, or both (``l1_l2``), of ``parameters``.
    A sharded parameter (a DTensor) counts its local shard: the gradient of each shard is then
    exactly its share of the penalty's gradient."""
    l1, l2 = kind in ("l1", "l1_l2"), kind in ("l2", "l1_l2")
    total = torch.zeros((), device=parameters[0].device if parameters else None)
    for p in parameters:
        p = p.to_local() if hasattr(p, "to_local") else p
        if l1:
            total = total + p.abs().sum()
        if l2:
            total = total + p.square().sum()
    return strength * total
