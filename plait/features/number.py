"""Number features: missing-value fill, the training range, outliers, and zscore / minmax / log1p / iq
/ quantile normalization."""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features import stats as st
from plait.features.base import FeatureProcessor


MISSING_WORDS = ["", "nan", "na", "n/a", "null", "none", "-"]


class NumberProcessor(FeatureProcessor):
    type = "number"

    def prepare(self, column: pa.Array) -> pa.Array:
        return _missing_unless_finite(self._parse(column))

    def _parse(self, column: pa.Array) -> pa.Array:
        if pa.types.is_floating(column.type):
            return column.cast(pa.float64())
        if pa.types.is_integer(column.type) or pa.types.is_boolean(column.type):
            return column.cast(pa.float64())
        strings = column.cast(pa.string())
        # Empty cells and the usual missing-value words are missing, not "not a number".
        blank = pc.is_in(pc.utf8_lower(pc.utf8_trim_whitespace(strings)), value_set=pa.array(MISSING_WORDS))
        strings = pc.if_else(blank, pa.scalar(None, pa.string()), strings)
        parsed = pd.to_numeric(pd.Series(strings.to_numpy(zero_copy_only=False)), errors="coerce")
        bad = parsed.isna().to_numpy() & pc.is_valid(strings).to_numpy(zero_copy_only=False)
        if bad.any():
            examples = ", ".join(repr(v) for v in list(dict.fromkeys(strings.filter(pa.array(bad)).to_pylist()))[:3])
            raise DataError(
                f"number feature {self.name!r}: column {self.column!r} holds values that are not "
                f"numbers ({examples}, {int(bad.sum())} rows). Clean the column, or declare the "
                f"feature as category or text."
            )
        return pa.array(parsed.to_numpy(dtype=np.float64), pa.float64(), from_pandas=True)

    def partial_stats(self, column: pa.Array) -> dict:
        values = pc.drop_null(column).to_numpy()
        values = values[np.isfinite(values)]
        stats = {
            "count": int(values.size),
            "sum": st.exact_sum(values),
            "sum_squares": st.exact_sum_of_squares(values),
            "min": float(values.min()) if values.size else None,
            "max": float(values.max()) if values.size else None,
        }
        if self.preprocessing.normalization in ("iq", "quantile", "auto"):
            stats["sketch"] = st.QuantileSketch.of(values)
        if "fill_with_mode" in (self.preprocessing.missing_value_strategy, self.preprocessing.outlier_strategy):
            stats["counts"] = st.value_counts(pa.array(values))
        return stats

    def merge_stats(self, a: dict, b: dict) -> dict:
        merged = {
            "count": a["count"] + b["count"],
            "sum": a["sum"] + b["sum"],
            "sum_squares": a["sum_squares"] + b["sum_squares"],
            "min": _pick(min, a["min"], b["min"]),
            "max": _pick(max, a["max"], b["max"]),
        }
        if "sketch" in a:
            merged["sketch"] = a["sketch"].merge(b["sketch"])
        if "counts" in a:
            merged["counts"] = st.merge_counts(a["counts"], b["counts"])
        return merged

    def finalize(self, stats: dict) -> dict:
        count = stats["count"]
        mean = stats["sum"] / count if count else Fraction(0)
        variance = stats["sum_squares"] / count - mean * mean if count else Fraction(0)
        meta = {
            "mean": float(mean),
            "std": _square_root(variance),
            "min": stats["min"] if stats["min"] is not None else 0.0,
            "max": stats["max"] if stats["max"] is not None else 0.0,
            "normalization": _chosen_normalization(self.preprocessing.normalization, stats),
        }
        if meta["normalization"] == "iq":
            meta["q1"], meta["median"], meta["q3"] = (float(v) for v in stats["sketch"].quantiles(np.array([0.25, 0.5, 0.75])))
        if meta["normalization"] == "quantile":
            meta["quantile_values"], meta["quantile_scores"] = _normal_scores(stats["sketch"])
        meta["fill_value"] = self._fill_for(self.preprocessing.missing_value_strategy, meta, stats)
        if self.preprocessing.outlier_strategy is not None:
            meta["outliers"] = {"strategy": self.preprocessing.outlier_strategy,
                                "threshold": self.preprocessing.outlier_threshold,
                                "fill_value": self._fill_for(self.preprocessing.outlier_strategy, meta, stats)}
        meta["shift"], meta["scale"] = _normalization(meta)
        if not self.is_output and self.preprocessing.clip_to_training_range and stats["min"] is not None:
            meta["clip"] = [meta["min"], meta["max"]]
        # The training range as the model reads it: the bins of the ple and bins encoders split it
        # (the raw range is another scale under log1p or quantile normalization). Values log1p
        # cannot take are the transform's error to report, with their count.
        if not (meta["normalization"] == "log1p" and meta["min"] <= -1):
            low, high = self._normalized(np.array([meta["min"], meta["max"]]), meta)
            meta["model_range"] = [float(low), float(high)]
        return meta

    def cache_inputs(self) -> dict:
        # A cache written before the metadata held model_range is not reused: the bins of the ple
        # and bins encoders are cut from it.
        return {"metadata": ["model_range"]}

    def _fill_for(self, strategy: str, meta: dict, stats: dict) -> float:
        if strategy == "fill_with_mean":
            return meta["mean"]
        if strategy == "fill_with_mode":
            top = st.most_common(stats.get("counts"), 1)
            return float(top[0]) if top else float(self.preprocessing.fill_value)
        return float(self.preprocessing.fill_value)

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        values = self.fill(column, metadata["fill_value"]).to_numpy(zero_copy_only=False)
        fill = metadata["fill_value"]
        if "clip" in metadata:  # present values only: a fill is what the config says it is
            present = column.is_valid().to_numpy(zero_copy_only=False)
            values = np.where(present, np.clip(values, *metadata["clip"]), values)
        if "outliers" in metadata and metadata["outliers"]["strategy"] != "drop_row":
            values = np.where(outlier_mask(values, metadata), metadata["outliers"]["fill_value"], values)
        # a fill at or below -1 has no log1p: it stands for 0 there
        raw_fill = 0.0 if metadata["normalization"] == "log1p" and fill <= -1 else fill
        values, fill = self._normalized(values, metadata), float(self._normalized(np.array([raw_fill]), metadata)[0])
        return pa.array(_float32_or_fill(values, fill), pa.float32())

    def _normalized(self, values: np.ndarray, metadata: dict) -> np.ndarray:
        """Values in the units the model reads: log1p or ranked to normal scores, then shifted
        and scaled."""
        if metadata["normalization"] == "log1p":
            values = self._log1p(values)
        if metadata["normalization"] == "quantile":
            values = np.interp(values, metadata["quantile_values"], metadata["quantile_scores"])
        return (values - metadata["shift"]) / metadata["scale"]

    def _log1p(self, values: np.ndarray) -> np.ndarray:
        bad = values <= -1
        if bad.any():
            raise DataError(
                f"number feature {self.name!r}: column {self.column!r} holds {float(values[bad][0])!r} ({int(bad.sum())} "
                f"value(s) at or below -1, after filling missing values), where log1p is undefined. Use another "
                f"preprocessing.normalization (zscore, minmax, iq) or shift the column first"
            )
        return np.log1p(values)

    def dropped_after_fit(self, column: pa.Array, metadata: dict) -> np.ndarray | None:
        """With outlier_strategy drop_row: the rows whose (filled) value is an outlier."""
        if metadata.get("outliers", {}).get("strategy") != "drop_row":
            return None
        return outlier_mask(self.fill(column, metadata["fill_value"]).to_numpy(zero_copy_only=False), metadata)


