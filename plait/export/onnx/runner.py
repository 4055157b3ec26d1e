"""Run a model that plait exported to ONNX, with numpy and onnxruntime alone.

This file is copied into every ONNX export folder as ``plait_onnx.py``::

    import plait_onnx
    model = plait_onnx.load("path/to/export")
    columns = model.predict({"age": [31, None], "color": ["red", "blue"]})   # {"<output>_predictions": ...}

The graph holds the preprocessing: this module only writes each column's values in the element
type the graph takes (``export.json``): numbers as float64 (missing: NaN), everything else as
strings the way plait reads a cell (missing: the empty string; 3.0 as "3"; True as "true"), an
image as its decoded uint8 pixels, [rows, height, width, channels].
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import onnxruntime

MISSING_WORDS = {"", "nan", "na", "n/a", "null", "none", "-"}
"""Strings a number column reads as missing (plait.features.number)."""


class ExportedModel:
    def __init__(self, folder: str | os.PathLike, providers: list[str] | None = None, threads: int | None = None):
        with open(os.path.join(folder, "export.json")) as f:
            self.description = json.load(f)
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(os.path.join(folder, self.description["model"]), options,
                                                    providers=providers or ["CPUExecutionProvider"])
        self.inputs = self.description["inputs"]
        self.outputs = self.description["outputs"]

    @property
    def columns(self) -> list[str]:
        """The data columns the model reads."""
        return [i["name"] for i in self.inputs]

    def feeds(self, columns) -> dict[str, np.ndarray]:
        """The graph's inputs from ``columns`` (a mapping of column name to values, such as a
        pandas DataFrame or a dict of lists)."""
        missing = [name for name in self.columns if name not in columns]
        if missing:
            raise KeyError(f"the data lacks column(s) {', '.join(map(repr, missing))}; the model reads {self.columns}")
        return {i["name"]: COERCE[i["type"]](columns[i["name"]]) for i in self.inputs}

    def predict(self, columns) -> dict[str, np.ndarray]:
        """``plait predict``'s columns for the rows of ``columns``, in its order."""
        values = self.session.run(self.outputs, self.feeds(columns))
        return dict(zip(self.outputs, values))

    def predict_rows(self, rows: list[dict]) -> dict[str, np.ndarray]:
        """The same for a list of rows (one dict per row)."""
        return self.predict({name: [row.get(name) for row in rows] for name in self.columns})


def load(folder: str | os.PathLike, providers: list[str] | None = None, threads: int | None = None) -> ExportedModel:
    return ExportedModel(folder, providers, threads)


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def as_numbers(values) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiub":
        return values.astype(np.float64).reshape(-1)
    return np.array([_number(v) for v in _items(values)], dtype=np.float64)


def _number(value) -> float:
    if isinstance(value, str):
        return math.nan if value.strip().lower() in MISSING_WORDS else float(value)
    return math.nan if _is_missing(value) else float(value)


def as_strings(values) -> np.ndarray:
    return np.array([_string(v) for v in _items(values)], dtype=object)


def _string(value) -> str:
    if _is_missing(value):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))  # 3.0 -> "3": whole numbers read as floats keep their labels
    return str(value)


def as_integers(values) -> np.ndarray:
    return np.asarray(_items(values), dtype=np.int64).reshape(-1)


def as_images(values) -> np.ndarray:
    """Decoded images of one size: an array [rows, height, width, channels], or a list of
    [height, width, channels] arrays."""
    images = np.asarray(values if isinstance(values, np.ndarray) else np.stack(list(values)))
    return (images[..., None] if images.ndim == 3 else images).astype(np.uint8)


def _items(values) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


COERCE = {"double": as_numbers, "string": as_strings, "int64": as_integers, "uint8": as_images}
