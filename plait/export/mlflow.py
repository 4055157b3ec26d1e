"""A trained plait model as an MLflow pyfunc model (Ludwig's ``export_mlflow``).

The folder holds ``MLmodel`` (how MLflow loads the model, its signature), ``mlflow_model.py``
(the code that loads it: MLflow's "models from code", so nothing is unpickled),
``artifacts/model/`` (the plait model folder, unchanged), an input example and the requirements.
Loaded by ``mlflow.pyfunc.load_model`` or served by ``mlflow models serve``, it predicts through
``plait.inference.predict``, the function ``Model.predict`` calls, so the answers are plait's own.

This package sits below ``plait.api`` (``Model.export_mlflow`` calls it), so it rebuilds the
model from the folder as plait's own serving replicas do, never through the public ``Model``.
"""

from __future__ import annotations

import os
from pathlib import Path

import plait
from plait import inference
from plait.backends.local import LocalBackend
from plait.config import load_config
from plait.errors import UsageError
from plait.features.category import UNKNOWN
from plait.inference import PredictorSpec
from plait.models.saved import read_model
from plait.utils.folder import Folder, is_url
from plait.utils.fs import atomic_folder, local_fs

MODEL_CODE = Path(__file__).with_name("mlflow_model.py")
"""The pyfunc's code, which MLflow copies into the exported folder and runs to load the model."""
ARTIFACT = "model"
"""The name of the plait model folder among the pyfunc's artifacts (``artifacts/model``)."""
MLMODEL = "MLmodel"
"""MLflow's description of a model, the file that marks an exported folder complete."""


class SavedModel:
    """A plait model folder predicting as ``Model.load(folder).predict`` does: the same
    ``plait.inference.predict`` on the local backend, from weights read once."""

    def __init__(self, model_path: str | os.PathLike):
        config, self.metadata, weights = read_model(model_path)  # the ModelError of a folder that is not a model
        self.spec = PredictorSpec(config, self.metadata, weights=weights)
        # Local: the pyfunc predicts in the process MLflow loads it into, whatever backend trained it.
        self.backend = LocalBackend(load_config(config))

    def predict(self, frame):
        return inference.predict(self.backend, self.spec, frame)


def export_mlflow(model_path: str | os.PathLike, output_path: str | os.PathLike = "mlflow",
                  registered_model_name: str | None = None) -> str:
    """Write the plait model at ``model_path`` (a path or an fsspec URL) as an MLflow pyfunc
    model in the new or empty local folder ``output_path``; returns its absolute path. With
    ``registered_model_name``, also log it to MLflow's tracking URI (``MLFLOW_TRACKING_URI``) and
    register it under that name."""
    mlflow = _import_mlflow()
    output = _new_output_folder(output_path)
    model = SavedModel(model_path)
    with Folder(model_path).fetched() as folder:
        arguments = _pyfunc_arguments(mlflow, model, folder)
        # Built beside the output folder and renamed into place: a crash leaves no half model there.
        with atomic_folder(local_fs(), output, marker=MLMODEL) as building:
            mlflow.pyfunc.save_model(building, **arguments)
        if registered_model_name is not None:
            mlflow.pyfunc.log_model(name=ARTIFACT, registered_model_name=registered_model_name, **arguments)
    return output


def _import_mlflow():
    try:
        import mlflow
        import mlflow.pyfunc
    except ImportError as exc:
        raise UsageError(f"export_mlflow needs `pip install plait[mlflow]` ({exc})") from None
    return mlflow


def _new_output_folder(output_path: str | os.PathLike) -> str:
    """``output_path`` as an absolute local path, refused when it holds anything already."""
    if is_url(output_path):
        raise UsageError(f"output_path {os.fspath(output_path)!r}: MLflow writes a model to a local folder; give a "
                         f"local path (registered_model_name also logs it to the tracking server)")
    output = os.path.abspath(os.path.expanduser(os.fspath(output_path)))
    if os.path.exists(output) and not (os.path.isdir(output) and not os.listdir(output)):
        raise UsageError(f"output_path {output!r} exists and is not an empty folder: give a new or empty folder, "
                         f"or remove this one first")
    return output


def _pyfunc_arguments(mlflow, model: SavedModel, folder: Path) -> dict:
    """What ``save_model`` and ``log_model`` are given: the code, the plait model folder, the
    signature and the example (the requirements are given too: inferring them would load the
    model in a subprocess, seconds of torch imports)."""
    example = example_frame(model.metadata)
    return dict(python_model=str(MODEL_CODE), artifacts={ARTIFACT: str(folder)},
                signature=mlflow.models.infer_signature(example, model.predict(example)), input_example=example,
                pip_requirements=[f"plait=={plait.__version__}", f"mlflow-skinny=={mlflow.__version__}"])


def example_frame(metadata: dict):
    """One row of typical input values, by column, from the preprocessing metadata (see
    :func:`typical_value`). A feature with none gets a missing value, in a text column, which
    every feature type reads and fills as it fills any missing value: MLflow infers no type for
    it and marks it optional, so the column still reaches the model (one left out of the
    signature would be dropped before it)."""
    import pandas as pd

    inputs = [feature for feature in metadata["features"].values() if not feature["output"]]
    values = {feature["column"]: typical_value(feature) for feature in inputs}
    return pd.DataFrame({column: pd.Series([value], dtype="string" if value is None else None)
                         for column, value in values.items()})


def typical_value(feature: dict):
    """A value of an input feature like its training data: a number's mean, a category's most
    frequent value, a binary's true label; None for other types (keep it simple: their metadata
    holds processed values, such as a date's parts, not raw ones)."""
    if feature["type"] == "number":
        return feature["mean"]
    if feature["type"] == "category":
        known = [(value, count) for value, count in zip(feature["vocabulary"], feature["frequencies"])
                 if value != UNKNOWN]
        return max(known, key=lambda pair: pair[1])[0] if known else None
    if feature["type"] == "binary" and feature["true_labels"]:
        label = feature["true_labels"][0]
        # "true" is how plait spells the values of a boolean column: training data held booleans.
        return True if label == "true" else label
    return None
