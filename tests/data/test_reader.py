"""The one chunk reader: paths, URLs and compressed files, read in chunks."""

from __future__ import annotations

import gzip

import fsspec
import pandas as pd
import pyarrow as pa
import pytest

from plait.errors import DataError
from plait.data import io as data_io
from plait.data.reader import iter_chunks, known_columns


def frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame({"x": range(rows), "label": [f"l{i % 7}" for i in range(rows)]})


def rows_of(chunks) -> pd.DataFrame:
    return pa.concat_tables(list(chunks)).to_pandas()


def test_a_gzip_csv_is_streamed_in_blocks_not_read_whole(tmp_path, monkeypatch):
    data = frame(20_000)
    path = tmp_path / "data.csv.gz"
    with gzip.open(path, "wt") as handle:
        data.to_csv(handle, index=False)
    monkeypatch.setattr(data_io, "CSV_BLOCK_BYTES", 16 << 10)  # small blocks: many chunks from one file
    chunks = list(iter_chunks(str(path)))
    assert len(chunks) > 5, "read in blocks"
    assert max(c.num_rows for c in chunks) < len(data)
    pd.testing.assert_frame_equal(rows_of(chunks), data)


def test_a_csv_behind_an_s3_url_is_read_in_chunks(s3_bucket, monkeypatch):
    bucket, credentials = s3_bucket
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", credentials["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", credentials["secret"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", credentials["endpoint_url"])
    monkeypatch.setattr(data_io, "CSV_BLOCK_BYTES", 4 << 10)
    data = frame(5_000)
    url = f"s3://{bucket}/in/data.csv"
    with fsspec.open(url, "w") as handle:
        data.to_csv(handle, index=False)
    chunks = list(iter_chunks(url))
    assert len(chunks) > 1
    pd.testing.assert_frame_equal(rows_of(chunks), data)


def test_parquet_is_read_in_chunks_of_the_asked_size_and_its_columns_known_from_the_footer(tmp_path):
    data = frame(1_000)
    path = tmp_path / "data.parquet"
    data.to_parquet(path, row_group_size=300)
    chunks = list(iter_chunks(str(path), chunk_rows=128))
    assert max(c.num_rows for c in chunks) == 128
    pd.testing.assert_frame_equal(rows_of(chunks), data)
    assert known_columns(str(path)) == ["x", "label"]


def test_a_folder_of_files_is_read_in_name_order(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    frame(10).to_csv(folder / "b.csv", index=False)
    frame(5).to_csv(folder / "a.csv", index=False)
    assert rows_of(iter_chunks(str(folder)))["x"].tolist() == list(range(5)) + list(range(10))


def test_a_damaged_file_is_a_data_error_naming_it(tmp_path):
    path = tmp_path / "data.csv.gz"
    path.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match="data.csv.gz"):
        list(iter_chunks(str(path)))


def test_a_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        list(iter_chunks(str(tmp_path / "nope.csv")))
