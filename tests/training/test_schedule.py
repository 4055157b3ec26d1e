"""The learning-rate schedules, reductions on a plateau, optimizers and the regularization penalty,
each computed for a small case and compared with a hand computation (or torch's own scheduler)."""

from __future__ import annotations

import math

import pytest
import torch

from plait.config import load_config
from plait.errors import TrainingError
from plait.training.schedule import (PlateauReduction, apply_now, build_optimizer, build_scheduler,
                                     regularization_penalty, warmup_steps)
from plait.training.trainer import Progress


def trainer_config(**trainer):
    config = {"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}],
              "trainer": trainer}
    return load_config(config).trainer


def lrs(steps: int, total: int, steps_per_epoch: int = 5, base: float = 1.0, world_size: int = 1,
        steps_per_evaluation=None, reductions=lambda: 0, **scheduler) -> list[float]:
    """The learning rate of each of the first ``steps`` optimizer steps."""
    trainer = trainer_config(learning_rate_scheduler=scheduler)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base)
    schedule = build_scheduler(optimizer, trainer, total, steps_per_epoch, world_size > 1, steps_per_evaluation,
                               reductions)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return rates


def test_linear_decay_after_warmup_reaches_zero_at_the_end():
    # 10 steps, warmup 0.2 -> 2 steps ramping up, then 8 steps falling linearly.
    assert lrs(10, 10, decay="linear", warmup_fraction=0.2) == pytest.approx(
        [0.5, 1.0, 1.0, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8])


def test_no_decay_is_constant_after_warmup():
    assert lrs(5, 10, warmup_fraction=0.4) == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])


def test_exponential_decay_follows_ludwigs_formula():
    # lr x decay_rate^(1 + step/decay_steps), from the first step after warmup.
    assert lrs(4, 100, decay="exponential", decay_rate=0.5, decay_steps=2) == pytest.approx(
        [0.5, 0.5 ** 1.5, 0.25, 0.5 ** 2.5])
    assert lrs(4, 100, decay="exponential", decay_rate=0.5, decay_steps=2, staircase=True) == pytest.approx(
        [0.5, 0.25, 0.25, 0.125])


def test_exponential_decay_steps_default_to_one_epoch():
    assert lrs(6, 100, steps_per_epoch=5, decay="exponential", decay_rate=0.5)[5] == pytest.approx(0.25)


def test_cosine_decay_restarts_every_t_0_steps():
    assert lrs(6, 100, decay="cosine", t_0=4) == pytest.approx(
        [1.0, (1 + math.cos(math.pi / 4)) / 2, 0.5, (1 - math.cos(math.pi / 4)) / 2, 1.0, (1 + math.cos(math.pi / 4)) / 2])


@pytest.mark.parametrize(("t_0", "t_mult", "eta_min"), [(3, 1, 0.0), (2, 2, 0.1), (3, 3, 0.0)])
def test_cosine_decay_matches_torchs_warm_restarts(t_0, t_mult, eta_min):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    reference = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=t_0, T_mult=t_mult, eta_min=eta_min)
    expected = []
    for _ in range(30):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        reference.step()
    assert lrs(30, 100, base=0.5, decay="cosine", t_0=t_0, t_mult=t_mult, eta_min=eta_min) == pytest.approx(expected)


def test_cosine_restarts_default_to_the_evaluation_interval():
    rates = lrs(8, 100, steps_per_epoch=10, steps_per_evaluation=4, decay="cosine")
    assert rates[0] == rates[4] == 1.0 and rates[2] == pytest.approx(0.5)


@pytest.mark.parametrize("max_lr", [None, 0.3])
def test_one_cycle_matches_torchs_one_cycle(max_lr):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    reference = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr or 0.1, total_steps=20, pct_start=0.3,
                                                    cycle_momentum=False)
    expected = []
    for _ in range(20):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        reference.step()
    assert lrs(20, 20, base=0.1, decay="one_cycle", max_lr=max_lr) == pytest.approx(expected)


def test_wsd_warms_up_holds_then_falls_by_a_cosine():
    rates = lrs(10, 10, decay="wsd", wsd_warmup_fraction=0.2, wsd_stable_fraction=0.5, wsd_decay_fraction=0.3)
    assert rates == pytest.approx([0.0, 0.5, 1, 1, 1, 1, 1, 1.0, 0.75, 0.25])


def test_polynomial_and_inverse_sqrt_decays():
    assert lrs(6, 10, decay="polynomial", polynomial_power=2, polynomial_end_lr=0.1)[5] == pytest.approx(0.9 * 0.25 + 0.1)
    rates = lrs(10, 100, decay="inverse_sqrt", inverse_sqrt_warmup_steps=4)
    assert rates[0] == rates[4] == pytest.approx(0.5) and rates[9] == pytest.approx(1 / 3)


