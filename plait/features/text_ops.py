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
    not a letter, digit or underscore a token of its own; comma, underscore: split on that
    character, each piece trimmed; characters: every character (spaces too); untokenized: the
    whole string; stripped: the whole string, trimmed. Empty tokens are dropped. space and
    space_punct run on the UTF-8 bytes (numpy), giving exactly the tokens of the Arrow-kernel path
    (``_arrow_tokenize``) at a fraction of the cost.
    """
    if tokenizer in ("space", "space_punct") and pa.types.is_string(strings.type):
        return _byte_tokenize(_contiguous(strings), tokenizer == "space_punct", lowercase)
    if tokenizer == "characters":
        return _characters(_contiguous(strings).cast(pa.string()), lowercase)
    if tokenizer in ("untokenized", "stripped"):
        return _whole(_contiguous(strings), tokenizer == "stripped", lowercase)
    return _arrow_tokenize(strings, tokenizer, lowercase)


def _whole(strings: pa.Array, strip: bool, lowercase: bool) -> pa.ListArray:
    """Each string as its one token (none when empty); nulls stay null."""
    strings = pc.utf8_lower(strings) if lowercase else strings
    strings = pc.utf8_trim_whitespace(strings) if strip else strings
    offsets = pa.array(np.arange(len(strings) + 1, dtype=np.int32),
                       mask=np.append(pc.is_null(strings).to_numpy(zero_copy_only=False), False))
    return _drop_empty(pa.ListArray.from_arrays(offsets, pc.fill_null(strings, "")))


def _characters(strings: pa.StringArray, lowercase: bool) -> pa.ListArray:
    """Each string as the list of its characters: a token starts at every UTF-8 byte that does not
    continue a multi-byte character."""
    nulls = pc.is_null(strings) if strings.null_count else None
    strings = pc.fill_null(strings, "") if nulls is not None else strings
    strings = pc.utf8_lower(strings) if lowercase else strings
    offsets, data = _bytes(strings)
    starts = np.flatnonzero((data & np.uint8(0xC0)) != np.uint8(0x80))
    token_offsets = np.append(starts, len(data)).astype(np.int32)
    values = pa.StringArray.from_buffers(len(starts), pa.py_buffer(token_offsets), pa.py_buffer(data.copy()))
    list_offsets = np.searchsorted(starts, offsets).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(list_offsets), values, mask=nulls)


def _arrow_tokenize(strings: pa.Array, tokenizer: str, lowercase: bool) -> pa.ListArray:
    if lowercase:
        strings = pc.utf8_lower(strings)
    if tokenizer == "space_punct":
        strings = pc.replace_substring_regex(strings, pattern=_PUNCT, replacement=r" \1 ")
    if tokenizer in ("comma", "underscore"):
        strings = _contiguous(strings)  # a column read in several chunks; from_arrays needs one array
        tokens = pc.split_pattern(strings, pattern="," if tokenizer == "comma" else "_")
        flat = pc.utf8_trim_whitespace(pc.list_flatten(tokens))
        return _drop_empty(pa.ListArray.from_arrays(_offsets(tokens), flat))
    # Trimmed first: utf8_split_whitespace reads past a string that ends in whitespace (Arrow
    # 26), so its last token could depend on the bytes that follow it in the buffer.
    return _drop_empty(pc.utf8_split_whitespace(pc.utf8_trim_whitespace(strings)))


# ASCII whitespace as utf8_split_whitespace sees it: \t \n \v \f \r, the separators 0x1c-0x1f, space.
_SPACE_RANGES = ((9, 13), (28, 32))
_BLOCK_BYTES = 1 << 20
"""The byte tokenizer works through blocks of whole strings of about this size, so that its
temporaries stay small and in cache."""
_SPACE, _PUNCT_CHAR, _WORD = 0, 1, 2
_CHAR_CLASSES = np.full(0x110000, -1, dtype=np.int8)
"""Class of each code point met so far (-1: not yet), as the Arrow-kernel path treats it."""


def _byte_tokenize(strings: pa.StringArray, punct: bool, lowercase: bool) -> pa.ListArray:
    """``tokenize`` on the UTF-8 bytes: a token starts at each non-space character that does not
    continue a run (of non-space characters; with ``punct``, of letters, digits and ``_``) begun
    earlier in the same string. The tokens are the non-space bytes, cut at those starts."""
    nulls = pc.is_null(strings) if strings.null_count else None
    if nulls is not None:
        strings = pc.fill_null(strings, "")
    if lowercase:
        strings = pc.ascii_lower(strings) if _bytes(strings)[1].max(initial=0) < 0x80 else pc.utf8_lower(strings)
    offsets, data = _bytes(strings)
    n = len(strings)
    cuts = np.searchsorted(offsets, np.arange(_BLOCK_BYTES, len(data), _BLOCK_BYTES))
    bounds = np.unique(np.concatenate([[0], cuts, [n]]))
    chars, lengths, row_tokens = [], [], []
    tokens = 0
    for r0, r1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        o0, o1 = int(offsets[r0]), int(offsets[r1])
        block_chars, block_lengths, block_rows = _tokenize_block(data[o0:o1], offsets[r0:r1] - o0, punct)
        chars.append(block_chars)
        lengths.append(block_lengths)
        row_tokens.append(block_rows + tokens)
        tokens += len(block_lengths)
    list_offsets = np.concatenate(row_tokens + [[tokens]]).astype(np.int32)
    token_offsets = np.empty(tokens + 1, dtype=np.int32)
    token_offsets[0] = 0
    position = 1
    for part in lengths:
        np.cumsum(part, out=token_offsets[position : position + len(part)])
        token_offsets[position : position + len(part)] += token_offsets[position - 1]
        position += len(part)
    kept = np.concatenate(chars) if chars else np.zeros(0, np.uint8)
    values = pa.StringArray.from_buffers(tokens, pa.py_buffer(token_offsets), pa.py_buffer(kept))
    return pa.ListArray.from_arrays(pa.array(list_offsets), values, mask=nulls)


def _bytes(strings: pa.StringArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets from 0, UTF-8 bytes) of a string array, without copying."""
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], np.int32, n + 1, strings.offset * 4)
    base, size = int(offsets[0]), int(offsets[-1] - offsets[0])
    data = np.frombuffer(strings.buffers()[2], np.uint8, size, base) if size else np.zeros(0, np.uint8)
    return offsets - base, data


