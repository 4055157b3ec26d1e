"""Weights & Biases: a run per training run (``wandb.init`` with ``reinit="create_new"``, so
runs in one process stay apart), offline or online.

W&B has no nested runs: a search's trials are grouped under the search's name (``group``, the
search directory's name, which is also the search run's name) and name the search's run in their
config (``parent_run``). Offline runs go to ``WANDB_DIR``, else beside the runs
(``<output directory>/wandb``), for ``wandb sync`` later. Machine statistics, the command line
and git details are not collected: a run logs what plait gives it.
"""

from __future__ import annotations

from pathlib import Path

from plait.run_directory import RunDirectory
from plait.tracking.base import RunPlace, Tracker, environ, needs, output_folder, temporary_text


class WandbTracker(Tracker):
    type = "wandb"

    def default_place(self, run: RunDirectory | None, experiment: str) -> RunPlace:
        folder = environ().get("WANDB_DIR") or output_folder(run)
        return RunPlace(str(folder) if folder is not None else None,
                        self.settings.project or environ().get("WANDB_PROJECT") or experiment)

    def start(self, place: RunPlace, name: str | None, resume_id: str | None) -> str:
        wandb = needs("wandb", "wandb")
        if place.location is not None:
            Path(place.location).mkdir(parents=True, exist_ok=True)
        parent = {"parent_run": self.parent.run_id} if self.parent is not None else {}
        settings = wandb.Settings(x_disable_stats=True, x_disable_meta=True, x_disable_machine_info=True,
                                  disable_git=True, disable_code=True, console="off", silent=True)
        self._live_run = wandb.init(
            project=place.experiment, entity=self.settings.entity, dir=place.location, name=name, id=resume_id,
            resume="allow" if resume_id else None, mode=self.settings.mode, reinit="create_new", settings=settings,
            group=self.settings.group or (self.parent.name if self.parent is not None else None), config=parent)
        return self._live_run.id

    def log_params(self, params: dict[str, str]) -> None:
        self._live_run.config.update(params, allow_val_change=True)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self._live_run.log(metrics, step=step)

    def log_text(self, name: str, text: str) -> None:
        # The run's files/config.yaml is W&B's own (the params): plait's config goes beside it.
        self.log_file(temporary_text(f"plait_{name}", text))

    def log_file(self, path: Path) -> None:
        self._live_run.save(str(path), base_path=str(path.parent), policy="now")

    def log_folder(self, path: Path, name: str) -> None:
        import wandb

        artifact = wandb.Artifact(f"{name}-{self.run_id}", type=name)
        artifact.add_dir(str(path))
        self._live_run.log_artifact(artifact)

    def finish(self, failed: bool) -> None:
        self._live_run.finish(exit_code=1 if failed else 0)
        self._live_run = None
