"""Vector features: fixed-size numeric vectors from lists or space-separated strings."""

from __future__ import annotations

import pyarrow as pa
import pytest

from plait.errors import DataError


def vector(make_processor, **preprocessing):
    return make_processor("vector", preprocessing or None)


def test_vectors_from_space_separated_strings(make_processor, fit_transform):
    meta, out = fit_transform(vector(make_processor), ["1 2 3", "4.5 -5 6e1", " 7\t8 9 "])
    assert meta["vector_size"] == 3
    assert out == [[1.0, 2.0, 3.0], [4.5, -5.0, 60.0], [7.0, 8.0, 9.0]]


def test_vectors_from_lists(make_processor, fit_transform):
    meta, out = fit_transform(vector(make_processor), [[1, 2], [3.5, 4]])
    assert meta["vector_size"] == 2
    assert out == [[1.0, 2.0], [3.5, 4.0]]


def test_output_is_fixed_size_lists_of_float32(make_processor, fit):
    processor = vector(make_processor)
    meta = fit(processor, ["1 2"])
    assert processor.transform(processor.prepare(pa.array(["3 4"])), meta).type == pa.list_(pa.float32(), 2)


def test_missing_vectors_are_filled_with_the_constant(make_processor, fit_transform):
    assert fit_transform(vector(make_processor), ["1 2", None])[1] == [[1.0, 2.0], [0.0, 0.0]]
    assert fit_transform(vector(make_processor, fill_value=-1), ["1 2", None])[1] == [[1.0, 2.0], [-1.0, -1.0]]


def test_fill_with_mean_is_the_mean_vector_of_training(make_processor, fit_transform):
    processor = vector(make_processor, missing_value_strategy="fill_with_mean")
    meta, out = fit_transform(processor, ["1 2", "3 6", None])
    assert meta["fill_value"] == [2.0, 4.0]
    assert out[2] == [2.0, 4.0]


def test_training_vectors_of_different_lengths_ask_for_vector_size(make_processor, fit):
    with pytest.raises(DataError) as info:
        fit(vector(make_processor), ["1 2", "1 2 3"])
    assert str(info.value) == (
        "vector feature 'f': vectors in column 'f' have different lengths (2, 3); set preprocessing.vector_size"
    )


def test_vector_of_the_wrong_size_is_a_data_error(make_processor, fit_transform):
    with pytest.raises(DataError, match="vector feature 'f': a vector in column 'f' has 2 values, expected 3"):
        fit_transform(vector(make_processor, vector_size=3), ["1 2 3"], ["1 2 3", "1 2"])


def test_non_numbers_in_a_vector_name_the_feature(make_processor):
    with pytest.raises(DataError, match="vector feature 'f': column 'f' holds non-numbers"):
        vector(make_processor).prepare(pa.array(["1 2", "1 x"]))


def test_a_plain_number_column_is_not_a_vector(make_processor):
    with pytest.raises(DataError, match="vector feature 'f': column 'f' has type int64"):
        vector(make_processor).prepare(pa.array([1, 2]))


def test_statistics_do_not_depend_on_partitioning(make_processor, fit):
    rows = ["0.1 0.2", "0.3 0.7", None, "1e-3 5", "2 2"]
    processor = vector(make_processor, missing_value_strategy="fill_with_mean")
    assert fit(processor, rows) == fit(processor, rows[:1], rows[1:3], rows[3:])


def test_a_fill_value_in_ludwigs_string_form_fills_that_vector(make_processor, fit_transform):
    processor = make_processor("vector", {"fill_value": "1 2"})
    assert fit_transform(processor, [[0.0, 0.0], None])[1] == [[0.0, 0.0], [1.0, 2.0]]
    with pytest.raises(DataError, match="has 3 numbers, but the vectors have 2"):
        fit_transform(make_processor("vector", {"fill_value": "1 2 3"}), [[0.0, 0.0]])


@pytest.mark.parametrize("strategy, filled", [("fill_with_const", [0.0, 0.0]), ("fill_with_mean", [2.0, 4.0])])
def test_a_vector_holding_nan_inf_or_a_number_beyond_float32_is_a_missing_value(make_processor, fit_transform,
                                                                                strategy, filled):
    processor = vector(make_processor, missing_value_strategy=strategy)
    training = [[1.0, 2.0], [3.0, 6.0], [float("nan"), 1.0], [1.0, float("inf")], [1.0, None], [1e300, 0.0]]
    meta, out = fit_transform(processor, training, [[5.0, 5.0], [1.0, float("nan")], [float("-inf"), 0.0], [1e39, 0.0]])
    assert meta["fill_value"] == filled  # the mean of the finite vectors only
    assert out == [[5.0, 5.0]] + [filled] * 3
    assert fit_transform(processor, ["1 2", "3 6", "nan 1"], ["1 inf", "-Infinity 2"])[1] == [filled] * 2


def test_a_vector_holding_nan_drops_its_row_under_drop_row(make_processor):
    processor = vector(make_processor, missing_value_strategy="drop_row")
    assert processor.prepare(pa.array(["1 2", "1 nan", "2 3"])).is_valid().to_pylist() == [True, False, True]
