"""What the tracking tests share: a small config, the offline environment, the secret no tool
may log, and the experiment every tool's test reads back (see conftest.py).

One small experiment tracked by all four tools at once, shared by the tests of each tool.

``plait experiment --mlflow --wandb --aim --comet`` on 300 synthesized rows (2 epochs), with the
config naming MLflow's experiment (its settings win over the flag's defaults) and, in the
environment, secrets that no tool may log. MLflow's store is a file store (MLflow's SQLite store
spends seconds creating its tables; the default store is covered by the benchmark), W&B and
Comet run offline, Aim's repository is the output directory (its default).
"""

from __future__ import annotations

import pytest

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


