"""The Python API: ``Model(config).train(dataset=...)``, ``.evaluate``, ``.predict``, ``Model.load``.

The CLI is a thin layer over these same objects.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from plait.config import PlaitConfig, load_config, with_backend_type
from plait.config.render import resolved_dict
from plait.data.preprocess import PreprocessedData, preprocess
from plait.errors import ModelError, UsageError
from plait.models.ecd import ECD
from plait.models.saved import read_model, save_model
from plait.predict import CachedSplit, Predictor, iter_chunks
from plait.training.data import Batches, table_tensors
from plait.training.run import FitJob, checkpoint_to_resume

log = logging.getLogger("plait")


@dataclass
class TrainResult:
    training_statistics: list
    preprocessed: PreprocessedData
    run_dir: Path | None


def new_run_dir(output_directory: str | os.PathLike, experiment_name: str) -> Path:
    """``<output_directory>/<experiment_name>_run_<n>`` with the first unused n."""
    output_directory = os.fspath(output_directory).removeprefix("file://")
    if "://" in output_directory:
        raise UsageError(f"--output-directory {output_directory!r}: a run directory (checkpoints, "
                         "TensorBoard logs, the model) must be a local or mounted path that every worker can "
                         "write; copy it to object storage when the run is done. (predict and evaluate "
                         "write to URLs.)")
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
            self.config = with_backend_type(self.config, backend)
        self._backend = None
        self.metadata: dict | None = None
        self.module: ECD | None = None
        self.path: Path | None = None
        """The saved-model directory the weights came from (Ray's prediction actors load it)."""

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
            if self._backend.name not in ("local", "ray"):  # Ray predicts and evaluates as Ray Data jobs
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
        self.module, self.path = output.module, None
        return TrainResult(output.history, data, run_path)

    # ---- evaluation and prediction -------------------------------------------------------------

    def evaluate_preprocessed(self, data: PreprocessedData, split: str = "test") -> dict:
        """Metrics on a split of preprocessed data (as the experiment does for the test set)."""
        self.require_trained()
        names = self.module.input_names + self.module.output_names
        tensors = table_tensors(data.read_split(split), self.metadata["features"], names)
        return self._evaluate_tensors(tensors)

    def evaluate(self, dataset: Any, split: str = "full", random_seed: int | None = None) -> dict:
        """Metrics on raw data holding the output columns; rows missing a target are skipped.
        The backend computes them: here chunk by chunk, or as a Ray Data job on Ray.

        ``split`` (training, validation or test) evaluates only the rows that the config's split
        puts there with ``random_seed`` (default: the seed the model was trained with), so
        ``split="test"`` on the training data gives the experiment's test metrics again. A split
        is drawn by global row number, so it is evaluated in this process on every backend."""
        self.require_trained()
        if split != "full":
            from plait.data.preprocess import transform_split

            seed = random_seed if random_seed is not None else self.metadata.get("seed", 42)
            table = transform_split(self.config, self.metadata["features"], dataset, seed, split)
            names = self.module.input_names + self.module.output_names
            return self._evaluate_tensors(table_tensors(table, self.metadata["features"], names))
        return self.backend.evaluate(self, dataset)

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
        """Predictions for every row of raw data, in its order (output columns are not needed),
        as a DataFrame. The backend computes them: here chunk by chunk, or as a Ray Data job on
        Ray; for data larger than memory write them to files instead (``plait predict``)."""
        self.require_trained()
        return self.backend.predict(self, dataset)

    def predict_chunks(self, dataset: Any):
        """Predictions in this process, one table per chunk of raw data."""

        self.require_trained()
        predictor = self.predictor(cached=isinstance(dataset, CachedSplit))
        for i, chunk in enumerate(iter_chunks(dataset)):
            if i == 0:
                predictor.check_columns(chunk, with_outputs=False)
            yield predictor.predict_chunk(chunk)

    def predictor(self, cached: bool = False) -> Predictor:
        """The saved preprocessing and this model, to apply to raw data (or, ``cached``, to rows
        of the preprocessing cache)."""
        return Predictor(self.config, self.metadata, self.module, cached=cached)

    def require_trained(self) -> None:
        if self.module is None:
            raise ModelError("this model is not trained yet: call train() or Model.load() first")

    # ---- saving ----------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> Path:
        self.require_trained()
        saved = save_model(path, resolved_dict(self.config), self.metadata, self.module.state_dict())
        self.path = saved.resolve()
        return saved

    @classmethod
    def load(cls, path: str | os.PathLike, backend: str | None = None) -> "Model":
        """A saved model, run on ``backend`` (default: its config's backend section; a model
        trained under a launcher such as torchrun predicts in this process outside of it)."""
        config, metadata, weights = read_model(path)
        model = cls(config, backend=backend or _backend_outside_launcher(config))
        model.metadata = metadata
        model.module = ECD(model.config, metadata)
        try:
            model.module.load_state_dict(weights)
        except RuntimeError as exc:
            raise ModelError(f"the weights at {str(path)!r} do not fit its config: {str(exc).splitlines()[0]}") from None
        model.module.eval()
        model.path = Path(path).resolve()
        return model


def _backend_outside_launcher(config: dict) -> str | None:
    """``local`` for a model whose config names a launcher (torchrun, horovod, deepspeed) when
    this process was not started by one: prediction is not a launched job. None otherwise."""
    from plait.backends import LAUNCHED
    from plait.backends.launched import detect_launch

    kind = config.get("backend", {}).get("type")
    return "local" if kind in LAUNCHED and detect_launch() is None else None
