"""One trial: an ordinary plait training run with the trial's values, reporting to Tune.

A trial runs where Tune puts it. Its config is the user's with the trial's values set; it trains
in its own process (backend auto or local) or drives a Ray Train worker group (backend ray).
Its run directory is ``<search>/trials/<trial id>``, a normal run directory: ``plait train
--resume`` continues one trial alone. At every evaluation the searched metric goes to Tune, so a
scheduler can stop the trial or (PBT) continue it from another trial's checkpoint.
"""

from __future__ import annotations

import copy
import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from plait.callbacks import Dispatcher
from plait.evaluation.statistics import history_of
from plait.search.tune_parts import METRIC

log = logging.getLogger("plait")

POINTER = "plait_checkpoint.json"
"""The one file of a trial's Tune checkpoint: the URL of the plait checkpoint it stands for (Tune
copies a few bytes per report, never the weights)."""


@dataclass(frozen=True)
class SearchSpec:
    """What every trial needs (picklable: it travels to Tune's trial processes)."""

    source: dict
    """The config as the user wrote it (Ludwig names upgraded), with absolute local paths."""
    paths: tuple[str, ...]
    """The searched parameter paths, in the order of Tune's keys (p0, p1, ...)."""
    data: dict
    seed: int
    trials_url: str
    """The folder holding every trial's run directory."""
    target: tuple[str, str, str]
    """(split, output feature, metric) reported to Tune."""
    worker_resources: dict | None
    """Each Ray Train worker's resources, for trials that are worker groups."""
    early_stop_off: bool
    """A scheduler decides when trials stop (every scheduler but fifo, unless the config sets
    ``trainer.early_stop``): no early stopping."""
    pointer_checkpoints: bool
    """Report a Tune checkpoint with every evaluation (PBT restarts trials from them)."""
    broker: object = None
    """The preprocessing broker's actor handle (``preprocessing.PreprocessingBroker``)."""
    trackers: tuple = ()
    """The search's experiment trackers, each told the search's run (``Tracker.for_trial``): a
    trial's run is nested under it. They replace the trackers of the config's tracking list."""


def trial_config(spec: SearchSpec, values: dict) -> dict:
    """The trial's config: the user's with the trial's values, the metric that picks the best
    model set to the searched one, and the backend fixed for a trial."""
    from plait.search.space import apply

    config = apply(spec.source, values)
    split, feature, metric = spec.target
    trainer = config.setdefault("trainer", {})
    trainer.update(validation_field=feature, validation_metric=metric)
    if split == "training":
        trainer["evaluate_training_set"] = True
    if spec.early_stop_off:
        trainer["early_stop"] = -1
    backend = config.setdefault("backend", {})
    if spec.worker_resources is not None:
        backend.setdefault("trainer", {}).setdefault("resources_per_worker", spec.worker_resources)
    else:  # Ray is up inside a trial: auto would pick it, and each trial would become a worker group
        backend["type"] = "local"
    return config


def run_trial(tune_config: dict, spec: SearchSpec) -> None:
    """Tune's trainable: train one trial and save its model."""
    from ray import tune

    from plait.api import Model
    from plait.config import load_config
    from plait.config.render import resolved_dict, yaml_text
    from plait.search.space import trial_values
    from plait.run_directory import RunDirectory
    from plait.training import checkpoint as ckpt
    from plait.utils.folder import Folder

    values = trial_values(spec.paths, tune_config)
    config = load_config(trial_config(spec, values))
    run = RunDirectory(Folder(spec.trials_url) / tune.get_context().get_trial_id())
    if not run.is_started():
        run.write_start(yaml_text(resolved_dict(config)), spec.data, spec.seed, "train")
    if spec.broker is not None:  # each distinct preprocessing is built once, by the broker
        import ray

        ray.get(spec.broker.build.remote(resolved_dict(config), spec.data, spec.seed))
    donor = _donor_checkpoint(tune.get_checkpoint())
    if donor is None and run.has_statistics("training") and run.has_model():
        # Finished before the search was interrupted (Tune's saved state may lag behind by a
        # second): its result stands, and nothing is trained again.
        _report_last(spec.target, history_of(run.read_statistics("training")))
        return
    own = ckpt.latest_checkpoint(run.checkpoints)
    resumed_step = ckpt.saved_step(donor or own) if (donor or own) is not None else None  # read now: it may rotate out
    report = TrialReport(spec.target, spec.worker_resources is not None,
                         run.root.url if spec.pointer_checkpoints else None)
    trackers = copy.deepcopy(list(spec.trackers))  # a reused trial process gets fresh ones for each trial
    events = Dispatcher(trackers)
    model = Model(config, callbacks=trackers)
    try:
        events("on_hyperopt_trial_start", parameters=values)
        result = model.train(**spec.data, random_seed=spec.seed, run_dir=run, resume=donor is None and own is not None,
                             resume_from=donor, progress_bar=False, on_evaluation=report)
        model.save(run.model_dir)
        run.write_statistics("training", result.ludwig_statistics())
        events("on_hyperopt_trial_end", parameters=values)
    finally:
        model.close()
    if result.training_statistics and result.training_statistics[-1]["step"] == resumed_step:
        _report_last(spec.target, result.training_statistics)  # nothing was left to train: no report was made


