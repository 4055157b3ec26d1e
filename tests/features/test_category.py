"""Category features: a vocabulary of the most common values and an unknown token."""

from __future__ import annotations

import pyarrow as pa

TRAIN = ["b", "a", "c", "a", "b", "a", None]


def category(make_processor, output=False, **preprocessing):
    return make_processor("category", preprocessing or None, output=output)


def test_vocabulary_is_unknown_then_values_by_frequency(make_processor, fit):
    meta = fit(category(make_processor), TRAIN)
    assert meta["vocabulary"] == ["<UNK>", "a", "b", "c"]
    assert meta["frequencies"] == [0, 3, 2, 1]


def test_ties_in_frequency_are_broken_alphabetically(make_processor, fit):
    assert fit(category(make_processor), ["z", "m", "a"])["vocabulary"] == ["<UNK>", "a", "m", "z"]


def test_values_map_to_vocabulary_indices(make_processor, fit_transform):
    _, out = fit_transform(category(make_processor), TRAIN, ["a", "b", "c"])
    assert out == [1, 2, 3]


def test_unseen_values_map_to_the_unknown_index(make_processor, fit_transform):
    _, out = fit_transform(category(make_processor), TRAIN, ["a", "never seen", "A"])
    assert out == [1, 0, 0]


def test_missing_values_map_to_unknown_by_default(make_processor, fit_transform):
    assert fit_transform(category(make_processor), TRAIN, [None])[1] == [0]


def test_most_common_caps_the_vocabulary_and_the_rest_is_unknown(make_processor, fit_transform):
    meta, out = fit_transform(category(make_processor, most_common=2), TRAIN, ["a", "b", "c"])
    assert meta["vocabulary"] == ["<UNK>", "a", "b"]
    assert out == [1, 2, 0]


def test_lowercase_merges_case_variants(make_processor, fit_transform):
    meta, out = fit_transform(category(make_processor, lowercase=True), ["A", "a", "B"], ["A", "b"])
    assert meta["vocabulary"] == ["<UNK>", "a", "b"]
    assert out == [1, 2]


def test_case_matters_by_default(make_processor, fit):
    assert fit(category(make_processor), ["A", "a"])["vocabulary"] == ["<UNK>", "A", "a"]


def test_fill_with_mode_uses_the_most_frequent_training_value(make_processor, fit_transform):
    meta, out = fit_transform(category(make_processor, missing_value_strategy="fill_with_mode"), TRAIN, [None, "c"])
    assert meta["fill_value"] == "a"
    assert out == [1, 3]


def test_fill_with_const_value_from_the_vocabulary(make_processor, fit_transform):
    _, out = fit_transform(category(make_processor, fill_value="c"), TRAIN, [None])
    assert out == [3]


def test_integer_labels_keep_their_spelling_even_with_missing_values(make_processor, fit):
    # A CSV column of integers with a gap is read as floats; labels stay "3", not "3.0".
    meta = fit(category(make_processor), pa.array([3.0, 1.0, 3.0, None, 2.5]))
    assert meta["vocabulary"] == ["<UNK>", "3", "1", "2.5"]


def test_output_vocabulary_has_no_unknown_and_unseen_labels_are_minus_one(make_processor, fit_transform):
    meta, out = fit_transform(category(make_processor, output=True), ["x", "y", "x"], ["x", "y", "z"])
    assert meta["vocabulary"] == ["x", "y"]
    assert out == [0, 1, -1]


def test_output_is_int32(make_processor, fit):
    processor = category(make_processor)
    meta = fit(processor, TRAIN)
    assert processor.transform(processor.prepare(pa.array(["a"])), meta).type == pa.int32()


def test_statistics_do_not_depend_on_partitioning(make_processor, fit):
    processor = category(make_processor, most_common=2, missing_value_strategy="fill_with_mode")
    assert fit(processor, TRAIN) == fit(processor, TRAIN[:3], [], TRAIN[3:])
