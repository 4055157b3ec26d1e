"""Run a model that plait exported to ONNX, with numpy and onnxruntime alone.

This file is copied into every ONNX export folder as ``plait_onnx.py``::

    import plait_onnx
    model = plait_onnx.load("path/to/export")
    columns = model.predict({"age": [31, None], "color": ["red", "blue"]})   # {"<output>_predictions": ...}

The graph holds the preprocessing: this module only writes each column's values in the element
type the graph takes (``export.json``): numbers as float64 (missing: NaN), everything else as
strings the way plait reads a cell (missing: the empty string; 3.0 as "3"; True as "true"), an
image as its decoded uint8 pixels, [rows, height, width, channels], an H3 index as int64
(decimal or hex strings read; missing: -1, which no index is).

Two inputs are read here rather than in the graph, by the column's ``reader`` in export.json:
``tokens`` (text, set and bag features) fills a missing cell with the feature's fill value and
splits each cell with plait's tokenizer (standard ONNX has no punctuation rule), giving a string
matrix [rows, tokens] padded with ""; ``vector`` writes a list of numbers as the
space-separated string plait reads. An output listed under ``lists`` (a set's labels) comes
from the graph as a string matrix with "" where a row has no item, and is returned as a list per
row, as ``plait predict`` writes it; so is a vector output's matrix [rows, size].
"""

from __future__ import annotations

import json
import math
import os
import re

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
        return {i["name"]: READERS[i["reader"]](columns[i["name"]], i) if "reader" in i
                else COERCE[i["type"]](columns[i["name"]]) for i in self.inputs}

    def predict(self, columns) -> dict[str, np.ndarray]:
        """``plait predict``'s columns for the rows of ``columns``, in its order."""
        values = self.session.run(self.outputs, self.feeds(columns))
        lists = set(self.description.get("lists", ()))
        return {name: _lists(value) if name in lists else value for name, value in zip(self.outputs, values)}

    def predict_rows(self, rows: list[dict]) -> dict[str, np.ndarray]:
        """The same for a list of rows (one dict per row)."""
        return self.predict({name: [row.get(name) for row in rows] for name in self.columns})


def load(folder: str | os.PathLike, providers: list[str] | None = None, threads: int | None = None) -> ExportedModel:
    return ExportedModel(folder, providers, threads)


def _is_missing(value) -> bool:
    # pandas' NA and NaT by their type's name: this module cannot import pandas.
    return (value is None or (isinstance(value, float) and math.isnan(value))
            or type(value).__name__ in ("NAType", "NaTType"))


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


MISSING_INTEGER = -1
"""A missing H3 index: its reserved top bit set, which no index has."""


def as_integers(values) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        return values.astype(np.uint64).view(np.int64).reshape(-1)  # an uint64 index keeps its bits
    return np.array([_integer(v) for v in _items(values)], dtype=np.int64)


def _integer(value) -> int:
    """An index as plait.features.h3 reads it: an integer, or a string of 17 to 19 decimal digits or
    of up to 16 hex digits (0x allowed); as int64, the bits of one past 2**63 kept."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in MISSING_WORDS:
            return MISSING_INTEGER
        number = int(text, 10) if text.isdigit() and len(text) > 16 else int(text.removeprefix("0x"), 16)
    elif _is_missing(value):
        return MISSING_INTEGER
    else:
        number = int(value)
    return number - (1 << 64) if number >= 1 << 63 else number


def as_images(values) -> np.ndarray:
    """Decoded images of one size: an array [rows, height, width, channels], or a list of
    [height, width, channels] arrays."""
    images = np.asarray(values if isinstance(values, np.ndarray) else np.stack(list(values)))
    return (images[..., None] if images.ndim == 3 else images).astype(np.uint8)


def _items(values) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


COERCE = {"double": as_numbers, "string": as_strings, "int64": as_integers, "uint8": as_images}

_WORDS_AND_MARKS = re.compile(r"\w+|[^\w\s]")
"""space_punct: runs of letters, digits and underscores; every other non-space character alone."""


def tokenize(text: str, tokenizer: str, lowercase: bool) -> list[str]:
    """plait's word tokenizers (plait.features.text_ops.tokenize) on one cell; empty tokens dropped."""
    if lowercase:
        text = text.lower()
    if tokenizer == "space":
        return text.split()
    if tokenizer == "space_punct":
        return _WORDS_AND_MARKS.findall(text)
    if tokenizer in ("comma", "underscore"):
        return [piece.strip() for piece in text.split("," if tokenizer == "comma" else "_") if piece.strip()]
    if tokenizer == "characters":
        return list(text)
    whole = text.strip() if tokenizer == "stripped" else text
    return [whole] if whole else []


def as_tokens(values, column: dict) -> np.ndarray:
    """[rows, tokens] strings, "" after each row's last token (at least one column)."""
    fill = column.get("fill_value")
    rows = []
    for value in _items(values):
        if _is_missing(value):
            value = fill
        rows.append([] if value is None else tokenize(_string(value), column["tokenizer"], column["lowercase"]))
    matrix = np.full((len(rows), max([1, *map(len, rows)])), "", dtype=object)
    for i, tokens in enumerate(rows):
        matrix[i, : len(tokens)] = tokens
    return matrix


def as_vectors(values, column: dict) -> np.ndarray:
    """Space-separated numbers, as plait reads a vector cell; a list or array is written so."""
    return np.array([" ".join(map(repr, map(float, v))) if isinstance(v, (list, tuple, np.ndarray)) else _string(v)
                     for v in _items(values)], dtype=object)


READERS = {"tokens": as_tokens, "vector": as_vectors}


def _lists(matrix: np.ndarray) -> np.ndarray:
    """A list per row of a matrix: a string matrix's items but "" (no item), a number matrix's
    values (as plait predict writes a vector: an array per row)."""
    out = np.empty(len(matrix), dtype=object)
    out[:] = [[item for item in row if item != ""] for row in matrix.tolist()] if matrix.dtype == object else list(matrix)
    return out
