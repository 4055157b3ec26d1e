"""A dataset folder or glob whose files disagree on their columns is refused, naming the files and
the columns, rather than merged with nulls."""

from __future__ import annotations

import pandas as pd
import pytest

from plait.cli import main
from plait.data.io import check_files_share_columns, parquet_row_groups, read_table
from plait.errors import DataError

CONFIG = {"input_features": [{"name": "x1", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}]}


def write_parts(folder, suffix: str) -> None:
    folder.mkdir()
    frames = [pd.DataFrame({"x1": [1.0, 2.0], "y": [0, 1]}), pd.DataFrame({"X1": [3.0], "y": [1]})]
    for i, frame in enumerate(frames):
        path = folder / f"part-{i}.{suffix}"
        frame.to_parquet(path) if suffix == "parquet" else frame.to_csv(path, index=False)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_preprocess_refuses_a_folder_whose_files_disagree_on_columns(suffix, tmp_path, write_config, cache_dir, capsys):
    write_parts(tmp_path / "parts", suffix)
    config = write_config({**CONFIG, "backend": {"type": "local", "cache_dir": cache_dir}})
    code = main(["preprocess", "--config", config, "--dataset", str(tmp_path / "parts")])
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err and err.count("plait: error:") == 1, err
    assert f"part-0.{suffix}' alone has 'x1'" in err and f"part-1.{suffix}' alone has 'X1'" in err
    assert "give every file of a dataset the same column names" in err


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_every_reader_of_a_glob_refuses_differing_columns(suffix, tmp_path):
    write_parts(tmp_path / "parts", suffix)
    glob = str(tmp_path / "parts" / f"*.{suffix}")
    readers = [read_table, check_files_share_columns] + ([parquet_row_groups] if suffix == "parquet" else [])
    for reader in readers:
        with pytest.raises(DataError, match="do not share their columns"):
            reader(glob)


def test_files_with_the_same_columns_in_another_order_are_one_dataset(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    pd.DataFrame({"x1": [1.0], "y": [0]}).to_csv(folder / "a.csv", index=False)
    pd.DataFrame({"y": [1], "x1": [2.0]}).to_csv(folder / "b.csv", index=False)
    check_files_share_columns(str(folder))
    assert read_table(str(folder)).to_pydict() == {"x1": [1.0, 2.0], "y": [0, 1]}
