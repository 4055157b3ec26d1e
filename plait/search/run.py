"""A search from start to end: check everything, preprocess once, run Ray Tune, write results.

Every mistake a config can hold is found before the first trial starts (``check``): a path that
names nothing, a value that makes an invalid config, a missing package, GPUs the cluster lacks,
a trial no node can hold. Then the driver joins the Ray cluster plait finds (``RAY_ADDRESS`` or
``ray start``) or starts a local one, preprocesses the config as written into the cache, and
hands Tune one trainable (``trial.run_trial``) sized by ``plan``.

The search's folder ``<output directory>/<experiment name>_run_<n>`` holds ``config.yaml`` (as
written) and ``description.json`` (for ``--resume``), ``tune/`` (Tune's own state, saved every
second), ``trials/<trial id>/`` (each trial's plait run directory) and
``hyperopt_statistics.json``.

The config's experiment trackers (``tracking``) get the search's own run (``on_hyperopt_*``
here, in the driver), and each trial's run is nested under it (see ``trial``).
"""

from __future__ import annotations

import copy
import logging
import os
from dataclasses import dataclass

from plait import tracking
from plait.callbacks import Dispatcher
from plait.config import load_config, with_backend_type
from plait.config.hyperopt import FifoScheduler
from plait.config.render import yaml_text
from plait.errors import ConfigError, UsageError
from plait.search import plan as trial_plan
from plait.search import results, seal, space, tune_parts
from plait.search.trial import SearchSpec, run_trial
from plait.run_directory import RunDirectory
from plait.utils.folder import is_url

log = logging.getLogger("plait")


@dataclass
class HyperoptResult:
    trials: list[dict]
    """Every trial's record (``hyperopt_statistics.json``'s ``hyperopt_results``), best first."""
    best: dict | None
    run: RunDirectory
    statistics: dict


def check(source: dict):
    """The validated config of a search, or a ConfigError naming the first problem."""
    config = _validated(source)
    section = config.hyperopt
    if section is None:
        raise ConfigError("the config has no hyperopt section: add one with the parameters to search "
                          "(see docs/config.md, Hyperparameter search)")
    if not section.parameters:
        raise ConfigError("hyperopt.parameters: nothing to search; name at least one path with its space")
    if config.backend.type not in ("auto", "local", "ray"):
        raise ConfigError(f"backend.type: {config.backend.type} starts its processes with a launcher, which a search "
                          "cannot do for each trial; use backend type local (each trial in its own process) or ray "
                          "(each trial a Ray Train worker group)")
    if config.trainer.skip_all_evaluation:
        raise ConfigError("trainer.skip_all_evaluation: a search needs the metric of every evaluation; set it to false")
    space.check_parameters(source, section.parameters, _validated)
    tune_parts.check_packages(section)
    tune_parts.check_scheduler(section)
    tune_parts.check_points(section)
    if not isinstance(section.executor.scheduler, FifoScheduler) and config.backend.type == "ray":
        raise ConfigError(f"hyperopt.executor.scheduler.type: {section.executor.scheduler.type} stops or restarts "
                          "running trials, and a trial that is a Ray Train worker group leaves its workers' "
                          "resources behind when stopped, so the next trial would wait forever; use fifo, or "
                          "backend type local (each trial trains in its own process, any scheduler)")
    return config


def _validated(source: dict):
    return load_config(copy.deepcopy(source))


def search(source: dict, data: dict, *, seed: int = 42, output_directory: str = "results",
           experiment_name: str = "hyperopt", resume: str | None = None, tune_verbosity: int = 1) -> HyperoptResult:
    """Run (or, with ``resume``, continue) the search that ``source``'s hyperopt section
    describes. ``source``: the config as written (a dict, Ludwig names upgraded, the command
    line's backend settings in it)."""
    source = _absolute_paths(source)
    config = check(source)
    if config.backend.artifacts_credentials and is_url(output_directory):
        raise ConfigError("backend.artifacts_credentials: Ray Tune saves its state with the filesystem it is given, "
                          "credentials included, so a search on object storage takes them from the environment "
                          "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL); remove them here")
    data = {key: _absolute(value) for key, value in data.items()}
    resumed = _resumed_directory(resume) if resume is not None else None
    from plait.backends.ray.cluster import connect, free_node_resources, node_resources

    trackers = tracking.trackers(config)
    events = Dispatcher(trackers)
    events("on_hyperopt_init", experiment_name=experiment_name)
    started = connect()
    try:
        plan = trial_plan.plan_trials_now(config, node_resources, free_node_resources)
        log.info("Search plan: %s.", plan.describe())
        run = resumed or _new_directory(source, data, seed, output_directory, experiment_name)
        log.info("Search directory: %s", run)
        _preprocess_once(config, data, seed)
        events("on_hyperopt_start", experiment_name=experiment_name, run_directory=run.root.url)
        # Each trial gets the search's trackers, told the search's run to nest its own under.
        result = _tune(config, source, data, seed, plan, run, resume is not None, tune_verbosity,
                       tuple(tracker.for_trial() for tracker in trackers))
        events("on_hyperopt_end", experiment_name=experiment_name, results=result.trials)
        return result
    finally:
        events("on_ludwig_end")
        if started:
            import ray

            ray.shutdown()


