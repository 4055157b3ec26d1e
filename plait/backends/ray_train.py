"""Training on a Ray Train worker group: the same ``fit`` on every worker, with the strategy
``backend.trainer.strategy`` names (ddp, fsdp, deepspeed or horovod).

Each worker reads its shard of the cached splits through the Ray Data loader
(``plait.backends.ray_loader``); checkpoints are written to the run directory (every worker
must see it: one machine, or a shared filesystem). When a
worker dies, Ray restarts the group (``backend.trainer.max_retries`` times) and the workers
resume from the last checkpoint. Rank 0 leaves the final weights and history in the run
directory for the driver.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

from plait.backends.ray_loader import ShardBatches, exactly_once_data_config, filler_table, shuffle_rows, split_datasets
from plait.errors import BackendError, PlaitError, TrainingError
from plait.training import checkpoint as ckpt
from plait.training.run import FitJob, FitOutput, batch_size, eval_batch_size, model_columns
from plait.utils.fs import is_local, write_json

log = logging.getLogger("plait")

RESULT = "ray_result"
"""Folder of the run directory where rank 0 leaves the final weights and history."""
STARTED = "started"
FINAL_ERROR = "final_error.json"
"""Left in the result folder by a worker that raised one of plait's own errors (see ``_worker``)."""


def plan(settings, resources: dict) -> dict:
    """Workers, per-worker resources and GPU use, with the defaults filled from the cluster."""
    gpus = resources.get("GPU", 0)
    use_gpu = settings.use_gpu if settings.use_gpu is not None else gpus > 0
    if use_gpu and not gpus:
        raise BackendError("backend.trainer.use_gpu is true but the Ray cluster has no GPU; set it to false")
    workers = settings.num_workers or (int(gpus) if use_gpu else 1)
    per_worker = settings.resources_per_worker or {"CPU": _cpus_per_worker(resources.get("CPU", 1), workers),
                                                   **({"GPU": 1.0} if use_gpu else {})}
    if per_worker.get("GPU") and not use_gpu:
        raise BackendError("backend.trainer.resources_per_worker asks for a GPU but use_gpu is false; "
                           "set use_gpu: true or remove GPU from resources_per_worker")
    if 0 < per_worker.get("GPU", 0) < 1 and workers > 1:
        raise BackendError(f"backend.trainer.resources_per_worker: {per_worker['GPU']:g} GPU per worker would put "
                           f"several of the {workers} workers on one GPU, which NCCL refuses; give each worker a "
                           "whole GPU, or train with one worker (fractions suit one worker per trial)")
    return {"num_workers": workers, "use_gpu": use_gpu, "resources_per_worker": per_worker}


def _cpus_per_worker(cluster_cpus: float, workers: int) -> float:
    """One CPU per worker, less where that would leave no CPU for the loader's read tasks: Ray
    schedules by these tokens, and workers holding them all would wait for data forever. Torch
    still uses every core of the node (see ``_share_cores``)."""
    spare = 1.0 if cluster_cpus >= 2 else 0.5
    return round(max(0.1, min(1.0, (cluster_cpus - spare) / workers)), 2)


def describe_plan(scaling: dict, strategy: str, global_batch: int) -> str:
    resources = ", ".join(f"{v:g} {k}" for k, v in scaling["resources_per_worker"].items())
    return (f"Ray Train: {scaling['num_workers']} worker(s) x {resources}, strategy {strategy}, "
            f"{'GPU' if scaling['use_gpu'] else 'CPU'}, global batch {global_batch}.")


