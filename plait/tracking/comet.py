"""Comet: an experiment per training run, offline (an archive to ``comet upload`` later) unless
an API key is set.

Offline is comet_ml's ``OfflineExperiment``: it needs no account and writes
``<experiment key>.zip`` into the offline folder when the run ends (``--resume`` continues it as
an ``ExistingOfflineExperiment``, one more archive that uploads into the same experiment).
Comet has no nested runs: a search's trials are tagged with the search's name and name its
experiment in the other value ``parent_experiment``. Comet's automatic logging (code, git, the
command line, environment, system metrics) is off: a run logs what plait gives it.
"""

from __future__ import annotations

from pathlib import Path

from plait.run_directory import RunDirectory
from plait.tracking.base import RunPlace, Tracker, environ, needs, output_folder

QUIET = dict(log_code=False, log_graph=False, auto_param_logging=False, auto_metric_logging=False, parse_args=False,
             auto_output_logging=None, log_env_details=False, log_git_metadata=False, log_git_patch=False,
             log_env_gpu=False, log_env_host=False, log_env_cpu=False, display_summary_level=0)
"""Everything comet_ml would collect by itself, off."""


class CometTracker(Tracker):
    type = "comet"

    def default_place(self, run: RunDirectory | None, experiment: str) -> RunPlace:
        """The location is the offline folder; None: online."""
        env = environ()
        online = env.get("COMET_API_KEY") and env.get("COMET_MODE", "").lower() != "offline"
        folder = self.settings.offline_directory
        if folder is None and not online:
            folder = str((output_folder(run) or Path.cwd()) / "comet")
        return RunPlace(folder, self.settings.project_name or env.get("COMET_PROJECT_NAME") or experiment)

    def start(self, place: RunPlace, name: str | None, resume_id: str | None) -> str:
        comet_ml = needs("comet_ml", "comet")
        where = {"project_name": place.experiment, "workspace": self.settings.workspace}
        if place.location is not None:
            Path(place.location).mkdir(parents=True, exist_ok=True)
            where["offline_directory"] = place.location
            kind = comet_ml.ExistingOfflineExperiment if resume_id else comet_ml.OfflineExperiment
        else:
            kind = comet_ml.ExistingExperiment if resume_id else comet_ml.Experiment
        if resume_id is not None:
            where = {key: value for key, value in where.items() if key != "project_name"} | {"previous_experiment": resume_id}
        self._live_experiment = experiment = kind(**where, **QUIET)
        if resume_id is None:
            if name is not None:
                experiment.set_name(name)
            if self.parent is not None:
                experiment.log_other("parent_experiment", self.parent.run_id)
                experiment.add_tag(self.parent.name)
        return resume_id or experiment.get_key()

    def log_params(self, params: dict[str, str]) -> None:
        self._live_experiment.log_parameters(params)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self._live_experiment.log_metrics(metrics, step=step)

    def log_text(self, name: str, text: str) -> None:
        self._live_experiment.log_asset_data(text, name=name)

    def log_file(self, path: Path) -> None:
        self._live_experiment.log_asset(str(path))

    def log_folder(self, path: Path, name: str) -> None:
        self._live_experiment.log_asset_folder(str(path), log_file_name=True)

    def finish(self, failed: bool) -> None:
        if failed:
            self._live_experiment.log_other("status", "failed")
        self._live_experiment.end()
        self._live_experiment = None