def _absolute(value):
    return os.path.abspath(value) if isinstance(value, str) and not is_url(value) else value


def _scheduler_stops_trials(section, source: dict) -> bool:
    """Whether early stopping is off in the trials: under a scheduler other than fifo, the
    scheduler decides when they stop, unless the config sets ``trainer.early_stop`` itself (then
    a trial also ends when it stops improving, and its time goes to the next)."""
    return section.executor.scheduler.type != "fifo" and "early_stop" not in (source.get("trainer") or {})


def _absolute_paths(source: dict) -> dict:
    """Trials run in folders of their own: local paths in the config become absolute."""
    source = copy.deepcopy(source)
    section = source.get("backend")
    if isinstance(section, dict) and isinstance(section.get("cache_dir"), str):
        section["cache_dir"] = _absolute(section["cache_dir"])
    return source


def _resumed_directory(resume: str) -> RunDirectory:
    run = RunDirectory.existing(resume).resolved()
    seal.check(run, resume)  # before Ray Tune unpickles anything of it
    return run


def _new_directory(source: dict, data: dict, seed: int, output_directory: str, experiment_name: str) -> RunDirectory:
    run = RunDirectory.create(output_directory, experiment_name).resolved()  # trials run in folders of their own
    run.write_start(yaml_text(_without_secrets(source)), data, seed, "hyperopt")
    seal.start(run)
    return run


def _without_secrets(source: dict) -> dict:
    """The config as written, inline credentials hidden as a saved config hides them (a file
    that holds them is named, not read)."""
    from plait.config.backend import HIDDEN

    backend = source.get("backend")
    if not isinstance(backend, dict):
        return source
    hidden = {key: {name: HIDDEN for name in value} for key, value in backend.items()
              if key in ("cache_credentials", "artifacts_credentials") and isinstance(value, dict)}
    return {**source, "backend": {**backend, **hidden}}


def _preprocess_once(config, data: dict, seed: int) -> None:
    """The config as written, preprocessed before the first trial: every trial that leaves
    preprocessing alone reads this cache entry."""
    from plait.api import Model

    model = Model(with_backend_type(config, "local") if config.backend.type == "auto" else config)
    try:
        model.preprocess(**data, random_seed=seed)
    finally:
        model.close()


def _tune(config, source: dict, data: dict, seed: int, plan, run: RunDirectory, resuming: bool,
          verbosity: int, trackers: tuple) -> HyperoptResult:
    from ray import tune

    from plait.search.preprocessing import start_broker

    section = config.hyperopt
    domains = space.param_space(section.parameters)
    pbt = section.executor.scheduler.type in ("pbt", "pb2")
    broker = start_broker()
    spec = SearchSpec(source=source, paths=tuple(section.parameters), data=data, seed=seed,
                      trials_url=run.trials.url,
                      target=(section.split, section.output_feature, section.metric),
                      worker_resources=plan.worker_resources if plan.worker_group else None,
                      early_stop_off=_scheduler_stops_trials(section, source), pointer_checkpoints=pbt, broker=broker,
                      trackers=trackers)
    trainable = tune.with_resources(tune.with_parameters(run_trial, spec=spec), plan.trial_resources)
    try:
        with _tune_checkpoint_period():
            tuner = _tuner(trainable, config, domains, seed, plan, run, resuming, verbosity)
            try:
                tuner.fit()
            finally:
                seal.close(run)
        analysis = _analysis(run)
    finally:
        import ray

        ray.kill(broker)
    return _finish(config, spec, analysis, run)