def fit_on_ray(job: FitJob, settings) -> FitOutput:
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from plait.training.strategies import check_strategy

    scaling = plan(settings, ray.cluster_resources())
    # Absolute paths: Ray workers run in a working directory of their own.
    run_dir = Path(job.run_dir or tempfile.mkdtemp(prefix="plait-ray-run-")).resolve()
    data = job.data
    if is_local(data.fs):
        data = replace(data, location=os.path.abspath(data.location))
    job = replace(job, data=data, run_dir=run_dir, progress_bar=False)  # worker output does not reach this terminal
    (run_dir / RESULT).mkdir(parents=True, exist_ok=True)
    for stale in (STARTED, FINAL_ERROR):  # restarts and errors are this run of the driver's
        (run_dir / RESULT / stale).unlink(missing_ok=True)
    check_strategy(settings.strategy, job.config.trainer)  # settings a worker would refuse, refused here and now
    global_batch = batch_size(job) * scaling["num_workers"] * job.config.trainer.gradient_accumulation_steps
    log.info("%s", describe_plan(scaling, settings.strategy.type, global_batch))
    loader = job.config.backend.loader
    datasets = split_datasets(job.data, loader, model_columns(job.config), scaling["num_workers"])
    feed = {"filler": filler_table(datasets["training"]),
            "shuffle_rows": shuffle_rows(job.data, loader, batch_size(job)) if job.config.trainer.should_shuffle else None}
    try:
        with _relayed_worker_logs() as logs:
            trainer = TorchTrainer(
                _worker,
                train_loop_config={"job": job, "logs": logs, "feed": feed,
                                   "logdir": str(Path(settings.logdir or run_dir / "logs").resolve())},
                scaling_config=ScalingConfig(**scaling),
                datasets=datasets,
                dataset_config=exactly_once_data_config(loader.window_size_bytes),
                # A unique name: Ray resumes silently when a name is reused under the same storage path.
                run_config=RunConfig(name=f"plait-{uuid.uuid4().hex[:12]}", storage_path=str(run_dir / "ray"),
                                     failure_config=FailureConfig(max_failures=settings.max_retries)),
            )
            trainer.fit()
    except Exception as exc:  # Ray wraps a worker's exception; show the worker's own message
        raise TrainingError(f"training on Ray failed: {final_error(run_dir) or _worker_message(exc)}") from None
    recorded = final_error(run_dir)  # a restarted group found it and returned
    if recorded:
        raise TrainingError(f"training on Ray failed: {recorded}")
    for restart in restarts(run_dir):
        step = restart["resumed_from_step"]
        log.warning("A worker failed; the worker group was restarted and %s.",
                    f"resumed from the checkpoint at step {step}" if step is not None else "started over (no checkpoint yet)")
    return _read_result(job)


def _worker(loop_config: dict) -> None:
    """One Ray Train worker's run. plait's own errors (a diverging loss, a missing package, bad
    data) are the same on every try: Ray Train restarts the group after any error, so the
    worker that raises one records it, and the restarted workers find it and return at once
    (no collective, no retry left to spend); the driver then reports it."""
    import ray.train

    job: FitJob = loop_config["job"]
    if final_error(job.run_dir):
        return
    _share_cores()
    _relay_logs(loop_config["logs"], loop_config["logdir"])
    try:
        _train_on_worker(job, loop_config["feed"])
    except PlaitError as error:
        rank = ray.train.get_context().get_world_rank()
        try:
            write_json(Path(job.run_dir) / RESULT / FINAL_ERROR, {"rank": rank, "message": str(error)})
        except OSError as unrecorded:  # the worker's own error matters more than this one
            logging.getLogger("plait").warning("Could not record the error for the driver: %s", unrecorded)
        raise


def _train_on_worker(job: FitJob, feed: dict) -> None:
    from plait.training.run import fit
    from plait.training.strategies import build_strategy

    strategy = build_strategy(job.config.backend.trainer.strategy, trainer=job.config.trainer, device=_assigned_gpu())
    try:
        started = Path(job.run_dir) / RESULT / STARTED
        # A restarted group (a worker died) continues from the last checkpoint, if there is one;
        # rank 0 decides, so every worker resumes from the same one.
        restart = None
        if strategy.is_coordinator and started.exists():
            latest = ckpt.latest_checkpoint(Path(job.run_dir) / "checkpoints")
            restart = {"resumed_from_step": _step(latest) if latest else None}
            _record_restart(started, restart)
        restart = strategy.broadcast_object(restart)
        if restart and restart["resumed_from_step"] is not None:
            job = replace(job, resume=True)
        if strategy.is_coordinator and not started.exists():
            started.parent.mkdir(parents=True, exist_ok=True)
            write_json(started, [])
        output = fit(job, strategy, _shard_batches(job, strategy, feed))
        if strategy.is_coordinator:
            _write_result(job, output)
        strategy.barrier()
    finally:
        strategy.shutdown()


def final_error(run_dir) -> str | None:
    """The error a worker recorded as one a restart cannot fix, if any."""
    path = Path(run_dir) / RESULT / FINAL_ERROR
    if not path.is_file():
        return None
    error = json.loads(path.read_text())
    return f"{error['message']} (worker {error['rank']})"


