"""W&B offline: the run's transaction log and files, as ``wandb sync`` would upload them."""

from __future__ import annotations

import json

import pytest

import wandb_log  # tests/tracking/wandb_log.py

pytest.importorskip("wandb")


def test_an_offline_run_holds_the_config_every_evaluation_and_the_model(tracked_experiment):
    run_dir = tracked_experiment.run_dir
    run_id = json.loads((run_dir / "tracking.json").read_text())["wandb"]["run_id"]
    [folder] = (tracked_experiment.out / "wandb").glob(f"offline-run-*-{run_id}")  # WANDB_DIR's default

    config = wandb_log.config(folder / f"run-{run_id}.wandb")
    assert config["trainer.epochs"] == "2" and not [name for name in config if name.startswith("tracking")]
    rows = [row for row in wandb_log.history(folder / f"run-{run_id}.wandb") if "validation/y/accuracy" in row]
    statistics = json.loads((run_dir / "training_statistics.json").read_text())
    assert [row["validation/y/accuracy"] for row in rows] == pytest.approx(statistics["validation"]["y"]["accuracy"])
    assert [row["epoch"] for row in rows] == [1, 2] and all(row["speed/rows_per_s"] > 0 for row in rows)
    test = json.loads((run_dir / "test_statistics.json").read_text())
    assert rows[-1]["evaluation/test/y/accuracy"] == pytest.approx(test["y"]["accuracy"])

    files = {p.name for p in (folder / "files").iterdir()}
    assert {"plait_config.yaml", "training_statistics.json", "test_statistics.json"} <= files
    assert "input_features" in (folder / "files" / "plait_config.yaml").read_text()
    artifacts = [r.artifact for r in wandb_log.records(folder / f"run-{run_id}.wandb")
                 if r.WhichOneof("record_type") == "artifact"]
    assert [(a.name, a.type) for a in artifacts] == [(f"model-{run_id}", "model")]
    assert {entry.path for entry in artifacts[0].manifest.contents} == {p.name for p in (run_dir / "model").iterdir()}
