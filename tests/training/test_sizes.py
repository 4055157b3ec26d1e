"""The sizes of a run, worked out once: batch sizes, and the schedule's batches, steps and epochs."""

from __future__ import annotations

import pickle

import pytest
import torch

from plait.config.trainer import TrainerConfig
from plait.training.batches import Batches
from plait.training.sizes import TrainingSizes, batch_count


def test_auto_batch_sizes():
    assert TrainingSizes.of(TrainerConfig(), 10_000).batch_size == 256
    assert TrainingSizes.of(TrainerConfig(max_batch_size=100), 10_000).batch_size == 100
    evaluation = [TrainingSizes.of(TrainerConfig(batch_size=64, eval_batch_size=size), 1000).eval_batch_size
                  for size in (0, None, "auto", 10)]
    assert evaluation == [64, 64, 1024, 10]


@pytest.mark.parametrize("rows", [0, 1, 15, 16, 17, 33, 100])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_batch_count_is_what_the_in_memory_batches_yield(rows, workers):
    if rows < workers:
        pytest.skip("a worker without rows")
    tensors = {"x": torch.arange(rows)}
    largest = max(sum(1 for _ in Batches(tensors, 16, rank=r, world_size=workers).epoch(0)) for r in range(workers))
    sizes = TrainingSizes.of(TrainerConfig(batch_size=16), rows)
    assert sizes.batches_per_epoch(workers) == largest == len(Batches(tensors, 16, world_size=workers))


def test_a_lone_last_row_joins_the_batch_before():
    assert batch_count(33, 16) == 2 and batch_count(34, 16) == 3 and batch_count(1, 16) == 1


def test_steps_and_epochs_follow_accumulation_and_train_steps():
    sizes = TrainingSizes.of(TrainerConfig(batch_size=10, gradient_accumulation_steps=3, epochs=4), 100)
    assert sizes.steps_per_epoch(1) == 4 and sizes.total_steps(1) == 16  # 10 batches: 3 + 3 + 3 + 1
    assert sizes.steps_per_epoch(2) == 2 and sizes.global_batch(2) == 60
    by_steps = TrainingSizes.of(TrainerConfig(batch_size=10, train_steps=9), 100)
    assert by_steps.total_steps(1) == 9 and by_steps.epochs_to_run(1) == 1 and by_steps.epochs_to_run(4) == 3


def test_the_sizes_travel_to_workers_unchanged():
    sizes = TrainingSizes.of(TrainerConfig(), 5000)
    assert pickle.loads(pickle.dumps(sizes)) == sizes
