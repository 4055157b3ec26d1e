"""The local engine: in-memory Arrow partitions, processed by a thread pool in this process.

Arrow and numpy release the GIL, so threads use every core without copying data.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import reduce as fold

import numpy as np
import pyarrow as pa

from plait.data.engines.base import ROW_NUMBER, DataEngine, Source
from plait.data.io import is_url, read_table
from plait.data.layout import SPLIT_COLUMN, split_slice, write_file
from plait.errors import DataError


class LocalEngine(DataEngine):
    name = "local"

    def __init__(self, num_partitions: int | None = None, rows_per_partition: int = 250_000, threads: int | None = None):
        self.num_partitions = num_partitions
        self.rows_per_partition = rows_per_partition
        self.threads = threads or min(4, os.cpu_count() or 1)

    def read(self, sources: list[Source], storage_options: dict | None = None) -> tuple[list[pa.Table], list[str]]:
        tables = []
        for source in sources:
            table = read_table(source.data, storage_options if is_url(source.data) else None)
            if source.split is not None:
                table = table.append_column(SPLIT_COLUMN, pa.array(np.full(table.num_rows, source.split, dtype=np.int8)))
            tables.append(table)
        columns = [c for c in tables[0].column_names if all(c in t.column_names for t in tables)]
        if len(tables) > 1:
            try:
                tables = [pa.concat_tables([t.select(columns) for t in tables], promote_options="permissive")]
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise DataError(f"the training, validation and test sets do not share column types: {exc}") from None
        return self.from_table(tables[0]), columns

    def from_table(self, table: pa.Table) -> list[pa.Table]:
        rows = pa.array(np.arange(table.num_rows, dtype=np.int64))
        batches = table.to_batches()
        sizes = [b.num_rows for b in batches]
        about_right = len(batches) > 1 and self.rows_per_partition // 2 <= min(sizes[:-1]) and max(sizes) <= 2 * self.rows_per_partition
        if self.num_partitions is None and about_right:
            # The reader's record batches are about the partition size: taken as the partitions,
            # each column of each partition is one contiguous array, used without copying.
            bounds = np.cumsum([0] + sizes)
            return [
                pa.Table.from_batches([b.append_column(ROW_NUMBER, rows.slice(a, b.num_rows))])
                for a, b in zip(bounds[:-1].tolist(), batches)
            ]
        table = table.append_column(ROW_NUMBER, rows)
        parts = self.num_partitions or max(1, -(-table.num_rows // self.rows_per_partition))
        bounds = np.linspace(0, table.num_rows, parts + 1).astype(int)
        return [table.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]

    def map(self, data: list[pa.Table], fn) -> list[pa.Table]:
        return self._run(fn, data)

    def reduce(self, data: list[pa.Table], fn, merge):
        return fold(merge, self._run(fn, data))

    def collect(self, data: list[pa.Table], fn) -> list:
        return self._run(fn, data)

    def persist(self, data: list[pa.Table]) -> list[pa.Table]:
        return data  # already in memory

    def write(self, data: list[pa.Table], tasks, fs, schema: pa.Schema) -> list[int]:
        def write_one(task):
            pieces = [split_slice(data[i], task.split, a, b) for i, a, b in task.slices]
            return write_file(fs, task.path, pieces, schema)

        return self._run(write_one, tasks)

    def _run(self, fn, parts: list):
        if len(parts) == 1 or self.threads == 1:
            return [fn(p) for p in parts]
        with ThreadPoolExecutor(self.threads) as pool:
            return list(pool.map(fn, parts))
