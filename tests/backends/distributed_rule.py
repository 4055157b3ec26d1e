"""A simple rule every distributed test trains on: y = x1 + 1.5 [c == a] > 0.3."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def rule_data(rows: int = 1600, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x1": rng.normal(size=rows), "x2": rng.normal(size=rows), "c": rng.choice(list("abc"), rows)})
    df["y"] = df.x1 + 1.5 * (df.c == "a") > 0.3
    return df


def rule_config(tmp_path: Path, workers: int | None, **trainer) -> dict:
    backend = {"type": "ray", "cache_dir": str(tmp_path / "cache")}
    if workers is not None:
        backend["trainer"] = {"num_workers": workers, "max_retries": trainer.pop("max_retries", 3)}
    return {
        "input_features": [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"}, {"name": "c", "type": "category"}],
        "output_features": [{"name": "y", "type": "binary"}],
        # A brisk rate: with two workers, 6 epochs are about 50 steps, and the learned vector of
        # c starts small (the dense encoder's xavier_uniform), so at 0.001 one seed stopped short.
        "trainer": {"epochs": 6, "batch_size": 64, "learning_rate": 0.003, **trainer},
        "backend": backend,
    }
