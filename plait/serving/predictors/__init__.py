"""What a server predicts with, chosen by what the folder it is given holds.

A plait model folder is served by the same torch predictor as ``plait predict``
(``plait_model.py``); an ONNX export (``plait export_model --format onnx``: a folder whose
export.json says so) by onnxruntime (``onnx_export.py``). Both give the server the same few
things: the serve settings, the features a request names, where to serve by default, and a
predictor of checked columns. The choice is made here, in :func:`open_folder`, and nowhere else.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from plait.config.serve import ServeConfig

EXPORT_DESCRIPTION = "export.json"


@dataclass(frozen=True)
class ServedFeature:
    """A feature as the server sees it: its name, the column requests hold it in, its type and
    the metadata checking one of its values reads."""

    name: str
    column: str
    type: str
    metadata: dict = field(default_factory=dict)


class ServingPredictor(Protocol):
    inputs: list[ServedFeature]
    outputs: list[ServedFeature]
    batch_size: int
    """The most rows one call of :meth:`predict` computes at once."""

    def predict(self, columns: dict[str, list]) -> dict[str, Any]:
        """The prediction columns (NumPy arrays, or Arrow arrays) for checked values, one list
        per input column (``ServedModel.check_row`` / ``check_batch``). A
        :class:`~plait.errors.DataError` refuses rows the features cannot read."""

    # A predictor that can explain its predictions (the torch model's) also has
    # ``explain(columns, output, steps, every_class) -> pa.Table``; an ONNX export has no gradients.


class ModelFolder(Protocol):
    path: str
    settings: ServeConfig
    """The ``serve`` settings, flags laid over what the folder holds."""

    def backend(self, flag: str | None) -> str:
        """``local`` or ``ray``: where ``plait serve --backend <flag>`` serves this folder."""

    def predictor(self, device: str | None = None) -> ServingPredictor:
        """The predictor, loaded (once per server, or per Ray Serve replica)."""


def open_folder(path: str | os.PathLike, settings: dict | None = None) -> ModelFolder:
    """The folder at ``path``, read and checked (a damaged one fails here, before a server
    listens): an ONNX export when it has an export.json of format onnx, else a plait model."""
    path = os.fspath(path)
    description = os.path.join(path, EXPORT_DESCRIPTION)
    if "://" not in path and os.path.isfile(description):
        with open(description) as f:
            export = json.load(f)
        from plait.serving.predictors.onnx_export import OnnxExportFolder

        return OnnxExportFolder(path, export, settings)
    from plait.serving.predictors.plait_model import PlaitModelFolder

    return PlaitModelFolder(path, settings)