def _report_last(target: tuple[str, str, str], history: list[dict]) -> None:
    """Tune gets the trial's last score (a trial with no report would have none)."""
    from ray import tune

    split, feature, metric = target
    scored = [r for r in history if r.get(split, {}).get(feature, {}).get(metric) is not None]
    if scored:
        last = scored[-1]
        tune.report({METRIC: float(last[split][feature][metric]), "epoch": last["epoch"], "step": last["step"]})


def _donor_checkpoint(checkpoint):
    """The plait checkpoint a Tune checkpoint points to (PBT's exploit, or a restored search):
    the one named, else (rotated out since) the newest of the same run."""
    if checkpoint is None:
        return None
    from plait.training import checkpoint as ckpt
    from plait.utils.folder import Folder

    with checkpoint.as_directory() as folder:
        url = json.loads((Path(folder) / POINTER).read_text())["checkpoint"]
    named = Folder(url)
    if ckpt.is_complete(named):
        return named
    log.warning("The checkpoint %s was rotated out; continuing from the newest of its run.", url)
    return ckpt.latest_checkpoint(Folder(url.rsplit("/", 1)[0]))


@dataclass
class TrialReport:
    """The trainer's ``on_evaluation`` hook in a trial: the searched metric to Tune.

    In a trial that trains in its own process the coordinator reports straight to Tune. In a
    worker group every worker reports to Ray Train (its report is collective), and the
    trial's ``TuneReportCallback`` passes rank 0's metrics on to Tune."""

    target: tuple[str, str, str]
    through_ray_train: bool
    run_url: str | None = None
    """The trial's run directory, when each report carries a pointer checkpoint."""

    def __call__(self, record: dict, strategy) -> None:
        split, feature, metric = self.target
        value = record.get(split, {}).get(feature, {}).get(metric)
        if value is None:
            return
        metrics = {METRIC: float(value), "epoch": record["epoch"], "step": record["step"]}
        if self.through_ray_train:
            import ray.train

            ray.train.report(metrics)
        elif strategy.is_coordinator:
            self._report_to_tune(metrics)

    def _report_to_tune(self, metrics: dict) -> None:
        from ray import tune

        if self.run_url is None:
            tune.report(metrics)
            return
        from plait.run_directory import RunDirectory
        from plait.training import checkpoint as ckpt

        latest = ckpt.latest_checkpoint(RunDirectory(self.run_url).checkpoints)
        with tempfile.TemporaryDirectory(prefix="plait-pointer-") as folder:
            (Path(folder) / POINTER).write_text(json.dumps({"checkpoint": latest.url}))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))

    def train_callbacks(self) -> list:
        """Ray Train callbacks for a worker-group trial (the Ray backend adds them)."""
        return [_EvaluationsToTune()] if self.through_ray_train else []


def _EvaluationsToTune():  # noqa: N802 (a class built lazily: Ray is imported only in a trial)
    from ray.tune.integration.ray_train import TuneReportCallback

    class EvaluationsToTune(TuneReportCallback):
        """Rank 0's evaluation reports to Tune; the group's final report (the weights) is not one."""

        def after_report(self, run_context, metrics, checkpoint):
            if metrics and METRIC in metrics[0]:
                super().after_report(run_context, metrics, None)

    return EvaluationsToTune()

