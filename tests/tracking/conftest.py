"""One small experiment tracked by all four tools at once, shared by the tests of each tool.

``plait experiment --mlflow --wandb --aim --comet`` on 300 synthesized rows (2 epochs), with the
config naming MLflow's experiment (its settings win over the flag's defaults) and, in the
environment, secrets that no tool may log. MLflow's store is a file store (MLflow's SQLite store
spends seconds creating its tables; the default store is covered by the benchmark), W&B and
Comet run offline, Aim's repository is the output directory (its default).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import yaml

from plait.synthesize import synthesize_dataset

SECRET = "hunter2-do-not-log"
FEATURES = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
            "output_features": [{"name": "y", "type": "binary"}]}


def small_config(cache_dir, **sections) -> dict:
    return {**FEATURES, "trainer": {"epochs": 2, "batch_size": 32},
            "backend": {"type": "local", "cache_dir": str(cache_dir)}, **sections}


def offline_environment(patch: pytest.MonkeyPatch, root) -> None:
    """Every tool local and offline; MLflow's file store in ``root``; secrets a tool could pick up."""
    patch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    patch.setenv("MLFLOW_TRACKING_URI", (root / "mlruns").as_uri())
    patch.setenv("WANDB_MODE", "offline")
    patch.setenv("WANDB_SILENT", "true")
    patch.delenv("WANDB_DIR", raising=False)
    patch.delenv("COMET_API_KEY", raising=False)
    for name in ("MLFLOW_TRACKING_PASSWORD", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY"):
        patch.setenv(name, SECRET)


@pytest.fixture(scope="session")
def tracked_experiment(tmp_path_factory):
    """.run_dir (``<out>/experiment_run_0``), .out (the output directory), .mlflow_uri."""
    from plait.cli import main

    root = tmp_path_factory.mktemp("tracked")
    synthesize_dataset(small_config(root), 300, seed=3).to_csv(root / "data.csv", index=False)
    config = small_config(root / "cache", tracking=[{"type": "mlflow", "experiment_name": "tracked"}])
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    logger = logging.getLogger("plait")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    with pytest.MonkeyPatch.context() as patch:
        offline_environment(patch, root)
        try:
            code = main(["experiment", "--config", str(root / "config.yaml"), "--dataset", str(root / "data.csv"),
                         "--output-directory", str(root / "out"), "--mlflow", "--wandb", "--aim", "--comet"])
        finally:
            logger.handlers[:], logger.level, logger.propagate = saved
    assert code == 0
    return SimpleNamespace(run_dir=root / "out" / "experiment_run_0", out=root / "out",
                           mlflow_uri=(root / "mlruns").as_uri())