def outlier_mask(values: np.ndarray, metadata: dict) -> np.ndarray:
    """Values farther than the threshold in training standard deviations from the training mean
    (a constant column's spread counts as 1, as its zscore does)."""
    spread = metadata["std"] if metadata["std"] > 0 else 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        return np.abs(values - metadata["mean"]) > metadata["outliers"]["threshold"] * spread


def _missing_unless_finite(column: pa.Array) -> pa.Array:
    """NaN (as Spark or numpy write it) and infinities are missing values, like null, so that the
    feature's missing_value_strategy applies to them: an infinite input would otherwise reach the
    model and make every probability NaN."""
    return pc.if_else(pc.is_finite(column), column, pa.scalar(None, pa.float64()))


def _float32_or_fill(values: np.ndarray, fill: float) -> np.ndarray:
    """The model reads float32: a value finite in float64 but beyond float32 after normalization
    (1e300 where training saw only zeros) would reach it as inf and make its outputs NaN. Such
    values are treated as missing, as inf is, and replaced by the (normalized) fill value."""
    with np.errstate(over="ignore", invalid="ignore"):
        narrowed = values.astype(np.float32)
    beyond = ~np.isfinite(narrowed)
    if beyond.any():
        with np.errstate(over="ignore"):
            narrowed[beyond] = np.float32(fill) if np.isfinite(np.float32(fill)) else np.float32(0.0)
    return narrowed


