"""Dask on Ray: partitions are Dask tasks over Arrow tables, run by Ray's Dask scheduler.

Parquet sources are read straight into Arrow by row group, in partitions of about
``rows_per_partition`` rows (small groups read together, large ones cut); other sources go
through ``dask.dataframe`` (one task per file block). Every later step is one task per
partition applying plait's per-partition functions, so the graph grows linearly with
partitions and never with features. ``persist`` keeps the cleaned partitions in Ray's object
store; without it each pass recomputes from the source, which streams data that does not fit
in memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from plait.data.engines.base import ROW_NUMBER, DataEngine, Source
from plait.data.io import RowGroups, is_url, parquet_row_groups, read_row_groups
from plait.data.layout import SPLIT_COLUMN, split_slice, write_file
from plait.data.split import SPLIT_NAMES
from plait.utils.fs import ensure_dir


def _scheduler():
    from ray.util.dask import ray_dask_get

    return ray_dask_get


@dataclass(frozen=True)
class _Partition:
    """A partition as a Dask value plus the per-partition functions still to apply to it.

    Maps are fused: a chain of them runs as one task when something needs the result, so the
    intermediate tables of each stage are never stored in Ray's object store (storing and
    loading them cost more than the stages themselves)."""

    value: Any
    functions: tuple = ()

    def then(self, fn) -> "_Partition":
        return _Partition(self.value, (*self.functions, fn))

    def delayed(self):
        import dask

        return dask.delayed(_apply)(self.value, self.functions) if self.functions else self.value


class DaskEngine(DataEngine):
    name = "dask"

    def __init__(self, parallelism: int | None = None, persist: bool = True, rows_per_partition: int = 250_000):
        self.parallelism = parallelism
        self.persist_enabled = persist
        self.rows_per_partition = rows_per_partition
        self.min_csv_partitions = 1

    def expect_costly_rows(self) -> None:
        import ray

        self.min_csv_partitions = self.parallelism or max(1, int(ray.cluster_resources().get("CPU", 1)))

    # ---- reading ---------------------------------------------------------------------------

    def read(self, sources: list[Source], storage_options: dict | None = None) -> tuple[list, list[str]]:
        parts, lengths, columns = [], [], None
        for source in sources:
            found = parquet_row_groups(source.data, storage_options if is_url(source.data) else None)
            if found is not None:
                new_parts, new_lengths, names = self._row_group_parts(*found, source.split)
            else:
                frame = self._dask_frame(source.data, storage_options if is_url(source.data) else None)
                names = list(frame.columns)
                new_parts = [_Partition(p).then(partial(_to_arrow, split=source.split)) for p in frame.to_delayed()]
                new_lengths = self._compute(*[p.then(len).delayed() for p in new_parts])
            columns = names if columns is None else [c for c in columns if c in names]
            parts += new_parts
            lengths += list(new_lengths)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        parts = [p.then(partial(_number_rows, offset=int(o))) for p, o in zip(parts, offsets[:-1])]
        return self.persist(parts), columns or []

    def _row_group_parts(self, fs, groups: list[RowGroups], names: list[str], split: int | None):
        """Partitions of about the partition size from Parquet row groups: small consecutive
        groups are read together, and a partition of one read is read in its own task; a large
        group is read once and cut. Row counts come from the footers: no task runs to count."""
        import dask

        total = sum(g.rows for g in groups)
        size = -(-total // self.parallelism) if self.parallelism else self.rows_per_partition
        parts, lengths = [], []
        for read in _merge_small(groups, size):
            cuts = max(1, round(read.rows / size))
            if cuts == 1:
                parts.append(_Partition(read).then(partial(read_row_groups, fs)).then(partial(_cut, start=0, rows=read.rows, split=split)))
                lengths.append(read.rows)
                continue
            table = dask.delayed(read_row_groups)(fs, read)
            bounds = np.linspace(0, read.rows, cuts + 1).astype(int).tolist()
            for a, b in zip(bounds[:-1], bounds[1:]):
                parts.append(_Partition(table).then(partial(_cut, start=a, rows=b - a, split=split)))
                lengths.append(b - a)
        return parts, lengths, names

    def _dask_frame(self, data: Any, storage_options: dict | None):
        import dask.dataframe as dd

        from plait.data.io import check_files_share_columns, data_format, is_dataframe, read_table

        if isinstance(data, dd.DataFrame):
            return data
        if is_dataframe(data) or isinstance(data, pa.Table):
            pdf = data.to_pandas() if isinstance(data, pa.Table) else data
            return dd.from_pandas(pdf, npartitions=self._partitions(len(pdf)), sort=False)
        if type(data).__module__.startswith("ray.data"):
            return data.to_dask()
        check_files_share_columns(data, storage_options)  # their readers would merge differing files with nulls
        path = os.fspath(data)
        options = dict(storage_options=storage_options) if storage_options else {}
        fmt = data_format(path if not os.path.isdir(path) else _first_file(path))
        if fmt in ("csv", "tsv"):
            # Round-trip float parsing: the same (correctly rounded) values Arrow's reader gives the local engine.
            frame = dd.read_csv(path, sep="\t" if fmt == "tsv" else ",", blocksize="64MB", float_precision="round_trip",
                                **options)
            return frame if frame.npartitions >= self.min_csv_partitions else frame.repartition(
                npartitions=self.min_csv_partitions)
        return dd.from_pandas(read_table(path, storage_options).to_pandas(), npartitions=self.parallelism or 1, sort=False)

    def _partitions(self, rows: int) -> int:
        return self.parallelism or max(2, -(-rows // self.rows_per_partition))

    # ---- the per-partition operations ------------------------------------------------------------

    def map(self, data: list[_Partition], fn) -> list[_Partition]:
        return [p.then(fn) for p in data]

    def reduce(self, data: list[_Partition], fn, merge):
        import dask

        level = [p.then(fn).delayed() for p in data]
        while len(level) > 1:  # a balanced tree: log-depth, and no single task merges everything
            level = [dask.delayed(merge)(*level[i : i + 2]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
        return self._compute(level[0])[0]

    def collect(self, data: list[_Partition], fn) -> list:
        return list(self._compute(*[p.then(fn).delayed() for p in data]))

    def persist(self, data: list[_Partition]) -> list[_Partition]:
        if not self.persist_enabled:
            return data
        import dask

        # ray_persist: the results stay in Ray's object store as references (without it, Ray's
        # Dask scheduler fetches every persisted partition into this process).
        values = dask.persist(*[p.delayed() for p in data], scheduler=_scheduler(), ray_persist=True)
        return [_Partition(v) for v in values]

    def write(self, data: list[_Partition], tasks, fs, schema: pa.Schema) -> list[int]:
        """Two passes through the cache's filesystem rather than Ray's object store: each
        partition's rows of each split go to a scratch file, then each output file is
        assembled from its slices of them. A file of the validation or test split needs rows
        from every partition; held in the object store, the transformed partitions would pile
        up faster than the writers drain them. This way every task holds one partition or one
        output file, whatever the size of the data."""
        import dask

        scratch = f"{tasks[0].path.rsplit('/', 2)[0]}/.scratch"  # tasks write <entry>/<split>/part-k
        ensure_dir(fs, scratch)
        try:
            self._compute(*[p.then(partial(_write_pieces, fs=fs, scratch=scratch, index=i)).delayed() for i, p in enumerate(data)])
            return list(self._compute(*[dask.delayed(_assemble)(fs, scratch, t, schema) for t in tasks]))
        finally:
            fs.rm(scratch, recursive=True)

    def _compute(self, *delayed):
        import dask

        return dask.compute(*delayed, scheduler=_scheduler())


def _apply(table, functions):
    for fn in functions:
        table = fn(table)
    return table


def _piece(scratch: str, index: int, split: int) -> str:
    return f"{scratch}/{index:06d}-{split}.arrow"


def _write_pieces(table: pa.Table, *, fs, scratch: str, index: int) -> None:
    """Partition ``index``'s rows of each split, each to its own scratch file (Arrow IPC: types
    come back exactly as written, with no encoding work)."""
    for split in range(len(SPLIT_NAMES)):
        rows = split_slice(table, split, 0, table.num_rows)
        with fs.open(_piece(scratch, index, split), "wb") as handle, pa.ipc.new_file(handle, rows.schema) as writer:
            writer.write_table(rows)


def _assemble(fs, scratch: str, task, schema: pa.Schema) -> int:
    """One output file from its slices of the scratch files."""
    pieces = []
    for i, start, stop in task.slices:
        with fs.open(_piece(scratch, i, task.split), "rb") as handle:
            pieces.append(pa.ipc.open_file(handle).read_all().slice(start, stop - start))
    return write_file(fs, task.path, pieces, schema)


def _merge_small(groups: list[RowGroups], size: int) -> list[RowGroups]:
    """Consecutive row groups of one file joined while together they stay within ``size`` rows."""
    merged: list[RowGroups] = []
    for group in groups:
        last = merged[-1] if merged else None
        if last is not None and last.file == group.file and last.rows + group.rows <= size:
            merged[-1] = RowGroups(last.file, last.indices + group.indices, last.rows + group.rows)
        else:
            merged.append(group)
    return merged


def _cut(table: pa.Table, start: int, rows: int, split: int | None) -> pa.Table:
    part = table.slice(start, rows)
    if split is not None:
        part = part.append_column(SPLIT_COLUMN, pa.array(np.full(part.num_rows, split, dtype=np.int8)))
    return part


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
