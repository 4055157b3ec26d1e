"""CSV files with rows larger than Arrow's blocks are read whole and streamed alike; a file cut
short inside a quoted value is an error naming it."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from plait.data import io as data_io
from plait.data.io import read_table
from plait.errors import DataError
from plait.data.reader import iter_chunks

TOKENS = " ".join(f"tok{i % 50}" for i in range(800_000))  # 4.6 MB: over Arrow's 1 MiB block


def test_a_4_mb_sequence_cell_in_a_valid_csv_preprocesses(tmp_path, make_config, write_config, cli):
    path = tmp_path / "long.csv"
    path.write_text("s,y\n" + "".join(f"a b c,{i % 2}\n" for i in range(10)) + f'"{TOKENS}",1\n')
    config = write_config(make_config([{"name": "s", "type": "sequence"}], [{"name": "y", "type": "binary"}]))
    code, out, err = cli("preprocess", "--config", config, "--dataset", path)
    assert code == 0, err
    assert sum(json.loads(out)["rows"].values()) == 11


def test_a_row_larger_than_a_block_reads_the_same_whole_and_streamed(tmp_path, monkeypatch):
    monkeypatch.setattr(data_io, "CSV_BLOCK_BYTES", 1 << 20)  # streamed blocks of 1 MiB: rows before and after
    path = tmp_path / "long.csv"
    path.write_text("s,y\n" + "".join(f"{'w' * 100},0\n" for i in range(30_000)) + f'"{TOKENS}",1\n' + "z,0\n" * 5)
    whole = read_table(str(path))
    chunks = list(iter_chunks(str(path)))
    assert whole.num_rows == 30_006 and whole["s"][30_000].as_py() == TOKENS
    assert len(chunks) > 2 and pa.concat_tables(chunks).equals(whole)


@pytest.mark.parametrize("long_value", [TOKENS.replace(" ", "\n"), "short\nvalue"])
def test_a_csv_cut_inside_a_quoted_value_is_an_error_naming_the_file(tmp_path, make_config, write_config, cli_error,
                                                                       long_value):
    path = tmp_path / "cut.csv"
    path.write_text("x,s\n" + "".join(f"{i},a b\n" for i in range(10)) + f'10,"{long_value}')
    config = write_config(make_config([{"name": "x", "type": "number"}], [{"name": "s", "type": "text"}]))
    expected = f"cannot read {str(path)!r}: the quoted value of column 's' in its last row never ends"
    assert expected in cli_error("preprocess", "--config", config, "--dataset", path)
    with pytest.raises(DataError, match=expected.replace("(", r"\(")):
        list(iter_chunks(str(path)))


def test_a_quoted_value_with_line_breaks_at_the_end_of_a_whole_file_is_read(tmp_path):
    path = tmp_path / "whole.csv"
    path.write_text('x,s\n1,"two\nlines"\n')
    assert read_table(str(path)).to_pydict() == {"x": [1], "s": ["two\nlines"]}
    assert pa.concat_tables(iter_chunks(str(path))).to_pydict() == {"x": [1], "s": ["two\nlines"]}


def test_a_row_longer_than_the_largest_block_is_refused_with_what_to_check(tmp_path, monkeypatch):
    monkeypatch.setattr(data_io, "CSV_BLOCK_BYTES", 1 << 20)
    monkeypatch.setattr(data_io, "CSV_MAX_BLOCK_BYTES", 2 << 20)
    path = tmp_path / "long.csv"
    path.write_text("s,y\n" + "a,0\n" * 10 + f'"{TOKENS}",1\n')
    for read in (lambda: read_table(str(path)), lambda: list(iter_chunks(str(path)))):
        with pytest.raises(DataError, match=r"a row is longer than 2 MiB, or a quoted value never ends .* Is the file "
                                            r"complete\?"):
            read()
