"""Training on a Ray Train worker group, the driver's side: the same ``fit`` on every worker
(``worker.py``, handed one ``WorkerTask``), with the strategy ``backend.trainer.strategy`` names
(ddp, fsdp, deepspeed or horovod).

Each worker reads its shard of the cached splits through the Ray Data loader
(``plait.backends.ray.loader``); checkpoints, logs and TensorBoard events go to the run
directory: on object storage (``s3://...``) no node needs to see another's disk; a local path
must be one every node sees (one machine, or a shared filesystem). Rank 0 hands the final
weights and history back through Ray Train's own result: a checkpoint it reports when training
ends, kept in the run directory's ``ray/`` folder.

Failures: the driver runs the worker group again (``backend.trainer.max_retries`` times) after a
worker dies, resuming from the last checkpoint. plait's own errors (a diverging loss, a missing
package, bad data) would come back on every try, so they end the run at once; that is why the
driver, not Ray Train, decides about retries (Ray Train retries every error alike).

Elastic groups (``num_workers: [min, max]``) are Ray Train's own: it starts the group with the
workers that fit and, when room comes back, restarts it larger by itself; after a lost node the
driver's restart above starts it with what fits now. Every start resumes from the run's last
checkpoint (``worker._fit``), and a preemption notice asks for one first (``preemption.py``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import uuid
from dataclasses import replace
from functools import partial
from pathlib import Path

from plait.backends.ray.cluster import check_room, plan_with_room
from plait.backends.ray.errors import plait_error_of, worker_message
from plait.backends.ray.loader import (exactly_once_data_config, filler_table, shuffle_rows, split_datasets,
                                       whole_splits)
from plait.backends.ray.worker import RESULT_HISTORY, RESULT_WEIGHTS, WorkerTask, train_on_worker
from plait.errors import BackendError, TrainingError
from plait.run_directory import RunDirectory
from plait.training import checkpoint as ckpt
from plait.training.run import FitJob, FitOutput, model_columns
from plait.training.strategies import StepPlan, check_strategy
from plait.utils.folder import Folder
from plait.utils.fs import is_local

log = logging.getLogger("plait")


def plan(settings, resources: dict, nodes: list[dict] | None = None) -> dict:
    """Workers, per-worker resources and GPU use, with the defaults filled from the cluster's
    ``resources``; given the ``nodes``' resources, refused (Unschedulable) when the nodes cannot
    hold every worker at once, which Ray Train would wait for forever."""
    scaling = _scaling(settings, resources)
    if nodes is not None:  # an elastic group starts once its minimum fits
        check_room(scaling["resources_per_worker"], nodes, scaling["min_workers"], "backend.trainer: the worker group")
    return scaling


def _scaling(settings, resources: dict) -> dict:
    gpus = resources.get("GPU", 0)
    use_gpu = settings.use_gpu if settings.use_gpu is not None else gpus > 0
    if use_gpu and not gpus:
        raise BackendError("backend.trainer.use_gpu is true but the Ray cluster has no GPU; set it to false")
    low, workers = settings.num_workers if isinstance(settings.num_workers, tuple) else (None, settings.num_workers)
    workers = workers or (int(gpus) if use_gpu else 1)
    per_worker = settings.resources_per_worker or {"CPU": _cpus_per_worker(resources.get("CPU", 1), workers),
                                                   **({"GPU": 1.0} if use_gpu else {})}
    if per_worker.get("GPU") and not use_gpu:
        raise BackendError("backend.trainer.resources_per_worker asks for a GPU but use_gpu is false; "
                           "set use_gpu: true or remove GPU from resources_per_worker")
    if 0 < per_worker.get("GPU", 0) < 1 and workers > 1:
        raise BackendError(f"backend.trainer.resources_per_worker: {per_worker['GPU']:g} GPU per worker would put "
                           f"several of the {workers} workers on one GPU, which NCCL refuses; give each worker a "
                           "whole GPU, or train with one worker (fractions suit one worker per trial)")
    return {"num_workers": workers, "min_workers": low or workers, "use_gpu": use_gpu, "resources_per_worker": per_worker,
            "placement_strategy": settings.placement_strategy}


def _cpus_per_worker(cluster_cpus: float, workers: int) -> float:
    """One CPU per worker, less where that would leave no CPU for the loader's read tasks: Ray
    schedules by these tokens, and workers holding them all would wait for data forever. Torch
    still uses every core of the node (see ``_share_cores``)."""
    spare = 1.0 if cluster_cpus >= 2 else 0.5
    return round(max(0.1, min(1.0, (cluster_cpus - spare) / workers)), 2)


def describe_plan(scaling: dict, strategy: str, global_batch: int) -> str:
    resources = ", ".join(f"{v:g} {k}" for k, v in scaling["resources_per_worker"].items())
    low, high = scaling["min_workers"], scaling["num_workers"]
    workers = f"{high} worker(s)" if low == high else f"{low} to {high} workers (elastic)"
    return (f"Ray Train: {workers} x {resources}, strategy {strategy}, {'GPU' if scaling['use_gpu'] else 'CPU'}, "
            f"global batch {global_batch}{' at the most workers' if low != high else ''}.")


def fit_on_ray(job: FitJob, settings) -> FitOutput:
    if job.run_dir is not None:
        return _fit_in_run_directory(job, settings)
    # Checkpoints and Ray's result need a folder the workers see; the caller keeps none, so it
    # lasts as long as this call (a checkpoint is the model's size: left behind, they fill disks).
    with tempfile.TemporaryDirectory(prefix="plait-ray-run-") as folder:
        return _fit_in_run_directory(replace(job, run_dir=RunDirectory(folder)), settings)


def _fit_in_run_directory(job: FitJob, settings) -> FitOutput:
    scaling = plan_with_room(partial(plan, settings), settings.scheduling_timeout_s)
    events = job.events  # called here, in the driver, with what rank 0 relays
    job = _for_workers(job)
    # Settings a worker would refuse, refused here and now.
    check_strategy(settings.strategy, StepPlan.of(job.sizes, job.config.trainer.gradient_clipping))
    log.info("%s", describe_plan(scaling, settings.strategy.type, job.sizes.global_batch(scaling["num_workers"])))
    loader, columns = job.config.backend.loader, model_columns(job.config)
    splits = whole_splits(job.data, loader, columns)
    if splits is not None:
        log.info("Ray Train: the splits go to every worker whole, through the object store; each trains on its shard.")
        datasets, window, filler = {}, None, None
    else:
        datasets = split_datasets(job.data, loader, columns, scaling["num_workers"])
        window = shuffle_rows(job.data, loader, job.sizes.batch_size) if job.config.trainer.should_shuffle else None
        filler = filler_table(datasets["training"])
    restarts: list[dict] = []
    with _relayed_worker_logs(events) as log_queue:
        logs = Folder(settings.logdir).resolved() if settings.logdir else job.run_dir.logs
        while True:
            # Checkpoints already there were not written by this group: Ray's own restarts resume
            # only from newer ones (see worker._fit).
            before = ckpt.latest_checkpoint(job.run_dir.checkpoints)
            task = WorkerTask(job, log_queue, logs, filler=filler, shuffle_rows=window,
                              checkpoint_before=before and before.name, splits=splits, relay_events=events is not None)
            trainer = _trainer(task, settings, scaling, datasets)
            try:
                with _own_sigint_handler(), _controller_settings(scaling):
                    result = trainer.fit()
                return _output(job, result, restarts)
            except Exception as failure:  # noqa: BLE001 (Ray wraps what a worker raised)
                job = _after_failure(job, failure, restarts, settings.max_retries)


def _for_workers(job: FitJob) -> FitJob:
    """The job with absolute paths (Ray workers run in a working directory of their own)."""
    run = job.run_dir.resolved()
    if run.is_local:
        _warn_if_nodes_do_not_share(run)
    data = job.data
    if is_local(data.fs):
        data = replace(data, location=os.path.abspath(data.location))
    # Worker output does not reach this terminal; the callbacks stay here (rank 0 relays events).
    return replace(job, data=data, run_dir=run, progress_bar=False, events=None)


def _warn_if_nodes_do_not_share(run: RunDirectory) -> None:
    """A local run directory on a cluster of several nodes works only where every node sees it
    at the same path; plait cannot tell a shared filesystem from a local disk, so it says so."""
    import ray

    nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    if nodes > 1:
        log.warning("The run directory %s is a local path and the Ray cluster has %d nodes: workers on other nodes "
                    "write checkpoints and logs there, so it must be a filesystem every node shares. Without one, "
                    "use object storage: --output-directory s3://bucket/prefix (any fsspec URL).", run, nodes)


def _trainer(task: WorkerTask, settings, scaling: dict, datasets: dict):
    import ray
    from ray.train import FailureConfig
    from ray.train.torch import TorchTrainer

    from plait.backends.ray.worker_entry import run_worker

    job = task.job
    return TorchTrainer(
        run_worker,  # which gets the task from the object store (see worker_entry)
        train_loop_config={"payload": ray.put((train_on_worker, task))},
        scaling_config=_scaling_config(scaling, settings),
        datasets=datasets,
        dataset_config=exactly_once_data_config(job.config.backend.loader.window_size_bytes),
        run_config=_run_config(job.run_dir, FailureConfig(max_failures=0), _callbacks(job)),
    )


def _callbacks(job: FitJob) -> list:
    """Ray Train callbacks that the job's evaluation hook brings (a search trial's reports to
    Tune); the backend itself knows nothing of them."""
    train_callbacks = getattr(job.on_evaluation, "train_callbacks", None)
    return train_callbacks() if train_callbacks else []


def _scaling_config(scaling: dict, settings):
    """Ray Train's scaling: a fixed count, or ``(min, max)`` for an elastic group, which Ray
    starts with what fits and restarts larger when room comes back (each start resumes from the
    run's last checkpoint: see ``_fit_on_worker``)."""
    from ray.train import ScalingConfig

    low, high = scaling["min_workers"], scaling["num_workers"]
    elastic = {"num_workers": (low, high), "elastic_resize_monitor_interval_s": settings.elastic_resize_interval_s}
    return ScalingConfig(**(elastic if low != high else {"num_workers": high}), use_gpu=scaling["use_gpu"],
                         resources_per_worker=scaling["resources_per_worker"],
                         placement_strategy=scaling["placement_strategy"])


def _run_config(run: RunDirectory, failure_config, callbacks: list):
    """Ray Train's own storage in the run directory's ``ray/`` folder, on the same filesystem."""
    from ray.train import RunConfig

    # A unique name: Ray resumes silently when a name is reused under the same storage path.
    name = f"plait-{uuid.uuid4().hex[:12]}"
    storage = run.ray_storage
    if storage.is_local:
        return RunConfig(name=name, storage_path=storage.url, failure_config=failure_config, callbacks=callbacks)
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    return RunConfig(name=name, storage_path=storage.path, storage_filesystem=PyFileSystem(FSSpecHandler(storage.fs)),
                     failure_config=failure_config, callbacks=callbacks)


@contextlib.contextmanager
def _own_sigint_handler():
    """Ray Train installs its own Ctrl-C handler in the driver for a run and leaves it there;
    this process's handler comes back when the run ends."""
    import signal
    import threading

    previous = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:  # handlers can be set from the main thread only
        if previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous)


