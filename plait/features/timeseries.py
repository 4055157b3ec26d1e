"""Timeseries features: a series of numbers per row (a list column, or a string the tokenizer
splits into numbers), padded or cut to one length: the longest training series, at most
``timeseries_length_limit``.

Every row is read on its own (Ludwig's ``window_size``, which builds a series from the previous
rows, is refused by the config): every engine and every prediction chunk gives the same series.
An input's padded steps are stored as NaN, a marker no real step has (a value inside a series
that is not finite becomes ``padding_value``, as in Ludwig): the encoder reads them as
``padding_value`` and leaves them out of its reductions and attention. An output's are stored
as ``padding_value``.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features.base import FeatureProcessor
from plait.features.text_ops import as_strings, first_values, fixed_size_list, row_lists, tokenize
from plait.utils.ragged import pad

log = logging.getLogger("plait")

SERIES = pa.list_(pa.float64())
_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(nan|inf|infinity)$"
"""What Arrow reads as a float, to find the tokens that are not numbers when a cast fails."""


class TimeseriesProcessor(FeatureProcessor):
    type = "timeseries"
    reads_nested = True  # list columns; prepare refuses other nested types itself

    def prepare(self, column: pa.Array) -> pa.Array:
        if _is_list(column.type):  # numbers, or strings of numbers
            return self._numbers(column, column.cast(pa.list_(pa.string())) if _holds_strings(column) else column)
        if pa.types.is_nested(column.type) or pa.types.is_binary(column.type):
            raise DataError(f"timeseries feature {self.name!r}: column {self.column!r} has type {column.type}; a "
                            f"series is a list of numbers or a string of numbers split by "
                            f"{self.preprocessing.tokenizer}")
        strings = as_strings(column)
        return self._numbers(strings, tokenize(strings, self.preprocessing.tokenizer, lowercase=False))

    def _numbers(self, cells: pa.Array, tokens: pa.Array) -> pa.Array:
        """The token lists as lists of floats; a DataError with the count and an example otherwise."""
        try:
            return tokens.cast(SERIES)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            reason = str(exc)
        flat = pc.list_flatten(tokens).cast(pa.string())
        bad = pc.invert(pc.match_substring_regex(flat, _NUMBER, ignore_case=True)).to_numpy(zero_copy_only=False)
        rows = np.unique(pc.list_parent_indices(tokens).to_numpy()[bad])
        if not rows.size:  # Arrow refused what the pattern takes: its own words
            raise DataError(f"timeseries feature {self.name!r}: column {self.column!r} holds non-numbers: {reason}")
        example = _short(cells[int(rows[0])].as_py())
        raise DataError(f"timeseries feature {self.name!r}: {rows.size} row(s) of column {self.column!r} hold "
                        f"something that is not a number, such as {example} (a series is numbers split by "
                        f"{self.preprocessing.tokenizer}). Clean the column, or fix preprocessing.tokenizer")

    def partial_stats(self, column: pa.Array) -> dict:
        lengths = pc.list_value_length(pc.drop_null(column)).to_numpy(zero_copy_only=False)
        limit = self.preprocessing.timeseries_length_limit
        return {"longest": int(lengths.max(initial=0)), "over_limit": int((lengths > limit).sum())}

    def merge_stats(self, a: dict, b: dict) -> dict:
        return {"longest": max(a["longest"], b["longest"]), "over_limit": a["over_limit"] + b["over_limit"]}

    def finalize(self, stats: dict) -> dict:
        pp = self.preprocessing
        if stats["over_limit"]:
            log.info("timeseries feature %r: %d training series are longer than timeseries_length_limit (%d) and "
                     "were cut to it.", self.name, stats["over_limit"], pp.timeseries_length_limit)
        return {
            "timeseries_length": max(1, min(stats["longest"], pp.timeseries_length_limit)),
            "padding_value": pp.padding_value,
            "fill_value": self.prepare(pa.array([pp.fill_value])).to_pylist()[0],
            "truncated": stats["over_limit"],
            "padding": pp.padding,
        }

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        if column.null_count:
            column = pc.if_else(pc.is_valid(column), column, pa.scalar(metadata["fill_value"], SERIES))
        with np.errstate(over="ignore"):  # beyond float32 is inf, and so the padding value
            values = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.float32)
        values[~np.isfinite(values)] = metadata["padding_value"]
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.int64)
        if "padding" in metadata:  # each row's steps, cut to the length: the batches pad them
            return row_lists(*first_values(values, lengths, metadata["timeseries_length"]), pa.float32())
        # The metadata of a model saved before series were stored unpadded: rows padded here.
        marker = metadata["padding_value"] if self.is_output else np.nan
        matrix = pad(values, lengths, metadata["timeseries_length"], marker, self.preprocessing.padding == "left",
                     dtype=np.float32)
        return fixed_size_list(matrix, pa.float32())


def _is_list(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)


def _holds_strings(column: pa.Array) -> bool:
    value_type = column.type.value_type
    return pa.types.is_string(value_type) or pa.types.is_large_string(value_type)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"
