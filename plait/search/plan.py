"""How trials are sized to the cluster, so that a search can never deadlock on its own resources.

A trial is one of two kinds:

* **one process**: the trial trains where Tune runs it, holding ``cpu_resources_per_trial`` and
  ``gpu_resources_per_trial`` (configs whose backend is auto or local);
* **a worker group**: the trial's process drives a Ray Train group of
  ``backend.trainer.num_workers`` (configs with ``backend: {type: ray}``). Tune reserves only
  the driver; the group asks for its workers when it starts. If every trial's driver started
  before any group could, or the groups held every CPU, Ray Data's read tasks that feed them
  would wait for a CPU forever (Ludwig #1441, #2465, #2709).

So a worker-group trial is counted whole (driver and workers), each worker's CPUs are set
explicitly, and ``DATA_CPUS`` of the cluster is always left free for the read tasks.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

from plait.backends.ray.cluster import describe_nodes, room_for
from plait.errors import ConfigError

DATA_CPUS = 0.5
"""CPUs a worker-group search leaves free: room for one of the loader's read tasks at a time."""


@dataclass(frozen=True)
class TrialPlan:
    worker_group: bool
    """Whether each trial drives a Ray Train worker group (else it trains in its own process)."""
    trial_resources: dict[str, float]
    """What Tune reserves for a trial: the whole trial, or a worker group's driver."""
    worker_resources: dict[str, float] | None
    """Each Ray Train worker's resources (worker-group trials only)."""
    num_workers: int
    max_concurrent: int
    """Trials at once."""

    def describe(self) -> str:
        each = ", ".join(f"{v:g} {k}" for k, v in self.trial_resources.items() if v)
        if not self.worker_group:
            return f"each trial trains in its own process ({each}); up to {self.max_concurrent} at once"
        workers = ", ".join(f"{v:g} {k}" for k, v in (self.worker_resources or {}).items() if v)
        return (f"each trial drives a Ray Train group of {self.num_workers} worker(s) x ({workers}) from a driver "
                f"({each}); up to {self.max_concurrent} at once, {DATA_CPUS:g} CPU left for data loading")


def plan_trials(config, nodes: list[dict[str, float]], executor=None) -> TrialPlan:
    """The plan for ``config``'s search on a cluster whose live nodes have ``nodes`` resources.
    Every refusal happens here, before any trial starts. ``executor``: the trials' settings
    (``hyperopt.executor``'s, which it defaults to; k-fold's folds are trials too)."""
    executor = executor or config.hyperopt.executor
    total = {name: sum(node.get(name, 0) for node in nodes) for name in ("CPU", "GPU")}
    if executor.gpu_resources_per_trial and not total["GPU"]:
        raise ConfigError(f"hyperopt.executor.gpu_resources_per_trial: got {executor.gpu_resources_per_trial:g}, but "
                          f"this Ray cluster has no GPU ({describe_nodes(nodes, {'CPU': 1})}); set it to 0, or run "
                          "the search on a cluster with GPUs")
    if config.backend.type == "ray":
        return _worker_group_plan(executor, config.backend.trainer, nodes, total)
    return _one_process_plan(executor, nodes)


FREE_WAIT_S, FREE_POLL_S = 15.0, 1.0
"""How long a search waits for resources that other work holds to come free before refusing, and
how often it looks."""


def plan_trials_now(config, totals: Callable[[], list[dict]], free: Callable[[], list[dict]], executor=None) -> TrialPlan:
    """The plan on what the cluster has free now (``free()``, each node's): a search sized by the
    totals would queue trials behind work that holds resources (another job, a Serve deployment,
    a placement group), and its data loading could wait forever. Refused as ``plan_trials`` does
    when even the whole cluster could not hold a trial; when only other work is in the way, after
    waiting ``FREE_WAIT_S`` for it to end."""
    nodes = totals()
    plan_trials(config, nodes, executor)  # what the cluster could never hold, refused as such
    deadline = time.monotonic() + FREE_WAIT_S
    while True:
        now = free()
        try:
            return plan_trials(config, now, executor)
        except ConfigError as error:
            if time.monotonic() > deadline:
                held = {name: sum(n.get(name, 0) for n in nodes) - sum(n.get(name, 0) for n in now) for name in ("CPU", "GPU")}
                why = (f" (other work on this Ray cluster holds {_shown(held)} of it now: `ray status` shows what; "
                       "wait for it to end, or size the search to what is free)")
                raise ConfigError([problem + why for problem in error.problems]) from None
            time.sleep(FREE_POLL_S)


