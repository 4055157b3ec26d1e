"""The experiment that every tool's test reads back (tracked_runs.py says how it runs)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import yaml

from plait.synthesize import synthesize_dataset
from tracked_runs import offline_environment, small_config  # a module beside this file


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
