"""Date features: Ludwig's nine numbers from text, timestamps or Unix times; fills; bad dates."""

from __future__ import annotations

import datetime
import logging

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from plait.errors import DataError

TARGET = {"name": "y", "type": "binary"}


def date(make_processor, **preprocessing):
    return make_processor("date", preprocessing or None)


def test_text_dates_become_year_month_day_weekday_yearday_hour_minute_second_and_second_of_day(
        make_processor, fit_transform):
    meta, out = fit_transform(date(make_processor), ["2024-03-05 10:11:12", "2023-12-31"])
    assert out == [[2024, 3, 5, 1, 65, 10, 11, 12, 36672], [2023, 12, 31, 6, 365, 0, 0, 0, 0]]
    assert meta["year_range"] == [2023, 2024]


@pytest.mark.parametrize("text", ["2024-03-05T10:11:12", "2024-03-05T10:11:12.999Z", "2024-03-05 12:11:12+02:00",
                                  "03/05/2024 10:11:12", "05.03.2024 10:11:12", "Tue, 05 Mar 2024 05:11:12 -0500"])
def test_common_forms_are_read_value_by_value_times_with_a_zone_in_utc(make_processor, fit_transform, text):
    assert fit_transform(date(make_processor), [text])[1] == [[2024, 3, 5, 1, 65, 10, 11, 12, 36672]]


def test_times_with_a_zone_read_the_same_from_a_csv_file_as_from_text(make_processor, fit_transform):
    import io

    import pyarrow.csv as csv

    text = ["2024-03-05T12:11:12+02:00", "2024-03-06T10:00:00Z"]
    typed = csv.read_csv(io.BytesIO(("d\n" + "\n".join(text)).encode()))["d"]
    assert typed.type == pa.timestamp("s", tz="UTC")  # Arrow's CSV reader converts to UTC
    processor = date(make_processor)
    assert fit_transform(processor, typed)[1] == fit_transform(processor, text)[1]


def test_a_column_mixing_forms_reads_each_value_in_its_own(make_processor, fit_transform):
    out = fit_transform(date(make_processor), ["2024-03-05", "13/05/2024", "5 Mar 2024", "20240305", "1709596800"])[1]
    assert [row[:3] for row in out] == [[2024, 3, 5], [2024, 5, 13], [2024, 3, 5], [2024, 3, 5], [2024, 3, 5]]


def test_arrow_dates_timestamps_and_unix_times_are_taken_as_they_are(make_processor, fit_transform):
    processor = date(make_processor)
    assert fit_transform(processor, pa.array([datetime.date(2024, 3, 5)]))[1][0][:4] == [2024, 3, 5, 1]
    tokyo = pa.array([3600_000], pa.timestamp("ms", tz="Asia/Tokyo"))  # 10:00 there, 01:00 UTC
    assert fit_transform(processor, tokyo)[1][0][5] == 1
    # seconds and milliseconds alike, as Ludwig scales them
    assert fit_transform(processor, pa.array([1709596800, 1709596800000]))[1][0] == fit_transform(
        processor, pa.array([1709596800000]))[1][0]


def test_a_datetime_format_reads_its_form_and_other_values_are_still_inferred(make_processor, fit_transform):
    out = fit_transform(date(make_processor, datetime_format="%d|%m|%Y %Hh"), ["05|03|2024 10h", "2024-03-05"])[1]
    assert [row[:6] for row in out] == [[2024, 3, 5, 1, 65, 10], [2024, 3, 5, 1, 65, 0]]


def test_missing_dates_are_filled_with_the_epoch_or_the_fill_value(make_processor, fit_transform):
    assert fit_transform(date(make_processor), ["2024-03-05", None, " ", "NaN"])[1][1:] == [
        [1970, 1, 1, 3, 1, 0, 0, 0, 0]] * 3
    assert fit_transform(date(make_processor, fill_value="2000-01-02"), [None])[1] == [[2000, 1, 2, 6, 2, 0, 0, 0, 0]]


def test_a_fill_value_that_is_no_date_is_a_data_error(make_processor, fit):
    with pytest.raises(DataError, match="date feature 'f': preprocessing.fill_value 'soon' is not a date"):
        fit(date(make_processor, fill_value="soon"), ["2024-03-05"])


def test_an_impossible_date_is_not_rolled_over(make_processor):
    with pytest.raises(DataError) as info:
        date(make_processor).prepare(pa.array(["2024-03-05", "2024-02-30", "later", None]))
    assert str(info.value) == (
        "date feature 'f': 2 value(s) of column 'f' are not dates plait can read, such as '2024-02-30'; set "
        "preprocessing.datetime_format to their strptime format (such as %d/%m/%Y %H:%M), or clean the column")


def test_partitioning_does_not_change_a_single_byte(preprocessed_in_parts):
    rng = np.random.default_rng(0)
    forms = np.array(["%Y-%m-%d %H:%M:%S", "%m/%d/%Y", "%d %b %Y"])
    times = pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 10**8, 200), unit="s")
    frame = pd.DataFrame({"d": [t.strftime(f) for t, f in zip(times, rng.choice(forms, 200))],
                          "y": rng.random(200) < 0.5})
    frame.loc[::9, "d"] = None
    inputs = [{"name": "d", "type": "date"}]
    assert preprocessed_in_parts(inputs, [TARGET], frame, 1) == preprocessed_in_parts(inputs, [TARGET], frame, 20)


