"""Number features: normalization fitted on training values, missing-value fills, bad data."""

from __future__ import annotations

import statistics

import numpy as np
import pyarrow as pa
import pytest

from plait.errors import DataError

TRAIN = [1.0, 2.0, 3.0, 4.0]


def number(make_processor, **preprocessing):
    return make_processor("number", preprocessing)


def test_zscore_uses_training_mean_and_standard_deviation(make_processor, fit_transform):
    meta, out = fit_transform(number(make_processor, normalization="zscore"), TRAIN)
    mean, std = statistics.fmean(TRAIN), statistics.pstdev(TRAIN)
    assert meta["mean"] == pytest.approx(2.5) and meta["std"] == pytest.approx(std)
    assert out == pytest.approx([(x - mean) / std for x in TRAIN], rel=1e-6)


def test_the_default_auto_zscores_an_ordinary_column(make_processor, fit):
    processor = number(make_processor)
    assert processor.preprocessing.normalization == "auto"
    assert fit(processor, TRAIN)["normalization"] == "zscore"


def test_minmax_maps_training_range_onto_zero_one(make_processor, fit_transform):
    meta, out = fit_transform(number(make_processor, normalization="minmax"), [2.0, 4.0, 10.0], [2.0, 4.0, 10.0, 14.0])
    assert (meta["min"], meta["max"]) == (2.0, 10.0)
    assert out == pytest.approx([0.0, 0.25, 1.0, 1.0])  # 14 is past the training range: read as 10


def test_inputs_past_the_training_range_are_read_as_its_bounds_unless_told_not_to(make_processor, fit_transform):
    meta, out = fit_transform(number(make_processor, normalization="none", fill_value=-99.0),
                              [2.0, 4.0, 10.0], [-5.0, 3.0, 999999.0, None])
    assert meta["clip"] == [2.0, 10.0]
    assert out == pytest.approx([2.0, 3.0, 10.0, -99.0])  # a missing value keeps its fill
    meta, out = fit_transform(number(make_processor, normalization="none", clip_to_training_range=False),
                              [2.0, 4.0, 10.0], [-5.0, 999999.0])
    assert "clip" not in meta and out == pytest.approx([-5.0, 999999.0])


def test_iq_centres_on_the_median_and_scales_by_the_interquartile_range(make_processor, fit_transform):
    values = [float(v) for v in range(1, 102)]  # median 51; quartiles 26 and 76 (nearest rank)
    meta, out = fit_transform(number(make_processor, normalization="iq"), values, [51.0, 101.0])
    assert meta["median"] == pytest.approx(51, rel=0.01)
    assert meta["q1"] == pytest.approx(26, rel=0.01)
    assert meta["q3"] == pytest.approx(76, rel=0.01)
    assert out == pytest.approx([0.0, 1.0], abs=0.02)


def test_quantile_maps_each_value_to_the_normal_score_of_its_training_rank(make_processor, fit_transform):
    rng = np.random.default_rng(0)
    # A long tail and a sentinel in 5% of the rows: zscore would squeeze every ordinary value
    # into a sliver near its minimum.
    values = np.concatenate([rng.exponential(3.0, 950), [999999.0] * 50]).tolist()
    median = float(np.median(values))
    meta, out = fit_transform(number(make_processor, normalization="quantile"), values,
                              [median, 999999.0, 5e9, -1.0, None])
    assert out[0] == pytest.approx(0.0, abs=0.02)
    assert out[1] == out[2] > 1.6, "the sentinel's rows share the top ranks' mean score; past the range: the same"
    assert out[3] == pytest.approx(-3.09, abs=0.01), "below the training range: the lowest score"
    assert out[4] == out[3], "a missing value takes its fill (0), whose rank is the lowest"
    assert (np.diff(meta["quantile_values"]) > 0).all() and (np.diff(meta["quantile_scores"]) > 0).all()
    _, few = fit_transform(number(make_processor, normalization="quantile"), [0.0, 1.0, 1.0, 1.0] * 5, [0.0, 1.0])
    assert few[0] < 0 < few[1], "a two-valued column: two scores, in order"


