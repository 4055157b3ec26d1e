"""Data to predict on or evaluate, read in chunks so that memory stays bounded.

One reader for every consumer: local prediction and evaluation read a source chunk by chunk
(:func:`iter_chunks`); a Ray Data job reads the same source as independent pieces, one per read
task (:func:`pieces` and :func:`read_piece`). Both go through :func:`file_chunks`, so a file
parses the same way everywhere: Parquet by batches, CSV and TSV streamed in blocks (compressed
or not, local or behind any fsspec URL), JSON whole.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

import pyarrow as pa

from plait.data.io import (csv_blocks, data_format, dataset_files, first_line, from_pandas, is_dataframe,
                           parquet_row_groups, read_file)
from plait.errors import DataError
from plait.utils.fs import bounded_options

CHUNK_ROWS = 100_000


@dataclass(frozen=True)
class CachedSplit:
    """A split of the preprocessing cache as data to predict on or evaluate (the experiment's
    test split): its rows are already preprocessed, with columns named after the features."""

    data: Any
    split: str


class Piece(NamedTuple):
    """What one read task reads: row groups of a Parquet file, or a whole file."""

    file: str
    row_groups: tuple[int, ...] | None = None
    rows: int | None = None


def iter_chunks(source: Any, chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
    """Raw data (a path, URL, glob or folder, a DataFrame, an Arrow table) or a cached split in
    chunks of about ``chunk_rows`` rows, without reading it all at once."""
    if isinstance(source, CachedSplit):
        fs = source.data.fs
        for file in source.data.split_files(source.split):
            yield from file_chunks(fs, file, chunk_rows)
        return
    table = in_memory_table(source)
    if table is not None:
        for start in range(0, max(table.num_rows, 1), chunk_rows):
            yield table.slice(start, chunk_rows)
        return
    fs, found = pieces(source)
    for piece in found:
        yield from read_piece(fs, piece, chunk_rows)


def in_memory_table(source: Any) -> pa.Table | None:
    """The source as an Arrow table when it is already in memory (a DataFrame or a table)."""
    if is_dataframe(source):
        return from_pandas(source, empty_ok=True)
    return source if isinstance(source, pa.Table) else None


def pieces(source: str | os.PathLike) -> tuple[Any, list[Piece]]:
    """``(filesystem, pieces)`` of a path or URL: a piece per Parquet row group, or per file of
    another format, in the order the rows are read."""
    if not isinstance(source, (str, os.PathLike)):
        raise DataError(f"a dataset must be a path, a URL or a pandas DataFrame, not {type(source).__name__}")
    import fsspec

    path = os.fspath(source)
    if not os.path.exists(path) and "://" not in path and not any(c in path for c in "*?["):
        raise DataError(f"dataset {path!r} does not exist")
    options = bounded_options(path, None)  # an endpoint that never answers fails in seconds
    parquet = parquet_row_groups(path, options, empty_ok=True)
    if parquet is not None:
        fs, groups, _ = parquet
        return fs, [Piece(g.file, g.indices, g.rows) for g in groups]
    fs, fs_path = fsspec.core.url_to_fs(path, **options)
    files = dataset_files(fs, fs_path, path) or [fs_path]
    for file in files:
        data_format(file)  # an unknown format fails here, before any read, naming the file
    return fs, [Piece(file) for file in files]


def known_columns(source: Any) -> list[str] | None:
    """The source's column names when they are known without reading rows (a table in memory, or
    Parquet footers); None otherwise."""
    table = in_memory_table(source)
    if table is not None:
        return table.column_names
    if isinstance(source, (str, os.PathLike)):
        parquet = parquet_row_groups(source, bounded_options(os.fspath(source), None), empty_ok=True)
        return parquet[2] if parquet is not None else None
    return None


def read_piece(fs, piece: Piece, chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
    """The rows of one piece, in chunks; a file that cannot be read is a DataError naming it."""
    yield from file_chunks(fs, piece.file, chunk_rows, piece.row_groups)


def file_chunks(fs, file: str, chunk_rows: int = CHUNK_ROWS, row_groups=None) -> Iterator[pa.Table]:
    """One file in chunks of at most ``chunk_rows`` rows: Parquet by record batches (of
    ``row_groups`` only, when given), CSV/TSV streamed in blocks (decompressed on the fly), JSON
    and JSONL read whole; blocks larger than a chunk are sliced."""
    fmt = data_format(file)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            with fs.open(file, "rb") as handle:
                groups = list(row_groups) if row_groups is not None else None
                for batch in pq.ParquetFile(handle).iter_batches(batch_size=chunk_rows, row_groups=groups):
                    yield pa.Table.from_batches([batch])
        elif fmt in ("csv", "tsv"):
            for block in csv_blocks(fs, file, fmt):
                for start in range(0, block.num_rows, chunk_rows):
                    yield block.slice(start, chunk_rows)
        else:
            table = read_file(fs, file, fmt)
            for start in range(0, table.num_rows, chunk_rows):
                yield table.slice(start, chunk_rows)
    except (pa.ArrowException, OSError, ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {file!r}: {first_line(exc)}") from None