def _one_process_plan(executor, nodes: list[dict]) -> TrialPlan:
    each = {"CPU": float(executor.cpu_resources_per_trial), "GPU": float(executor.gpu_resources_per_trial)}
    fits = room_for(each, nodes)
    if fits < 1:
        raise ConfigError(f"hyperopt.executor: a trial needs {_shown(each)}, but no node of this Ray cluster has "
                          f"room for one ({describe_nodes(nodes, each)}); lower cpu_resources_per_trial or "
                          "gpu_resources_per_trial")
    wanted = executor.max_concurrent_trials
    # One-process trials read their data in their own process, so extra trials only queue.
    concurrent = int(min(fits, 1024)) if wanted in ("auto", None) else wanted
    return TrialPlan(False, each, None, 1, max(1, concurrent))


def _worker_group_plan(executor, trainer, nodes: list[dict], total: dict) -> TrialPlan:
    if isinstance(trainer.num_workers, tuple):
        raise ConfigError("backend.trainer.num_workers: an elastic group ([min, max]) cannot be a search trial; "
                          "give a fixed number of workers")
    workers = trainer.num_workers or 1
    driver = executor.trial_driver_resources or {"CPU": 1.0 if total["CPU"] >= 4 else 0.5}
    worker = trainer.resources_per_worker or _worker_share(total["CPU"], driver, workers, trainer.use_gpu)
    whole = {k: driver.get(k, 0) + workers * worker.get(k, 0) for k in {*driver, *worker}}
    usable = max(0.0, total["CPU"] - DATA_CPUS)
    fits = math.floor(usable / whole["CPU"] + 1e-6) if whole.get("CPU") else 1024
    if whole.get("GPU"):
        fits = min(fits, math.floor(total["GPU"] / whole["GPU"] + 1e-6))
    if fits < 1 or room_for(worker, nodes) < workers:
        raise ConfigError(f"hyperopt: one trial needs a driver ({_shown(driver)}) and {workers} worker(s) x "
                          f"({_shown(worker)}), and {DATA_CPUS:g} CPU must stay free for data loading, but this Ray "
                          f"cluster has {describe_nodes(nodes, whole)}; lower backend.trainer.num_workers, "
                          "backend.trainer.resources_per_worker or hyperopt.executor.trial_driver_resources")
    wanted = executor.max_concurrent_trials
    if isinstance(wanted, int) and wanted > fits:
        raise ConfigError(f"hyperopt.executor.max_concurrent_trials: got {wanted}, but this Ray cluster holds {fits} "
                          f"trial(s) of {_shown(whole)} at once with {DATA_CPUS:g} CPU left for data loading; more "
                          f"would wait for CPUs that the running trials' data loading needs (a deadlock). Set it to "
                          f"{fits} or auto")
    concurrent = fits if wanted in ("auto", None) else wanted
    return TrialPlan(True, {k: float(v) for k, v in driver.items()}, worker, workers, concurrent)


def _worker_share(cpus: float, driver: dict, workers: int, use_gpu: bool | None) -> dict:
    """Each worker's CPUs: one, less where one trial would leave no CPU for data loading."""
    share = round(max(0.1, min(1.0, (cpus - DATA_CPUS - driver.get("CPU", 0)) / workers)), 2)
    return {"CPU": share, **({"GPU": 1.0} if use_gpu else {})}


def _shown(resources: dict) -> str:
    return ", ".join(f"{v:g} {k}" for k, v in resources.items() if v) or "nothing"