def _tuner(trainable, config, domains: dict, seed: int, plan, run: RunDirectory, resuming: bool, verbosity: int):
    from ray import tune

    storage = _storage(run)
    if resuming and tune.Tuner.can_restore(_experiment_path(run), storage_filesystem=storage.get("storage_filesystem")):
        log.info("Resuming the search: finished trials are kept, the others continue from their checkpoints.")
        return tune.Tuner.restore(_experiment_path(run), trainable, resume_unfinished=True, resume_errored=True,
                                  param_space=domains, storage_filesystem=storage.get("storage_filesystem"))
    section = config.hyperopt
    tune_config = tune.TuneConfig(
        metric=tune_parts.METRIC, mode=section.mode, num_samples=section.num_samples,
        search_alg=tune_parts.searcher(section, seed, plan.max_concurrent),
        scheduler=tune_parts.scheduler(section), time_budget_s=section.executor.time_budget_s,
        # A worker-group trial's process ends only with its group: it cannot be reset for another.
        reuse_actors=not plan.worker_group,
    )
    run_config = tune.RunConfig(name=run.tune_state.name, verbose=verbosity, failure_config=tune.FailureConfig(max_failures=0), **storage)
    return tune.Tuner(trainable, param_space=domains, tune_config=tune_config, run_config=run_config)


def _storage(run: RunDirectory) -> dict:
    if run.is_local:
        return {"storage_path": run.root.resolved().url}
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    return {"storage_path": run.root.path, "storage_filesystem": PyFileSystem(FSSpecHandler(run.root.fs))}


def _experiment_path(run: RunDirectory) -> str:
    return run.tune_state.resolved().url if run.is_local else run.tune_state.path


class _tune_checkpoint_period:  # noqa: N801 (a context manager)
    """Tune saves the search's state every second (unless the user set the period), so a killed
    driver loses about a second of it; a search runs few, long trials, and the state is small."""

    VARIABLE = "TUNE_GLOBAL_CHECKPOINT_S"

    def __enter__(self):
        self.set = self.VARIABLE not in os.environ
        if self.set:
            os.environ[self.VARIABLE] = "1"

    def __exit__(self, *exc):
        if self.set:
            os.environ.pop(self.VARIABLE, None)


def _analysis(run: RunDirectory):
    from ray.tune import ExperimentAnalysis

    storage = _storage(run)
    return ExperimentAnalysis(_experiment_path(run), storage_filesystem=storage.get("storage_filesystem"))


def _finish(config, spec: SearchSpec, analysis, run: RunDirectory) -> HyperoptResult:
    trials = run.trials
    for trial in analysis.trials:
        if trial.status != "ERROR":
            _model_of_stopped_trial(spec, trials / trial.trial_id)
    mode = config.hyperopt.mode
    records = results.ranked(results.trial_records(analysis, spec.paths, trials, run.tune_state, spec.target, mode),
                             mode)
    stats = results.statistics(config, records)
    run.root.write_json(results.STATISTICS, stats)
    print(results.summary({**stats, "file": run.root.file(results.STATISTICS)}))
    return HyperoptResult(records, stats["best"], run, stats)


def _model_of_stopped_trial(spec: SearchSpec, folder) -> None:
    """A trial a scheduler or the time budget stopped saved no model: it gets one from the best
    weights of its last checkpoint (the trial's config, the cached preprocessing metadata)."""
    from plait.models.saved import save_model
    from plait.training import checkpoint as ckpt

    run = RunDirectory(folder)
    if run.has_model() or not run.has_config():
        return
    latest = ckpt.latest_checkpoint(run.checkpoints)
    if latest is None:
        return
    weights = ckpt.kept_weights(latest)
    if weights is None:
        log.warning("Trial %s stopped early; its checkpoint %s holds sharded weights only, so it keeps no model.",
                    run.root, latest.name)
        return
    import yaml

    from plait.data.preprocess import preprocess

    config_dict = yaml.safe_load(run.config_text())
    config = with_backend_type(load_config(config_dict), "local")
    metadata = preprocess(config, **spec.data, seed=spec.seed).metadata  # a cache hit
    save_model(run.model_dir, config_dict, {"features": metadata["features"], "splits": metadata["splits"],
                                            "seed": spec.seed}, weights)


def load_source(config) -> dict:
    """The config as written, Ludwig's older names upgraded (defaults are filled in per trial)."""
    from plait.config import read_yaml
    from plait.config.upgrade import upgrade

    data = read_yaml(config) if isinstance(config, (str, os.PathLike)) else copy.deepcopy(config)
    if not isinstance(data, dict):
        raise UsageError("the config must be a mapping with input_features, output_features and hyperopt")
    return upgrade(data)[0]
