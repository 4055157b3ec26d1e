"""Mergeable statistics: exact sums and the quantile sketch, independent of partitioning."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from plait.features import stats as st


@pytest.fixture
def awkward_values() -> np.ndarray:
    """Floats whose naive sum depends on the order of addition."""
    rng = np.random.default_rng(7)
    return np.concatenate([
        rng.normal(0, 1e6, 2000), rng.normal(0, 1e-6, 2000), rng.integers(-5, 5, 100).astype(float),
        [1e300, -1e300, 0.0, -0.0, 5e-324, 0.1, 0.2, 0.3],
    ])


def test_exact_sum_equals_the_sum_of_fractions(awkward_values):
    assert st.exact_sum(awkward_values) == sum(map(Fraction, awkward_values), Fraction(0))


def test_exact_sum_does_not_depend_on_how_values_are_split(awkward_values):
    whole = st.exact_sum(awkward_values)
    shuffled = np.random.default_rng(1).permutation(awkward_values)
    assert sum((st.exact_sum(part) for part in np.array_split(shuffled, 13)), Fraction(0)) == whole
    assert st.exact_sum(awkward_values[:1]) + st.exact_sum(awkward_values[1:]) == whole


def test_exact_sum_of_nothing_is_zero():
    assert st.exact_sum(np.array([])) == 0


def test_exact_sum_of_tenths_is_exact():
    assert st.exact_sum(np.full(10, 0.1)) == 10 * Fraction(0.1)


@pytest.fixture
def spread_values() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.lognormal(0, 2, 50_000) * rng.choice([-1.0, 0.0, 1.0], 50_000, p=[0.3, 0.1, 0.6])


@pytest.mark.parametrize("q", [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99])
def test_sketch_quantiles_are_within_one_percent(spread_values, q):
    expected = np.quantile(spread_values, q, method="lower")
    assert st.QuantileSketch.of(spread_values).quantile(q) == pytest.approx(expected, rel=0.01, abs=1e-12)


def test_merged_sketches_equal_the_sketch_of_the_whole(spread_values):
    whole = st.QuantileSketch.of(spread_values)
    parts = [st.QuantileSketch.of(p) for p in np.array_split(spread_values, 9)]
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.merge(part)
    assert merged.zeros == whole.zeros
    assert merged.positive.sort_index().equals(whole.positive.sort_index())
    assert merged.negative.sort_index().equals(whole.negative.sort_index())
    for q in np.linspace(0, 1, 41):
        assert merged.quantile(q) == whole.quantile(q)


def test_sketch_merge_order_does_not_matter(spread_values):
    a, b, c = (st.QuantileSketch.of(p) for p in np.array_split(spread_values, 3))
    assert a.merge(b).merge(c).quantile(0.3) == c.merge(a).merge(b).quantile(0.3)


def test_empty_sketch_answers_zero():
    assert st.QuantileSketch.of(np.array([])).quantile(0.5) == 0.0


def test_value_counts_merge_and_most_common_break_ties_by_value():
    a = st.value_counts(pa.array(["x", "y", None, "y"]))
    b = st.value_counts(pa.array(["z", "x"]))
    merged = st.merge_counts(a, b)
    assert merged.to_dict() == {"x": 2, "y": 2, "z": 1}
    assert st.most_common(merged, 2) == ["x", "y"]
    assert st.merge_counts(None, b) is b and st.merge_counts(a, None) is a