def _shard_batches(job: FitJob, strategy, feed: dict) -> tuple:
    """This worker's training and validation shards from the Ray Data loader."""
    import ray.train

    features = job.data.metadata["features"]
    common = dict(world_size=strategy.world_size, features=features, names=model_columns(job.config), filler=feed["filler"], rank=strategy.rank)
    train = ShardBatches(ray.train.get_dataset_shard("training"), job.data.rows("training"), batch_size=batch_size(job),
                         shuffle_rows=feed["shuffle_rows"], seed=job.seed, read_ahead=True, **common)
    train.epochs = _epochs_to_run(job.config.trainer, len(train))
    validation = None
    if job.data.rows("validation"):
        validation = ShardBatches(ray.train.get_dataset_shard("validation"), job.data.rows("validation"),
                                  batch_size=eval_batch_size(job), **common)
    return train, validation


def _epochs_to_run(trainer, batches_per_epoch: int) -> int:
    """Epochs the run starts (early stopping may end it sooner): ``trainer.epochs``, or those
    ``train_steps`` take at the shard's estimated length."""
    if not trainer.train_steps:
        return trainer.epochs
    steps_per_epoch = max(1, -(-batches_per_epoch // trainer.gradient_accumulation_steps))
    return -(-trainer.train_steps // steps_per_epoch)


@contextlib.contextmanager
def _relayed_worker_logs():
    """Rank 0's plait log lines (one per evaluation, not per batch) shown here as they come:
    Ray does not forward worker output to this process."""
    import threading

    from ray.util.queue import Empty, Queue

    queue = Queue(maxsize=10_000, actor_options={"num_cpus": 0})
    done = threading.Event()

    def show():
        while not done.is_set():
            try:
                log.info("%s", queue.get(timeout=0.5))
            except Empty:
                pass

    thread = threading.Thread(target=show, name="plait-worker-logs", daemon=True)
    thread.start()
    try:
        yield queue
    finally:
        done.set()
        thread.join()
        while not queue.empty():
            log.info("%s", queue.get_nowait())
        queue.shutdown()


class _QueueHandler(logging.Handler):
    def __init__(self, queue):
        super().__init__(logging.INFO)
        self.queue = queue

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(self.format(record))
        except Exception:  # a full or closed queue must never stop training
            pass


def _relay_logs(queue, logdir: str) -> None:
    """Every worker's plait log lines to ``<logdir>/rank-<n>.log`` (appended across restarts);
    rank 0's also to the driver."""
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    plait_log = logging.getLogger("plait")
    plait_log.setLevel(logging.INFO)
    Path(logdir).mkdir(parents=True, exist_ok=True)
    kept = logging.FileHandler(Path(logdir) / f"rank-{rank}.log")
    kept.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    plait_log.addHandler(kept)
    if rank == 0:
        plait_log.addHandler(_QueueHandler(queue))


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


def _step(checkpoint: Path) -> int:
    return json.loads((checkpoint / "state.json").read_text())["step"]


def _record_restart(started: Path, restart: dict) -> None:
    """Restarts are listed in the ``started`` file, for the driver to report."""
    write_json(started, [*json.loads(started.read_text()), restart])


def restarts(run_dir: Path) -> list[dict]:
    """The worker group's restarts in a run: ``[{"resumed_from_step": n or None}, ...]``."""
    path = Path(run_dir) / RESULT / STARTED
    return json.loads(path.read_text()) if path.is_file() else []


def _write_result(job: FitJob, output: FitOutput) -> None:
    folder = Path(job.run_dir) / RESULT
    ckpt.save_weights(output.module.state_dict(), folder / "model.safetensors")
    write_json(folder / "history.json", output.history)


def _read_result(job: FitJob) -> FitOutput:
    from plait.models.ecd import ECD

    folder = Path(job.run_dir) / RESULT
    module = ECD(job.config, job.metadata)
    module.load_state_dict(ckpt.load_weights(folder / "model.safetensors"))
    return FitOutput(module, json.loads((folder / "history.json").read_text()))


def _worker_message(exc: BaseException) -> str:
    """The innermost cause's last line: the worker's error, not Ray's wrapping."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__