def _tokenize_block(data: np.ndarray, row_starts: np.ndarray, punct: bool):
    """One block of whole strings: (their non-space bytes, token lengths, tokens before each row)."""
    keep = np.ones(len(data), dtype=bool)
    for low, high in _SPACE_RANGES:
        keep &= (data - np.uint8(low)) > np.uint8(high - low)
    if punct:
        glue = (data - np.uint8(48)) <= np.uint8(9)  # digits
        glue |= ((data | np.uint8(32)) - np.uint8(97)) <= np.uint8(25)  # letters
        glue |= data == np.uint8(95)  # underscore
    else:
        glue = keep
    # continues[p]: byte p extends the token of byte p - 1 (never across strings)
    continues = np.zeros(len(data) + 1, dtype=bool)
    np.logical_and(glue[1:], glue[:-1], out=continues[1:-1])
    if data.max(initial=0) >= 0x80:
        _classify_multibyte(data, keep, glue, continues, punct)
    continues[row_starts] = False
    starts = np.flatnonzero(keep & ~continues[:-1])
    ends = np.flatnonzero(keep & ~continues[1:])
    return np.compress(keep, data), (ends - starts + 1).astype(np.int32), np.searchsorted(starts, row_starts)


def _classify_multibyte(data: np.ndarray, keep: np.ndarray, glue: np.ndarray, continues: np.ndarray, punct: bool) -> None:
    """Give every byte of each multi-byte character its character's class (in place), and make
    continuation bytes continue their character."""
    high = np.flatnonzero(data >= 0x80)
    lead = data[high] >= 0xC0
    starts = high[lead]
    first = data[starts].astype(np.int32)
    size = 2 + (first >= 0xE0) + (first >= 0xF0)
    follow = [data[np.minimum(starts + k, len(data) - 1)].astype(np.int32) & 0x3F for k in (1, 2, 3)]
    code = np.where(
        size == 2,
        ((first & 0x1F) << 6) | follow[0],
        np.where(size == 3, ((first & 0x0F) << 12) | (follow[0] << 6) | follow[1], ((first & 0x07) << 18) | (follow[0] << 12) | (follow[1] << 6) | follow[2]),
    )
    # Malformed bytes (a string array need not hold valid UTF-8) count as U+FFFD.
    code[(code > 0x10FFFF) | ((code >= 0xD800) & (code < 0xE000))] = 0xFFFD
    kind = _char_classes(code)
    # Glue within a character is set by continues below; between characters only word characters
    # (space_punct) or non-space characters (space) stick together.
    for k in range(4):
        at = size > k
        positions = starts[at] + k
        keep[positions] = kind[at] != _SPACE
        glue[positions] = (kind[at] == _WORD) if punct else (kind[at] != _SPACE)
    np.logical_and(glue[1:], glue[:-1], out=continues[1:-1])
    continues[high[~lead]] = True


def _char_classes(code: np.ndarray) -> np.ndarray:
    """Class of each code point (space, punctuation or word), probing the Arrow-kernel path once
    for each character not met before, so both paths always agree."""
    classes = _CHAR_CLASSES[code]
    if (classes < 0).any():
        new = np.unique(code[classes < 0])
        probes = pa.array([f"a{chr(c)}a" for c in new.tolist()], pa.string())  # new characters, not rows
        counts = pc.list_value_length(_arrow_tokenize(probes, "space_punct", False)).to_numpy()
        # "a?a" is one token when ? is a word character, two when it is a space, else three.
        _CHAR_CLASSES[new] = np.where(counts == 1, _WORD, np.where(counts == 2, _SPACE, _PUNCT_CHAR))
        classes = _CHAR_CLASSES[code]
    return classes


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
        return pc.fill_null(index, unknown).to_numpy().astype(np.int32, copy=False), lengths
    rows = np.repeat(np.arange(len(lengths)), lengths)
    known = pc.is_valid(index).to_numpy(zero_copy_only=False)
    lengths = np.bincount(rows[known], minlength=len(lengths)).astype(np.int64)
    return pc.drop_null(index).to_numpy().astype(np.int32), lengths


def fixed_size_list(matrix: np.ndarray, value_type: pa.DataType) -> pa.FixedSizeListArray:
    values = pa.array(matrix.reshape(-1), type=value_type)
    return pa.FixedSizeListArray.from_arrays(values, matrix.shape[1])


def row_lists(flat: np.ndarray, lengths: np.ndarray, value_type: pa.DataType) -> pa.ListArray:
    """Variable-length rows: each row's ``lengths`` values of ``flat``, in order."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, value_type))


def first_values(flat: np.ndarray, lengths: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(flat values, row lengths) of each row's first ``length`` values."""
    if lengths.size == 0 or lengths.max() <= length:
        return flat, lengths
    within = np.arange(flat.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return flat[within < length], np.minimum(lengths, length)
