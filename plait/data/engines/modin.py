"""Modin on Ray: Modin reads and partitions the data; plait's per-partition functions then run
as Ray tasks over Modin's row partitions (Arrow tables in Ray's object store)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa

from plait.data.engines.base import DataEngine, Source
from plait.data.engines.dask import _number_rows, _to_arrow
from plait.data.layout import split_slice, write_file


class ModinEngine(DataEngine):
    name = "modin"

    def __init__(self, parallelism: int | None = None, persist: bool = True):
        import ray

        self.parallelism = parallelism
        self.persist_enabled = persist  # Ray tasks' results always live in the object store
        self._task = ray.remote(_call)

    def read(self, sources: list[Source], storage_options: dict | None = None) -> tuple[list, list[str]]:
        import ray
        from modin.distributed.dataframe.pandas import unwrap_partitions

        parts, columns = [], None
        for source in sources:
            frame = self._modin_frame(source.data, storage_options)
            columns = list(frame.columns) if columns is None else [c for c in columns if c in frame.columns]
            refs = unwrap_partitions(frame, axis=0)
            parts += [self._task.remote(_to_arrow, ref, source.split) for ref in refs]
        lengths = ray.get([self._task.remote(len, p) for p in parts])
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        parts = [self._task.remote(_number_rows, p, int(o)) for p, o in zip(parts, offsets[:-1])]
        return parts, columns or []

    def _modin_frame(self, data: Any, storage_options: dict | None):
        import modin.pandas as mpd

        from plait.data.io import check_files_share_columns, data_format, is_dataframe, is_url, read_table

        if isinstance(data, mpd.DataFrame):
            return data
        if is_dataframe(data) or isinstance(data, pa.Table):
            return mpd.DataFrame(data.to_pandas() if isinstance(data, pa.Table) else data)
        check_files_share_columns(data, storage_options)  # their readers would merge differing files with nulls
        path = os.fspath(data)
        fmt = data_format(path) if not os.path.isdir(path) else "parquet"
        # The options are the cache's credentials, which a dataset shares only when it is a URL
        # too; pandas refuses storage options for a local path.
        storage_options = storage_options if is_url(path) else None
        options = dict(storage_options=storage_options) if storage_options else {}
        if fmt == "parquet":
            return mpd.read_parquet(path, **options)
        if fmt in ("csv", "tsv"):
            return mpd.read_csv(path, sep="\t" if fmt == "tsv" else ",", float_precision="round_trip", **options)
        return mpd.DataFrame(read_table(path, storage_options).to_pandas())

    def map(self, data: list, fn) -> list:
        return [self._task.remote(fn, p) for p in data]

    def reduce(self, data: list, fn, merge):
        import ray

        level = [self._task.remote(fn, p) for p in data]
        while len(level) > 1:
            level = [self._task.remote(merge, *level[i : i + 2]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
        return ray.get(level[0])

    def collect(self, data: list, fn) -> list:
        import ray

        return ray.get([self._task.remote(fn, p) for p in data])

    def persist(self, data: list) -> list:
        return data

    def write(self, data: list, tasks, fs, schema: pa.Schema) -> list[int]:
        import ray

        writes = [
            self._task.remote(_write_slices, fs, t.path, t.split, t.slices, schema, *[data[i] for i, _, _ in t.slices])
            for t in tasks
        ]
        return ray.get(writes)


def _call(fn, *args):
    return fn(*args)


def _write_slices(fs, path, split, slices, schema, *parts):
    pieces = [split_slice(part, split, a, b) for part, (_, a, b) in zip(parts, slices)]
    return write_file(fs, path, pieces, schema)
