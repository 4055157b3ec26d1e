"""MLflow: a run per training run, through ``MlflowClient`` (never the global active run, so a
search's driver and a trial in one process cannot step on each other).

A search's trials are nested as MLflow nests runs: the tag ``mlflow.parentRunId`` names the
search's run, in the same experiment. The default store is SQLite beside the runs
(``sqlite:///<output directory>/mlflow.db``, artifacts in ``<output directory>/mlartifacts``): it
needs no server, and MLflow 3 deprecates its file store. Creating that database runs MLflow's
migrations once (a few seconds, on its first run only).
"""

from __future__ import annotations

import time
from pathlib import Path

from plait.run_directory import RunDirectory
from plait.tracking.base import RunPlace, Tracker, environ, needs, output_folder

BATCH = 100
"""Params per ``log_batch`` call (MLflow's limit; metrics may be 1000)."""


class MLflowTracker(Tracker):
    type = "mlflow"

    def default_place(self, run: RunDirectory | None, experiment: str) -> RunPlace:
        uri = self.settings.tracking_uri or environ().get("MLFLOW_TRACKING_URI")
        folder = output_folder(run)
        if uri is None and folder is not None:
            uri = f"sqlite:///{folder / 'mlflow.db'}"
        return RunPlace(uri, self.settings.experiment_name or environ().get("MLFLOW_EXPERIMENT_NAME") or experiment)

    def _client(self):
        if getattr(self, "_live_client", None) is None:
            mlflow = needs("mlflow", "mlflow")
            self._live_client = mlflow.MlflowClient(self.place.location)
        return self._live_client

    def start(self, place: RunPlace, name: str | None, resume_id: str | None) -> str:
        client = self._client()
        if resume_id is not None:
            client.update_run(resume_id, status="RUNNING")
            return resume_id
        experiment = client.get_experiment_by_name(place.experiment)
        experiment_id = (experiment.experiment_id if experiment is not None else
                         client.create_experiment(place.experiment, artifact_location=_artifacts_beside(place)))
        tags = {"mlflow.parentRunId": self.parent.run_id} if self.parent is not None else {}
        return client.create_run(experiment_id, run_name=name, tags=tags).info.run_id

    def log_params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(key, value) for key, value in params.items()]
        for at in range(0, len(items), BATCH):
            self._client().log_batch(self.run_id, params=items[at:at + BATCH])

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Queued to MLflow's own logging thread (``synchronous=False``): training goes on while
        a store writes them (a SQLite or remote store takes tens of milliseconds a call, which
        was 5% of a short epoch); :meth:`finish` waits for every one."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(key, float(value), now, step) for key, value in metrics.items()]
        pending = self._live_pending = getattr(self, "_live_pending", None) or []  # not carried to trials
        for at in range(0, len(items), 10 * BATCH):
            pending.append(self._client().log_batch(self.run_id, metrics=items[at:at + 10 * BATCH], synchronous=False))

    def log_text(self, name: str, text: str) -> None:
        self._client().log_text(self.run_id, text, name)

    def log_file(self, path: Path) -> None:
        self._client().log_artifact(self.run_id, str(path))

    def log_folder(self, path: Path, name: str) -> None:
        self._client().log_artifacts(self.run_id, str(path), name)

    def finish(self, failed: bool) -> None:
        for operation in getattr(self, "_live_pending", None) or []:
            if operation is not None:
                operation.wait()  # raises what the store refused
        self._live_pending = []
        self._client().set_terminated(self.run_id, status="FAILED" if failed else "FINISHED")


def _artifacts_beside(place: RunPlace) -> str | None:
    """A new experiment in a SQLite store keeps its artifacts beside the database file (MLflow
    would put them under the working directory, wherever the command ran)."""
    location = place.location or ""
    if not location.startswith("sqlite:///"):
        return None
    return (Path(location[len("sqlite:///"):]).parent / "mlartifacts").as_uri()
