"""Vectorized string operations shared by the text, set and category features (Arrow compute)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Every character that is not a letter, digit, underscore or space becomes its own token.
_PUNCT = r"([^\p{L}\p{N}_\s])"


def as_strings(column: pa.Array) -> pa.Array:
    if pa.types.is_string(column.type):
        return column
    if pa.types.is_large_string(column.type) or pa.types.is_dictionary(column.type):
        return column.cast(pa.string())
    if pa.types.is_floating(column.type):
        # 3.0 -> "3": integers read as floats (because of missing values) keep their labels.
        whole = pc.equal(column, pc.floor(column))
        as_int = pc.if_else(whole, pc.cast(pc.if_else(whole, column, 0), pa.int64()).cast(pa.string()), None)
        return pc.coalesce(as_int, column.cast(pa.string()))
    return column.cast(pa.string())


def tokenize(strings: pa.Array, tokenizer: str, lowercase: bool) -> pa.ListArray:
    """Split each string into a list of tokens; nulls stay null."""
    if lowercase:
        strings = pc.utf8_lower(strings)
    if tokenizer == "space_punct":
        strings = pc.replace_substring_regex(strings, pattern=_PUNCT, replacement=r" \1 ")
    if tokenizer == "comma":
        tokens = pc.split_pattern(strings, pattern=",")
        flat = pc.utf8_trim_whitespace(pc.list_flatten(tokens))
        return _drop_empty(pa.ListArray.from_arrays(_offsets(tokens), flat))
    return _drop_empty(pc.utf8_split_whitespace(strings))


def _offsets(lists: pa.ListArray) -> pa.Array:
    lists = _plain_list(lists)
    return pc.subtract(lists.offsets, lists.offsets[0])


def _plain_list(lists):
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    return lists


def _drop_empty(tokens: pa.ListArray) -> pa.ListArray:
    """Remove empty tokens (from empty cells, or leading and trailing spaces)."""
    tokens = _plain_list(tokens)
    flat = pc.list_flatten(tokens)
    if not pc.any(pc.equal(flat, "")).as_py():
        return tokens
    keep = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)
    parents = pc.list_parent_indices(tokens).to_numpy()
    lengths = np.bincount(parents[keep], minlength=len(tokens))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    # Null cells stay null: from_arrays takes validity from a null offset.
    offsets = pa.array(offsets, mask=np.concatenate([~pc.is_valid(tokens).to_numpy(zero_copy_only=False), [False]]))
    return pa.ListArray.from_arrays(offsets, flat.filter(pa.array(keep)))


def encode_tokens(tokens: pa.ListArray, vocabulary: list[str], unknown: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Token lists -> (flat vocabulary indices, row offsets). Unknown tokens map to ``unknown``,
    or are dropped when it is None."""
    tokens = _plain_list(tokens)
    lengths = pc.list_value_length(tokens).fill_null(0).to_numpy().astype(np.int64)
    index = pc.index_in(pc.list_flatten(tokens), value_set=pa.array(vocabulary, pa.string()))
    if unknown is not None:
        return pc.fill_null(index, unknown).to_numpy().astype(np.int32), lengths
    rows = np.repeat(np.arange(len(lengths)), lengths)
    known = pc.is_valid(index).to_numpy(zero_copy_only=False)
    lengths = np.bincount(rows[known], minlength=len(lengths)).astype(np.int64)
    return pc.drop_null(index).to_numpy().astype(np.int32), lengths


def pad(flat: np.ndarray, lengths: np.ndarray, length: int, pad_id: int, left: bool) -> np.ndarray:
    """Scatter variable-length rows into a [rows, length] matrix, truncating long rows."""
    out = np.full((len(lengths), length), pad_id, dtype=np.int32)
    if flat.size == 0:
        return out
    rows = np.repeat(np.arange(len(lengths)), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    position = np.arange(flat.size) - np.repeat(starts, lengths)
    keep = position < length
    if left:
        position = position + (length - np.minimum(lengths, length))[rows]
    out[rows[keep], position[keep]] = flat[keep]
    return out


def fixed_size_list(matrix: np.ndarray, value_type: pa.DataType) -> pa.FixedSizeListArray:
    values = pa.array(matrix.reshape(-1), type=value_type)
    return pa.FixedSizeListArray.from_arrays(values, matrix.shape[1])