def test_a_category_set_by_the_weekday_is_learned(tmp_path):
    from plait.api import Model

    rng = np.random.default_rng(1)
    days = pd.Timestamp("2022-01-01") + pd.to_timedelta(rng.integers(0, 700, 400), unit="D")
    frame = pd.DataFrame({"when": days.strftime("%Y-%m-%d"),
                          "kind": np.where(days.dayofweek >= 5, "weekend", np.where(days.dayofweek == 0, "monday", "week"))})
    config = {"input_features": [{"name": "when", "type": "date"}], "output_features": [{"name": "kind", "type": "category"}],
              "trainer": {"epochs": 2, "batch_size": 32, "learning_rate": 0.02},
              "backend": {"type": "local", "cache_dir": str(tmp_path)}}
    model = Model(config)
    model.train(dataset=frame, random_seed=1, progress_bar=False)
    accuracy = (model.predict(frame).kind_predictions == frame.kind).mean()
    assert accuracy > 0.95


def test_bad_dates_through_the_cli_are_one_clean_error(tmp_path, make_config, write_config, make_dataset, cli_error):
    path = make_dataset({"d": ["2024-03-05"] * 9 + ["next tuesday"], "y": [True, False] * 5})
    config = write_config(make_config([{"name": "d", "type": "date"}], [TARGET]))
    error = cli_error("preprocess", "--config", config, "--dataset", path)
    assert "date feature 'd': 1 value(s) of column 'd' are not dates plait can read, such as 'next tuesday'" in error


# ---- the order of slash dates, decided once per column -----------------------------------------------

DAY_FIRST = [f"{day:02d}/01/2024" for day in range(1, 29)]  # 01/01 ... 28/01: day-first from 13/01 on


def test_a_day_first_column_is_read_day_first_in_every_row(make_processor, fit_transform):
    meta, out = fit_transform(date(make_processor), DAY_FIRST)
    assert meta["day_first"] is True
    assert [row[:3] for row in out] == [[2024, 1, day] for day in range(1, 29)]


def test_prediction_reads_a_date_in_the_order_training_decided(make_processor, fit, transform):
    processor = date(make_processor)
    day_first, month_first = fit(processor, DAY_FIRST), fit(processor, ["01/13/2024", "01/02/2024"])
    assert transform(processor, ["05/01/2024"], day_first)[0][:3] == [2024, 1, 5]
    assert transform(processor, ["05/01/2024"], month_first)[0][:3] == [2024, 5, 1]
    with pytest.raises(DataError, match="date feature 'f': 1 value\\(s\\) of column 'f' are month-first dates, such as "
                                        "01/13/2024, but this column's dates are read day-first, as its training data "
                                        "decided; write them day-first, or set preprocessing.datetime_format"):
        transform(processor, ["01/13/2024"], day_first)


def test_a_column_whose_dates_read_both_ways_is_read_month_first_with_a_warning(make_processor, fit, fit_transform,
                                                                                  caplog):
    with caplog.at_level(logging.WARNING, logger="plait"):
        meta = fit(date(make_processor), ["03/05/2024", "2024-06-01", "04/05/2024 10:00"], ["01/02/2024", "07/07/2024"])
    assert meta["day_first"] is False
    assert ("date feature 'f': column 'f': 3 date(s) such as 01/02/2024 read both month-first and day-first, and none "
            "tells which; they are read month-first (as in Ludwig). If they are day-first, set "
            "preprocessing.datetime_format to their form (such as %d/%m/%Y or %m/%d/%Y).") in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="plait"):
        meta, out = fit_transform(date(make_processor, datetime_format="%d/%m/%Y"), ["03/05/2024"])
    assert out[0][:3] == [2024, 5, 3] and caplog.text == ""


def test_a_column_mixing_month_first_and_day_first_dates_is_refused_through_the_cli(make_config, write_config,
                                                                                    make_dataset, cli_error):
    path = make_dataset({"d": ["01/13/2024", "13/01/2024", "14/01/2024"] * 4, "y": [True, False] * 6})
    config = write_config(make_config([{"name": "d", "type": "date"}], [TARGET],
                                      preprocessing={"split": {"probabilities": [1.0, 0.0, 0.0]}}))
    assert cli_error("preprocess", "--config", config, "--dataset", path) == (
        "plait: error: date feature 'd': column 'd' mixes month-first dates (4, such as 01/13/2024) and day-first "
        "dates (8, such as 13/01/2024); write them all one way, or set preprocessing.datetime_format to their form "
        "(such as %d/%m/%Y or %m/%d/%Y) so that the others are refused")


def test_a_day_first_column_preprocesses_the_same_in_any_partitioning(preprocessed_in_parts):
    frame = pd.DataFrame({"d": DAY_FIRST * 3, "y": [True, False] * 42})
    inputs = [{"name": "d", "type": "date"}]
    one, many = preprocessed_in_parts(inputs, [TARGET], frame, 1), preprocessed_in_parts(inputs, [TARGET], frame, 28)
    assert one == many and one[1]["d"]["day_first"] is True


def test_a_model_trained_before_the_order_was_kept_reads_each_value_as_it_did(make_processor, fit, transform):
    processor = date(make_processor)
    legacy = {k: v for k, v in fit(processor, ["2024-01-01"]).items() if k != "day_first"}
    assert [row[:3] for row in transform(processor, ["05/01/2024", "13/01/2024"], legacy)] == [[2024, 5, 1],
                                                                                                [2024, 1, 13]]
