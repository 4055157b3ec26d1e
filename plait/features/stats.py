"""Partial statistics that merge exactly, whatever the partitioning.

Preprocessing must give byte-identical output for one partition or twenty. Float sums depend on
the order of addition, so sums here are exact (rational) and counts are integers; the quantile
sketch is a fixed-bucket histogram whose merge is plain addition.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


_EXACT_CHUNK = 1 << 25


def exact_sum(values: np.ndarray) -> Fraction:
    """The exact sum of finite float64 values, vectorized.

    Each value is m * 2**e with an integer mantissa |m| < 2**53. Mantissas are split into two
    26-bit halves and summed per exponent (exact in float64 for chunks below 2**26 values), then the
    few per-exponent sums are combined exactly in Python integers.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size > _EXACT_CHUNK:
        return sum((exact_sum(values[i : i + _EXACT_CHUNK]) for i in range(0, values.size, _EXACT_CHUNK)), Fraction(0))
    if values.size == 0:
        return Fraction(0)
    fraction, exponent = np.frexp(values)
    mantissa = (fraction * 2.0**53).astype(np.int64)
    low_exp = int(exponent.min())
    slot = exponent - low_exp
    # Halves are below 2**27 in magnitude, so float64 bincount sums stay exact below 2**26 values.
    high_sums = np.bincount(slot, weights=(mantissa >> 26).astype(np.float64))
    low_sums = np.bincount(slot, weights=(mantissa & ((1 << 26) - 1)).astype(np.float64))
    total = 0
    for i in np.flatnonzero((high_sums != 0) | (low_sums != 0)):
        total += ((int(high_sums[i]) << 26) + int(low_sums[i])) << int(i)
    low_exp -= 53
    return Fraction(total) * Fraction(2) ** low_exp


_SQUARE_SCALE = 512  # |x| >= 2**500 squares past float range (2**1024); 2**-512 brings it back


def exact_sum_of_squares(values: np.ndarray) -> Fraction:
    """The exact sum of the (float-rounded) squares of finite float64 values, even where a square
    overflows float64 (|x| above about 1.3e154). Those values are scaled by 2**-512 before squaring,
    which is exact and rounds the square the same way, and the sum is scaled back exactly; the
    choice is per value, so the result does not depend on the partitioning."""
    values = np.asarray(values, dtype=np.float64)
    large = np.abs(values) >= 2.0**500
    small_sum = exact_sum(values[~large] * values[~large])
    scaled = values[large] * 2.0**-_SQUARE_SCALE
    return small_sum + exact_sum(scaled * scaled) * Fraction(2) ** (2 * _SQUARE_SCALE)


def merge_counts(a: pd.Series | None, b: pd.Series | None) -> pd.Series | None:
    """Add two value->count tables."""
    if a is None:
        return b
    if b is None:
        return a
    return a.add(b, fill_value=0).astype(np.int64)


def value_counts(values: pa.Array | pa.ChunkedArray) -> pd.Series:
    """value -> count of the non-null values, as a Series indexed by value."""
    counts = pc.value_counts(pc.drop_null(values))
    if len(counts) == 0:
        return pd.Series([], dtype=np.int64)
    counts = counts.flatten() if isinstance(counts, pa.StructArray) else counts
    return pd.Series(counts[1].to_numpy(), index=counts[0].to_pandas(), dtype=np.int64)


def most_common(counts: pd.Series | None, limit: int | None) -> list:
    """The ``limit`` most frequent values (None: all), ties broken by the value itself (deterministic)."""
    if counts is None or counts.empty:
        return []
    frame = pd.DataFrame({"value": counts.index, "count": counts.to_numpy()})
    frame = frame.sort_values(["count", "value"], ascending=[False, True], kind="mergesort")
    return frame["value"].tolist() if limit is None else frame["value"].head(limit).tolist()


class QuantileSketch:
    """A relative-error quantile sketch (DDSketch-style log buckets), exactly mergeable."""

    # 0.01%: values far from 0 but close together (years, 2007 and 2009, 0.1% apart) must fall in
    # buckets of their own, or a column of them has no interquartile range and one rank.
    relative_accuracy = 0.0001
    gamma = (1 + relative_accuracy) / (1 - relative_accuracy)

    def __init__(self, positive=None, negative=None, zeros: int = 0):
        self.positive = positive if positive is not None else pd.Series([], dtype=np.int64)
        self.negative = negative if negative is not None else pd.Series([], dtype=np.int64)
        self.zeros = zeros

    @classmethod
    def of(cls, values: np.ndarray) -> "QuantileSketch":
        log_gamma = math.log(cls.gamma)

        def buckets(x):
            idx, counts = np.unique(np.ceil(np.log(x) / log_gamma).astype(np.int64), return_counts=True)
            return pd.Series(counts, index=idx, dtype=np.int64)

        return cls(buckets(values[values > 0]), buckets(-values[values < 0]), int((values == 0).sum()))

    def merge(self, other: "QuantileSketch") -> "QuantileSketch":
        return QuantileSketch(
            merge_counts(self.positive, other.positive), merge_counts(self.negative, other.negative),
            self.zeros + other.zeros,
        )

    def quantiles(self, levels: np.ndarray) -> np.ndarray:
        """``quantile`` at each of ``levels``: the buckets are ordered and counted once."""
        values = np.concatenate([-2 * self.gamma ** self.negative.sort_index(ascending=False).index.to_numpy(float)
                                 / (self.gamma + 1), [0.0],
                                 2 * self.gamma ** self.positive.sort_index().index.to_numpy(float) / (self.gamma + 1)])
        counts = np.concatenate([self.negative.sort_index(ascending=False).to_numpy(), [self.zeros],
                                 self.positive.sort_index().to_numpy()])
        seen = np.cumsum(counts)
        if seen[-1] == 0:
            return np.zeros(len(levels))
        # The first bucket whose running count passes the level's rank.
        return values[np.minimum(np.searchsorted(seen, np.asarray(levels) * (seen[-1] - 1), side="right"),
                                 len(values) - 1)]

    def quantile(self, q: float) -> float:
        """The value at level ``q`` (0 to 1): the first bucket whose running count, from the most
        negative, passes rank ``q * (count - 1)``, as its bucket's middle value."""
        return float(self.quantiles(np.array([q]))[0])
