"""The canonical on-disk layout of a preprocessed split, shared by every engine.

A split is a folder of Parquet files, file k holding the split's rows k*ROWS_PER_FILE up to
(k+1)*ROWS_PER_FILE in input order. The layout depends on the row counts alone, never on how
an engine partitioned the data, so every engine writes byte-identical files; engines that run
on many workers write the files in parallel, each from slices of one or two partitions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from plait.data.engines.base import fixed_row_bytes, parquet_options
from plait.utils.fs import atomic_open, ensure_dir

ROWS_PER_FILE = 500_000
FILE_BYTES = 64 << 20
"""Files of rows with large fixed-size values (images) hold about this much, not 500,000 rows:
small enough that a split's files are written by several threads or tasks at once."""
SPLIT_COLUMN = "__plait_split__"


@dataclass(frozen=True)
class FileTask:
    """One output file: the split's rows ``[start, stop)`` of each listed partition, in order."""

    path: str
    split: int
    slices: tuple[tuple[int, int, int], ...]  # (partition index, start, stop) within the split's rows

    @property
    def rows(self) -> int:
        return sum(stop - start for _, start, stop in self.slices)


def plan(counts: list[np.ndarray], split: int, directory: str, rows_per_file: int = ROWS_PER_FILE) -> list[FileTask]:
    """File tasks for one split, given each partition's row count per split code."""
    sizes = [int(c[split]) for c in counts]
    total = sum(sizes)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    tasks = []
    for k, first in enumerate(range(0, max(total, 1), rows_per_file)):
        last = min(first + rows_per_file, total)
        slices = tuple(
            (i, max(first, int(offsets[i])) - int(offsets[i]), min(last, int(offsets[i + 1])) - int(offsets[i]))
            for i in range(len(sizes))
            if sizes[i] and offsets[i] < last and offsets[i + 1] > first
        )
        tasks.append(FileTask(f"{directory}/part-{k:05d}.parquet", split, slices))
    return tasks


def rows_per_file(schema: pa.Schema) -> int:
    """Rows per file of a split of this schema (from the schema alone: every engine agrees)."""
    return min(ROWS_PER_FILE, max(1, FILE_BYTES // fixed_row_bytes(schema)))


def split_slice(part: pa.Table, split: int, start: int, stop: int) -> pa.Table:
    """Rows ``[start, stop)`` of one partition's rows of ``split``, without the split column."""
    # The rows' indices first, then a take of just those: filtering the whole split and slicing
    # it copied every image of the split once per file.
    rows = np.flatnonzero(pc.equal(part[SPLIT_COLUMN], split).to_numpy(zero_copy_only=False))[start:stop]
    return part.drop_columns([SPLIT_COLUMN]).take(pa.array(rows))


def write_file(fs, path: str, pieces: list[pa.Table], schema: pa.Schema) -> int:
    """Write one file of the layout atomically; returns its size in bytes."""
    table = pa.concat_tables(pieces).combine_chunks() if pieces else schema.empty_table()
    ensure_dir(fs, path.rsplit("/", 1)[0])
    with atomic_open(fs, path) as handle:
        pq.write_table(table, handle, **parquet_options(table.schema))
    return fs.info(path)["size"]
