"""Prediction on data a model cannot read: one clean error naming the column."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from plait.cli import main

ROWS = 40


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("predictor")
    (root / "data.csv").write_text("x,c,y\n" + "".join(f"{i},{'ab'[i % 2]},{i % 3 == 0}\n" for i in range(ROWS)))
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}],
              "trainer": {"epochs": 1, "batch_size": 16},
              "backend": {"type": "local", "cache_dir": str(root / "cache")}}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", "--config", str(root / "config.yaml"), "--dataset", str(root / "data.csv"),
                 "--output-directory", str(root / "runs")]) == 0
    return str(root / "runs" / "experiment_run_0" / "model")


def test_a_nested_parquet_column_at_prediction_is_refused_by_name(model, tmp_path, cli_error):
    pq.write_table(pa.table({"x": [[1.0, 2.0]] * 5, "c": ["a"] * 5}), tmp_path / "new.parquet")
    error = cli_error("predict", "--model-path", model, "--dataset", tmp_path / "new.parquet",
                      "--output-directory", tmp_path / "out")
    assert "input feature 'x' (number): column 'x' has Arrow type list<element: double>" in error


def test_a_duplicated_header_at_prediction_is_refused_by_name(model, tmp_path, cli_error):
    (tmp_path / "new.csv").write_text("x,c,c\n1,a,b\n2,b,a\n")
    error = cli_error("predict", "--model-path", model, "--dataset", tmp_path / "new.csv",
                      "--output-directory", tmp_path / "out")
    assert "appear more than once" in error and "'c'" in error
