"""Sampling and splitting rows, partition-invariantly.

Randomness comes from a counter-based hash of (seed, global row number), not from a generator
advanced row by row, so the same row lands in the same split however the data is partitioned.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError, UsageError

SEEDS = 1 << 32
"""Seeds are 0 to 2**32 - 1, as in Ludwig (which seeds numpy with them)."""


def check_seed(seed: Any, name: str = "random_seed") -> int:
    """``seed`` as an int, or a UsageError naming the argument (a float or text would fail deep
    in the split, and a seed past 2**32 overflows torch's generators)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < SEEDS:
        raise UsageError(f"{name} {seed!r}: give a whole number from 0 to {SEEDS - 1}, such as 42")
    return int(seed)


TRAINING, VALIDATION, TEST = 0, 1, 2
SPLIT_NAMES = ("training", "validation", "test")
SPLIT_WORDS = {"0": 0, "1": 1, "2": 2, "train": 0, "training": 0, "validation": 1, "val": 1, "valid": 1, "test": 2}


def row_uniforms(row_numbers: np.ndarray, seed: int, stream: int) -> np.ndarray:
    """Uniform [0, 1) numbers from splitmix64 of (seed, stream, row number)."""
    with np.errstate(over="ignore"):
        z = row_numbers.astype(np.uint64) + np.uint64((seed * 1_000_003 + stream * 7919) & 0xFFFFFFFF) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def sample_mask(row_numbers: np.ndarray, ratio: float, seed: int) -> np.ndarray:
    """Rows whose sampling hash is below ``ratio`` (a share, or a threshold from sample_threshold)."""
    return row_uniforms(row_numbers, seed, stream=1) < ratio


def random_split(row_numbers: np.ndarray, probabilities: list[float], seed: int) -> np.ndarray:
    u = row_uniforms(row_numbers, seed, stream=2)
    edges = np.cumsum(probabilities)[:2]
    return np.searchsorted(edges, u, side="right").astype(np.int8)


def fold_of(row_numbers: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Each row's fold (0 to folds - 1), from a seeded hash of its row number."""
    return np.minimum((row_uniforms(row_numbers, seed, stream=3) * folds).astype(np.int64), folds - 1)


def kfold_split(row_numbers: np.ndarray, folds: int, fold: int, seed: int) -> np.ndarray:
    """Split codes of one fold's run: its fold's rows are the test set, the rest train."""
    return np.where(fold_of(row_numbers, folds, seed) == fold, TEST, TRAINING).astype(np.int8)


def fixed_split(values: pa.Array, column: str) -> np.ndarray:
    words = pc.utf8_lower(pc.utf8_trim_whitespace(values.cast(pa.string())))
    codes = np.full(len(values), -1, dtype=np.int8)
    for word, code in SPLIT_WORDS.items():
        codes[pc.equal(words, word).fill_null(False).to_numpy(zero_copy_only=False)] = code
    if (codes < 0).any():
        bad = values.filter(pa.array(codes < 0))[0].as_py()
        raise DataError(
            f"split column {column!r} holds {bad!r}; a fixed split needs 0/1/2 or "
            f"training/validation/test in every row"
        )
    return codes


def stratify_stats(labels: pa.Array, row_numbers: np.ndarray, seed: int) -> dict:
    """Map step of a stratified split: each label's row hashes."""
    u = row_uniforms(row_numbers, seed, stream=3)
    keys = labels.cast(pa.string()).fill_null("<null>").to_numpy(zero_copy_only=False)
    return {key: np.sort(u[keys == key]) for key in np.unique(keys)}


def merge_stratify_stats(a: dict, b: dict) -> dict:
    return {k: np.sort(np.concatenate([a.get(k, []), b.get(k, [])])) for k in a.keys() | b.keys()}


def stratify_thresholds(stats: dict, probabilities: list[float]) -> dict:
    """Per label: the hash values below which rows go to training, then validation."""
    thresholds = {}
    for key, hashes in stats.items():
        n = len(hashes)
        cuts = [int(round(n * probabilities[0])), int(round(n * (probabilities[0] + probabilities[1])))]
        thresholds[key] = [float(hashes[c]) if c < n else 2.0 for c in cuts]
    return thresholds


def stratified_split(labels: pa.Array, row_numbers: np.ndarray, seed: int, thresholds: dict) -> np.ndarray:
    u = row_uniforms(row_numbers, seed, stream=3)
    keys = labels.cast(pa.string()).fill_null("<null>").to_numpy(zero_copy_only=False)
    codes = np.full(len(keys), TEST, dtype=np.int8)
    for key, (train_cut, valid_cut) in thresholds.items():
        rows = keys == key
        codes[rows & (u < valid_cut)] = VALIDATION
        codes[rows & (u < train_cut)] = TRAINING
    return codes


def hash_split(values: pa.Array, probabilities: list[float]) -> np.ndarray:
    """Split codes from a hash of each row's value (its text form; missing values share one), not
    seeded: a value lands in the same split in every run and whatever other rows there are."""
    encoded = pc.dictionary_encode(values.cast(pa.string()).fill_null("\0null"))
    uniques = encoded.dictionary.to_pylist()
    digests = [int.from_bytes(hashlib.sha256(v.encode("utf-8", "surrogatepass")).digest()[:8], "big") for v in uniques]
    u = (np.array(digests, dtype=np.uint64) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    edges = np.cumsum(probabilities)[:2]
    return np.searchsorted(edges, u[encoded.indices.to_numpy()], side="right").astype(np.int8)


NO_TIME = np.iinfo(np.int64).max
"""The time key of a row with no date: such rows come last (into the test split)."""


def time_keys(values: pa.Array, column: str) -> np.ndarray:
    """Each row's time as int64 nanoseconds (UTC). Text is parsed value by value (never with a
    format guessed from the first row, which would depend on the partitioning)."""
    if pa.types.is_timestamp(values.type) or pa.types.is_date(values.type):
        times = pc.cast(values, pa.timestamp("ns")) if pa.types.is_date(values.type) else values
        keys = pc.cast(times, pa.int64()).to_numpy(zero_copy_only=False)
    else:
        text = values.cast(pa.string()).to_pandas()
        parsed = pd.to_datetime(text, format="mixed", utc=True, errors="coerce")
        bad = parsed.isna().to_numpy() & text.notna().to_numpy()
        if bad.any():
            raise DataError(f"split column {column!r} holds {text[bad].iloc[0]!r}, which is not a date or time; a "
                            f"datetime split needs dates such as 2024-05-01 or 2024-05-01 12:30 in every row")
        keys = parsed.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    nulls = pc.is_null(values).to_numpy(zero_copy_only=False)
    return np.where(nulls, NO_TIME, keys).astype(np.int64)


def order_stats(keys: np.ndarray, row_numbers: np.ndarray) -> np.ndarray:
    """Map step of a datetime split: the (time, row) pairs of a partition, in order."""
    pairs = np.empty(len(keys), dtype=[("time", np.int64), ("row", np.int64)])
    pairs["time"], pairs["row"] = keys, row_numbers
    return np.sort(pairs, order=["time", "row"])


def merge_order_stats(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sort(np.concatenate([a, b]), order=["time", "row"])


def order_thresholds(pairs: np.ndarray, probabilities: list[float]) -> list[tuple[int, int] | None]:
    """The first (time, row) of validation and of test: the oldest ceil(p_train * n) rows train."""
    n = len(pairs)
    first_validation = int(np.ceil(probabilities[0] * n))
    first_test = first_validation + int(probabilities[1] * n) if probabilities[2] > 0 else n
    return [(int(pairs[c]["time"]), int(pairs[c]["row"])) if c < n else None for c in (first_validation, first_test)]


def ordered_split(keys: np.ndarray, row_numbers: np.ndarray, thresholds: list) -> np.ndarray:
    codes = np.full(len(keys), TRAINING, dtype=np.int8)
    for code, cut in zip((VALIDATION, TEST), thresholds):
        if cut is not None:
            codes[(keys > cut[0]) | ((keys == cut[0]) & (row_numbers >= cut[1]))] = code
    return codes


def smallest_sample_hashes(row_numbers: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Map step of sample_size: the ``size`` smallest sampling hashes of a partition, sorted."""
    return smallest(row_uniforms(row_numbers, seed, stream=1), size)


def smallest(values: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` smallest values, sorted (all of them when there are fewer)."""
    return np.sort(np.partition(values, size - 1)[:size]) if len(values) > size else np.sort(values)


def merge_smallest(size: int):
    return lambda a, b: np.sort(np.concatenate([a, b]))[:size]


def sample_threshold(smallest: np.ndarray, size: int) -> float:
    """The sampling hash below which exactly ``size`` rows fall (all rows when there are fewer)."""
    if len(smallest) < size:
        return 2.0
    return float(np.nextafter(smallest[size - 1], 2.0))