ELASTIC_START_TIMEOUT_S = 20
"""How long an elastic group waits for its workers to start before Ray Train decides its size
again. Just after a node is lost, the cluster may still count it for a few seconds: a group
sized for it would wait Ray's default 60 s before going on with the workers that exist."""

HEALTH_CHECK_INTERVAL_S = 0.5
"""How often Ray Train's controller polls its workers. Ray's default, 2 s, is also how late a
finished run is noticed: about 4 s of a short run's 25 on two cores. A poll is one small call per
worker."""


@contextlib.contextmanager
def _controller_settings(scaling: dict):
    """Ray Train's controller settings for this run, as the environment variables Ray Train reads
    (its controller receives the driver's): the health-check interval, and for an elastic group
    the worker start timeout. A variable the user set is left as it is."""
    wanted = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": HEALTH_CHECK_INTERVAL_S}
    if scaling["min_workers"] != scaling["num_workers"]:
        wanted["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] = ELASTIC_START_TIMEOUT_S
    ours = {name: str(value) for name, value in wanted.items() if name not in os.environ}
    os.environ.update(ours)
    try:
        yield
    finally:
        for name in ours:
            os.environ.pop(name, None)


def _after_failure(job: FitJob, failure: Exception, restarts: list, max_retries: int) -> FitJob:
    """The job to run again after a failed try (resuming from the last checkpoint, if any), or
    the error that ends the run: plait's own, or any once the retries are spent."""
    error = plait_error_of(failure)
    if error is not None:
        raise TrainingError(f"training on Ray failed: {error}") from None
    if len(restarts) >= max_retries:
        raise TrainingError(f"training on Ray failed: {worker_message(failure)}") from None
    latest = ckpt.latest_checkpoint(job.run_dir.checkpoints)
    step = ckpt.saved_step(latest) if latest else None
    restarts.append({"resumed_from_step": step})
    log.warning("A worker failed (%s); the worker group was restarted and %s.", worker_message(failure),
                f"resumed from the checkpoint at step {step}" if step is not None else "started over (no checkpoint yet)")
    return replace(job, resume=step is not None or job.resume)


def _output(job: FitJob, result, restarts: list) -> FitOutput:
    """The model and history rank 0 reported."""
    from plait.models import build_model

    module = build_model(job.config, job.metadata)
    with result.checkpoint.as_directory() as folder:
        module.load_state_dict(ckpt.load_weights(Path(folder) / RESULT_WEIGHTS))
        history = json.loads((Path(folder) / RESULT_HISTORY).read_text())
    return FitOutput(module, history, restarts)


@contextlib.contextmanager
def _relayed_worker_logs(events=None):
    """Rank 0's plait log lines (one per evaluation, not per batch) shown here as they come:
    Ray does not forward worker output to this process. With ``events`` (the model's callbacks),
    rank 0's training events come the same way and are called here, in the order sent. The
    queue's actor runs on this node, which a run cannot lose and go on; should it die all the
    same, lines stop, training not. A callback that raises ends the run when training returns."""
    import threading

    import ray
    from ray.util.queue import Empty, Queue
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    queue = Queue(maxsize=10_000, actor_options={"num_cpus": 0, "scheduling_strategy": here})
    done, failures = threading.Event(), []

    def handle(item) -> None:
        if not isinstance(item, tuple):
            log.info("%s", item)
        elif events is not None and not failures:
            try:
                events(item[1], **item[2])
            except Exception as error:  # noqa: BLE001 (raised in the driver's thread below)
                failures.append(error)

    def show():
        while not done.is_set():
            try:
                handle(queue.get(timeout=0.5))
            except Empty:
                pass
            except ray.exceptions.RayError:  # the queue's actor is gone
                return

    thread = threading.Thread(target=show, name="plait-worker-logs", daemon=True)
    thread.start()
    try:
        yield queue
    finally:
        done.set()
        thread.join()
        with contextlib.suppress(ray.exceptions.RayError):
            while not queue.empty():
                handle(queue.get_nowait())
            queue.shutdown()
    if failures:
        raise failures[0]
