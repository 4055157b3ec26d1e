"""Aim: a run per training run in an Aim repository (a local folder, or ``aim://host:port``).

Aim has no nested runs: a search's trials go to the search's experiment and name the search's
run in the param ``parent_run`` (query them with ``run.parent_run == "<hash>"``). The default
repository is the output directory (``<output directory>/.aim``); files are kept with
``Run.log_artifact`` in ``aim_artifacts`` beside the repository. Aim's system statistics and
terminal capture are off: a run logs what plait gives it.
"""

from __future__ import annotations

from pathlib import Path

from plait.run_directory import RunDirectory
from plait.tracking.base import RunPlace, Tracker, needs, output_folder, temporary_text


class AimTracker(Tracker):
    type = "aim"

    def default_place(self, run: RunDirectory | None, experiment: str) -> RunPlace:
        repo = self.settings.repo or str(output_folder(run) or Path.cwd())
        return RunPlace(repo, self.settings.experiment or experiment)

    def start(self, place: RunPlace, name: str | None, resume_id: str | None) -> str:
        aim = needs("aim", "aim")
        if "://" not in place.location:
            Path(place.location).mkdir(parents=True, exist_ok=True)
        self._live_run = run = aim.Run(run_hash=resume_id, repo=place.location, experiment=place.experiment,
                                       system_tracking_interval=None, log_system_params=False,
                                       capture_terminal_logs=False)
        if resume_id is None:
            if name is not None:
                run.name = name
            if self.parent is not None:
                run["parent_run"] = self.parent.run_id
        if "://" not in place.location:
            run.set_artifacts_uri((Path(place.location).resolve() / "aim_artifacts").as_uri())
        return run.hash

    def log_params(self, params: dict[str, str]) -> None:
        self._live_run["hparams"] = params

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self._live_run.track(value, name=key, step=step)

    def log_text(self, name: str, text: str) -> None:
        self.log_file(temporary_text(name, text))

    def log_file(self, path: Path) -> None:
        self._live_run.log_artifact(str(path), name=path.name, block=True)

    def log_folder(self, path: Path, name: str) -> None:
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            self._live_run.log_artifact(str(file), name=f"{name}/{file.relative_to(path).as_posix()}", block=True)

    def finish(self, failed: bool) -> None:
        self._live_run["status"] = "failed" if failed else "finished"
        self._live_run.close()
        self._live_run = None
