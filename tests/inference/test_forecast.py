"""Timeseries outputs, and forecasting each row's series with them (plait forecast)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from plait.api import Model


def rising_series(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    """Each row a line with its own slope: 8 steps of history and the next 2."""
    rng = np.random.default_rng(seed)
    slope, start = rng.uniform(-1, 1, rows), rng.uniform(-2, 2, rows)
    steps = start[:, None] + slope[:, None] * np.arange(10)[None, :]
    return pd.DataFrame({"history": [" ".join(f"{v:.4f}" for v in row[:8]) for row in steps],
                         "next": [" ".join(f"{v:.4f}" for v in row[8:]) for row in steps],
                         "slope": slope, "start": start})


@pytest.fixture
def trained(make_config, tmp_path):
    config = make_config([{"name": "history", "type": "timeseries", "encoder": {"type": "dense", "output_size": 32}}],
                         [{"name": "next", "type": "timeseries"}], trainer={"epochs": 30, "learning_rate": 0.01})
    model = Model(config)
    model.train(rising_series())
    model.save(tmp_path / "model")
    return tmp_path / "model"


def test_a_timeseries_output_predicts_the_next_steps(trained):
    model = Model.load(trained)
    data = rising_series(50, seed=1)
    assert model.evaluate(data)["next"]["r2"] >= 0.9
    predicted = np.asarray(model.predict(data)["next_predictions"].tolist())
    assert predicted.shape == (50, 2)


def test_forecast_extends_each_row_by_the_horizon_through_the_cli(trained, cli, make_dataset, tmp_path):
    data = rising_series(20, seed=2)
    code, out, err = cli("forecast", "--model-path", trained, "--dataset", make_dataset(data), "--horizon", 5,
                         "--output-directory", tmp_path / "out")
    assert code == 0, err
    forecast = pd.read_parquet(tmp_path / "out" / "forecast.parquet")["next_forecast"]
    expected = data["start"].to_numpy()[:, None] + data["slope"].to_numpy()[:, None] * np.arange(8, 13)[None, :]
    assert np.abs(np.stack(forecast.to_list()) - expected).mean() < 0.3


def test_forecast_needs_a_model_from_series_to_series(tmp_path, make_config, make_dataset, cli_error):
    model = Model(make_config([{"name": "x", "type": "number"}], [{"name": "y", "type": "number"}],
                              trainer={"epochs": 1}))
    model.train(pd.DataFrame({"x": np.arange(20.0), "y": np.arange(20.0)}))
    model.save(tmp_path / "model")
    error = cli_error("forecast", "--model-path", tmp_path / "model", "--dataset",
                      make_dataset({"x": [1.0]}), "--horizon", 3)
    assert "forecast needs a model with one timeseries input (the history) and one timeseries output" in error


def test_a_horizon_over_the_rows_is_refused_with_the_row_major_form(make_config):
    from plait.config import load_config
    from plait.errors import ConfigError

    with pytest.raises(ConfigError, match="Put each row's next 3 values in the output column"):
        load_config(make_config([{"name": "x", "type": "number"}],
                                [{"name": "y", "type": "timeseries", "preprocessing": {"horizon": 3}}]))
