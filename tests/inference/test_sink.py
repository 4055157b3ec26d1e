"""The predictions sink: an input without rows gets an output without rows, never none."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from plait.inference.sink import PredictionsSink

NO_ROWS = pa.table({"y_predictions": pa.array([], pa.bool_()), "y_probability": pa.array([], pa.float32())})


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_no_tables_write_a_file_of_no_rows_in_place_of_an_older_one(fmt, tmp_path):
    (tmp_path / f"predictions.{fmt}").write_text("an older answer")
    written = PredictionsSink(str(tmp_path), fmt, no_rows=lambda: NO_ROWS).write_file([])
    assert (written.path, written.rows) == (str(tmp_path / f"predictions.{fmt}"), 0)
    if fmt == "parquet":
        assert pq.read_table(written.path).schema.equals(NO_ROWS.schema)
    else:
        assert (tmp_path / "predictions.csv").read_text().strip() == '"y_predictions","y_probability"'


def test_no_tables_and_no_columns_to_write_remove_an_older_file(tmp_path):
    (tmp_path / "predictions.parquet").write_text("an older answer")
    assert PredictionsSink(str(tmp_path)).write_file([]).rows == 0
    assert not (tmp_path / "predictions.parquet").exists()


def test_a_part_folder_of_no_parts_gets_one_part_of_no_rows(tmp_path):
    sink = PredictionsSink(str(tmp_path), no_rows=lambda: NO_ROWS)
    with sink.part_folder():
        pass  # a distributed job whose input had no rows: no write task wrote a part
    parts = sorted(p.name for p in (tmp_path / "predictions.parquet").iterdir())
    assert parts == ["_SUCCESS", "part-000000.parquet"]
    assert pq.read_table(tmp_path / "predictions.parquet" / "part-000000.parquet").schema.equals(NO_ROWS.schema)


def test_a_part_folder_with_parts_gets_no_extra_part(tmp_path):
    sink = PredictionsSink(str(tmp_path), no_rows=lambda: NO_ROWS)
    with sink.part_folder() as parts:
        parts.write_part(3, [pa.table({"y_predictions": [True], "y_probability": pa.array([0.9], pa.float32())})])
    assert sorted(p.name for p in (tmp_path / "predictions.parquet").iterdir()) == ["_SUCCESS", "part-000003.parquet"]
