"""Request values read as a CSV cell of the same text is read by `plait predict`."""

from __future__ import annotations

import pytest

from plait.serving.values import BadValue, binary, label, number, vector


@pytest.mark.parametrize("value, expected", [(3, 3.0), ("2.5", 2.5), (" 1e3 ", 1000.0), ("", None), ("NaN", None),
                                             ("n/a", None), (None, None), (float("inf"), None)])
def test_numbers_and_missing_words(value, expected):
    assert number(value, {}) == expected


@pytest.mark.parametrize("value, expected", [(3, "3"), (3.0, "3"), (2.5, "2.5"), (True, "true"), ("x", "x"), (None, None)])
def test_labels_are_the_text_a_csv_cell_would_hold(value, expected):
    assert label(value, {}) == expected


def test_binary_takes_trained_labels_and_true_false_words_only():
    meta = {"labels": ["no", "yes"]}
    assert binary("yes", meta) == "yes" and binary(False, meta) == "false" and binary("ON", meta) == "ON"
    with pytest.raises(BadValue, match="labels it was trained on: no, yes"):
        binary("maybe", meta)


def test_vectors_as_lists_or_text_of_the_trained_size():
    meta = {"vector_size": 2}
    assert vector([1, 2.5], meta) == "1.0 2.5" and vector("1 2", meta) == "1 2" and vector(None, meta) is None
    for bad in ([1], [1, "x"], "1 2 3", {"a": 1}):
        with pytest.raises(BadValue):
            vector(bad, meta)


def test_a_file_part_is_read_as_utf8_text():
    assert number(b"4", {}) == 4.0
    with pytest.raises(BadValue, match="not UTF-8"):
        number(b"\xff", {})
