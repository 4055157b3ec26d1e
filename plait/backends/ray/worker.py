"""The worker side of training on Ray: what each Ray Train worker runs.

The driver (``plait.backends.ray.train``) hands every worker one :class:`WorkerTask`; the worker
joins its strategy's process group, reads its shards through the Ray Data loader, runs the same
``fit`` as every backend, and rank 0 reports the final weights and history as Ray Train's result.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from plait.backends.environment import strategy_options
from plait.backends.ray.loader import ShardBatches
from plait.errors import TrainingError
from plait.training import checkpoint as ckpt
from plait.training.run import FitJob, FitOutput, in_memory_batches, model_columns
from plait.training.strategies import build_strategy
from plait.utils.folder import Folder

RESULT_WEIGHTS = "model.safetensors"
RESULT_HISTORY = "history.json"
"""The files of the checkpoint rank 0 reports when training ends."""


@dataclass(frozen=True)
class WorkerTask:
    """What the driver hands each worker (picklable; it travels through the object store)."""

    job: FitJob
    """The training job, its paths absolute (workers run in a working directory of their own)."""
    log_queue: Any
    """A ``ray.util.queue.Queue`` that takes rank 0's log lines to the driver."""
    logs: Folder
    """Where each worker writes its log file (``rank-<n>.log``)."""
    filler: pa.Table | None
    """A few real rows: the batch a worker runs while its shard is done and the others' are not
    (streamed splits; whole splits have their own)."""
    shuffle_rows: int | None
    """Rows in each worker's shuffle window (None: no shuffling; streamed splits)."""
    checkpoint_before: str | None
    """The name of the run's newest checkpoint when the driver started this group: a newer one
    at a worker's start was saved by this group before Ray Train restarted it (see ``_fit``)."""
    splits: dict | None = None
    """Small splits, whole: ``{split: object reference to its table}`` (``loader.whole_splits``);
    None: each worker's shards stream from the Ray Data loader."""
    relay_events: bool = False
    """Send rank 0's training events to the driver, whose callbacks take them."""


@dataclass(frozen=True)
class RelayedEvents:
    """Rank 0's training events, put on the driver's log queue as ``("event", hook, arguments)``
    (a log line is a string). Unlike a log line, an event waits for room in the queue: a tracker
    must get every evaluation. A queue that is gone loses the events, never the training."""

    queue: Any

    def __call__(self, hook: str, **arguments) -> None:
        try:
            self.queue.put(("event", hook, arguments), timeout=60)
        except Exception:  # noqa: BLE001 (the queue's actor is gone, or full for a minute)
            logging.getLogger("plait").warning("the driver's queue took no %s event: it is lost", hook)


def train_on_worker(task: WorkerTask) -> None:
    """One Ray Train worker's run: train, then rank 0 reports the final weights and history as
    Ray Train's result. A plait error is tagged with the worker's rank for the driver."""
    _share_cores()
    job = task.job
    _relay_logs(task.log_queue, job.run_dir.staging(task.logs))
    if task.relay_events:  # only the coordinator emits events (see Trainer._emit)
        job = replace(job, events=RelayedEvents(task.log_queue))
        task = replace(task, job=job)
    section = job.config.backend.trainer.strategy
    strategy = build_strategy(section, **strategy_options(section.type, _assigned_gpu()))
    try:
        output = _fit(task, strategy)
        _report_result(output, strategy.is_coordinator)
    finally:
        strategy.shutdown()
        job.run_dir.sync()  # this worker's log, also after a failure


def _fit(task: WorkerTask, strategy) -> FitOutput:
    from plait.backends.ray.preemption import checkpoint_before_preemption
    from plait.errors import PlaitError
    from plait.training.run import fit

    job = task.job
    # Only the coordinator looks: ``fit`` hands its checkpoint to the other workers.
    latest = None if job.resume or not strategy.is_coordinator else ckpt.latest_checkpoint(job.run_dir.checkpoints)
    if latest is not None and latest.name != task.checkpoint_before:
        # Ray Train started this group again itself (an elastic group resized) after it saved a
        # checkpoint: the group goes on from it.
        job = replace(job, resume=True)
    try:
        return fit(job, strategy, _shard_batches(task, strategy), watch=checkpoint_before_preemption)
    except PlaitError as error:  # the driver reports it as a training failure, naming the worker
        raise TrainingError(f"{error} (worker {strategy.rank})") from None


