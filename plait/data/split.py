"""Sampling and splitting rows, partition-invariantly.

Randomness comes from a counter-based hash of (seed, global row number), not from a generator
advanced row by row, so the same row lands in the same split however the data is partitioned.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError

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
    return row_uniforms(row_numbers, seed, stream=1) < ratio


def random_split(row_numbers: np.ndarray, probabilities: list[float], seed: int) -> np.ndarray:
    u = row_uniforms(row_numbers, seed, stream=2)
    edges = np.cumsum(probabilities)[:2]
    return np.searchsorted(edges, u, side="right").astype(np.int8)


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
