"""The training loop. It knows the model, the batches and the strategy interface, nothing about
which engine runs it: the same loop runs in one process, on Ray Train workers or under torchrun.

Early stopping and the best weights (``early_stopping.py``), what is shown to a person
(``reporting.py``) and Ctrl-C (``interrupt.py``) are parts of their own; this module reads top
to bottom: ``fit`` runs epochs, an epoch runs steps, evaluations save checkpoints.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from dataclasses import dataclass, field

import torch

from plait.errors import ConfigError, TrainingError
from plait.training import checkpoint as ckpt
from plait.data.tensors import trim_padding
from plait.training.batches import Batches, lockstep
from plait.training.early_stopping import BestWeights, EarlyStopping
from plait.training.interrupt import StopRequest, TrainingInterrupted
from plait.evaluation import Evaluation
from plait.run_directory import RunDirectory
from plait.utils.folder import Folder
from plait.training.reporting import EpochBar, EpochMeter, Reporter
from plait.training.schedule import (PlateauReduction, apply_now, build_optimizer, build_scheduler, learning_rate,
                                     regularization_penalty)
from plait.training.sizes import TrainingSizes
from plait.training.strategies import StepPlan, Strategy, unwrap

log = logging.getLogger("plait")

__all__ = ["Progress", "Trainer", "TrainingInterrupted"]


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
    plateau_best: float | None = None
    plateau_evals_without_improvement: int = 0
    lr_reductions: int = 0
    """Reductions of the learning rate on a plateau so far (``reduce_on_plateau``)."""


class Trainer:
    def __init__(self, config, model, strategy: Strategy, sizes: TrainingSizes, seed: int,
                 run_dir: RunDirectory | None = None, progress_bar: bool = True, on_evaluation=None, events=None):
        self.config, self.options = config, config.trainer
        self.on_evaluation = on_evaluation
        self.events = events
        self.strategy = strategy
        self.sizes = sizes
        self.seed = seed
        self.run_dir = run_dir
        self.lr = learning_rate(self.options, strategy.world_size)
        freeze_matching(model, self.options.layers_to_freeze_regex)
        optimizer = build_optimizer([p for p in model.parameters() if p.requires_grad], self.options, self.lr)
        self.model, self.optimizer = strategy.prepare(model, optimizer, StepPlan.of(sizes, self.options.gradient_clipping))
        # Gathered once: walking the module tree every step costs about 5% of a small model's step.
        self.parameters = [p for p in self.model.parameters() if p.requires_grad]
        self.scaler = self._grad_scaler()
        self.penalized = self._penalized_parameters()
        self.state = Progress()
        self.early_stopping = EarlyStopping(self.options)
        self.plateau = PlateauReduction(self.options)
        self.train_batches: Batches | None = None
        self.best = BestWeights(strategy, self.model)
        self.reporter = Reporter(strategy, run_dir, progress_bar)
        self.stop = StopRequest()
        self.epoch_speed: dict | None = None
        self.saved: tuple[int, Folder] | None = None
        """The step and folder of the last checkpoint this run saved or resumed from."""

    # ---- the loop ----------------------------------------------------------------------------

    def fit(self, train: Batches, validation: Batches | None, resume: Folder | None = None,
            watch=None) -> Progress:
        """Train from the start or from checkpoint ``resume``. ``watch(stop_request)``: a context
        manager around training that may ask for a checkpoint (see ``interrupt.StopRequest``)."""
        accumulation = self.sizes.accumulation
        self.train_batches = train
        total = self._build_schedule()
        if resume is not None:
            self._resume(resume)
            self._emit("on_resume_training", step=self.state.step)
        self.reporter.open()
        try:
            with self.stop.on_sigint(), (watch(self.stop) if watch else contextlib.nullcontext()):
                while not self._finished(total) and not self.early_stopping.should_stop(self.state) and not self.stop.agreed:
                    self._run_epoch(train, validation, total, accumulation)
        except KeyboardInterrupt:
            raise self._interrupted_without_agreement()
        finally:
            self.reporter.close()
            if self.run_dir is not None:
                self.run_dir.sync()
        # Ctrl-C after the last step (in the last evaluation, say) still stops the run.
        if self.stop.agree(self.strategy):
            raise self._interrupted()
        return self.state

    def _build_schedule(self) -> int:
        """Build the learning rate schedule; returns the number of steps training takes. (A
        streamed shard's length is an estimate: the schedule's length is, the epochs are not.)"""
        workers = self.strategy.world_size
        steps_per_epoch, total = self.sizes.steps_per_epoch(workers), self.sizes.total_steps(workers)
        self.eval_every = self.options.steps_per_checkpoint
        if self.options.checkpoints_per_epoch:
            self.eval_every = max(1, steps_per_epoch // self.options.checkpoints_per_epoch)
        self.scheduler = build_scheduler(self.optimizer, self.options, total, steps_per_epoch,
                                         scaled_for_workers=self.strategy.world_size > 1,
                                         steps_per_evaluation=self.eval_every or None,
                                         reductions=lambda: self.state.lr_reductions)
        return total

    def _finished(self, total: int) -> bool:
        if self.sizes.train_steps:
            return self.state.step >= total
        return self.state.epoch >= self.sizes.epochs

    def final_weights(self) -> dict:
        """The weights training ends with: the best evaluation's, else the last. Called on every
        worker (gathering sharded weights is a collective); complete on the coordinator."""
        return self.best.final()

    def _run_epoch(self, train: Batches, validation, total: int, accumulation: int) -> None:
        state = self.state
        self.model.train()
        if state.batch_in_epoch == 0:
            state.epoch_loss = 0.0
            self._emit("on_epoch_start", epoch=state.epoch + 1, step=state.step)
        meter = EpochMeter()
        bar = self.reporter.epoch_bar(len(train), state.epoch, meter)
        try:
            completed = self._run_steps(train, validation, total, accumulation, meter, bar)
        finally:
            bar.close()
        if completed:
            self._end_epoch(validation, meter)

    def _run_steps(self, train: Batches, validation, total: int, accumulation: int, meter: EpochMeter,
                   bar: EpochBar) -> bool:
        """The epoch's steps from where it stands. False when an interruption ends it early: the
        interruption's checkpoint then continues it."""
        state = self.state
        batches = lockstep(meter.timed(train.epoch(state.epoch)), self.strategy, train.filler(), self.stop)
        for i, (batch, real, last) in enumerate(batches):
            if i < state.batch_in_epoch:
                continue  # resumed mid-epoch: these batches were already trained on
            if self.stop.agreed and i % accumulation == 0:
                # Lockstep's all-reduce told every worker at this same batch: all stop before it,
                # between two optimizer steps, where a checkpoint holds all that was trained.
                return False
            if self.stop.checkpoint_agreed and i % accumulation == 0:
                self._checkpoint_on_request()
            boundary = (i + 1) % accumulation == 0 or last
            loss = self._train_step(batch, accumulation, boundary, weight=1.0 if real else 0.0)
            state.batch_in_epoch = i + 1
            if real:
                state.epoch_loss += loss
                meter.rows += len(next(iter(batch.values())))
            bar.show(i, last, loss)
            if not boundary:
                continue
            self._optimizer_step()
            if self.eval_every and state.step % self.eval_every == 0:
                self._evaluate_and_checkpoint(validation, state.epoch_loss / (i + 1))
            if (self.sizes.train_steps and state.step >= total) or self.early_stopping.should_stop(state):
                break
        return True

    def _end_epoch(self, validation: Batches | None, meter: EpochMeter) -> None:
        state = self.state
        self.epoch_speed = meter.summary(self.strategy)
        batches_run = max(1, state.batch_in_epoch)  # fewer than len(train) when train_steps ends the epoch
        state.epoch += 1
        state.batch_in_epoch = 0
        self._emit("on_epoch_end", epoch=state.epoch, step=state.step, speed=self.epoch_speed)
        if not self.eval_every:
            self._evaluate_and_checkpoint(validation, state.epoch_loss / batches_run)

    def _train_step(self, batch: dict, accumulation: int, boundary: bool, weight: float = 1.0) -> float:
        """Forward and backward of one batch; ``weight`` 0 for a filler batch, which takes part
        in the collectives but adds nothing to the gradients."""
        inputs, targets = self._split(batch)
        with self._autocast():
            logits = self.model(inputs)
        loss, _ = unwrap(self.model).loss(logits, targets)
        if self.penalized:
            loss = loss + regularization_penalty(self.penalized, self.options.regularization_type,
                                                 self.options.regularization_lambda)
        value = loss.item()
        if not math.isfinite(value):
            raise self._diverged(f"the loss became {value}")
        scale = weight / accumulation
        loss = loss * scale if scale != 1 else loss
        # Gradients are exchanged only before an optimizer step, not on every micro-step.
        self.strategy.backward(self.scaler.scale(loss) if self.scaler is not None else loss, sync=boundary)
        return value

    def _optimizer_step(self) -> None:
        clip = self.options.gradient_clipping
        if clip.clipvalue:  # both clip functions skip parameters without a gradient
            torch.nn.utils.clip_grad_value_(self.parameters, clip.clipvalue)
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)  # the clips see the gradients at their true size
        norm = self.strategy.optimizer_step(self.optimizer, self.parameters, clip.max_norm, self.scaler)
        if self.scaler is not None and self.scaler.get_scale() < 1.0:
            # An fp16 overflow skips its step and halves the scale: that is how the scale is found.
            # A scale below 1 means the gradients overflow whatever it is.
            raise self._diverged("the float16 gradients kept overflowing (the loss scale fell below 1)")
        if self.scaler is None and norm is not None and not math.isfinite(norm):
            # The step was skipped: training has stalled.
            raise self._diverged(f"the gradient norm became {norm}")
        self.scheduler.step()
        self.state.step += 1

    def _penalized_parameters(self) -> list[torch.Tensor]:
        """The weights ``regularization_type`` penalizes: all of the model's, as in Ludwig (none
        when ``regularization_lambda`` is 0)."""
        if not self.options.regularization_type or not self.options.regularization_lambda:
            return []
        if not self.strategy.whole_parameters_outside_forward:
            raise TrainingError("trainer.regularization_lambda: DeepSpeed ZeRO-3 keeps only a partition of each "
                                "weight outside the forward pass; use the optimizer's weight_decay, or ZeRO stage 1 or 2")
        return list(unwrap(self.model).parameters())

    def _diverged(self, what: str) -> TrainingError:
        return TrainingError(
            f"{what} at step {self.state.step + 1} (epoch {self.state.epoch + 1}). "
            f"Try a lower trainer.learning_rate (now {self.lr:g}) or trainer.gradient_clipping; "
            f"check the data for extreme values.{self._last_checkpoint_hint()}"
        )

    def _autocast(self):
        """Autocast in mixed_precision_dtype when use_mixed_precision is on; otherwise a no-op
        context (cheaper per step than a disabled ``torch.autocast``)."""
        if self.options.use_mixed_precision:
            return torch.autocast(self.strategy.device.type, dtype=getattr(torch, self.options.mixed_precision_dtype))
        return contextlib.nullcontext()

    def _grad_scaler(self) -> torch.amp.GradScaler | None:
        """float16 autocast's gradient scaler (None otherwise): the loss is multiplied before the
        backward pass so that small float16 gradients do not underflow to zero, the gradients are
        divided back before clipping, and a step whose gradients overflowed is skipped while the
        scale is lowered."""
        if not self.options.use_mixed_precision or self.options.mixed_precision_dtype != "float16":
            return None
        if not self.strategy.whole_gradients_in_step:
            raise ConfigError(f"trainer.mixed_precision_dtype: float16 needs the local or ddp strategy, whose "
                              f"gradients are whole on every worker (this run uses {self.strategy.name}); use "
                              "bfloat16, or DeepSpeed's own fp16 (backend.trainer.strategy.fp16.enabled)")
        return torch.amp.GradScaler(self.strategy.device.type)

    def _split(self, batch: dict) -> tuple[dict, dict]:
        device = self.strategy.device
        model = unwrap(self.model)
        batch = trim_padding(batch, model.batch_padded)
        inputs = {n: batch[n].to(device, non_blocking=True)
                  for n in model.input_names + model.target_readers}
        targets = {n: batch[n].to(device, non_blocking=True) for n in model.output_names}
        return inputs, targets

    # ---- evaluation and checkpoints --------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self, batches: Batches) -> dict:
        """Exact metrics over all rows of ``batches`` (statistics summed over workers)."""
        # The plain module: a wrapper's forward may hold collectives (DDP syncs buffers), and
        # shards for evaluation are uneven, so workers run different numbers of batches.
        model = unwrap(self.model)
        was_training = model.training
        model.eval()
        evaluation = Evaluation(model, self.strategy.device)
        for batch, real in self._evaluation_batches(batches):
            inputs, targets = self._split(batch)
            with self._autocast():
                logits = model(inputs)
            if real:
                evaluation.add(logits, targets)
        model.train(was_training)
        evaluation.all_reduce(self.strategy.all_reduce_sum)
        return evaluation.metrics.compute(evaluation.stats)

    def _evaluation_batches(self, batches: Batches):
        """``(batch, is_real)``. Workers evaluate uneven shards independently, except where the
        forward pass is itself a collective (sharded parameters): then they go in lockstep."""
        if not self.strategy.forward_is_collective:
            return ((batch, True) for batch in batches.epoch(0))
        return ((batch, real) for batch, real, _ in lockstep(batches.epoch(0), self.strategy, batches.filler()))

    def _evaluate_and_checkpoint(self, validation: Batches | None, train_loss: float) -> None:
        state = self.state
        self._emit("on_eval_start", epoch=state.epoch, step=state.step)
        record = {"epoch": state.epoch, "step": state.step, "training": {"combined": {"loss": self._mean_over_workers(train_loss)}}}
        if self.epoch_speed is not None:
            record.update(self.epoch_speed)
            self.epoch_speed = None
        evaluating = not self.options.skip_all_evaluation
        if evaluating and self.options.evaluate_training_set:
            record["training"] = {**self.evaluate(self.train_batches), **record["training"]}
        if evaluating and validation is not None and validation.rows:
            record["validation"] = self.evaluate(validation)
            if self.early_stopping.observe(state, record["validation"]):
                self.best.keep_current()
                self._emit("on_save_best_checkpoint", step=state.step)
        else:
            self.best.forget()
        if evaluating and self.plateau.active and self.plateau.observe(state, record):
            apply_now(self.scheduler)
            if self.strategy.is_coordinator:
                log.info("No improvement on a plateau: learning rate reduced to %g.", self.optimizer.param_groups[0]["lr"])
        state.history.append(record)
        self.reporter.evaluation(record)
        self._emit("on_eval_end", record=record)
        if self.run_dir is not None:
            self._save_checkpoint()
        if self.on_evaluation is not None:  # after the checkpoint, which a search may point its scheduler at
            self.on_evaluation(record, self.strategy)
        self.strategy.barrier()

    def _emit(self, hook: str, **arguments) -> None:
        """A training event for the callbacks (``plait.callbacks``), from the coordinator only."""
        if self.events is not None and self.strategy.is_coordinator:
            self.events(hook, **arguments)

    def _mean_over_workers(self, value: float) -> float:
        """The mean of a per-worker value over the workers: decisions taken on it (reductions on
        a plateau) must be the same on every worker."""
        if self.strategy.world_size == 1:
            return value
        total = self.strategy.all_reduce_sum(torch.tensor([value], dtype=torch.float64, device=self.strategy.device))
        return total.item() / self.strategy.world_size

    def _save_checkpoint(self) -> Folder:
        state = {**self.state.__dict__, "best_weights_step": self.state.best_step, "world_size": self.strategy.world_size,
                 "learning_rate": self.lr}
        path = ckpt.save_checkpoint(self.run_dir.checkpoints, self.strategy, self.model, self.optimizer,
                                    self.scheduler, state, best_weights=self.best.to_save(self.state))
        self.saved = (self.state.step, path)
        self.reporter.flush()
        self.run_dir.sync()  # logs and TensorBoard events on object storage keep up with the checkpoints
        return path

    def _resume(self, checkpoint: Folder) -> None:
        with checkpoint.fetched() as local:  # a download, where the checkpoint is on object storage
            saved = ckpt.load_checkpoint(local, self.strategy, self.model, self.optimizer, self.scheduler)
            saved.pop("best_weights_step", None)
            saved_world_size = saved.pop("world_size", self.strategy.world_size)
            saved_lr = saved.pop("learning_rate", learning_rate(self.options, saved_world_size))
            self.state = Progress(**saved)
            self.best.restore(local, self.state)
        self._adopt_learning_rate(saved_lr)
        if saved_world_size != self.strategy.world_size:
            self._adapt_to_world_size(saved_world_size)
        self.saved = (self.state.step, checkpoint)
        log.info("Resumed from %s (epoch %d, step %d).", checkpoint, self.state.epoch + 1, self.state.step)

    def _adopt_learning_rate(self, saved_lr: float) -> None:
        """Continue at this run's base learning rate where the checkpoint was saved at another:
        a group of another size (``learning_rate_scaling``), or a search that mutated
        ``trainer.learning_rate`` (PBT). The checkpoint's schedule goes on, scaled."""
        factor = self.lr / saved_lr if saved_lr else 1.0
        if abs(factor - 1.0) < 1e-12:
            return
        for group in self.optimizer.param_groups:
            group["lr"] *= factor
        self.scheduler.base_lrs = [lr * factor for lr in self.scheduler.base_lrs]
        if self.strategy.is_coordinator:
            log.info("The checkpoint's learning rate was %g; this run's is %g: its schedule goes on scaled (x%.3g).",
                     saved_lr, self.lr, factor)

    def _adapt_to_world_size(self, saved: int) -> None:
        """A checkpoint of another number of workers (an elastic group that shrank or grew).
        Each worker keeps its batch size, so the global batch follows the worker count (the
        learning rate, scaled by ``learning_rate_scaling``, is adopted above). The epoch goes on
        from the same share of its rows: the shards change with the count, so a few rows of this
        one epoch may be seen twice or not at all."""
        now = self.strategy.world_size
        self.state.batch_in_epoch = self.state.batch_in_epoch * saved // now
        if self.strategy.is_coordinator:
            log.info("The checkpoint was saved by %d worker(s); %d now: the global batch follows the worker count.",
                     saved, now)

    # ---- interruptions -------------------------------------------------------------------------

    def _interrupted(self) -> TrainingInterrupted:
        """Every worker stopped after the same step: they save one checkpoint together (unless
        this step's is saved already) and say how to continue."""
        where = ""
        if self.run_dir is not None:
            path = self._checkpoint_of_this_step()
            where = f"; a checkpoint is saved at {path}. Continue with: plait {self.run_dir.command()} --resume {self.run_dir}"
        return TrainingInterrupted(f"training interrupted at step {self.state.step}{where}")

    def _checkpoint_of_this_step(self) -> Folder:
        if self.saved is not None and self.saved[0] == self.state.step:
            return self.saved[1]
        if self.strategy.is_coordinator:
            log.info("Interrupted at step %d: saving a checkpoint (interrupt again to abort at once).", self.state.step)
        return self._save_checkpoint()

    def _checkpoint_on_request(self) -> None:
        """A checkpoint of where every worker stands, asked for by a watcher (a node about to be
        preempted); training goes on."""
        self.stop.checkpoint_requested = self.stop.checkpoint_agreed = False
        if self.run_dir is None:
            return
        saved = self.saved is not None and self.saved[0] == self.state.step
        if self.strategy.is_coordinator:
            log.info("A checkpoint was asked for at step %d (a node is about to go): %s.", self.state.step,
                     "the one of this step is saved already" if saved else "saving it")
        if not saved:
            self._save_checkpoint()

    def _interrupted_without_agreement(self) -> TrainingInterrupted:
        """A KeyboardInterrupt inside a step: a second Ctrl-C, or an interrupt no handler turned
        into a request. One worker saves where it stands, as nothing waits for it; several
        workers cannot save together (the others are inside a step), so none does."""
        if self.strategy.world_size == 1 and not self.stop.requested:
            return self._interrupted()
        why = "a second interrupt" if self.stop.requested else "an interrupt that did not reach every worker"
        hint = self._last_checkpoint_hint()
        if hint:
            hint += f" Continue from it with: plait {self.run_dir.command()} --resume {self.run_dir}"
        return TrainingInterrupted(f"training aborted at step {self.state.step} by {why}; no checkpoint saved for it.{hint}")

    def _last_checkpoint_hint(self) -> str:
        if self.run_dir is None:
            return ""
        last = ckpt.latest_checkpoint(self.run_dir.checkpoints)
        return f" The last good checkpoint is {last}." if last else ""


def freeze_matching(model: torch.nn.Module, pattern: str | None) -> None:
    """Stop training the parameters whose names match ``pattern`` (``trainer.layers_to_freeze_regex``)."""
    if not pattern:
        return
    matched = [p for name, p in model.named_parameters() if re.search(pattern, name)]
    if not matched:
        names = [name for name, _ in model.named_parameters()][:8]
        raise TrainingError(f"trainer.layers_to_freeze_regex: {pattern!r} matches no parameter; names look like {names}")
    for p in matched:
        p.requires_grad_(False)
