"""Preprocessed Arrow columns as model-ready tensors, by feature type.

Training batches, validation, prediction and evaluation all read the cache (or freshly
transformed columns) through :func:`table_tensors`, so a feature type's tensor layout is written
once, here.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from plait.utils.tokens import CACHED_EMBEDDING


PARTS = {"date": 9, "h3": 19}
"""The small integers each value of these types is preprocessed into (plait.features.date, .h3)."""


def column_tensor(column: pa.ChunkedArray | pa.Array, meta: dict) -> torch.Tensor:
    """One preprocessed column as a tensor, by feature type."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = meta["type"]
    if kind == "number":
        return torch.from_numpy(column.to_numpy(zero_copy_only=False).astype(np.float32))
    if kind == "binary":
        return torch.from_numpy(column.to_numpy(zero_copy_only=False).astype(np.float32))
    if kind == "category":
        return torch.from_numpy(column.to_numpy(zero_copy_only=False).astype(np.int64))
    if kind == "text" and CACHED_EMBEDDING in meta:  # an encoder's output, computed at preprocessing
        flat = pc.list_flatten(column).to_numpy().astype(np.float32)
        return torch.from_numpy(flat.reshape(len(column), meta[CACHED_EMBEDDING]))
    if kind in ("text", "sequence"):  # token ids, 0 for padding
        return torch.from_numpy(_padded(column, meta["sequence_length"], 0, meta.get("padding") == "left", np.int64))
    if kind in ("vector", "category_distribution"):
        flat = pc.list_flatten(column).to_numpy().astype(np.float32)
        return torch.from_numpy(flat.reshape(len(column), meta["vector_size"]))
    if kind == "timeseries":  # an input's padded steps are NaN (plait.features.timeseries)
        fill = meta["padding_value"] if meta.get("output") else np.nan
        return torch.from_numpy(_padded(column, meta["timeseries_length"], fill, meta.get("padding") == "left",
                                        np.float32))
    if kind == "audio":
        matrix = _padded(column, meta["frames"] * meta["channels"], np.nan, False, np.float32)
        return torch.from_numpy(matrix.reshape(len(column), meta["frames"], meta["channels"]))
    if kind == "image":
        return _images(column, meta)
    if kind == "set":
        return _multi_hot(column, meta)
    if kind in PARTS:
        flat = pc.list_flatten(column).to_numpy().astype(np.int64)
        return torch.from_numpy(flat.reshape(len(column), PARTS[kind]))
    if kind == "bag":
        return _counts(column, meta)
    raise ValueError(f"no tensor conversion for feature type {kind!r}")


def _images(column: pa.Array, meta: dict) -> torch.Tensor:
    """Stored images (height x width x channels bytes each) as uint8 [rows, channels, height,
    width]; an output's masks (a class id per pixel) as int64 [rows, height, width]."""
    height, width = meta["height"], meta["width"]
    pixels = np.frombuffer(column.buffers()[1], np.uint8, offset=column.offset * column.type.byte_width,
                           count=len(column) * column.type.byte_width) if len(column) else np.zeros(0, np.uint8)
    if meta.get("output"):
        return torch.from_numpy(pixels.reshape(len(column), height, width).astype(np.int64))
    images = torch.from_numpy(pixels.copy()).reshape(len(column), height, width, meta["num_channels"])
    return images.permute(0, 3, 1, 2)  # channels-last in memory, which CPU convolutions prefer


def _padded(column: pa.Array, width: int, fill: float, left: bool, dtype) -> np.ndarray:
    """Rows of a list column as a [rows, width] matrix, padded with ``fill`` on the left or the
    right (a column stored padded already, as caches before lists were, is read as it is)."""
    flat = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(dtype)
    if pa.types.is_fixed_size_list(column.type):
        return flat.reshape(len(column), width)
    lengths = pc.list_value_length(column).fill_null(0).to_numpy().astype(np.int64)
    matrix = np.full((len(column), width), fill, dtype=dtype)
    columns = np.arange(width)
    matrix[columns >= (width - lengths)[:, None] if left else columns < lengths[:, None]] = flat
    return matrix


def _multi_hot(column: pa.Array, meta: dict) -> torch.Tensor:
    """A set column as a multi-hot matrix, one column per vocabulary item. An output's matrix has
    one more, trailing column: how many of the row's items training never saw (the transform writes
    them as the id ``len(vocabulary)``). The loss ignores that column; the metrics count those
    items as missed."""
    vocabulary = len(meta["vocabulary"])
    width = max(1, vocabulary)
    output = bool(meta.get("output"))
    multi_hot = np.zeros((len(column), width + output), dtype=np.float32)
    rows = pc.list_parent_indices(column).to_numpy()
    ids = pc.list_flatten(column).to_numpy()
    seen = ids < vocabulary
    multi_hot[rows[seen], ids[seen]] = 1.0
    if output:
        multi_hot[:, width] = np.bincount(rows[~seen], minlength=len(column))
    return torch.from_numpy(multi_hot)


def _counts(column: pa.Array, meta: dict) -> torch.Tensor:
    """A bag column (token ids, one per occurrence) as a [rows, vocabulary] matrix of counts."""
    width = max(1, len(meta["vocabulary"]))
    keys = pc.list_parent_indices(column).to_numpy().astype(np.int64) * width + pc.list_flatten(column).to_numpy()
    cells, counts = np.unique(keys, return_counts=True)
    matrix = np.zeros((len(column), width), dtype=np.float32)
    matrix.reshape(-1)[cells] = counts
    return torch.from_numpy(matrix)


def trim_padding(batch: dict[str, torch.Tensor], names) -> dict[str, torch.Tensor]:
    """``batch`` with the token matrices of ``names`` (padded on the right) cut after the batch's
    longest row: per-batch padding, so a batch of short texts costs what short texts cost."""
    trimmed = dict(batch)
    for name in names:
        tokens = batch[name]
        used = torch.nonzero(tokens.any(0))
        length = int(used[-1]) + 1 if used.numel() else 1
        if length < tokens.shape[1]:
            trimmed[name] = tokens[:, :length]
    return trimmed


def table_tensors(table: pa.Table, features: dict, names: list[str]) -> dict[str, torch.Tensor]:
    return {name: column_tensor(table[name], features[name]) for name in names}
