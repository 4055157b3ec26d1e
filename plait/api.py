"""The Python API: ``Model(config).train(dataset=...)``, ``.evaluate``, ``.predict``, ``Model.load``.

The CLI is a thin layer over these same objects.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch

from plait.config import PlaitConfig, load_config
from plait.config.render import resolved_dict
from plait.data.preprocess import PreprocessedData, preprocess
from plait.errors import ConfigError, DataError, ModelError
from plait.models.ecd import ECD
from plait.models.saved import read_model, save_model
from plait.predict import Predictor, iter_chunks
from plait.training.data import Batches, table_tensors
from plait.training.run import FitJob, checkpoint_to_resume
from plait.utils.fs import write_json

log = logging.getLogger("plait")


@dataclass
class TrainResult:
    training_statistics: list
    preprocessed: PreprocessedData
    run_dir: Path | None


def new_run_dir(output_directory: str | os.PathLike, experiment_name: str) -> Path:
    """``<output_directory>/<experiment_name>_run_<n>`` with the first unused n."""
    root = Path(output_directory)
    root.mkdir(parents=True, exist_ok=True)
    n = 0
    while (root / f"{experiment_name}_run_{n}").exists():
        n += 1
    path = root / f"{experiment_name}_run_{n}"
    path.mkdir()
    return path


class Model:
    """A plait model: config, preprocessing metadata and (once trained) weights."""

    def __init__(self, config: str | os.PathLike | dict | PlaitConfig, backend: str | None = None):
        self.config = load_config(config)
        if backend is not None:
            self.config = self.config.model_copy(update={"backend": self.config.backend.model_copy(update={"type": backend})})
        self._backend = None
        self.metadata: dict | None = None
        self.module: ECD | None = None

    # ---- training --------------------------------------------------------------------------

    def preprocess(self, dataset: Any = None, *, training_set=None, validation_set=None, test_set=None,
                   random_seed: int = 42) -> PreprocessedData:
        return self.backend.preprocess(lambda: preprocess(
            self.config, dataset, training_set=training_set, validation_set=validation_set, test_set=test_set,
            seed=random_seed, engine=self.backend.data_engine))

    @property
    def backend(self):
        """The backend this model runs on, chosen (and started) on first use."""
        if self._backend is None:
            from plait.backends import get_backend

            self._backend = get_backend(self.config)
            if self._backend.name != "local":
                log.info("Preprocessing and training run on %s; prediction runs in this process.", self._backend.name)
        return self._backend

    def close(self) -> None:
        """Release what the backend started (a local Ray instance, for example)."""
        if self._backend is not None:
            self._backend.shutdown()
            self._backend = None

    def train(self, dataset: Any = None, *, training_set=None, validation_set=None, test_set=None,
              random_seed: int = 42, run_dir: str | os.PathLike | None = None, resume: bool = False,
              progress_bar: bool = True) -> TrainResult:
        """Preprocess (or hit the cache) and train. With ``run_dir``, checkpoints and TensorBoard
        logs go there and ``resume=True`` continues from its last checkpoint."""
        data = self.preprocess(dataset, training_set=training_set, validation_set=validation_set,
                               test_set=test_set, random_seed=random_seed)
        self.metadata = {"features": data.metadata["features"], "splits": data.metadata["splits"], "seed": random_seed}
        run_path = Path(run_dir) if run_dir is not None else None
        job = FitJob(self.config, self.metadata, data, random_seed, run_path, resume, progress_bar)
        checkpoint_to_resume(job)  # nothing to resume fails here, before a backend starts workers
        output = self.backend.fit(job)
        self.module = output.module
        return TrainResult(output.history, data, run_path)

    # ---- evaluation and prediction -------------------------------------------------------------

    def evaluate_preprocessed(self, data: PreprocessedData, split: str = "test") -> dict:
        """Metrics on a split of preprocessed data (as the experiment does for the test set)."""
        self._require_trained()
        names = self.module.input_names + self.module.output_names
        tensors = table_tensors(data.read_split(split), self.metadata["features"], names)
        return self._evaluate_tensors(tensors)

    def evaluate(self, dataset: Any, split: str = "full", random_seed: int | None = None) -> dict:
        """Metrics on raw data holding the output columns; rows missing a target are skipped.

        ``split`` (training, validation or test) evaluates only the rows that the config's split
        puts there with ``random_seed`` (default: the seed the model was trained with), so
        ``split="test"`` on the training data gives the experiment's test metrics again."""
        self._require_trained()
        if split != "full":
            from plait.data.preprocess import transform_split

            seed = random_seed if random_seed is not None else self.metadata.get("seed", 42)
            table = transform_split(self.config, self.metadata["features"], dataset, seed, split)
            names = self.module.input_names + self.module.output_names
            return self._evaluate_tensors(table_tensors(table, self.metadata["features"], names))
        predictor = self._predictor()
        chunks = []
        for chunk in iter_chunks(dataset):
            predictor.check_columns(chunk, with_outputs=True)
            for p in predictor.outputs:
                chunk = chunk.filter(pa.compute.is_valid(chunk[p.column]))
            chunks.append(predictor.tensors(chunk, predictor.processors))
        if not chunks or sum(len(next(iter(c.values()))) for c in chunks) == 0:
            raise DataError("no rows to evaluate (every row lacks a target value)")
        tensors = {k: torch.cat([c[k] for c in chunks]) for k in chunks[0]}
        return self._evaluate_tensors(tensors)

    def _evaluate_tensors(self, tensors: dict) -> dict:
        from plait.training.metrics import MetricSet

        metrics = MetricSet(self.module)
        stats = metrics.zeros()
        self.module.eval()
        batches = Batches(tensors, 8192, shuffle=False)
        with torch.no_grad():
            for batch in batches.epoch(0):
                inputs = {n: batch[n] for n in self.module.input_names}
                targets = {n: batch[n] for n in self.module.output_names}
                metrics.update(stats, self.module(inputs), targets)
        return metrics.compute(stats)

    def predict(self, dataset: Any) -> "pd.DataFrame":  # noqa: F821
        """Predictions for every row of raw data (output columns are not needed)."""
        import pandas as pd

        tables = list(self.predict_chunks(dataset))
        return pa.concat_tables(tables).to_pandas() if tables else pd.DataFrame()

    def predict_chunks(self, dataset: Any):
        self._require_trained()
        predictor = self._predictor()
        for i, chunk in enumerate(iter_chunks(dataset)):
            if i == 0:
                predictor.check_columns(chunk, with_outputs=False)
            yield predictor.predict_chunk(chunk)

    def _predictor(self) -> Predictor:
        return Predictor(self.config, self.metadata, self.module)

    def _require_trained(self) -> None:
        if self.module is None:
            raise ModelError("this model is not trained yet: call train() or Model.load() first")

    # ---- saving ----------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> Path:
        self._require_trained()
        return save_model(path, resolved_dict(self.config), self.metadata, self.module.state_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Model":
        config, metadata, weights = read_model(path)
        model = cls(config)
        model.metadata = metadata
        model.module = ECD(model.config, metadata)
        try:
            model.module.load_state_dict(weights)
        except RuntimeError as exc:
            raise ModelError(f"the weights at {str(path)!r} do not fit its config: {str(exc).splitlines()[0]}") from None
        model.module.eval()
        return model


def predict_preprocessed(model: Model, data: PreprocessedData, split: str) -> pa.Table:
    """Predictions for a split of preprocessed data (the experiment's test predictions)."""
    predictor = model._predictor()
    tensors = table_tensors(data.read_split(split), model.metadata["features"], model.module.input_names)
    from plait.predict import _postprocess

    logits = predictor.logits(tensors)
    columns: dict = {}
    for p in predictor.outputs:
        columns.update(_postprocess(p, model.module.heads[p.name].predict(logits[p.name]), model.metadata["features"][p.name]))
    return pa.table(columns)
