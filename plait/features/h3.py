"""H3 features: a 64-bit H3 cell index (an integer, or its hex string) as Ludwig's nineteen
numbers: mode, edge, resolution, base cell, and the cell's digit at each of the 15 resolutions
(7 past its own). The bits are read with numpy, without the h3 library.

Bit layout (from the most significant): 1 reserved bit (0), 4 bits of mode (1: a cell; 2: a
directed edge, whose 3 edge bits say which), 3 edge bits, 4 bits of resolution, 7 bits of base
cell (0 to 121), then 15 digits of 3 bits, 0 to 6 up to the resolution and 7 after it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features import stats as st
from plait.features.base import FeatureProcessor
from plait.features.number import MISSING_WORDS
from plait.features.text_ops import as_strings, fixed_size_list

COMPONENTS = 19
"""mode, edge, resolution, base cell and 15 digits."""
_DIGITS = 15
_FLOAT_EXACT = 2**53
"""Integers above this are not exact in float64, and every H3 index is above it."""
_HEX_VALUES = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate("0123456789abcdef"):
    _HEX_VALUES[ord(_c)] = _HEX_VALUES[ord(_c.upper())] = _i


class H3Processor(FeatureProcessor):
    type = "h3"

    def prepare(self, column: pa.Array) -> pa.Array:
        """The indexes as int64; nulls mark missing values."""
        values, missing, unread = read_indexes(column)
        if pa.types.is_floating(column.type) and unread.any():
            # Every H3 index is above 2**53: a float column (pandas makes one of an integer column
            # with a missing value) has already rounded them.
            raise DataError(f"h3 feature {self.name!r}: column {self.column!r} holds floating-point numbers, which "
                            f"cannot hold 64-bit H3 indexes exactly (pandas turns an integer column with a missing "
                            f"value into floats); use the nullable Int64 dtype (df[column].astype('Int64')), "
                            f"integers in the file, or hex strings")
        bad = ~missing & (unread | invalid_indexes(values))
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            why = "not an integer or a hex string" if unread[first] else index_problem(int(values[first]))
            raise DataError(
                f"h3 feature {self.name!r}: {int(bad.sum())} value(s) of column {self.column!r} are not H3 cell "
                f"indexes, such as {column[first].as_py()!r} ({why}); give 64-bit H3 indexes, as integers "
                f"(622236723497533439) or hex strings (8a2a1072b59ffff)")
        return pa.array(values, pa.int64(), mask=missing)

    def partial_stats(self, column: pa.Array):
        return st.value_counts(column) if self.preprocessing.missing_value_strategy == "fill_with_mode" else None

    def merge_stats(self, a, b):
        return st.merge_counts(a, b)

    def finalize(self, counts) -> dict:
        fill = self.fill_value(counts)
        values, _, unread = read_indexes(pa.array([str(fill)]))
        if unread[0] or invalid_indexes(values)[0]:
            why = "not an integer or a hex string" if unread[0] else index_problem(int(values[0]))
            raise DataError(f"h3 feature {self.name!r}: preprocessing.fill_value {fill!r} is not an H3 cell index "
                            f"({why})")
        return {"fill_value": int(values[0])}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        values = pc.fill_null(column, metadata["fill_value"]).to_numpy(zero_copy_only=False)
        return fixed_size_list(_parts(values), pa.uint8())


_FIELDS = [(59, 0xF), (56, 0x7), (52, 0xF), (45, 0x7F)] + [(45 - 3 * i, 0x7) for i in range(1, _DIGITS + 1)]
"""(shift, mask) of mode, edge, resolution, base cell and each digit."""
_DIGIT_LOW_BITS = np.uint64(sum(1 << 3 * k for k in range(_DIGITS)))
"""The lowest bit of each of the 15 digits."""


def index_components(values: np.ndarray) -> np.ndarray:
    """[rows, 19] int64: mode, edge, resolution, base cell and the 15 digits of each index."""
    return _parts(values).astype(np.int64)


def _parts(values: np.ndarray) -> np.ndarray:
    """``index_components`` as uint8, which holds every part: written a byte a part, which is
    several times faster than filling an int64 matrix column by column."""
    bits = _as_bits(values)
    out = np.empty((len(bits), COMPONENTS), dtype=np.uint8)
    for j, (shift, mask) in enumerate(_FIELDS):
        out[:, j] = (bits >> np.uint64(shift)) & np.uint64(mask)
    return out


def _checks(values: np.ndarray) -> list[tuple[np.ndarray, str]]:
    """(where it fails, what it says) of each rule an H3 cell or directed edge index follows; the
    text names the parts of an index as {mode}, {edge}, {base} and {resolution}.

    The rules are read from the 64-bit values themselves, never a [rows, 19] matrix, as every
    value of a column is checked: a digit is 7 where its three bits are all set."""
    bits = np.asarray(values).astype(np.uint64)
    mode, edge, resolution, base = ((bits >> np.uint64(shift)) & np.uint64(mask) for shift, mask in _FIELDS[:4])
    digits = bits & np.uint64((1 << 3 * _DIGITS) - 1)
    sevens = digits & (digits >> np.uint64(1)) & (digits >> np.uint64(2)) & _DIGIT_LOW_BITS  # a bit per digit 7
    # a bit per digit past the resolution: the lowest 15 - resolution digits
    past = _DIGIT_LOW_BITS & ((np.uint64(1) << (np.uint64(3) * (np.uint64(_DIGITS) - resolution))) - np.uint64(1))
    return [
        (values < 0, "its reserved top bit is set"),
        ((mode != 1) & (mode != 2), "mode {mode}, where a cell has 1 and a directed edge 2"),
        ((mode == 1) & (edge != 0), "a cell (mode 1) with edge bits {edge}"),
        ((mode == 2) & ((edge == 0) | (edge == 7)), "a directed edge with edge {edge}, not 1 to 6"),
        (base > 121, "base cell {base}, past 121"),
        ((sevens & ~past) != 0, "a digit 7 within its resolution, {resolution}"),
        ((past & ~sevens) != 0, "a digit other than 7 past its resolution, {resolution}"),
    ]


def invalid_indexes(values: np.ndarray) -> np.ndarray:
    """Where an index is no H3 cell or directed edge. Cells, the common case, are told apart in a
    few passes over the bits; only what is not a valid cell goes through the rules one by one."""
    values = np.asarray(values, dtype=np.int64)
    bad = ~_valid_cells(_as_bits(values))
    if bad.any():
        rest = np.flatnonzero(bad)
        detailed = np.zeros(len(rest), dtype=bool)
        for failed, _ in _checks(values[rest]):
            detailed |= failed
        bad[rest] = detailed
    return bad


def _valid_cells(bits: np.ndarray) -> np.ndarray:
    """Where a value is a valid H3 cell: reserved bit clear, mode 1 and no edge (the top 12 bits
    but the resolution's), base cell at most 121, and the digits 7 exactly past the resolution."""
    header = bits >> np.uint64(52)
    ok = (header >> np.uint64(4)) == np.uint64(0b0001000)
    ok &= ((bits >> np.uint64(45)) & np.uint64(0x7F)) <= np.uint64(121)
    digits = bits & np.uint64((1 << 3 * _DIGITS) - 1)
    sevens = digits & (digits >> np.uint64(1)) & (digits >> np.uint64(2)) & _DIGIT_LOW_BITS
    past = _DIGIT_LOW_BITS & ((np.uint64(1) << (np.uint64(3) * (np.uint64(_DIGITS) - (header & np.uint64(0xF)))))
                              - np.uint64(1))
    return ok & (sevens == past)


def _as_bits(values: np.ndarray) -> np.ndarray:
    """The indexes' 64 bits as uint64 (a view of int64 values, not a copy)."""
    values = np.asarray(values)
    return values.view(np.uint64) if values.dtype == np.int64 else values.astype(np.uint64)


def index_problem(value: int) -> str:
    """What makes one index invalid ("" when it is valid)."""
    values = np.array([value], np.int64)
    mode, edge, resolution, base = index_components(values)[0, :4].tolist()
    return next((message.format(mode=mode, edge=edge, base=base, resolution=resolution)
                 for failed, message in _checks(values) if failed[0]), "")


def read_indexes(column: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int64 indexes, missing mask, mask of values that are no integer or hex string)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    missing = pc.is_null(column).to_numpy(zero_copy_only=False)
    if pa.types.is_integer(column.type):
        values = pc.fill_null(column, 0).to_numpy(zero_copy_only=False)
        # An uint64 index past 2**63 has its reserved bit set: kept as a negative int64, refused.
        return values.astype(np.uint64).view(np.int64), missing, np.zeros(len(column), dtype=bool)
    if pa.types.is_floating(column.type):
        return _from_floats(column, missing)
    strings = pc.utf8_lower(pc.utf8_trim_whitespace(as_strings(column)))
    missing |= pc.is_in(strings, value_set=pa.array(MISSING_WORDS)).to_numpy(zero_copy_only=False)
    return _from_text(pc.fill_null(strings, ""), missing)


def _from_floats(column: pa.Array, missing: np.ndarray):
    """Only integers up to 2**53 (no H3 index is one) are exact in a float: the others are unread."""
    numbers = pc.fill_null(column, 0).to_numpy(zero_copy_only=False)
    whole = np.isfinite(numbers) & (numbers == np.floor(numbers)) & (np.abs(numbers) <= _FLOAT_EXACT)
    return np.where(whole, numbers, 0).astype(np.int64), missing, ~missing & ~whole


def _from_text(strings: pa.Array, missing: np.ndarray):
    """Decimal strings of 17 to 19 digits (every H3 index has 18 or 19) or hex strings of up to 16
    digits, optionally after 0x; anything else is unread."""
    decimal = pc.match_substring_regex(strings, r"^\d{17,19}$").to_numpy(zero_copy_only=False)
    hexadecimal = ~decimal & pc.match_substring_regex(strings, r"^(0x)?[0-9a-f]{1,16}$").to_numpy(zero_copy_only=False)
    values = np.zeros(len(strings), dtype=np.uint64)
    if decimal.any():
        values[decimal] = pc.cast(strings.filter(pa.array(decimal)), pa.uint64()).to_numpy(zero_copy_only=False)
    if hexadecimal.any():
        values[hexadecimal] = _hex_values(strings.filter(pa.array(hexadecimal)))
    return values.view(np.int64), missing, ~missing & ~decimal & ~hexadecimal


def _hex_values(strings: pa.Array) -> np.ndarray:
    """uint64 of hex strings of at most 16 digits (an 0x prefix allowed), digit by digit in numpy."""
    digits = pc.utf8_lpad(pc.replace_substring_regex(strings, r"^0x", ""), width=16, padding="0").cast(pa.binary(16))
    raw = np.frombuffer(digits.buffers()[1], np.uint8, 16 * len(digits), 16 * digits.offset)
    nibbles = _HEX_VALUES[raw].reshape(-1, 16).astype(np.uint64)
    return (nibbles << (np.uint64(4) * np.arange(15, -1, -1, dtype=np.uint64))).sum(axis=1, dtype=np.uint64)
