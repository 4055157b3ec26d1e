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


def test_a_series_as_a_list_or_text_of_numbers():
    from plait.serving.values import timeseries

    assert timeseries([1, 2.5], {}) == [1.0, 2.5] and timeseries("1, 2 3", {}) == [1.0, 2.0, 3.0]
    assert timeseries(None, {}) is None
    with pytest.raises(BadValue, match="numbers split by spaces or commas, got '1 x'"):
        timeseries("1 x", {})


def test_dates_are_checked_as_the_column_reads_them():
    from plait.serving.values import date

    assert date("2024-03-05 10:00", {"datetime_format": None}) == "2024-03-05 10:00"
    assert date(1709596800, {"datetime_format": None}) == "1709596800" and date(None, {}) is None
    assert date("05|03|2024", {"datetime_format": "%d|%m|%Y"}) == "05|03|2024"
    with pytest.raises(BadValue, match="a date such as 2024-05-01 .* got 'soon'"):
        date("soon", {"datetime_format": None})
    # A column trained on day-first slash dates reads them so; a value only month-first reads is refused.
    assert date("28/01/2024", {"datetime_format": None, "day_first": True}) == "28/01/2024"
    with pytest.raises(BadValue, match="got '01/28/2024'"):
        date("01/28/2024", {"datetime_format": None, "day_first": True})


def test_h3_indexes_are_integers_or_hex_strings_of_valid_cells():
    from plait.serving.values import h3

    assert h3("8a2a100d645ffff", {}) == h3(622236723497533439, {}) == 622236723497533439
    assert h3(None, {}) is None and h3("", {}) is None
    with pytest.raises(BadValue, match="got 123: mode 0, where a cell has 1"):
        h3(123, {})
    with pytest.raises(BadValue, match="an integer or a hex string"):
        h3(1.5, {})


def test_a_column_is_checked_as_its_values_are_one_by_one_and_the_first_bad_row_is_named():
    from plait.serving.values import check_column

    assert check_column("number", [1, "2", None, "inf"], {}) == [1.0, 2.0, None, None]
    assert check_column("date", ["2024-03-05", None, 1709596800], {"datetime_format": None}) == [
        "2024-03-05", None, "1709596800"]
    assert check_column("h3", ["8a2a100d645ffff", "", 622236723497533439], {}) == [
        622236723497533439, None, 622236723497533439]
    for kind, values, expected in [("number", [1.0, True], "a number, not true or false"),
                                   ("date", ["2024-03-05", "soon"], "got 'soon'"),
                                   ("h3", ["8a2a100d645ffff", 123], "got 123: mode 0")]:
        with pytest.raises(BadValue, match=expected) as info:
            check_column(kind, values, {"datetime_format": None})
        assert info.value.row == 1