def test_warmup_is_the_longer_of_fraction_and_evaluations():
    trainer = trainer_config(learning_rate_scheduler={"warmup_fraction": 0.1, "warmup_evaluations": 2})
    assert warmup_steps(trainer, 20, 10, False, steps_per_evaluation=3) == 6
    assert warmup_steps(trainer_config(learning_rate_scheduler={"warmup_fraction": 0.5}), 20, 10, False) == 10


def test_scaled_learning_rate_still_warms_up_over_the_first_epoch():
    assert warmup_steps(trainer_config(), 100, 5, scaled_for_workers=True) == 5
    assert warmup_steps(trainer_config(learning_rate_scaling="constant"), 100, 5, scaled_for_workers=True) == 0


def test_a_reduction_multiplies_the_rate_at_once_and_at_every_later_step():
    trainer = trainer_config(learning_rate_scheduler={"decay": "linear", "reduce_on_plateau": 2,
                                                      "reduce_on_plateau_rate": 0.5})
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    progress = Progress()
    schedule = build_scheduler(optimizer, trainer, 10, 10, reductions=lambda: progress.lr_reductions)
    optimizer.step()
    schedule.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.9)
    progress.lr_reductions = 1
    apply_now(schedule)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.45)
    optimizer.step()
    schedule.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.4)


def test_reduce_on_plateau_reduces_after_patience_evaluations_without_improvement():
    trainer = trainer_config(learning_rate_scheduler={"reduce_on_plateau": 1, "reduce_on_plateau_patience": 2,
                                                      "reduce_eval_split": "validation"})
    plateau, progress = PlateauReduction(trainer), Progress()
    losses = [1.0, 0.9, 0.95, 0.9, 0.92, 0.99, 0.99]
    reduced = [plateau.observe(progress, {"validation": {"combined": {"loss": v}}}) for v in losses]
    # 0.9 is the best; two evaluations without improvement are tolerated, the third reduces,
    # and a limit of one reduction leaves the rest alone.
    assert reduced == [False, False, False, False, True, False, False]
    assert progress.lr_reductions == 1


def test_reduce_on_plateau_watches_a_higher_is_better_metric():
    trainer = trainer_config(validation_field="y", learning_rate_scheduler={
        "reduce_on_plateau": 3, "reduce_on_plateau_patience": 0, "reduce_eval_split": "validation",
        "reduce_eval_metric": "accuracy"})
    plateau, progress = PlateauReduction(trainer), Progress()
    reduced = [plateau.observe(progress, {"validation": {"y": {"accuracy": v}}}) for v in [0.5, 0.6, 0.6, 0.7]]
    assert reduced == [False, False, True, False]


def test_reduce_on_plateau_names_a_metric_the_split_lacks():
    trainer = trainer_config(validation_field="y", learning_rate_scheduler={"reduce_on_plateau": 1})
    with pytest.raises(TrainingError, match="evaluate_training_set: true"):
        PlateauReduction(trainer).observe(Progress(), {"training": {"combined": {"loss": 1.0}}})


@pytest.mark.parametrize(("kind", "expected"), [("l1", 0.1 * 6), ("l2", 0.1 * 14), ("l1_l2", 0.1 * 20)])
def test_regularization_penalty_by_hand(kind, expected):
    weights = [torch.tensor([1.0, -2.0]), torch.tensor([[3.0]])]
    assert regularization_penalty(weights, kind, 0.1).item() == pytest.approx(expected)


@pytest.mark.parametrize("optimizer", [
    {"type": "sgd", "momentum": 0.5, "nesterov": True}, {"type": "adam", "amsgrad": True}, {"type": "adadelta", "rho": 0.8},
    {"type": "adagrad", "lr_decay": 0.01}, {"type": "adamax"}, {"type": "nadam", "momentum_decay": 0.01},
    {"type": "rmsprop", "centered": True, "momentum": 0.1}, {"type": "radam"}, {"type": "adamw", "weight_decay": 0.1},
])
def test_each_optimizer_is_built_with_its_settings(optimizer):
    built = build_optimizer([torch.nn.Parameter(torch.zeros(2))], trainer_config(optimizer=optimizer), 0.01)
    group = built.param_groups[0]
    assert type(built).__name__.lower() == optimizer["type"]
    assert group["lr"] == 0.01 and all(group[k] == v for k, v in optimizer.items() if k != "type")
