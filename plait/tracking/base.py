"""What every tracker does with a run's events; each tool says only how it logs.

A :class:`Tracker` is a callback (``plait.callbacks``), so it is called on the coordinator on
every backend. It turns the events into four things a tool stores (params, metrics by step, files
and the run itself) and leaves those to the tool's module, through the six methods at the end of
the class. Names of metrics, the same for every tool (and as plait's TensorBoard logs name them):

* ``<split>/<output>/<metric>`` at each evaluation's step (split: training, validation);
* ``speed/rows_per_s``, ``speed/data_wait_fraction`` at each epoch's last step, and with several
  workers ``speed/worker_<rank>/rows_per_s`` and ``speed/worker_<rank>/data_wait_fraction``;
* ``evaluation/<split>/<output>/<metric>`` for the evaluation after training (the experiment's
  test split), at the last step: its numbers alone (``scalar_metrics``).

Params are the resolved config flattened to dotted paths (``trainer.learning_rate``), less the
``tracking`` section and anything named like a secret; the whole config is kept as the file
``config.yaml``. At the end the model folder and the statistics files the run wrote are uploaded.

Each tool's run id is kept in the run directory's ``tracking.json`` when the run starts, so
``--resume`` continues the same tracked run (``RunDirectory.tracking_runs``).
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plait.callbacks import Callback
from plait.errors import UsageError
from plait.evaluation.statistics import scalar_metrics
from plait.run_directory import RunDirectory

log = logging.getLogger("plait")

SECRET_WORDS = ("credential", "password", "secret", "token", "api_key", "apikey", "auth")
"""Params whose path holds one of these are never logged (the config given to callbacks hides
backend credentials already; this keeps a future setting from leaking)."""

MAX_PARAM_CHARS = 500
"""Longer values are cut: MLflow's older servers refuse params over 500 characters."""


@dataclass(frozen=True)
class RunPlace:
    """Where a tracked run sits: the tool's store (a URI or folder, resolved) and the names."""

    location: str | None
    """The store: an MLflow tracking URI, an Aim repo, a Comet offline folder (None: the tool's own
    default from its environment)."""
    experiment: str
    """The experiment (MLflow, Aim), project (W&B, Comet) the run goes to."""


@dataclass(frozen=True)
class ParentRun:
    """The search's run that a trial's run is nested under."""

    run_id: str
    name: str
    """The search's name (its directory's name): W&B's group."""


