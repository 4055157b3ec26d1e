"""k-fold cross-validation (Ludwig's ``experiment --k_fold`` and ``kfold_cross_validate``).

Each row's fold comes from a seeded hash of its row number (``preprocessing.split: {type:
kfold}``), so every backend deals the same folds. Fold n's run trains on the other folds and is
evaluated on fold n. Locally the runs go one after another; on a Ray cluster (the config's backend
resolves to ray) they run at once as Ray Tune trials sized as a search's trials are
(``plait.search.plan``): with ``backend: {type: ray}`` each fold is a Ray Train worker group,
otherwise each trains in a trial process of its own, at most as many at once as the cluster
holds. Each finished fold's statistics are kept in ``<output_directory>/kfold/`` under a
fingerprint of the config, data and seed: the same command after a crash reuses them and runs
only the folds that had not finished. The results are written in Ludwig's layout:
``kfold_training_statistics.json`` (each fold's training statistics with its ``fold_eval_stats``,
and ``overall``: each metric's mean and standard deviation over the folds) and
``kfold_split_indices.json`` (each fold's training and test row indices).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from plait.api import Model
from plait.backends import resolve_type
from plait.config import PlaitConfig, load_config, with_backend_type
from plait.config.hyperopt import ExecutorConfig
from plait.config.render import resolved_dict
from plait.data import split as sp
from plait.data.cache import cache_key, dataset_identity
from plait.errors import PlaitError, TrainingError, UsageError
from plait.utils.folder import is_url
from plait.utils.fs import ensure_dir, resolve, write_json

log = logging.getLogger("plait")

STATISTICS = "kfold_training_statistics.json"
SPLIT_INDICES = "kfold_split_indices.json"


def kfold_cross_validate(num_folds: int, config: str | os.PathLike | dict | PlaitConfig, dataset: Any,
                         output_directory: str | os.PathLike = "results", random_seed: int = 42,
                         backend: str | None = None, skip_save_k_fold_split_indices: bool = False,
                         ) -> tuple[dict, dict]:
    """``(kfold statistics, split indices)``, as Ludwig's function of this name returns them, and
    written to ``output_directory`` (a path or fsspec URL)."""
    if isinstance(num_folds, bool) or not isinstance(num_folds, int) or num_folds < 2:
        raise UsageError(f"k_fold: got {num_folds!r}; give a whole number of folds, 2 or more")
    config = load_config(config)
    if backend is not None:
        config = with_backend_type(config, backend)
    seed = sp.check_seed(random_seed)
    fs, folder = resolve(os.fspath(output_directory))
    ensure_dir(fs, posixpath.join(folder, "kfold"))
    settings = resolved_dict(config)
    folds = Folds(settings=settings, dataset=_absolute(dataset), count=num_folds, seed=seed,
                  kept_url=posixpath.join(_absolute(os.fspath(output_directory)), "kfold"),
                  fingerprint=cache_key(dataset_identity(dataset, {}), settings, seed, num_folds))
    kept = {fold: folds.kept(fold) for fold in range(num_folds)}
    missing = [fold for fold, statistics in kept.items() if statistics is None]
    for fold in sorted(set(kept) - set(missing)):
        log.info("Fold %d finished in an earlier run of this config, data and seed: its statistics are reused.",
                 fold + 1)
    if missing:
        on_ray = resolve_type(config) == "ray"
        (_folds_as_trials if on_ray else _folds_in_turn)(folds, missing, config)
        kept.update({fold: folds.kept(fold) for fold in missing})  # as the runs wrote them
    statistics = {f"fold_{fold + 1}": kept[fold] for fold in range(num_folds)}
    statistics["overall"] = overall_statistics(list(statistics.values()))
    write_json(posixpath.join(folder, STATISTICS), statistics, fs)
    indices = split_indices(_row_count(dataset), num_folds, seed)
    if not skip_save_k_fold_split_indices:
        write_json(posixpath.join(folder, SPLIT_INDICES), indices, fs)
    return statistics, indices


@dataclass(frozen=True)
class Folds:
    """The folds of one k-fold run, and the statistics kept of each finished one (picklable: on
    Ray it travels to each fold's trial)."""

    settings: dict
    """The config, resolved."""
    dataset: Any
    count: int
    seed: int
    kept_url: str
    """The folder holding each finished fold's statistics (``fold_<n>.json``)."""
    fingerprint: str
    """The config's, data's and seed's: a kept fold of another run is not reused."""

    def kept(self, fold: int) -> dict | None:
        """Fold ``fold``'s statistics, if a run of the same config, data and seed finished it."""
        fs, path = resolve(self._kept_path(fold))
        if not fs.exists(path):
            return None
        kept = json.loads(fs.cat_file(path))
        return kept["statistics"] if kept.get("fingerprint") == self.fingerprint else None

    def settings_of(self, fold: int, backend: dict | None = None) -> dict:
        """Fold ``fold``'s config: its rows for testing, the others for training. ``backend``: a
        backend section replacing the config's (a trial's)."""
        split = {"type": "kfold", "folds": self.count, "fold": fold}
        settings = {**self.settings, "preprocessing": {**self.settings.get("preprocessing", {}), "split": split}}
        return settings if backend is None else {**settings, "backend": backend}

    def run(self, fold: int, backend: dict | None = None) -> None:
        """Train fold ``fold``'s run on the other folds, evaluate it on this one, keep the
        statistics. ``backend``: a backend section replacing the config's (a trial's)."""
        log.info("k-fold: training fold %d of %d.", fold + 1, self.count)
        started = time.time()
        model = Model(self.settings_of(fold, backend))
        try:
            result = model.train(self.dataset, random_seed=self.seed, progress_bar=False)
            evaluation = model.evaluate_preprocessed(result.preprocessed, "test")
        finally:
            model.close()
        statistics = {**result.ludwig_statistics(), "fold_eval_stats": evaluation}
        fs, path = resolve(self._kept_path(fold))
        ran = {"started": started, "finished": time.time()}  # seconds since the epoch: when the fold ran
        write_json(path, {"fingerprint": self.fingerprint, "ran": ran, "statistics": statistics}, fs)

    def _kept_path(self, fold: int) -> str:
        return posixpath.join(self.kept_url, f"fold_{fold + 1}.json")


def _folds_in_turn(folds: Folds, missing: list[int], config: PlaitConfig) -> None:
    for fold in missing:
        folds.run(fold)


def _folds_as_trials(folds: Folds, missing: list[int], config: PlaitConfig) -> None:
    """The missing folds at once, as Ray Tune trials sized as a search's (its executor settings
    from the config's hyperopt section, if it has one)."""
    import ray
    from ray import tune

    from plait.backends.ray.cluster import connect, free_node_resources, node_resources
    from plait.search.plan import plan_trials_now
    from plait.search.preprocessing import start_broker

    executor = config.hyperopt.executor if config.hyperopt is not None else ExecutorConfig()
    started = connect()
    try:
        plan = plan_trials_now(config, node_resources, free_node_resources, executor)
        log.info("k-fold on Ray: folds %s as Ray Tune trials; %s.", ", ".join(str(f + 1) for f in missing),
                 plan.describe())
        broker = start_broker()
        trainable = tune.with_resources(
            tune.with_parameters(_fold_trial, folds=folds, backend=fold_backend(config, plan), broker=broker),
            plan.trial_resources)
        try:
            results = _tuner(trainable, missing, plan).fit()
        finally:
            ray.kill(broker)
    finally:
        if started:
            ray.shutdown()
    for result in results:
        if result.error is not None:
            raise _fold_error(result.config["fold"], result.error)


def fold_backend(config: PlaitConfig, plan) -> dict:
    """The backend section of each fold's trial, as a search's trial has it: a fold that is a
    worker group sets its workers' share; one that trains in its trial's process does so locally
    (auto would find Ray there and start a group)."""
    if not plan.worker_group:
        return resolved_dict(with_backend_type(config, "local"))["backend"]
    backend = resolved_dict(config)["backend"]
    return {**backend, "trainer": {**backend.get("trainer", {}), "resources_per_worker": plan.worker_resources}}


def _fold_trial(tune_config: dict, folds: Folds, backend: dict, broker) -> None:
    """One fold as a trial. Its preprocessing is built by the search's broker, outside the trial's
    placement group, which holds only the trial's own resources (a Ray backend's Dask tasks would
    find no room in it), and the fold's run reads it from the cache."""
    import ray

    fold = tune_config["fold"]
    ray.get(broker.build.remote(folds.settings_of(fold), {"dataset": folds.dataset}, folds.seed))
    folds.run(fold, backend)


def _tuner(trainable, missing: list[int], plan):
    import tempfile

    from ray import tune

    # Nothing of Tune's state is needed again (a rerun reads the kept folds): a scratch folder.
    storage = tempfile.mkdtemp(prefix="plait-kfold-tune-")
    return tune.Tuner(trainable, param_space={"fold": tune.grid_search(missing)},
                      tune_config=tune.TuneConfig(max_concurrent_trials=plan.max_concurrent,
                                                  reuse_actors=not plan.worker_group),
                      run_config=tune.RunConfig(name="kfold", storage_path=storage, verbose=0,
                                                failure_config=tune.FailureConfig(max_failures=0)))


def _fold_error(fold: int, error: BaseException) -> TrainingError:
    """A failed fold's error, told by the error raised in its trial (Ray wraps it)."""
    cause = error
    while (inner := getattr(cause, "cause", None) or cause.__cause__) is not None:
        cause = inner
    message = str(cause) if isinstance(cause, PlaitError) else f"{type(cause).__name__}: {cause}"
    return TrainingError(f"k-fold: fold {fold + 1} failed (the folds that finished are kept; run the same command "
                         f"again to run the rest): {message}")


def _absolute(dataset: Any) -> Any:
    """Folds may train in processes of their own, elsewhere: a local path becomes absolute."""
    if isinstance(dataset, (str, os.PathLike)) and not is_url(os.fspath(dataset)):
        return os.path.abspath(dataset)
    return dataset


def overall_statistics(folds: list[dict]) -> dict:
    """Each output's scalar test metrics over the folds: ``<metric>_mean`` and ``<metric>_std``
    (the population standard deviation, as Ludwig computes it)."""
    values: dict[str, dict[str, list[float]]] = {}
    for fold in folds:
        for output, metrics in fold["fold_eval_stats"].items():
            for metric, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    values.setdefault(output, {}).setdefault(metric, []).append(float(value))
    return {output: {key: float(f(v)) for metric, v in metrics.items()
                     for key, f in ((f"{metric}_mean", np.mean), (f"{metric}_std", np.std))}
            for output, metrics in values.items()}


def split_indices(rows: int, num_folds: int, seed: int) -> dict:
    """Each fold's training and test row indices (rows of the data as given: a row its run
    dropped, for a missing value, is still listed)."""
    folds = sp.fold_of(np.arange(rows), num_folds, seed)
    return {f"fold_{n + 1}": {"training_indices": np.flatnonzero(folds != n).tolist(),
                              "test_indices": np.flatnonzero(folds == n).tolist()} for n in range(num_folds)}


def _row_count(dataset: Any) -> int:
    from plait.data.reader import iter_chunks

    return sum(chunk.num_rows for chunk in iter_chunks(dataset))