@pytest.mark.parametrize("normalization", ["none", None])
def test_no_normalization_keeps_raw_values(make_processor, fit_transform, normalization):
    meta, out = fit_transform(number(make_processor, normalization=normalization), [1.5, -2.0, 1e6])
    assert meta["normalization"] == "none"
    assert out == [1.5, -2.0, 1e6]


@pytest.mark.parametrize("normalization", ["zscore", "minmax", "iq", "quantile"])
def test_constant_column_does_not_divide_by_zero(make_processor, fit_transform, normalization):
    _, out = fit_transform(number(make_processor, normalization=normalization), [5.0, 5.0, 5.0])
    assert np.isfinite(out).all()
    assert out == pytest.approx([0.0, 0.0, 0.0], abs=0.05)


def test_output_is_float32(make_processor, fit):
    processor = number(make_processor)
    meta = fit(processor, TRAIN)
    assert processor.transform(processor.prepare(pa.array(TRAIN)), meta).type == pa.float32()


def test_missing_values_are_filled_with_the_constant_before_normalizing(make_processor, fit_transform):
    meta, out = fit_transform(number(make_processor, normalization="minmax", fill_value=7), [1.0, None, 3.0])
    assert meta["min"] == 1.0 and meta["max"] == 3.0  # the fill is not part of the statistics
    assert out == pytest.approx([0.0, 3.0, 1.0])


def test_missing_values_default_to_zero(make_processor, fit_transform):
    _, out = fit_transform(number(make_processor, normalization="none"), [1.0, None])
    assert out == [1.0, 0.0]


def test_fill_with_mean_uses_the_training_mean(make_processor, fit_transform):
    processor = number(make_processor, normalization="none", missing_value_strategy="fill_with_mean")
    _, out = fit_transform(processor, [1.0, 2.0, 6.0, None], [None, 5.0])
    assert out == [3.0, 5.0]


def test_fill_with_mode_uses_the_most_frequent_training_value(make_processor, fit_transform):
    processor = number(make_processor, normalization="none", missing_value_strategy="fill_with_mode")
    _, out = fit_transform(processor, [1.0, 2.0, 2.0, 7.0, None])
    assert out == [1.0, 2.0, 2.0, 7.0, 2.0]


def test_nan_counts_as_missing(make_processor, fit_transform):
    processor = number(make_processor, normalization="none", fill_value=-1)
    meta, out = fit_transform(processor, pa.array([1.0, float("nan"), 3.0]))
    assert meta["mean"] == 2.0
    assert out == [1.0, -1.0, 3.0]


def test_numbers_written_as_text_are_parsed(make_processor, fit_transform):
    _, out = fit_transform(number(make_processor, normalization="none"), ["1", " 2.5", "-3e2", None])
    assert out == [1.0, 2.5, -300.0, 0.0]


def test_integers_and_booleans_are_numbers(make_processor, fit_transform):
    assert fit_transform(number(make_processor, normalization="none"), [1, 2, 3])[1] == [1.0, 2.0, 3.0]
    assert fit_transform(number(make_processor, normalization="none"), [True, False])[1] == [1.0, 0.0]


@pytest.mark.filterwarnings("error")
def test_text_in_a_number_column_names_the_feature_and_the_values(make_processor):
    processor = number(make_processor)
    with pytest.raises(DataError) as info:
        processor.prepare(pa.array(["1", "abc", "x", "abc", "2", "zz", "q"]))
    message = str(info.value)
    assert message.startswith("number feature 'f': column 'f' holds values that are not numbers")
    assert "'abc', 'x', 'zz'" in message  # the first three distinct bad values
    assert "5 rows" in message
    assert "category or text" in message


