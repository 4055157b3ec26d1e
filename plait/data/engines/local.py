"""The local engine: in-memory Arrow partitions, processed by a thread pool in this process.

Arrow and numpy release the GIL, so threads use every core without copying data.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import reduce as fold

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from plait.data.engines.base import ROW_NUMBER, DataEngine, parquet_options
from plait.utils.fs import atomic_open


class LocalEngine(DataEngine):
    name = "local"

    def __init__(self, num_partitions: int | None = None, rows_per_partition: int = 250_000, threads: int | None = None):
        self.num_partitions = num_partitions
        self.rows_per_partition = rows_per_partition
        self.threads = threads or min(4, os.cpu_count() or 1)

    def from_table(self, table: pa.Table) -> list[pa.Table]:
        table = table.append_column(ROW_NUMBER, pa.array(np.arange(table.num_rows, dtype=np.int64)))
        parts = self.num_partitions or max(1, -(-table.num_rows // self.rows_per_partition))
        bounds = np.linspace(0, table.num_rows, parts + 1).astype(int)
        return [table.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]

    def map(self, data: list[pa.Table], fn) -> list[pa.Table]:
        return self._run(fn, data)

    def reduce(self, data: list[pa.Table], fn, merge):
        return fold(merge, self._run(fn, data))

    def write_parquet(self, data: list[pa.Table], fs, path: str) -> int:
        table = self.to_table(data)
        with atomic_open(fs, path) as handle:
            pq.write_table(table, handle, **parquet_options(table.schema))
        return table.num_rows

    def to_table(self, data: list[pa.Table]) -> pa.Table:
        return pa.concat_tables(data).combine_chunks()

    def _run(self, fn, parts: list):
        if len(parts) == 1 or self.threads == 1:
            return [fn(p) for p in parts]
        with ThreadPoolExecutor(self.threads) as pool:
            return list(pool.map(fn, parts))
