"""MLflow: what a tracked experiment leaves in the store, read back with MLflow's own client;
--resume continues the same run."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tracked_runs import SECRET, offline_environment, small_config  # tests/tracking/tracked_runs.py

mlflow = pytest.importorskip("mlflow")


@pytest.fixture
def client(tracked_experiment, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return mlflow.MlflowClient(tracked_experiment.mlflow_uri)


def only_run(client, experiment: str):
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert len(runs) == 1
    return runs[0]


def test_an_experiment_is_one_run_with_the_config_every_evaluation_and_the_model(tracked_experiment, client):
    run_dir = tracked_experiment.run_dir
    run = only_run(client, "tracked")  # the config's experiment_name won over the flag's default
    assert run.info.status == "FINISHED" and run.info.run_name == "experiment_run_0"
    assert json.loads((run_dir / "tracking.json").read_text())["mlflow"]["run_id"] == run.info.run_id

    params = run.data.params
    assert params["trainer.epochs"] == "2" and params["input_features.c.type"] == "category"
    assert not [name for name in params if name.startswith("tracking")]

    statistics = json.loads((run_dir / "training_statistics.json").read_text())
    history = client.get_metric_history(run.info.run_id, "validation/y/accuracy")
    assert [m.value for m in sorted(history, key=lambda m: m.step)] == pytest.approx(
        statistics["validation"]["y"]["accuracy"])
    steps = sorted(m.step for m in history)
    assert len(steps) == 2 and steps[0] > 0 and steps[1] == 2 * steps[0]  # one evaluation per epoch
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "speed/rows_per_s")) == steps
    test = json.loads((run_dir / "test_statistics.json").read_text())
    assert run.data.metrics["evaluation/test/y/accuracy"] == pytest.approx(test["y"]["accuracy"])

    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert artifacts == {"config.yaml", "model", "training_statistics.json", "test_statistics.json"}
    saved = {a.path.split("/", 1)[1] for a in client.list_artifacts(run.info.run_id, "model")}
    assert saved == {p.name for p in (run_dir / "model").iterdir()}


def test_resume_continues_the_same_run(tmp_path, monkeypatch):
    from plait import Model
    from plait.synthesize import synthesize_dataset

    offline_environment(monkeypatch, tmp_path)
    data = synthesize_dataset(small_config(tmp_path), 200, seed=5)
    run_dir = tmp_path / "out" / "resumed_run_0"
    for epochs, resume in ((1, False), (2, True)):  # an interrupted run, then --resume with more epochs
        model = Model(small_config(tmp_path / "cache", trainer={"epochs": epochs, "batch_size": 50},
                                   tracking=[{"type": "mlflow"}]))
        model.train(dataset=data, run_dir=run_dir, resume=resume, progress_bar=False)
        model.close()

    client = mlflow.MlflowClient((tmp_path / "mlruns").as_uri())
    run = only_run(client, "resumed")  # the experiment is the run directory's <name>_run_<n>
    assert run.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "validation/y/loss")]
    assert sorted(steps) == [3, 6]  # 150 training rows, batches of 50: the second epoch's step continues


def test_no_secret_reaches_any_tool(tracked_experiment):
    """The environment held secrets; no file any tool wrote holds one (Comet's offline archive
    is read inside)."""
    import zipfile

    found = []
    for path in [p for p in tracked_experiment.out.parent.rglob("*") if p.is_file()]:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                found += [f"{path}:{name}" for name in archive.namelist() if SECRET.encode() in archive.read(name)]
        elif SECRET.encode() in path.read_bytes():
            found.append(str(path))
    assert found == []
