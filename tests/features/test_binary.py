"""Binary features: boolean words, 0/1, booleans, or any two labels."""

from __future__ import annotations

import pyarrow as pa
import pytest

from plait.errors import DataError


def binary(make_processor, **preprocessing):
    return make_processor("binary", preprocessing or None)


def test_boolean_words_in_any_case(make_processor, fit_transform):
    meta, out = fit_transform(binary(make_processor), ["yes", "no", "Yes", "N", "TRUE", "off"])
    assert out == [True, False, True, False, True, False]
    assert sorted(meta["true_labels"]) == ["TRUE", "Yes", "yes"]


def test_zero_and_one_as_integers_floats_or_text(make_processor, fit_transform):
    assert fit_transform(binary(make_processor), [1, 0, 1])[1] == [True, False, True]
    assert fit_transform(binary(make_processor), [1.0, 0.0, None])[1] == [True, False, False]
    assert fit_transform(binary(make_processor), ["1", "0"])[1] == [True, False]


def test_arrow_booleans(make_processor, fit_transform):
    assert fit_transform(binary(make_processor), [True, False, None])[1] == [True, False, False]


def test_two_other_labels_make_the_one_sorting_last_true(make_processor, fit_transform):
    meta, out = fit_transform(binary(make_processor), ["dog", "cat", "dog"])
    assert meta["true_labels"] == ["dog"]
    assert out == [True, False, True]


def test_fallback_true_label_picks_which_label_is_true(make_processor, fit_transform):
    meta, out = fit_transform(binary(make_processor, fallback_true_label="cat"), ["dog", "cat", "dog"])
    assert meta["true_labels"] == ["cat"]
    assert out == [False, True, False]


def test_more_than_two_labels_is_a_data_error_suggesting_category(make_processor, fit):
    with pytest.raises(DataError) as info:
        fit(binary(make_processor), ["a", "b", "c", "a"])
    assert str(info.value) == (
        "binary feature 'f': column 'f' has 3 distinct values (a, b, c); a binary feature needs two. "
        "Use a category feature instead."
    )


def test_missing_values_are_false_by_default(make_processor, fit_transform):
    assert fit_transform(binary(make_processor), ["yes", None, "no"])[1] == [True, False, False]


def test_fill_with_true(make_processor, fit_transform):
    assert fit_transform(binary(make_processor, missing_value_strategy="fill_with_true"), ["no", None])[1] == [False, True]


def test_fill_with_mode_uses_the_most_frequent_training_label(make_processor, fit_transform):
    processor = binary(make_processor, missing_value_strategy="fill_with_mode")
    assert fit_transform(processor, ["yes", "yes", "no", None])[1] == [True, True, False, True]
    assert fit_transform(processor, ["no", "yes", "no", None])[1] == [False, True, False, False]


@pytest.mark.parametrize("fill_value, expected", [("yes", True), ("no", False), (True, True), (0, False)])
def test_fill_with_const(make_processor, fit_transform, fill_value, expected):
    processor = binary(make_processor, missing_value_strategy="fill_with_const", fill_value=fill_value)
    assert fit_transform(processor, ["yes", "no", None])[1] == [True, False, expected]


def test_statistics_do_not_depend_on_partitioning(make_processor, fit):
    values = ["yes", "no", None, "no", "yes", "yes"]
    processor = binary(make_processor, missing_value_strategy="fill_with_mode")
    assert fit(processor, values) == fit(processor, values[:2], values[2:3], values[3:])


def test_output_is_boolean(make_processor, fit):
    processor = binary(make_processor)
    meta = fit(processor, ["yes", "no"])
    assert processor.transform(processor.prepare(pa.array(["no"])), meta).type == pa.bool_()


@pytest.mark.parametrize("trained, later, expected", [
    ([1, 0, 1], ["yes", "no", "Y", "n", "True", "f"], [True, False, True, False, True, False]),
    (["yes", "no"], ["1", "0", "t", "F", "1.0", "0.0"], [True, False, True, False, True, False]),
    ([True, False], ["Yes", "No", "ON", "off"], [True, False, True, False]),
    (["dog", "cat"], ["dog", "cat", "yes", "no"], [True, False, True, False]),
])
def test_labels_spelled_otherwise_than_in_training_keep_their_meaning(make_processor, fit, trained, later, expected):
    processor = binary(make_processor)
    meta = fit(processor, trained)
    assert processor.transform(processor.prepare(pa.array(later)), meta).to_pylist() == expected


def test_a_label_that_is_neither_a_training_label_nor_a_boolean_word_is_refused(make_processor, fit):
    processor = binary(make_processor)
    meta = fit(processor, ["1", "0"])
    with pytest.raises(DataError) as info:
        processor.transform(processor.prepare(pa.array(["1", "maybe", None, "perhaps", "maybe"])), meta)
    assert str(info.value) == ("binary feature 'f': column 'f' has 'maybe', 'perhaps', which is neither a label of "
                               "the training data ('0', '1') nor a boolean word; use those labels or true/false, "
                               "yes/no, y/n, t/f, 1/0, on/off")
