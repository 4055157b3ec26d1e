"""The backend interface: where a run's work executes.

A backend hands out the data engine preprocessing runs on, runs training (in this process by
default; on a worker group for Ray; in every process of a launcher such as torchrun), predicts
and evaluates on raw data (here, chunk by chunk, by default; as a Ray Data job for Ray) and
releases what it started. Under a launcher several processes run the same command: only the
coordinator writes outputs, and ``broadcast_object`` gives every process the coordinator's value.
"""

from __future__ import annotations

import os
import posixpath
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from plait.data.engines import DataEngine


class Backend(ABC):
    name: str
    is_coordinator: bool = True
    """Whether this process writes the run's outputs (false on the other ranks of a launcher)."""

    @abstractmethod
    def data_engine(self) -> DataEngine:
        """The engine that preprocesses data on this backend."""

    def preprocess(self, run: Callable[[], "PreprocessedData"]) -> "PreprocessedData":  # noqa: F821
        """Run preprocessing (``run`` reads or builds the cache entry)."""
        return run()

    def broadcast_object(self, value):
        """``value`` as the coordinator has it (one process: itself)."""
        return value

    def fit(self, job: "FitJob") -> "FitOutput":  # noqa: F821
        """Train: here, in this process, with the local strategy."""
        from plait.training.run import fit
        from plait.training.strategies import get_strategy

        return fit(job, get_strategy("local"))

    def predict(self, model, dataset: Any, output_directory: str | os.PathLike | None = None,
                output_format: str = "parquet"):
        """Predictions for every row of raw data, here, chunk by chunk: a pandas DataFrame, or,
        with ``output_directory``, the file ``predictions.<output_format>`` written there."""
        from plait.predict import WrittenPredictions, lists_as_text, write_chunks
        from plait.utils.fs import ensure_dir, resolve

        chunks = model.predict_chunks(dataset)
        if output_directory is None:
            import pandas as pd

            tables = list(chunks)
            return pa.concat_tables(tables).to_pandas() if tables else pd.DataFrame()
        name = f"predictions.{output_format}"
        fs, folder = resolve(os.fspath(output_directory))
        ensure_dir(fs, folder)
        if output_format == "csv":
            chunks = (lists_as_text(table, model.config) for table in chunks)
        rows = write_chunks(chunks, fs, posixpath.join(folder, name), output_format)
        return WrittenPredictions(posixpath.join(os.fspath(output_directory), name), rows)

    def evaluate(self, model, dataset: Any) -> dict:
        """Metrics on raw data holding the output columns, here, chunk by chunk; rows missing a
        target are skipped."""
        from plait.predict import CachedSplit, add_statistics, iter_chunks, metrics_of
        from plait.training.metrics import MetricSet

        model.require_trained()
        predictor, metrics = model.predictor(cached=isinstance(dataset, CachedSplit)), MetricSet(model.module)
        stats, rows = metrics.zeros(), 0
        for chunk in iter_chunks(dataset):
            rows += add_statistics(predictor, metrics, chunk, stats)
        return metrics_of(metrics, stats, rows)

    def shutdown(self) -> None:
        """Release what this backend started (a Ray instance it launched, say)."""
