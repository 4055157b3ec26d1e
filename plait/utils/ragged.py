"""Variable-length rows (token ids, audio frames, series steps) as fixed-width matrices."""

from __future__ import annotations

import numpy as np


def pad(flat: np.ndarray, lengths: np.ndarray, length: int, pad_id: int | float, left: bool,
        dtype: type = np.int32) -> np.ndarray:
    """Scatter variable-length rows into a [rows, length] matrix, truncating long rows."""
    out = np.full((len(lengths), length), pad_id, dtype=dtype)
    if flat.size == 0:
        return out
    if lengths.max() <= length:  # nothing to truncate: scatter the rows through a mask, in order
        columns = np.arange(length)
        out[columns >= (length - lengths)[:, None] if left else columns < lengths[:, None]] = flat
        return out
    rows = np.repeat(np.arange(len(lengths)), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    position = np.arange(flat.size) - np.repeat(starts, lengths)
    keep = position < length
    if left:
        position = position + (length - np.minimum(lengths, length))[rows]
    out[rows[keep], position[keep]] = flat[keep]
    return out
