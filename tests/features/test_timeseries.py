"""Timeseries inputs: a series of numbers per row, padded (NaN marks padding) or cut to the
longest training series, read row by row; and a model that learns from its shape."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from plait.api import Model
from plait.config import load_config
from plait.errors import ConfigError, DataError

NAN = float("nan")
TARGET = {"name": "y", "type": "binary"}


def series(make_processor, **preprocessing):
    return make_processor("timeseries", preprocessing or None)


def same(a: list, b: list) -> bool:
    """Lists of lists of floats equal, NaN equal to NaN."""
    return np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float), equal_nan=True)


def test_strings_and_lists_are_padded_to_the_longest_training_series(make_processor, padded_fit_transform):
    meta, out = padded_fit_transform(series(make_processor), ["1 2 3", " 4.5\t-5 ", "6e1"])
    assert (meta["timeseries_length"], meta["truncated"]) == (3, 0)
    assert same(out, [[1, 2, 3], [4.5, -5, NAN], [60, NAN, NAN]])
    assert same(padded_fit_transform(series(make_processor), [[1, 2], [3]])[1], [[1, 2], [3, NAN]])


def test_comma_tokenizer_left_padding_and_the_length_limit(make_processor, padded_fit_transform):
    processor = series(make_processor, tokenizer="comma", padding="left", timeseries_length_limit=3)
    meta, out = padded_fit_transform(processor, ["1, 2, 3, 4, 5", "7,8"])
    assert (meta["timeseries_length"], meta["truncated"]) == (3, 1)
    assert same(out, [[1, 2, 3], [NAN, 7, 8]])  # as in Ludwig: the first steps are kept


def test_missing_series_and_values_that_are_not_finite(make_processor, padded_fit_transform):
    meta, out = padded_fit_transform(series(make_processor, padding_value=-1), ["1 nan 3", None, "inf 2"])
    assert meta["padding_value"] == -1
    assert same(out, [[1, -1, 3], [NAN, NAN, NAN], [-1, 2, NAN]])
    filled = series(make_processor, fill_value="7 8")
    assert same(padded_fit_transform(filled, ["1 2 3", None])[1], [[1, 2, 3], [7, 8, NAN]])


def test_an_output_pads_with_the_padding_value(make_processor, padded_fit_transform):
    processor = make_processor("timeseries", {"missing_value_strategy": "fill_with_const"})
    processor.is_output = True
    assert same(padded_fit_transform(processor, ["1 2", "3"])[1], [[1, 2], [3, 0]])


def test_output_is_each_rows_steps_as_float32_lists_cut_to_the_length(make_processor, fit):
    processor = series(make_processor)
    meta = fit(processor, ["1 2"])
    out = processor.transform(processor.prepare(pa.array(["3", "4 5 6"])), meta)
    assert out.type == pa.list_(pa.float32()) and out.to_pylist() == [[3.0], [4.0, 5.0]]


def test_non_numbers_are_counted_with_an_example(make_processor):
    with pytest.raises(DataError) as info:
        series(make_processor).prepare(pa.array(["1 2", "1 x 3", "y", None]))
    assert str(info.value) == (
        "timeseries feature 'f': 2 row(s) of column 'f' hold something that is not a number, such as '1 x 3' (a "
        "series is numbers split by space). Clean the column, or fix preprocessing.tokenizer")


def test_statistics_do_not_depend_on_partitioning(make_processor, fit, padded_transform):
    rows = ["0.1 0.2", "0.3 0.7 0.9", None, "1e-3", "2 2 2 2 2", ""]
    processor = series(make_processor, timeseries_length_limit=4)
    whole = fit(processor, rows)
    assert whole == fit(processor, rows[:1], rows[1:3], rows[3:], []) and whole["truncated"] == 1
    assert same(padded_transform(processor, rows, whole), padded_transform(processor, rows[:3], whole) + padded_transform(processor, rows[3:], whole))


def test_ludwigs_window_over_rows_is_refused_with_the_alternative():
    with pytest.raises(ConfigError, match=r"window_size: got 3; plait does not build a series from the previous rows "
                                          r"of a number column: that depends on the row order"):
        load_config({"input_features": [{"name": "t", "type": "timeseries", "preprocessing": {"window_size": 3}}],
                     "output_features": [TARGET]})


def trend_frame(rows: int, seed: int) -> pd.DataFrame:
    """Noisy series of 6 to 12 steps; y: whether the series goes up."""
    rng = np.random.default_rng(seed)
    up = rng.random(rows) < 0.5
    texts = []
    for rises in up:
        steps = int(rng.integers(6, 13))
        line = np.linspace(0, 1, steps) * (1 if rises else -1) * rng.uniform(0.5, 2) + rng.normal(0, 0.15, steps)
        texts.append(" ".join(f"{v:.3f}" for v in line + rng.normal(0, 1)))  # an offset: only the trend tells
    return pd.DataFrame({"t": texts, "y": up})


def test_a_model_learns_whether_a_series_rises(tmp_path, one_torch_thread):
    config = {"input_features": [{"name": "t", "type": "timeseries",
                                  "encoder": {"type": "parallel_cnn", "num_filters": 16, "reduce_output": "mean"}}],
              "output_features": [TARGET],
              "trainer": {"epochs": 6, "batch_size": 32, "learning_rate": 0.01},
              "backend": {"type": "local", "cache_dir": str(tmp_path)}}
    model = Model(config)
    model.train(dataset=trend_frame(400, 0), random_seed=1, progress_bar=False)
    test = trend_frame(200, 1)
    accuracy = (model.predict(test).y_predictions == test.y).mean()
    assert accuracy >= 0.9, accuracy


def test_bad_series_through_the_cli_are_one_clean_error(make_config, write_config, make_dataset, cli_error):
    path = make_dataset({"t": ["1 2 3"] * 9 + ["1 two 3"], "y": [True, False] * 5})
    config = write_config(make_config([{"name": "t", "type": "timeseries"}], [TARGET]))
    error = cli_error("preprocess", "--config", config, "--dataset", path)
    assert error == ("plait: error: timeseries feature 't': 1 row(s) of column 't' hold something that is not a "
                     "number, such as '1 two 3' (a series is numbers split by space). Clean the column, or fix "
                     "preprocessing.tokenizer")


def test_a_step_beyond_float32_becomes_the_padding_value_without_a_warning(make_processor, fit_transform, recwarn):
    assert fit_transform(make_processor("timeseries", {"padding_value": -1.0}), ["1e308 2", "-1e300"])[1] == [
        [-1.0, 2.0], [-1.0]]
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
