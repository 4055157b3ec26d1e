"""Aim: the run in the repository beside the runs, read back with Aim's own ``Repo``."""

from __future__ import annotations

import json

import pytest

aim = pytest.importorskip("aim")
from aim.sdk.index_manager import RepoIndexManager  # noqa: E402


def test_a_run_in_the_output_directorys_repo_holds_the_config_and_every_evaluation(tracked_experiment):
    run_dir = tracked_experiment.run_dir
    run_hash = json.loads((run_dir / "tracking.json").read_text())["aim"]["run_id"]
    repo = aim.Repo(str(tracked_experiment.out))  # Aim's default here: the output directory
    RepoIndexManager.get_index_manager(repo).index(run_hash)  # as `aim up` does, before showing a run
    run = repo.get_run(run_hash)
    assert run.experiment == "experiment" and run.name == "experiment_run_0" and run["status"] == "finished"
    assert run["hparams"]["trainer.epochs"] == "2"

    [accuracy] = [m for m in run.metrics() if m.name == "validation/y/accuracy"]
    steps, (values, _, _) = accuracy.data.items_list()
    statistics = json.loads((run_dir / "training_statistics.json").read_text())
    assert values == pytest.approx(statistics["validation"]["y"]["accuracy"]) and len(steps) == 2
    logged = {m.name for m in run.metrics()}
    assert {"speed/rows_per_s", "evaluation/test/y/accuracy", "training/combined/loss"} <= logged
    artifacts = set(run.artifacts)
    assert {"config.yaml", "training_statistics.json", "test_statistics.json"} <= artifacts
    assert {f"model/{p.name}" for p in (run_dir / "model").iterdir()} <= artifacts
