"""Dask on Ray: partitions are Dask tasks over Arrow tables, run by Ray's Dask scheduler.

Sources are read by ``dask.dataframe`` in parallel (one task per file block); every later step
is one task per partition applying plait's per-partition functions, so the graph grows
linearly with partitions and never with features. ``persist`` keeps the cleaned partitions in
Ray's object store; without it each pass recomputes from the source, which streams data that
does not fit in memory.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa

from plait.data.engines.base import ROW_NUMBER, DataEngine, Source
from plait.data.layout import SPLIT_COLUMN, split_slice, write_file


def _scheduler():
    from ray.util.dask import ray_dask_get

    return ray_dask_get


class DaskEngine(DataEngine):
    name = "dask"

    def __init__(self, parallelism: int | None = None, persist: bool = True, rows_per_partition: int = 250_000):
        self.parallelism = parallelism
        self.persist_enabled = persist
        self.rows_per_partition = rows_per_partition

    # ---- reading ---------------------------------------------------------------------------

    def read(self, sources: list[Source], storage_options: dict | None = None) -> tuple[list, list[str]]:
        import dask

        parts, columns = [], None
        for source in sources:
            frame = self._dask_frame(source.data, storage_options)
            columns = list(frame.columns) if columns is None else [c for c in columns if c in frame.columns]
            parts += [dask.delayed(_to_arrow)(p, source.split) for p in frame.to_delayed()]
        lengths = self._compute(*[dask.delayed(len)(p) for p in parts])
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        parts = [dask.delayed(_number_rows)(p, int(o)) for p, o in zip(parts, offsets[:-1])]
        return self.persist(parts), columns or []

    def _dask_frame(self, data: Any, storage_options: dict | None):
        import dask.dataframe as dd

        from plait.data.io import data_format, is_dataframe, read_table

        if isinstance(data, dd.DataFrame):
            return data
        if is_dataframe(data) or isinstance(data, pa.Table):
            pdf = data.to_pandas() if isinstance(data, pa.Table) else data
            return dd.from_pandas(pdf, npartitions=self._partitions(len(pdf)), sort=False)
        if type(data).__module__.startswith("ray.data"):
            return data.to_dask()
        path = os.fspath(data)
        options = dict(storage_options=storage_options) if storage_options else {}
        fmt = data_format(path if not os.path.isdir(path) else _first_file(path))
        if fmt == "parquet":
            return dd.read_parquet(path, **options)
        if fmt in ("csv", "tsv"):
            # Round-trip float parsing: the same (correctly rounded) values Arrow's reader gives the local engine.
            return dd.read_csv(path, sep="\t" if fmt == "tsv" else ",", blocksize="64MB", float_precision="round_trip", **options)
        return dd.from_pandas(read_table(path, storage_options).to_pandas(), npartitions=self.parallelism or 1, sort=False)

    def _partitions(self, rows: int) -> int:
        return self.parallelism or max(2, -(-rows // self.rows_per_partition))

    # ---- the per-partition operations ------------------------------------------------------------

    def map(self, data: list, fn) -> list:
        import dask

        return [dask.delayed(fn)(p) for p in data]

    def reduce(self, data: list, fn, merge):
        import dask

        level = [dask.delayed(fn)(p) for p in data]
        while len(level) > 1:  # a balanced tree: log-depth, and no single task merges everything
            level = [dask.delayed(merge)(*level[i : i + 2]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
        return self._compute(level[0])[0]

    def collect(self, data: list, fn) -> list:
        import dask

        return list(self._compute(*[dask.delayed(fn)(p) for p in data]))

    def persist(self, data: list) -> list:
        if not self.persist_enabled:
            return data
        import dask

        return list(dask.persist(*data, scheduler=_scheduler()))

    def write(self, data: list, tasks, fs, schema: pa.Schema) -> list[int]:
        import dask

        writes = [
            dask.delayed(write_file)(fs, t.path, [dask.delayed(split_slice)(data[i], t.split, a, b) for i, a, b in t.slices], schema)
            for t in tasks
        ]
        return list(self._compute(*writes))

    def _compute(self, *delayed):
        import dask

        return dask.compute(*delayed, scheduler=_scheduler())


def _to_arrow(frame, split: int | None) -> pa.Table:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if split is not None:
        table = table.append_column(SPLIT_COLUMN, pa.array(np.full(table.num_rows, split, dtype=np.int8)))
    return table


def _number_rows(table: pa.Table, offset: int) -> pa.Table:
    return table.append_column(ROW_NUMBER, pa.array(np.arange(offset, offset + table.num_rows, dtype=np.int64)))


def _first_file(directory: str) -> str:
    for root, _, files in sorted(os.walk(directory)):
        for name in sorted(files):
            if not name.startswith(("_", ".")):
                return os.path.join(root, name)
    return directory
