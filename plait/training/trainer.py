"""The training loop. It knows the model, the batches and the strategy interface, nothing about
which engine runs it: the same loop runs in one process, on Ray Train workers or under torchrun.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import torch

from plait.errors import PlaitError, TrainingError
from plait.training import checkpoint as ckpt
from plait.training.data import Batches, lockstep
from plait.training.metrics import MetricSet
from plait.training.schedule import build_optimizer, build_scheduler, learning_rate
from plait.training.strategies import Strategy

log = logging.getLogger("plait")

HIGHER_IS_BETTER = {"accuracy", "hits_at_k", "roc_auc", "precision", "recall", "f1", "r2", "jaccard"}


class TrainingInterrupted(PlaitError):
    exit_code = 130


@dataclass
class Progress:
    """Where training is: saved with every checkpoint, so a resumed run continues exactly."""

    epoch: int = 0
    step: int = 0
    batch_in_epoch: int = 0
    best_value: float | None = None
    best_step: int = 0
    evals_without_improvement: int = 0
    history: list = field(default_factory=list)
    epoch_loss: float = 0.0
    """Sum of this epoch's batch losses so far (kept across a resume, for the epoch's mean)."""


class EpochMeter:
    """Rows trained and time spent waiting for the next batch, over one epoch on one worker."""

    def __init__(self):
        self.started = time.perf_counter()
        self.rows = 0
        self.waiting = 0.0

    def timed(self, batches: Iterable) -> Iterator:
        iterator = iter(batches)
        while True:
            asked = time.perf_counter()
            batch = next(iterator, None)
            self.waiting += time.perf_counter() - asked
            if batch is None:
                return
            yield batch

    def elapsed(self) -> float:
        return max(time.perf_counter() - self.started, 1e-9)

    def summary(self, strategy) -> dict:
        """Rows trained by all workers, rows per second and the mean fraction of the epoch each
        worker waited on data (evaluation excluded). One all-reduce, once per epoch."""
        elapsed = self.elapsed()
        totals = strategy.all_reduce_sum(torch.tensor([float(self.rows), self.waiting / elapsed], dtype=torch.float64,
                                                      device=strategy.device)).tolist()
        return {"rows": int(totals[0]), "rows_per_s": totals[0] / elapsed, "data_wait_fraction": totals[1] / strategy.world_size}


class Trainer:
    def __init__(self, config, model, strategy: Strategy, seed: int, run_dir: Path | None = None,
                 progress_bar: bool = True):
        self.config, self.trainer = config, config.trainer
        self.strategy = strategy
        self.seed = seed
        self.run_dir = run_dir
        self.progress_bar = progress_bar and strategy.is_coordinator
        self.metrics = MetricSet(model)
        self.lr = learning_rate(self.trainer, strategy.world_size)
        optimizer = build_optimizer(model.parameters(), self.trainer, self.lr)
        self.model, self.optimizer = strategy.prepare(model, optimizer)
        # Gathered once: walking the module tree every step costs about 5% of a small model's step.
        self.parameters = [p for p in self.model.parameters() if p.requires_grad]
        self.field = self.trainer.validation_field or "combined"
        self.metric = self.trainer.validation_metric or "loss"
        self.state = Progress()
        self.best_weights = None
        self.writer = None
        self.epoch_speed: dict | None = None

    # ---- the loop ----------------------------------------------------------------------------

    def fit(self, train: Batches, validation: Batches | None, resume: Path | None = None) -> Progress:
        accumulation = self.trainer.gradient_accumulation_steps
        # An epoch's leftover batches (fewer than ``accumulation``) still make one step. A
        # streamed shard's length is an estimate: the schedule's length is, the epochs are not.
        steps_per_epoch = max(1, -(-len(train) // accumulation))
        total = self.trainer.train_steps or steps_per_epoch * self.trainer.epochs
        self.scheduler = build_scheduler(self.optimizer, self.trainer, total, steps_per_epoch,
                                         scaled_for_workers=self.strategy.world_size > 1)
        if resume is not None:
            self._resume(resume)
        self._open_tensorboard()
        try:
            while not self._finished(total) and not self._should_stop():
                self._run_epoch(train, validation, total, accumulation)
        except KeyboardInterrupt:
            self._interrupted()
        finally:
            if self.writer:
                self.writer.close()
        return self.state

    def _finished(self, total: int) -> bool:
        if self.trainer.train_steps:
            return self.state.step >= total
        return self.state.epoch >= self.trainer.epochs

    def final_weights(self) -> dict:
        """The weights training ends with: the best evaluation's, else the last. Called on every
        worker (gathering sharded weights is a collective); complete on the coordinator."""
        return self.best_weights if self.best_weights is not None else self._weights_copy()

    def _run_epoch(self, train: Batches, validation, total: int, accumulation: int) -> None:
        model, state = self.model, self.state
        model.train()
        eval_every = self.trainer.steps_per_checkpoint
        bar = self._bar(len(train), f"epoch {state.epoch + 1}")
        meter = EpochMeter()
        if state.batch_in_epoch == 0:
            state.epoch_loss = 0.0
        for i, (batch, real, last) in enumerate(lockstep(meter.timed(train.epoch(state.epoch)), self.strategy, train.filler())):
            if i < state.batch_in_epoch:
                continue  # resumed mid-epoch: these batches were already trained on
            boundary = (i + 1) % accumulation == 0 or last
            loss = self._train_step(batch, accumulation, boundary, weight=1.0 if real else 0.0)
            state.batch_in_epoch = i + 1
            if real:
                state.epoch_loss += loss
                meter.rows += len(next(iter(batch.values())))
            if boundary:
                self._optimizer_step()
                if eval_every and state.step % eval_every == 0:
                    self._evaluate_and_checkpoint(validation, state.epoch_loss / (i + 1))
                if (self.trainer.train_steps and state.step >= total) or self._should_stop():
                    break
            if bar is not None and (i % 10 == 0 or last):
                bar.update(i + 1 - bar.n)
                bar.set_postfix(loss=f"{loss:.4f}", rows_per_s=f"{meter.rows * self.strategy.world_size / meter.elapsed():,.0f}")
        if bar is not None:
            bar.close()
        self.epoch_speed = meter.summary(self.strategy)
        batches_run = max(1, state.batch_in_epoch)  # fewer than len(train) when train_steps ends the epoch
        state.epoch += 1
        state.batch_in_epoch = 0
        if not eval_every:
            self._evaluate_and_checkpoint(validation, state.epoch_loss / batches_run)

    def _train_step(self, batch: dict, accumulation: int, boundary: bool, weight: float = 1.0) -> float:
        """Forward and backward of one batch; ``weight`` 0 for a filler batch, which takes part
        in the collectives but adds nothing to the gradients."""
        inputs, targets = self._split(batch)
        with self._autocast():
            logits = self.model(inputs)
        loss, _ = self.strategy.unwrap(self.model).loss(logits, targets)
        value = loss.item()
        if not math.isfinite(value):
            raise self._diverged(f"the loss became {value}")
        scale = weight / accumulation
        # Gradients are exchanged only before an optimizer step, not on every micro-step.
        self.strategy.backward(loss * scale if scale != 1 else loss, sync=boundary)
        return value

    def _optimizer_step(self) -> None:
        clip = self.trainer.gradient_clipping
        if clip.clipvalue:  # both clip functions skip parameters without a gradient
            torch.nn.utils.clip_grad_value_(self.parameters, clip.clipvalue)
        norm = self.strategy.optimizer_step(self.optimizer, self.parameters, clip.clipglobalnorm)
        if norm is not None and not math.isfinite(norm):  # the step was skipped: training has stalled
            raise self._diverged(f"the gradient norm became {norm}")
        self.scheduler.step()
        self.state.step += 1

    def _diverged(self, what: str) -> TrainingError:
        return TrainingError(
            f"{what} at step {self.state.step + 1} (epoch {self.state.epoch + 1}). "
            f"Try a lower trainer.learning_rate (now {self.lr:g}) or trainer.gradient_clipping; "
            f"check the data for extreme values.{self._last_checkpoint_hint()}"
        )

    def _autocast(self):
        """bf16 autocast when use_mixed_precision is on; otherwise a no-op context (cheaper per
        step than a disabled ``torch.autocast``)."""
        if self.trainer.use_mixed_precision:
            return torch.autocast(self.strategy.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _split(self, batch: dict) -> tuple[dict, dict]:
        device = self.strategy.device
        model = self.strategy.unwrap(self.model)
        inputs = {n: batch[n].to(device, non_blocking=True) for n in model.input_names}
        targets = {n: batch[n].to(device, non_blocking=True) for n in model.output_names}
        return inputs, targets

    # ---- evaluation, early stopping, checkpoints -------------------------------------------------

    @torch.no_grad()
    def evaluate(self, batches: Batches) -> dict:
        """Exact metrics over all rows of ``batches`` (statistics summed over workers)."""
        # The plain module: a wrapper's forward may hold collectives (DDP syncs buffers), and
        # shards for evaluation are uneven, so workers run different numbers of batches.
        model = self.strategy.unwrap(self.model)
        was_training = model.training
        model.eval()
        stats = self.metrics.zeros(self.strategy.device)
        for batch, real in self._evaluation_batches(batches):
            inputs, targets = self._split(batch)
            with self._autocast():
                logits = model(inputs)
            if real:
                self.metrics.update(stats, logits, targets)
        model.train(was_training)
        return self.metrics.compute(self.metrics.reduce(stats, self.strategy.all_reduce_sum))

    def _evaluation_batches(self, batches: Batches):
        """``(batch, is_real)``. Workers evaluate uneven shards independently, except where the
        forward pass is itself a collective (sharded parameters): then they go in lockstep."""
        if not self.strategy.forward_is_collective:
            return ((batch, True) for batch in batches.epoch(0))
        return ((batch, real) for batch, real, _ in lockstep(batches.epoch(0), self.strategy, batches.filler()))

    def _evaluate_and_checkpoint(self, validation: Batches | None, train_loss: float) -> None:
        state = self.state
        record = {"epoch": state.epoch, "step": state.step, "training": {"combined": {"loss": train_loss}}}
        if self.epoch_speed is not None:
            record.update(self.epoch_speed)
            self.epoch_speed = None
        if validation is not None and validation.rows:
            record["validation"] = self.evaluate(validation)
            self._track_best(record["validation"])
        else:
            self.best_weights = None  # nothing to select on: the final weights are the model
        state.history.append(record)
        self._log(record)
        if self.run_dir is not None:
            self._save_checkpoint()
        self.strategy.barrier()

    def _track_best(self, metrics: dict) -> None:
        value = metrics.get(self.field, {}).get(self.metric)
        if value is None:
            known = {f: sorted(m) for f, m in metrics.items()}
            raise TrainingError(f"trainer.validation_field/validation_metric: no metric {self.field}.{self.metric}; available: {known}")
        best = self.state.best_value
        if best is None or (value > best if self.metric in HIGHER_IS_BETTER else value < best):
            self.state.best_value, self.state.best_step = value, self.state.step
            self.state.evals_without_improvement = 0
            self.best_weights = self._weights_copy()
        else:
            self.state.evals_without_improvement += 1

    def _should_stop(self) -> bool:
        patience = self.trainer.early_stop
        return patience >= 0 and self.state.evals_without_improvement >= max(1, patience)

    def _weights_copy(self) -> dict:
        # Every worker calls this (gathering sharded weights is a collective).
        return {k: v.detach().cpu().clone() for k, v in self.strategy.model_state(self.model).items()}

    def _save_checkpoint(self) -> Path:
        return ckpt.save_checkpoint(self.run_dir.checkpoints, self.strategy, self.model, self.optimizer,
                                    self.scheduler, self._state_dict(), best_weights=self._best_to_save())

    def _state_dict(self) -> dict:
        return {**self.state.__dict__, "best_weights_step": self.state.best_step}

    def _best_to_save(self) -> dict | None:
        """The best weights, for the checkpoint, unless they are the model's current weights."""
        return self.best_weights if self.best_weights is not None and self.state.best_step != self.state.step else None

    def _resume(self, path: Path) -> None:
        saved = ckpt.load_checkpoint(path, self.strategy, self.model, self.optimizer, self.scheduler)
        saved.pop("best_weights_step", None)
        self.state = Progress(**saved)
        # Without them the resumed run would end with its last weights, not the best evaluation's.
        if (path / ckpt.BEST).is_file():
            self.best_weights = ckpt.load_weights(path / ckpt.BEST)
        elif self.state.best_value is not None and self.state.best_step == self.state.step:
            self.best_weights = self._weights_copy()
        log.info("Resumed from %s (epoch %d, step %d).", path, self.state.epoch + 1, self.state.step)

    def _interrupted(self) -> None:
        where = ""
        if self.strategy.is_coordinator and self.run_dir is not None:
            path = self._save_checkpoint()
            where = f"; a checkpoint is saved at {path}. Continue with: plait {self._command()} --resume {self.run_dir}"
        raise TrainingInterrupted(f"training interrupted at step {self.state.step}{where}")

    def _command(self) -> str:
        """The command that started this run (train or experiment), as its run directory says."""
        return self.run_dir.command()

    def _last_checkpoint_hint(self) -> str:
        if self.run_dir is None:
            return ""
        last = ckpt.latest_checkpoint(self.run_dir.checkpoints)
        return f" The last good checkpoint is {last}." if last else ""

    # ---- reporting -----------------------------------------------------------------------------

    def _bar(self, total: int, desc: str):
        if not self.progress_bar:
            return None
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit="batch", leave=False, dynamic_ncols=True, disable=None)

    def _open_tensorboard(self) -> None:
        if self.strategy.is_coordinator and self.run_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is a dependency; a trimmed install still trains
                log.warning("tensorboard is not installed; no TensorBoard logs will be written")
                return
            self.writer = SummaryWriter(log_dir=str(self.run_dir.tensorboard))

    def _log(self, record: dict) -> None:
        if not self.strategy.is_coordinator:
            return
        parts = [f"epoch {record['epoch']}", f"step {record['step']}", f"train loss {record['training']['combined']['loss']:.4f}"]
        if "rows_per_s" in record:
            parts.append(f"{record['rows_per_s']:,.0f} rows/s, {100 * record['data_wait_fraction']:.1f}% waiting on data")
        for name, metrics in record.get("validation", {}).items():
            for metric, value in metrics.items():
                if self.writer:
                    self.writer.add_scalar(f"validation/{name}/{metric}", value, record["step"])
            if name != "combined":
                shown = {k: v for k, v in metrics.items() if k in ("loss", "accuracy", "roc_auc", "r2", "jaccard")}
                parts.append(f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in shown.items()))
        if self.writer:
            self.writer.add_scalar("training/loss", record["training"]["combined"]["loss"], record["step"])
        log.info(" | ".join(parts))
