"""The sizes of a training run: batch sizes, accumulation, batches, steps and epochs.

They are worked out once, on the driver, from the trainer section and the number of training
rows (:meth:`TrainingSizes.of`), and the frozen value travels to every worker with the job. The
schedule's numbers depend on how many workers share an epoch, which an elastic Ray group knows
only when it starts: they are methods taking the worker count, so that the Trainer's schedule,
the Ray loader's epochs and the log line all come from the same arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def auto_batch_size(rows: int) -> int:
    """About 20 steps per epoch on small data, between 16 and 256 rows, a power of two."""
    target = max(1, rows // 20)
    return int(min(256, max(16, 2 ** round(math.log2(target)))))


def batch_count(rows: int, batch_size: int) -> int:
    """Batches of ``batch_size`` over ``rows`` rows, a last batch of one row joining the one
    before it (batch norm cannot train on one row)."""
    count = -(-rows // batch_size)
    if count > 1 and batch_size > 1 and rows % batch_size == 1:
        count -= 1
    return count


@dataclass(frozen=True)
class TrainingSizes:
    training_rows: int
    batch_size: int
    """Rows per worker in each forward and backward pass (``trainer.batch_size``, resolved)."""
    eval_batch_size: int
    """Rows per evaluation batch (``trainer.eval_batch_size``, resolved)."""
    accumulation: int
    """Passes per optimizer step (``trainer.gradient_accumulation_steps``)."""
    epochs: int
    """``trainer.epochs``: how long training runs, unless ``train_steps`` says."""
    train_steps: int | None
    """``trainer.train_steps``: when set, the optimizer steps training runs instead."""

    @classmethod
    def of(cls, trainer, training_rows: int) -> TrainingSizes:
        batch = trainer.batch_size
        if batch == "auto":  # at most max_batch_size
            batch = min(auto_batch_size(training_rows), trainer.max_batch_size)
        evaluation = trainer.eval_batch_size
        if evaluation == "auto":  # evaluation keeps no activations for a backward pass
            evaluation = max(1024, 4 * batch)
        # 0 or null: the training batch (Ludwig's meaning)
        return cls(training_rows=training_rows, batch_size=batch, eval_batch_size=evaluation or batch,
                   accumulation=trainer.gradient_accumulation_steps, epochs=trainer.epochs,
                   train_steps=trainer.train_steps or None)

    def global_batch(self, workers: int) -> int:
        """Rows per optimizer step over every worker."""
        return self.batch_size * workers * self.accumulation

    def batches_per_epoch(self, workers: int) -> int:
        """Batches per epoch on the worker with the largest shard (each worker takes an even share
        of the rows, give or take one; a streamed shard may differ a little: this is its estimate)."""
        return batch_count(-(-self.training_rows // workers), self.batch_size)

    def steps_per_epoch(self, workers: int) -> int:
        """Optimizer steps per epoch: an epoch's leftover batches (fewer than ``accumulation``)
        still make one step."""
        return max(1, -(-self.batches_per_epoch(workers) // self.accumulation))

    def total_steps(self, workers: int) -> int:
        """Optimizer steps training takes (early stopping may end it sooner)."""
        return self.train_steps or self.steps_per_epoch(workers) * self.epochs

    def epochs_to_run(self, workers: int) -> int:
        """Epochs training starts (early stopping may end it sooner)."""
        if not self.train_steps:
            return self.epochs
        return -(-self.train_steps // self.steps_per_epoch(workers))