def _square_root(value: Fraction) -> float:
    """The square root of an exact fraction, 0 below 0. Taken in Decimal because the variance of
    finite floats can lie beyond float range (values near 1e300 square to 1e600) while the
    standard deviation, never above the largest magnitude, does not. The squares are rounded
    floats, so a constant column's variance can come out a hair below 0."""
    if value <= 0:
        return 0.0
    with localcontext() as context:
        context.prec = 40
        return float((Decimal(value.numerator) / Decimal(value.denominator)).sqrt())


def _pick(fn, a, b):
    return b if a is None else a if b is None else fn(a, b)


OUTLYING_RANGE = 20.0
"""``auto`` normalization's line: a column whose training range spans more interquartile ranges
than this has outliers or a long tail, and is ranked (quantile); the others are zscored. A normal
sample of a million spans about 7.5 interquartile ranges, an exponential one about 12.5; among
benchmarks/model_quality.py's tables wine's widest column spans 5.4, and loanapp's sentinel
columns (999999 among hundreds) have no bound."""


def _chosen_normalization(setting: str | None, stats: dict) -> str:
    """The normalization a column gets: the setting, or for ``auto`` zscore or quantile by the
    spread of the training values (a column of one value: zscore)."""
    if setting != "auto":
        return setting or "none"
    if not stats["count"] or stats["max"] == stats["min"]:
        return "zscore"
    q1, q3 = stats["sketch"].quantiles(np.array([0.25, 0.75]))
    return "quantile" if stats["max"] - stats["min"] > OUTLYING_RANGE * (q3 - q1) else "zscore"


QUANTILE_LEVELS = 1001
"""How many of the training values' quantiles (0, 0.1%, ..., 100%) quantile normalization keeps."""
EDGE_LEVEL = 0.001
"""The first and last levels' scores are those of 0.1% and 99.9% (±3.09), not infinite."""


def _normal_scores(sketch: st.QuantileSketch) -> tuple[list[float], list[float]]:
    """The training values' quantiles and the standard normal score of each: a value is mapped to
    the score of its rank, linearly between quantiles (scikit-learn's QuantileTransformer with a
    normal output). Equal quantiles (a column of few distinct values) share their levels' mean score."""
    levels = np.linspace(0.0, 1.0, QUANTILE_LEVELS)
    scores = np.array([NormalDist().inv_cdf(q) for q in np.clip(levels, EDGE_LEVEL, 1 - EDGE_LEVEL)])
    values, first, counts = np.unique(sketch.quantiles(levels), return_index=True, return_counts=True)
    shared = np.add.reduceat(scores, first) / counts if values.size > 1 else np.zeros(1)
    return values.tolist(), shared.tolist()


def _normalization(meta: dict) -> tuple[float, float]:
    """x -> (x - shift) / scale; a zero spread (a constant column) leaves the scale at 1."""
    kind = meta["normalization"]
    if kind == "zscore":
        shift, scale = meta["mean"], meta["std"]
    elif kind == "minmax":
        shift, scale = meta["min"], meta["max"] - meta["min"]
    elif kind == "iq":
        shift, scale = meta["median"], meta["q3"] - meta["q1"]
    else:
        shift, scale = 0.0, 1.0
    return shift, scale if scale > 0 else 1.0
