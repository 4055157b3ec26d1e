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
    """Split each string into a list of tokens; nulls stay null.

    space: maximal runs of non-whitespace; space_punct: the same, with every character that is
    not a letter, digit or underscore a token of its own; comma: comma-separated, trimmed.
    Empty tokens are dropped. ASCII rows take a byte-level path (numpy) that gives exactly the
    tokens of the general Arrow path, which handles the other rows.
    """
    if tokenizer in ("space", "space_punct") and pa.types.is_string(strings.type):
        strings = _contiguous(strings)
        ascii_rows = pc.fill_null(pc.string_is_ascii(strings), True)
        if pc.all(ascii_rows).as_py() is not False:
            return _ascii_tokenize(strings, tokenizer == "space_punct", lowercase)
        if pc.any(ascii_rows).as_py():
            return _splice(ascii_rows, strings, tokenizer, lowercase)
    return _arrow_tokenize(strings, tokenizer, lowercase)


def _arrow_tokenize(strings: pa.Array, tokenizer: str, lowercase: bool) -> pa.ListArray:
    if lowercase:
        strings = pc.utf8_lower(strings)
    if tokenizer == "space_punct":
        strings = pc.replace_substring_regex(strings, pattern=_PUNCT, replacement=r" \1 ")
    if tokenizer == "comma":
        tokens = pc.split_pattern(strings, pattern=",")
        flat = pc.utf8_trim_whitespace(pc.list_flatten(tokens))
        return _drop_empty(pa.ListArray.from_arrays(_offsets(tokens), flat))
    # Trimmed first: utf8_split_whitespace reads past a string that ends in whitespace (Arrow
    # 26), so its last token could depend on the bytes that follow it in the buffer.
    return _drop_empty(pc.utf8_split_whitespace(pc.utf8_trim_whitespace(strings)))


# ASCII whitespace as utf8_split_whitespace sees it: \t \n \v \f \r, the separators 0x1c-0x1f, space.
_SPACE_RANGES = ((9, 13), (28, 32))


def _ascii_tokenize(strings: pa.StringArray, punct: bool, lowercase: bool) -> pa.ListArray:
    """``tokenize`` for ASCII strings on the bytes: a token starts at each non-space byte that
    does not continue a run (of non-space bytes; with ``punct``, of letters, digits and ``_``)
    begun earlier in the same string. The tokens are the non-space bytes, cut at those starts."""
    nulls = pc.is_null(strings) if strings.null_count else None
    if nulls is not None:
        strings = pc.fill_null(strings, "")
    if lowercase:
        strings = pc.ascii_lower(strings)
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], np.int32, n + 1, strings.offset * 4)
    first, size = int(offsets[0]), int(offsets[-1] - offsets[0])
    data = np.frombuffer(strings.buffers()[2], np.uint8, size, first) if size else np.zeros(0, np.uint8)
    offsets = offsets - first
    keep = np.ones(size, dtype=bool)
    for low, high in _SPACE_RANGES:
        keep &= (data - np.uint8(low)) > np.uint8(high - low)
    if punct:
        glue = (data - np.uint8(48)) <= np.uint8(9)  # digits
        glue |= ((data | np.uint8(32)) - np.uint8(97)) <= np.uint8(25)  # letters
        glue |= data == np.uint8(95)  # underscore
    else:
        glue = keep
    continues = np.zeros(size, dtype=bool)
    np.logical_and(glue[1:], glue[:-1], out=continues[1:])
    continues[offsets[:-1][offsets[:-1] < size]] = False  # no run crosses into the next string
    starts = np.flatnonzero(keep & ~continues)
    kept = np.cumsum(keep, dtype=np.int32)
    token_offsets = np.empty(len(starts) + 1, dtype=np.int32)
    token_offsets[:-1] = kept[starts] - 1
    token_offsets[-1] = kept[-1] if size else 0
    values = pa.StringArray.from_buffers(len(starts), pa.py_buffer(token_offsets), pa.py_buffer(data[keep]))
    list_offsets = pa.array(np.searchsorted(starts, offsets).astype(np.int32))
    return pa.ListArray.from_arrays(list_offsets, values, mask=nulls)


def _splice(ascii_rows: pa.BooleanArray, strings: pa.StringArray, tokenizer: str, lowercase: bool) -> pa.ListArray:
    """Tokenize ASCII rows on the byte path, the others on the Arrow path, in the input order."""
    fast = ascii_rows.to_numpy(zero_copy_only=False)
    position = np.empty(len(fast), dtype=np.int64)
    position[fast] = np.arange(int(fast.sum()))
    position[~fast] = np.arange(int(fast.sum()), len(fast))
    parts = [
        _ascii_tokenize(strings.filter(ascii_rows), tokenizer == "space_punct", lowercase),
        _plain_list(_arrow_tokenize(strings.filter(pc.invert(ascii_rows)), tokenizer, lowercase)),
    ]
    return pa.concat_arrays(parts).take(pa.array(position))


def _contiguous(column):
    """One Array from a ChunkedArray, copying only when it has several chunks."""
    if not isinstance(column, pa.ChunkedArray):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks() if column.num_chunks else pa.array([], column.type)


def _offsets(lists: pa.ListArray) -> pa.Array:
    lists = _plain_list(lists)
    return pc.subtract(lists.offsets, lists.offsets[0])


def _plain_list(lists):
    return _contiguous(lists)


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


def fixed_size_list(matrix: np.ndarray, value_type: pa.DataType) -> pa.FixedSizeListArray:
    values = pa.array(matrix.reshape(-1), type=value_type)
    return pa.FixedSizeListArray.from_arrays(values, matrix.shape[1])
