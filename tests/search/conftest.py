"""A small learnable table and a search config over it, for the hyperopt tests."""

from __future__ import annotations

import pytest

from plait.synthesize import synthesize_dataset

INPUTS = [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"}, {"name": "c", "type": "category"}]
OUTPUTS = [{"name": "y", "type": "binary"}]


@pytest.fixture
def search_config(cache_dir):
    """search_config(parameters, **hyperopt) -> a config dict with that hyperopt section."""

    def make(parameters: dict, trainer: dict | None = None, backend: dict | None = None, **hyperopt) -> dict:
        return {"input_features": [dict(f) for f in INPUTS], "output_features": [dict(f) for f in OUTPUTS],
                "trainer": {"epochs": 2, "batch_size": 32, **(trainer or {})},
                "backend": {"type": "local", "cache_dir": cache_dir, **(backend or {})},
                "hyperopt": {"goal": "maximize", "metric": "accuracy", "output_feature": "y",
                             "parameters": parameters, **hyperopt}}

    return make


@pytest.fixture
def table(tmp_path, search_config):
    """A CSV of 300 seeded rows that fits search_config's features; its path."""
    path = tmp_path / "data.csv"
    synthesize_dataset(search_config({}), 300, seed=7).to_csv(path, index=False)
    return str(path)
