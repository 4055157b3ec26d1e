"""Forecasting with a model that predicts a series from a series (Ludwig's ``forecast``).

Each row holds its own history in the timeseries input's column. The model predicts the next
steps (as many as its timeseries output holds); they are appended to the history, and the model
predicts again from the longer history, until ``horizon`` steps are known. Every row is forecast
on its own, as plait preprocesses rows on their own (Ludwig forecasts one series laid out in rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from plait.errors import UsageError


def forecast(model, dataset: Any, horizon: int):
    """The next ``horizon`` steps of each row's series, as a DataFrame with one column,
    ``<output>_forecast`` (a list of numbers per row)."""
    from plait.data.io import read_table

    series_input, series_output = _series_features(model.config)
    if horizon < 1:
        raise UsageError(f"--horizon {horizon}: give the number of steps to forecast, 1 or more")
    table = read_table(dataset)
    features = model.metadata["features"]
    kept, steps = features[series_input.name]["timeseries_length"], features[series_output.name]["timeseries_length"]
    history = _histories(series_input, table)
    frame = table.to_pandas()
    known: list[list[float]] = [[] for _ in range(len(frame))]
    for _ in range(-(-horizon // steps) if len(frame) else 0):
        # The input keeps a series' first steps, so the newest ``kept`` steps are what it is given.
        frame[series_input.column] = [(list(h) + k)[-kept:] for h, k in zip(history, known)]
        predicted = model.predict(frame)[f"{series_output.name}_predictions"]
        known = [k + [float(v) for v in p] for k, p in zip(known, predicted)]
    return _as_frame(series_output.name, [k[:horizon] for k in known])


def _series_features(config):
    """The model's one timeseries input and one timeseries output; a clear error otherwise."""
    inputs = [f for f in config.input_features if f.type == "timeseries"]
    outputs = [f for f in config.output_features if f.type == "timeseries"]
    if len(inputs) != 1 or len(outputs) != 1:
        raise UsageError(f"forecast needs a model with one timeseries input (the history) and one timeseries output "
                         f"(the next steps); this one has {len(inputs)} and {len(outputs)}. Use plait predict")
    return inputs[0], outputs[0]


def _histories(feature, table: pa.Table) -> list[np.ndarray]:
    """Each row's history as the model reads it (the column's numbers, parsed by its processor)."""
    from plait.features import PROCESSORS
    from plait.inference.predictor import Predictor

    if feature.column not in table.column_names:
        Predictor.missing_columns_error([feature.column], table.column_names, with_outputs=False)
    processor = PROCESSORS["timeseries"](feature, is_output=False)
    series = processor.prepare_raw(table[feature.column].combine_chunks())
    return [np.asarray(row if row is not None else [], dtype=np.float64) for row in series.to_pylist()]


def _as_frame(name: str, rows: list[list[float]]):
    import pandas as pd

    return pd.DataFrame({f"{name}_forecast": rows})


def write_forecast(frame, output_directory: str, fmt: str) -> str:
    """``<output_directory>/forecast.<fmt>``, written to a temporary name and renamed (CSV: each
    series as its numbers joined by spaces)."""
    import posixpath

    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    from plait.utils.fs import atomic_open, ensure_dir, resolve

    fs, folder = resolve(str(output_directory))
    ensure_dir(fs, folder)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if fmt == "csv":
        table = pa.table({name: [" ".join(map(repr, row)) for row in table[name].to_pylist()] for name in table.column_names})
    path = posixpath.join(folder, f"forecast.{fmt}")
    with atomic_open(fs, path, "wb") as handle:
        (pq.write_table if fmt == "parquet" else csv.write_csv)(table, handle)
    return path
