"""Prediction and evaluation with a trained model, on any backend.

What is computed lives here: a picklable :class:`PredictorSpec` rebuilt by whichever process
runs the work, one chunk reader, one predictions sink and one evaluation pipeline. Where it is
computed is the backend's business: it maps the batch functions below over the data (in this
process, or as a Ray Data job) and nothing else.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from functools import partial
from typing import Any

import pyarrow as pa

from plait.evaluation import Evaluation
from plait.inference.predictor import Predictor, PredictorSpec
from plait.data.reader import CachedSplit, iter_chunks, known_columns
from plait.inference.sink import PredictionsSink, WrittenPredictions
from plait.utils.fs import endpoint_errors


class ChunkFunction:
    """A batch function for a backend's map, holding a predictor rebuilt from its spec once per
    process that runs it (``cached``: the chunks are rows of the preprocessing cache)."""

    def __init__(self, spec: PredictorSpec, cached: bool, device: str = "cpu"):
        self.predictor = spec.build(device=device, cached=cached)


class ChunkPredictions(ChunkFunction):
    """One chunk in, its predictions out."""

    def __call__(self, chunk: pa.Table) -> pa.Table:
        self.predictor.check_columns(chunk.column_names, with_outputs=False)
        return self.predictor.predict_chunk(chunk)


class ChunkStatistics(ChunkFunction):
    """One chunk in, its metric statistics out as one row."""

    def __call__(self, chunk: pa.Table) -> pa.Table:
        evaluation = Evaluation(self.predictor.module)
        evaluation.add_chunk(self.predictor, chunk)
        return evaluation.as_row()


def _endpoint_named(function):
    """A storage endpoint (of a dataset URL, or the output directory's) that cannot be reached
    is one error naming it, not a botocore traceback; credentials come from the environment."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with endpoint_errors({}, "the environment"):
            return function(*args, **kwargs)

    return wrapper


@_endpoint_named
def predict(backend, spec: PredictorSpec, dataset: Any):
    """Predictions for every row of ``dataset``, in its order, as a pandas DataFrame (with the
    predictions' columns even when there are no rows)."""
    spec, dataset = _to_predict(spec, dataset)
    _check_known_columns(spec, dataset, with_outputs=False)
    make = partial(_make, ChunkPredictions, spec, isinstance(dataset, CachedSplit))
    tables = [t for t in backend.map_batches(dataset, make, ordered=True, what="prediction")]
    return (pa.concat_tables(tables) if tables else _predictions_of_no_rows(spec)).to_pandas()


@_endpoint_named
def write_predictions(backend, spec: PredictorSpec, dataset: Any, output_directory, fmt: str = "parquet"
                      ) -> WrittenPredictions:
    """Predictions for every row of ``dataset`` written to ``<output_directory>/predictions.<fmt>``
    (a file, or on a distributed backend a folder of part files in input order)."""
    from plait.config import load_config

    spec, dataset = _to_predict(spec, dataset)
    _check_known_columns(spec, dataset, with_outputs=False)
    cached = isinstance(dataset, CachedSplit)
    sink = PredictionsSink.for_config(output_directory, fmt, load_config(spec.config),
                                      no_rows=None if cached else partial(_predictions_of_no_rows, spec))
    make = partial(_make, ChunkPredictions, spec, cached)
    return backend.write_batches(dataset, make, sink)


@_endpoint_named
def evaluate(backend, spec: PredictorSpec, dataset: Any, cached: bool | None = None) -> dict:
    """Metrics on data holding the output columns (rows missing a target are skipped): each
    batch's statistics, computed where the backend maps batches, added up here. ``cached``: the
    rows are preprocessed (default: for a cached split)."""
    spec = reading_from(spec, dataset)
    cached = isinstance(dataset, CachedSplit) if cached is None else cached
    if not cached:
        _check_known_columns(spec, dataset, with_outputs=True)
    total = Evaluation(spec.build(cached=cached).module)
    for shipped in backend.map_batches(dataset, partial(_make, ChunkStatistics, spec, cached), ordered=False,
                                       what="evaluation"):
        total.add_rows(shipped)
    return total.metrics_or_error()


def reading_from(spec: PredictorSpec, dataset: Any) -> PredictorSpec:
    """The spec with relative file paths in ``dataset`` read from its folder."""
    from plait.features import data_directory

    return dataclasses.replace(spec, data_directory=data_directory(dataset))


def _to_predict(spec: PredictorSpec, dataset: Any) -> tuple[PredictorSpec, Any]:
    """The spec reading relative paths from the dataset's folder, and the dataset; a folder (or
    glob) of image files, given to a model whose one input is an image, becomes a table of their
    paths in name order, and the predictions then begin with the path of each image."""
    from plait.data.io import image_files

    spec = reading_from(spec, dataset)
    inputs = spec.config["input_features"]
    if len(inputs) != 1 or inputs[0]["type"] != "image" or not isinstance(dataset, (str, os.PathLike)):
        return spec, dataset
    files = image_files(os.fspath(dataset))
    if files is None:
        return spec, dataset
    column = inputs[0].get("column") or inputs[0]["name"]
    return dataclasses.replace(spec, key_column=column), pa.table({column: pa.array(files, pa.string())})


def _predictions_of_no_rows(spec: PredictorSpec) -> pa.Table:
    """The predictions of an input without rows: their columns and types, as any chunk's. The
    inputs are empty text columns, which every feature type reads (numbers, vectors as text)."""
    predictor = spec.build()
    return predictor.predict_chunk(pa.table({predictor.column(p): pa.array([], pa.string()) for p in predictor.inputs}))


def _make(function_class, spec: PredictorSpec, cached: bool, device: str):
    return function_class(spec, cached, device)


def _check_known_columns(spec: PredictorSpec, dataset: Any, with_outputs: bool) -> None:
    """Fail before any work starts when the columns are known without reading (footers, frames)."""
    columns = None if isinstance(dataset, CachedSplit) else known_columns(dataset)
    if columns is not None:
        from plait.config import load_config
        from plait.inference.predictor import predicting_processors

        processors = [p for p in predicting_processors(load_config(spec.config)) if with_outputs or not p.is_output]
        missing = [column for p in processors for column in p.columns if column not in columns]
        if missing:
            Predictor.missing_columns_error(missing, columns, with_outputs)


__all__ = ["CachedSplit", "ChunkPredictions", "ChunkStatistics", "Evaluation", "Predictor", "PredictorSpec",
           "PredictionsSink", "WrittenPredictions", "evaluate", "iter_chunks", "predict", "reading_from",
           "write_predictions"]