class Tracker(Callback):
    """A tracker of one tool, built from its config item (``plait.config.tracking``)."""

    type: str = ""
    """The tool: the config item's ``type`` and the key of its run in ``tracking.json``."""

    def __init__(self, settings, parent: ParentRun | None = None, place: RunPlace | None = None):
        self.settings = settings
        self.parent = parent
        self.place = place
        """Set when the run starts (or, for a trial, by the search's driver)."""
        self.run_id: str | None = None
        self._run_directory: RunDirectory | None = None
        self._trial_parameters: dict = {}
        self._last_step = 0
        self._ended = False
        """Training (or the search) ended: the run finishes as a success, else as failed."""

    def __getstate__(self) -> dict:
        """A tracker travels to a search's trials without its live run: each process starts its own."""
        state = dict(self.__dict__)
        for name in [key for key in state if key.startswith("_live")]:
            state[name] = None
        return state

    @property
    def started(self) -> bool:
        return self.run_id is not None

    # ---- a training run ---------------------------------------------------------------------

    def on_train_init(self, config: dict, run_directory: str | None, resume: bool, **kwargs) -> None:
        run = RunDirectory(run_directory) if run_directory is not None else None
        self._begin(run, config, run.tracking_runs().get(self.type) if run is not None and resume else None)

    def _begin(self, run: RunDirectory | None, config: dict, saved: dict | None) -> None:
        """Start the run (or continue the ``saved`` one), record its id in the run directory and,
        for a new run, log the config."""
        self._run_directory, self._last_step, self._ended = run, 0, False
        if saved is not None and self.place is None:  # the store it was started in, whatever the default is now
            self.place = RunPlace(saved["location"], saved["experiment"])
        self.place = self.place or self.default_place(run, experiment_of(run))
        self.run_id = self.start(self.place, run_name(run), saved["run_id"] if saved else None)
        if run is not None:
            run.write_tracking_run(self.type, {"run_id": self.run_id, "location": self.place.location,
                                               "experiment": self.place.experiment})
        if saved is None:
            self.log_params({**config_params(config), **self._trial_parameters})
            self.log_text("config.yaml", _yaml(config))
        log.info("%s run %s (%s)", self.type, self.run_id, self.place.location or "the tool's default store")

    def on_epoch_end(self, epoch: int, step: int, speed: dict, **kwargs) -> None:
        self._last_step = step
        self.log_metrics(speed_metrics(speed), step)

    def on_eval_end(self, record: dict, **kwargs) -> None:
        self._last_step = record["step"]
        self.log_metrics({"epoch": record["epoch"], **evaluation_metrics(record)}, record["step"])

    def on_train_end(self, **kwargs) -> None:
        self._ended = True

    def on_evaluation_end(self, split: str, statistics: dict, **kwargs) -> None:
        if self.started:
            metrics = {f"evaluation/{split}/{output}/{name}": value
                       for output, values in scalar_metrics(statistics).items() for name, value in values.items()}
            self.log_metrics(metrics, self._last_step)

    def on_ludwig_end(self, **kwargs) -> None:
        """The last call: the files the run wrote (the model is saved by now), then the run ends."""
        if not self.started:
            return
        run = self._run_directory
        if run is not None and _log_artifacts(self.settings) and run.is_local:
            root = run.root.local()
            for name in ("training_statistics.json", "test_statistics.json", "hyperopt_statistics.json"):
                if (root / name).is_file():
                    self.log_file(root / name)
            if (root / "model").is_dir():
                self.log_folder(root / "model", "model")
        self.finish(failed=not self._ended)
        self.run_id = None

    # ---- a search (in the search's driver) ------------------------------------------------------

    def on_hyperopt_start(self, experiment_name: str, run_directory: str, **kwargs) -> None:
        """The search's own run, which its trials' runs are nested under; a resumed search (its
        directory records the run) continues it."""
        import yaml

        search = RunDirectory(run_directory)
        self._begin(search, yaml.safe_load(search.config_text()), search.tracking_runs().get(self.type))

    def on_hyperopt_end(self, experiment_name: str, results: list[dict], **kwargs) -> None:
        self._ended = True
        scores = [trial["metric_score"] for trial in results if trial.get("metric_score") is not None]
        if scores:  # results come best first
            self.log_metrics({"hyperopt/best_metric_score": float(scores[0]), "hyperopt/trials": len(results)},
                             self._last_step)

    def for_trial(self) -> "Tracker":
        """A tracker for the search's trials: the same settings and store, nested under this
        search's run (it travels to each trial's process, without this one's live objects)."""
        name = run_name(self._run_directory) or self.run_id
        return type(self)(self.settings, ParentRun(self.run_id, name), self.place)

    # ---- a search's trial (in the trial's process) --------------------------------------------

    def on_hyperopt_trial_start(self, parameters: dict, **kwargs) -> None:
        """Logged with the trial's params when its run starts (training starts after this)."""
        self._trial_parameters = {f"hyperopt.{path}": _param_value(value) for path, value in parameters.items()}

    # ---- what each tool writes ----------------------------------------------------------------

    def default_place(self, run: RunDirectory | None, experiment: str) -> RunPlace:
        """Where a run goes: the config item's settings, else the tool's environment variables,
        else beside the run directory and named after its ``experiment``."""
        raise NotImplementedError

    def start(self, place: RunPlace, name: str | None, resume_id: str | None) -> str:
        """Start a run called ``name`` (its run directory's name), nested under ``self.parent``
        when set, or continue the run ``resume_id``; its id."""
        raise NotImplementedError

    def log_params(self, params: dict[str, str]) -> None:
        raise NotImplementedError

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def log_text(self, name: str, text: str) -> None:
        """A file made of ``text`` (the config), kept with the run."""
        raise NotImplementedError

    def log_file(self, path: Path) -> None:
        raise NotImplementedError

    def log_folder(self, path: Path, name: str) -> None:
        raise NotImplementedError

    def finish(self, failed: bool) -> None:
        """End the run: ``failed`` when training (or the search) never ended, as when it raised."""
        raise NotImplementedError