def _shard_batches(task: WorkerTask, strategy) -> tuple:
    """This worker's training and validation shards: of the whole splits in memory, or from the
    Ray Data loader."""
    import ray.train

    if task.splits is not None:
        return in_memory_batches(task.job, strategy, {split: ray.get(ref) for split, ref in task.splits.items()})
    job, sizes, workers = task.job, task.job.sizes, strategy.world_size
    common = dict(world_size=workers, features=job.data.metadata["features"], names=model_columns(job.config),
                  filler=task.filler, rank=strategy.rank)
    train = ShardBatches(ray.train.get_dataset_shard("training"), job.data.rows("training"), batch_size=sizes.batch_size,
                         shuffle_rows=task.shuffle_rows, seed=job.seed, read_ahead=True,
                         epochs=sizes.epochs_to_run(workers), bucketing_field=job.config.trainer.bucketing_field, **common)
    validation = None
    if job.data.rows("validation"):
        validation = ShardBatches(ray.train.get_dataset_shard("validation"), job.data.rows("validation"),
                                  batch_size=sizes.eval_batch_size, **common)
    return train, validation


def _report_result(output: FitOutput, is_coordinator: bool) -> None:
    """Every worker reports once (Ray Train's report is collective); rank 0 attaches a
    checkpoint with the final weights and the history."""
    import ray.train

    with tempfile.TemporaryDirectory(prefix="plait-result-") as folder:
        checkpoint = None
        if is_coordinator:
            ckpt.save_weights(output.module.state_dict(), Path(folder) / RESULT_WEIGHTS)
            (Path(folder) / RESULT_HISTORY).write_text(json.dumps(output.history))
            checkpoint = ray.train.Checkpoint.from_directory(folder)
        ray.train.report({"epochs": len(output.history)}, checkpoint=checkpoint)


class _QueueHandler(logging.Handler):
    def __init__(self, queue):
        super().__init__(logging.INFO)
        self.queue = queue

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(self.format(record))
        except Exception:  # a full or closed queue must never stop training
            pass


def _relay_logs(queue, logdir: Path) -> None:
    """Every worker's plait log lines to ``<logdir>/rank-<n>.log`` (appended across restarts);
    rank 0's also to the driver."""
    import ray.train

    context = ray.train.get_context()
    rank = context.get_world_rank()
    plait_log = logging.getLogger("plait")
    plait_log.setLevel(logging.INFO)
    Path(logdir).mkdir(parents=True, exist_ok=True)
    kept = logging.FileHandler(Path(logdir) / f"rank-{rank}.log")
    kept.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    plait_log.addHandler(kept)
    if rank == 0:
        plait_log.addHandler(_QueueHandler(queue))
    plait_log.info("worker rank %d of %d on node %s", rank, context.get_world_size(), ray.get_runtime_context().get_node_id())


def _assigned_gpu() -> str | None:
    """The GPU Ray gave this worker (None without one). Not ``cuda:<local rank>``: with
    fractional GPUs several workers share one device, and the order of a node's visible devices
    need not follow the workers' ranks."""
    import ray.train.torch
    import torch

    return str(ray.train.torch.get_device()) if torch.cuda.is_available() else None


def _share_cores() -> None:
    """Torch threads: this node's cores but one, shared by its workers. Ray limits a worker to
    as many threads as CPUs it reserved (1 by default), which leaves a CPU-only node mostly
    idle; the reservation stays small so that other Ray work (a data loader) can still be
    scheduled. The core left over runs Ray's own processes and the loader's read-ahead: with
    every core busy in torch's parallel regions, each of them stalls whenever another process
    runs (measured: a third of one worker's runs on two cores lost 20% of their speed)."""
    import ray.train
    import torch

    if torch.cuda.is_available():
        return
    workers_here = max(1, ray.train.get_context().get_local_world_size())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    torch.set_num_threads(max(1, (cores - 1) // workers_here))
