"""One training run on one worker: build the model, take this worker's shard of the cached
splits, run the Trainer. The local backend calls it in the driver; the Ray backend calls it on
every Ray Train worker with the ddp strategy. Nothing here knows which.
"""

from __future__ import annotations

import gc
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from plait.data.preprocess import PreprocessedData
from plait.errors import ModelError
from plait.models import build_model
from plait.models.saved import load_weights_into
from plait.run_directory import RunDirectory
from plait.utils.folder import Folder
from plait.training import checkpoint as ckpt
from plait.data.tensors import table_tensors
from plait.training.batches import Batches
from plait.training.sizes import TrainingSizes
from plait.training.strategies import Strategy
from plait.training.trainer import Trainer

log = logging.getLogger("plait")


@dataclass
class FitJob:
    """Everything a worker needs to train (picklable: it travels to Ray workers)."""

    config: object
    metadata: dict
    data: PreprocessedData
    seed: int
    run_dir: RunDirectory | None = None
    """Where checkpoints and TensorBoard logs go (a path is taken as a run directory)."""
    resume: bool = False
    progress_bar: bool = True
    resume_from: Folder | None = None
    """A checkpoint to continue from instead of the run directory's own (another trial's, when a
    search's scheduler moves a trial onto a better one)."""
    on_evaluation: Callable[[dict, Strategy], None] | None = None
    """Called on every worker after each evaluation with its record (epoch, step, metrics) and
    the worker's strategy: a search reports the metric to its scheduler from here."""
    events: Callable[..., None] | None = None
    """Where the coordinator's training events go (``events(hook, **arguments)``): the model's
    callbacks (``plait.callbacks.Dispatcher``) in this process; on Ray, a relay to the driver."""
    initial_weights: dict | None = None
    """A state dict training starts from instead of the initialization (a loaded model's, when it
    trains on); a checkpoint resumed from goes over it."""
    sizes: TrainingSizes | None = None
    """Batch sizes, accumulation and the schedule's arithmetic: worked out here, where the job is
    made (the driver), and carried to the workers with it."""

    def __post_init__(self):
        if self.run_dir is not None and not isinstance(self.run_dir, RunDirectory):
            self.run_dir = RunDirectory(self.run_dir)
        if self.sizes is None and self.config.model_type != "gbm":  # boosting has no batches
            self.sizes = TrainingSizes.of(self.config.trainer, self.data.rows("training"))


@dataclass
class FitOutput:
    module: torch.nn.Module
    history: list
    restarts: list = field(default_factory=list)
    """Restarts of a worker group after failures: ``[{"resumed_from_step": n or None}, ...]``."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def model_columns(config) -> list[str]:
    """The cached columns a model trains on: its input features, its output features, then a
    preference trainer's rejected completions (an LLM's)."""
    rejected = getattr(config, "rejected_column", None)  # an LLM config's; ECD configs have none
    return [f.name for f in config.input_features] + [f.name for f in config.output_features] + \
        ([rejected] if rejected is not None else [])


def in_memory_batches(job: FitJob, strategy: Strategy, tables: dict | None = None) -> tuple[Batches, Batches]:
    """Training and validation batches over the cached splits whole in this process (``tables``:
    the splits by name; default: read from the cache), each worker taking its shard (the local
    backend, launchers such as torchrun, and Ray workers given small splits whole)."""
    features = job.data.metadata["features"]
    names = model_columns(job.config)
    shard = dict(rank=strategy.rank, world_size=strategy.world_size)
    read = (lambda split: tables[split]) if tables is not None else job.data.read_split
    train = Batches(table_tensors(read("training"), features, names), job.sizes.batch_size,
                    shuffle=job.config.trainer.should_shuffle, seed=job.seed,
                    bucketing_field=job.config.trainer.bucketing_field, **shard)
    validation = Batches(table_tensors(read("validation"), features, names), job.sizes.eval_batch_size,
                         shuffle=False, **shard)
    return train, validation


def fit(job: FitJob, strategy: Strategy, batches: tuple | None = None, watch=None) -> FitOutput:
    """Train on this worker's shard (every worker builds the same initial model from the seed).
    ``batches``: (training, validation) batches from a loader; default: read the cache whole.
    ``watch``: see :meth:`Trainer.fit`. A GBM boosts instead (``plait.training.gbm``)."""
    if job.config.model_type == "gbm":
        from plait.training.gbm import fit_gbm

        return FitOutput(*fit_gbm(job, strategy))
    seed_everything(job.seed)
    module = build_model(job.config, job.metadata, load_pretrained=True)
    if job.initial_weights is not None:
        load_weights_into(module, job.initial_weights, "the loaded model's weights")
    train, validation = batches or in_memory_batches(job, strategy)
    resume_from = strategy.broadcast_object(checkpoint_to_resume(job, warn=False) if strategy.is_coordinator else None)
    if strategy.is_coordinator:
        log.info("Training on %d rows (validation %d), batch size %d%s.", job.data.rows("training"),
                 job.data.rows("validation"), job.sizes.batch_size,
                 f" per worker x {strategy.world_size} workers" if strategy.world_size > 1 else "")
    trainer = Trainer(job.config, module, strategy, job.sizes, job.seed, job.run_dir, job.progress_bar,
                      job.on_evaluation, job.events)
    progress = trainer.fit(train, validation if validation is not None and validation.rows else None, resume=resume_from,
                           watch=watch)
    weights = trainer.final_weights()
    history = progress.history
    # The training state (model, gradients, optimizer) goes before the final model is built:
    # with both, a worker would hold the model twice over at the end of a run.
    strategy.release_model()
    del trainer, module, progress
    if strategy.world_size > 1:
        # Sharded modules and their hooks refer to each other: only the collector frees them.
        # (Not in one process: a full collection of a large heap, a test runner's, takes seconds.)
        gc.collect()
    final = build_model(job.config, job.metadata)
    if strategy.is_coordinator:  # a sharded strategy has the whole weights on the coordinator only
        final.load_state_dict(weights)
    return FitOutput(final, history)


def checkpoint_to_resume(job: FitJob, warn: bool = True) -> Folder | None:
    """The checkpoint a job continues from (None unless it resumes); an error if there is none.
    ``warn``: say when a damaged checkpoint is passed over (the API checks first, and says it)."""
    if job.resume_from is not None:
        return job.resume_from
    if not job.resume:
        return None
    found = ckpt.resumable_checkpoint(job.run_dir.checkpoints, warn) if job.run_dir else None
    if found is None:
        raise ModelError(f"nothing to resume in {str(job.run_dir)!r}: it has no complete checkpoint")
    return found
