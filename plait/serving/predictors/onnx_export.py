"""An ONNX export (``plait export_model --format onnx``), served by onnxruntime.

The graph holds the preprocessing, the network and the postprocessing, so serving it needs
neither torch nor the model's config: export.json names the input columns, their types and the
metadata a request's values are checked against. The model runs in plait's own
:class:`~plait.export.onnx.runner.ExportedModel`, never the folder's ``plait_onnx.py``: that file
is whoever wrote the folder's code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.config.serve import ServeConfig
from plait.errors import ConfigError, ModelError
from plait.serving.predictors import ServedFeature

FILE_INPUTS = {"uint8"}
"""Raw input types whose values are files (an image's pixels): the server does not decode them
for an export yet."""


class OnnxExportFolder:
    def __init__(self, path: str, export: dict, settings: dict | None = None):
        self.path = path
        if export.get("format") != "onnx":
            raise ModelError(f"{path!r} holds an export of format {export.get('format')!r}; plait serve serves a "
                             f"plait model folder or an ONNX export (plait export_model --format onnx)")
        self.export = export
        files = [f"{i['name']!r} ({i['feature_type']})" for i in export["inputs"] if i["type"] in FILE_INPUTS]
        if files:
            raise ModelError(f"{path!r}: the server cannot take image or audio inputs of an ONNX export yet "
                             f"(input column(s) {', '.join(files)}); serve the plait model folder it was exported from")
        self.settings = export_settings(settings)

    def backend(self, flag: str | None) -> str:
        """An export has no backend section: ``--backend ray`` serves it on Ray Serve, else here."""
        return "ray" if flag == "ray" else "local"

    def predictor(self, device: str | None = None) -> "OnnxPredictor":
        """onnxruntime on the CPU, whatever ``device``."""
        return OnnxPredictor(self.path, self.export, self.settings)


class OnnxPredictor:
    def __init__(self, path: str, export: dict, settings: ServeConfig):
        from plait.export.onnx.runner import ExportedModel

        # Two sessions of one graph. A micro-batch of single rows is a few microseconds of work
        # per operator: one thread, so that no pool is woken for it and the server's event loop
        # keeps the other cores (not measured against the default alone). A large batch gets
        # onnxruntime's threads.
        self.small = ExportedModel(path, threads=1)
        self.large = ExportedModel(path)
        self.small_rows = settings.max_batch_size
        self.inputs = [ServedFeature(i["feature"], i["name"], i["feature_type"], i.get("metadata", {}))
                       for i in export["inputs"]]
        self.outputs = [ServedFeature(o["name"], o["column"], o["type"]) for o in export.get("output_features", [])]
        self.batch_size = settings.batch_piece_rows
        self._numbers = {i["name"] for i in export["inputs"] if i["type"] == "double"}

    def predict(self, columns: dict[str, list]) -> dict[str, Any]:
        rows = len(next(iter(columns.values())))
        model = self.small if rows <= self.small_rows else self.large
        # Checked numbers are floats or None, which NumPy reads as NaN, the graph's missing value;
        # the runner writes the other columns as the graph takes them.
        feeds = {column: np.array(values, dtype=np.float64) if column in self._numbers else values
                 for column, values in columns.items()}
        return model.predict(feeds)


def export_settings(settings: dict | None) -> ServeConfig:
    """The ``serve`` settings of an export: its flags alone (an export holds no config)."""
    from pydantic import ValidationError

    from plait.config.base import format_errors

    try:
        return ServeConfig.model_validate(settings or {})
    except ValidationError as err:
        raise ConfigError([f"serve.{line}" for line in format_errors(err, settings, ServeConfig)]) from None