# ---- what the events become ------------------------------------------------------------------------

def config_params(config: dict) -> dict[str, str]:
    """The resolved config flattened to ``{dotted path: text}``, less the tracking section and
    anything named like a secret."""
    flat: dict[str, str] = {}

    def visit(value: Any, path: str) -> None:
        if any(word in path.lower() for word in SECRET_WORDS):
            return
        if isinstance(value, dict) and value:
            for key, item in value.items():
                visit(item, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            for index, item in enumerate(value):  # features by name: input_features.x.encoder.type
                visit(item, f"{path}.{item.get('name', index)}")
        else:
            flat[path] = _param_value(value)

    visit({key: value for key, value in config.items() if key != "tracking"}, "")
    return flat


def _param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_PARAM_CHARS else text[:MAX_PARAM_CHARS - 3] + "..."


def evaluation_metrics(record: dict) -> dict[str, float]:
    """An evaluation record's ``{split: {output: {metric: value}}}`` as ``split/output/metric``."""
    return {f"{split}/{output}/{name}": float(value)
            for split, outputs in record.items() if isinstance(outputs, dict)
            for output, values in outputs.items() if isinstance(values, dict)
            for name, value in values.items() if isinstance(value, (int, float))}


def speed_metrics(speed: dict) -> dict[str, float]:
    metrics = {f"speed/{name}": float(speed[name]) for name in ("rows_per_s", "data_wait_fraction") if name in speed}
    for name in ("rows_per_s", "data_wait_fraction"):
        for rank, value in enumerate(speed.get(f"{name}_per_worker") or []):
            metrics[f"speed/worker_{rank}/{name}"] = float(value)  # not under speed/<name>: a name is no folder
    return metrics


def _yaml(config: dict) -> str:
    from plait.config.render import yaml_text

    return yaml_text({key: value for key, value in config.items() if key != "tracking"})


def experiment_of(run: RunDirectory | None) -> str:
    """The experiment a run directory belongs to: ``<name>_run_<n>`` is the CLI's
    ``--experiment-name`` (experiment, hyperopt for a search); ``plait`` otherwise."""
    match = re.fullmatch(r"(.+)_run_\d+", run.root.name) if run is not None else None
    return match.group(1) if match else "plait"


def _log_artifacts(settings) -> bool:
    return getattr(settings, "log_artifacts", True)


def output_folder(run: RunDirectory | None) -> Path | None:
    """The local folder that holds the run directory (the output directory), where a tool's
    default store goes; None for a run without one, or on object storage."""
    if run is None or not run.is_local:
        return None
    return run.root.local().parent


def run_name(run: RunDirectory | None) -> str | None:
    return run.root.name if run is not None else None


def needs(package: str, extra: str):
    """The tool's package, imported now; a missing one is one plait error saying what to install."""
    import importlib

    try:
        return importlib.import_module(package)
    except ImportError as error:
        raise UsageError(f"the {extra} tracker needs `pip install plait[{extra}]` ({package} is not installed: "
                         f"{error})") from None


def temporary_text(name: str, text: str) -> Path:
    """``text`` in a file called ``name`` in a new temporary folder (tools upload files)."""
    folder = Path(tempfile.mkdtemp(prefix="plait-tracking-"))
    (folder / name).write_text(text)
    return folder / name


def environ() -> os._Environ:
    """The environment the trackers read their tools' defaults from (one place)."""
    return os.environ
