"""Shipping a trained model outside plait.

``export_model`` writes one of :data:`FORMATS`, Ludwig's names for them: ``onnx`` (the network
with its preprocessing and postprocessing in one graph, run by onnxruntime and numpy alone),
``torch_export`` (the network as a ``torch.export`` program) and ``safetensors`` (the weights with
the config and preprocessing metadata: a plait model folder). Each format is a module of this
package with two functions: ``refusals(model)``, every reason the model cannot be written in it
(checked before any file is), and ``write(model, folder)``. ``mlflow`` writes an MLflow model.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from plait.errors import ModelError, UsageError

FORMATS = {"onnx": "plait.export.onnx", "torch_export": "plait.export.torch_export",
           "safetensors": "plait.export.safetensors"}
"""Ludwig's ``export_model --format`` names, and the module that writes each."""
DESCRIPTION = "export.json"
"""Written last into every export folder: what it holds (format, inputs, outputs)."""


def export_model(model, output_path: str | os.PathLike, format: str = "onnx") -> Path | str:
    """Write ``model`` (a trained or loaded :class:`plait.Model`) in ``format`` to the new
    folder ``output_path`` (a local path or an fsspec URL). Nothing is written when the model
    cannot be exported; the folder appears whole or not at all. Returns where it is."""
    from plait.utils.folder import Folder, built_locally

    if format not in FORMATS:
        raise UsageError(f"export format {format!r} is not one of {', '.join(FORMATS)}")
    model.require_trained()
    exporter = importlib.import_module(FORMATS[format])
    problems = exporter.refusals(model)
    if problems:
        raise ModelError(f"this model cannot be exported to {format}: " + "; ".join(problems))
    folder = Folder(os.path.expanduser(output_path)).resolved()
    if folder.names():  # a folder with something in it, or a file
        raise UsageError(f"--output_path {str(output_path)!r} exists and is not an empty folder: give a new path, "
                         "or remove it first")
    with built_locally(folder, marker=DESCRIPTION) as building:
        exporter.write(model, building)
    return folder.local() if folder.is_local else folder.url
