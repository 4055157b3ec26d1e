"""Prediction on data a model cannot read: one clean error naming the column."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_runs import train_with_the_cli

ROWS = 40


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("predictor")
    (root / "data.csv").write_text("x,c,y\n" + "".join(f"{i},{'ab'[i % 2]},{i % 3 == 0}\n" for i in range(ROWS)))
    run = train_with_the_cli(root, [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
                             [{"name": "y", "type": "binary"}], {"epochs": 1, "batch_size": 16})
    return str(run / "model")


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