def test_statistics_do_not_depend_on_partitioning(make_processor, fit):
    rng = np.random.default_rng(0)
    values = rng.normal(3, 7, 1000).tolist()
    values[::9] = [None] * len(values[::9])
    for normalization in ("zscore", "minmax", "iq", "quantile"):
        processor = number(make_processor, normalization=normalization, missing_value_strategy="fill_with_mean")
        whole = fit(processor, values)
        assert fit(processor, values[:1], values[1:400], [], values[400:]) == whole
        assert fit(processor, *[values[i::7] for i in range(7)]) == whole


@pytest.mark.parametrize("values", [[1.0, float("inf"), 3.0, float("-inf")], ["1", "inf", "3", "-Infinity"]])
def test_infinities_are_missing_values_filled_per_the_strategy(make_processor, fit, values):
    processor = number(make_processor, missing_value_strategy="fill_with_mean", normalization="none")
    meta = fit(processor, values)
    assert meta["mean"] == 2.0
    assert processor.transform(processor.prepare(pa.array(values)), meta).to_pylist() == [1.0, 2.0, 3.0, 2.0]


def test_infinities_drop_the_row_under_drop_row(make_processor):
    processor = number(make_processor, missing_value_strategy="drop_row")
    assert processor.prepare(pa.array([1.0, float("inf")])).is_valid().to_pylist() == [True, False]


def test_log1p_takes_the_log_of_one_plus_each_value(make_processor, fit_transform):
    meta, out = fit_transform(number(make_processor, normalization="log1p"), [0.0, 1.0, 99.0], [0.0, 99.0, None])
    assert out == pytest.approx([0.0, np.log(100.0), 0.0])
    assert (meta["shift"], meta["scale"]) == (0.0, 1.0)


def test_log1p_refuses_values_where_it_is_undefined(make_processor, fit_transform):
    with pytest.raises(DataError, match="holds -2.0 .* log1p is undefined"):
        fit_transform(number(make_processor, normalization="log1p"), [1.0, -2.0])


@pytest.mark.parametrize("strategy, expected", [("fill_with_mean", 100.0 / 21), ("fill_with_const", 7.0), ("fill_with_mode", 0.0)])
def test_outliers_are_replaced_by_the_outlier_strategy_fill(make_processor, fit_transform, strategy, expected):
    train = [0.0] * 20 + [100.0]  # mean 4.76, std 21.3: 100 is 4.5 standard deviations out
    processor = number(make_processor, normalization="none", outlier_strategy=strategy, fill_value=7.0)
    meta, out = fit_transform(processor, train, [0.0, 100.0, 50.0])
    assert out == pytest.approx([0.0, expected, 50.0])


def test_outlier_threshold_sets_how_far_is_too_far(make_processor, fit_transform):
    processor = number(make_processor, normalization="none", outlier_strategy="fill_with_const", outlier_threshold=1.0)
    assert fit_transform(processor, [0.0, 0.0, 0.0, 3.0], [3.0, 0.5])[1] == pytest.approx([0.0, 0.5])


def test_auto_ranks_a_column_with_outliers_and_zscores_the_others(make_processor, fit):
    rng = np.random.default_rng(1)
    ordinary = rng.normal(50.0, 10.0, 2000)
    processor = number(make_processor, normalization="auto")
    assert fit(processor, ordinary.tolist())["normalization"] == "zscore"
    with_sentinels = np.where(rng.random(2000) < 0.05, 999999.0, ordinary)
    assert fit(processor, with_sentinels.tolist())["normalization"] == "quantile"
    assert fit(processor, [7.0] * 10)["normalization"] == "zscore"


def test_years_are_far_from_zero_and_close_together_and_still_ranked_apart(make_processor, fit, fit_transform):
    years = [2007.0] * 30 + [2008.0] * 40 + [2009.0] * 30
    assert fit(number(make_processor, normalization="auto"), years)["normalization"] == "zscore"
    _, out = fit_transform(number(make_processor, normalization="quantile"), years, [2007.0, 2008.0, 2009.0])
    assert out[0] < out[1] < out[2]
