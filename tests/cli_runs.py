"""Runs of the plait CLI that several test modules start from (imported by name: tests/ is on
sys.path through its conftest)."""

from __future__ import annotations

import logging
from pathlib import Path

import yaml


def train_with_the_cli(root: Path, inputs: list, outputs: list, trainer: dict) -> Path:
    """``plait train`` on ``root/data.csv`` (written by the caller) with a config of these
    features and trainer settings, its cache in ``root``; returns the run directory."""
    return _run_with_the_cli("train", root, {"input_features": inputs, "output_features": outputs, "trainer": trainer})


def experiment_with_the_cli(root: Path, config: dict, rows: int = 200) -> Path:
    """``plait experiment`` on ``rows`` rows synthesized for ``config`` (written to
    ``root/data.csv``), its cache in ``root``; returns the run directory, which holds training
    and test statistics, predictions of the test split and the model."""
    from plait.synthesize import synthesize_dataset

    synthesize_dataset(config, rows, seed=3).to_csv(root / "data.csv", index=False)
    return _run_with_the_cli("experiment", root, config)


def _run_with_the_cli(command: str, root: Path, config: dict) -> Path:
    """``plait <command>`` on ``root/data.csv`` into ``root/runs``. For module-scoped fixtures:
    the plait logger, which main() points at the stderr of the moment, is put back afterwards."""
    from plait.cli import main

    config = {**config, "backend": {"type": "local", "cache_dir": str(root / "cache")}}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    logger = logging.getLogger("plait")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    try:
        code = main([command, "--config", str(root / "config.yaml"), "--dataset", str(root / "data.csv"),
                     "--output-directory", str(root / "runs")])
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
    assert code == 0
    return root / "runs" / "experiment_run_0"
