"""Where predictions go: ``<output directory>/predictions.<format>``, written all or nothing.

In one process the tables stream into one file under a temporary name, renamed when complete.
From a distributed job, each write task writes one part file ``part-<index>.<format>`` into a
temporary folder; the folder is published in place of any earlier output when every part is
there, so the parts read in name order hold the predictions in input order. Either way a failed
job leaves an earlier output as it was.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import posixpath
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import pyarrow as pa

from plait.utils.fs import atomic_folder, atomic_open, ensure_dir, resolve


@dataclass(frozen=True)
class WrittenPredictions:
    """Where predictions were written (a file, or a folder of part files) and how many rows."""

    path: str
    rows: int


@dataclass
class PredictionsSink:
    """Predictions of one job, to ``<output_directory>/predictions.<fmt>`` (parquet or csv)."""

    output_directory: str
    fmt: str = "parquet"
    set_separators: dict = field(default_factory=dict)
    """CSV has no list type: each set output's predictions joined with its tokenizer's separator."""
    no_rows: Callable[[], pa.Table] | None = None
    """The predictions of no rows (their columns and types): what an input without rows gets, so
    that the file named as the result is this input's, never an older one."""
    options: dict = field(default_factory=dict, repr=False)
    """Storage options (credentials) for an output directory on object storage."""

    @classmethod
    def for_config(cls, output_directory, fmt: str, config, no_rows: Callable[[], pa.Table] | None = None
                   ) -> "PredictionsSink":
        from plait.utils.folder import Folder

        separators = {f"{f.name}_predictions": "," if f.preprocessing.tokenizer == "comma" else " "
                      for f in config.output_features if f.type == "set"}
        if isinstance(output_directory, Folder):  # a run directory's, with its credentials
            return cls(output_directory.url, fmt, separators, no_rows, output_directory.options)
        return cls(os.fspath(output_directory), fmt, separators, no_rows)

    @property
    def name(self) -> str:
        return f"predictions.{self.fmt}"

    def written(self, rows: int) -> WrittenPredictions:
        return WrittenPredictions(posixpath.join(self.output_directory, self.name), rows)

    def formatted(self, table: pa.Table) -> pa.Table:
        """A table as the format can hold it (list columns as text in CSV)."""
        if self.fmt != "csv":
            return table
        import pyarrow.compute as pc

        for i, name in enumerate(table.column_names):
            kind = table.schema.field(i).type
            if pa.types.is_list(kind):
                # Numbers (a vector's, a sequence's probabilities) are written as their shortest text.
                values = table[name] if pa.types.is_string(kind.value_type) else table[name].cast(pa.list_(pa.string()))
                table = table.set_column(i, name, pc.binary_join(values, self.set_separators.get(name, " ")))
        return table

    def write_file(self, tables: Iterable[pa.Table]) -> WrittenPredictions:
        """Stream tables into one file; no tables, a file of no rows (see :attr:`no_rows`)."""
        fs, folder = resolve(self.output_directory, self.options)
        ensure_dir(fs, folder)
        tables = iter(tables)
        first = next(tables, None)
        if first is None:
            if self.no_rows is None:
                return self._without_rows(fs, folder)
            first = self.no_rows()
        rows = 0
        with atomic_open(fs, posixpath.join(folder, self.name), "wb") as handle, self._writer(handle, first) as write:
            for table in itertools.chain([first], tables):
                write(self.formatted(table))
                rows += table.num_rows
        return self.written(rows)

    def _without_rows(self, fs, folder: str) -> WrittenPredictions:
        """No rows and no schema to write them with: an earlier output must not pass for this one."""
        path = posixpath.join(folder, self.name)
        if fs.exists(path):
            fs.rm(path, recursive=True)
        return self.written(0)

    @contextlib.contextmanager
    def _writer(self, handle, first: pa.Table) -> Iterator:
        import pyarrow.csv as csv
        import pyarrow.parquet as pq

        schema = self.formatted(first.slice(0, 0)).schema
        writer = pq.ParquetWriter(handle, schema) if self.fmt == "parquet" else csv.CSVWriter(handle, schema)
        try:
            yield writer.write_table
        finally:  # also on an error: the temporary file is then removed, not left to a finalizer
            writer.close()

    @contextlib.contextmanager
    def part_folder(self) -> Iterator["PartFolder"]:
        """A temporary folder for part files, published as ``predictions.<fmt>/`` on success
        (marked complete by ``_SUCCESS``, which is what counts on an object store)."""
        fs, folder = resolve(self.output_directory, self.options)
        with atomic_folder(fs, posixpath.join(folder, self.name)) as tmp:
            parts = PartFolder(fs, tmp, self)
            yield parts
            parts.write_no_rows_if_empty()


@dataclass
class PartFolder:
    """Part files written by the tasks of a distributed job. Each task names its part by its
    index, so the names sort in the data's order and a retried task rewrites its own part."""

    fs: object
    folder: str
    sink: PredictionsSink

    def write_part(self, index: int, tables: list[pa.Table]) -> None:
        tables = [self.sink.formatted(t) for t in tables if t.num_rows]
        if not tables:
            return
        self._write(f"part-{index:06d}.{self.sink.fmt}", pa.concat_tables(tables))

    def write_no_rows_if_empty(self) -> None:
        """An input without rows still gets a part: no rows, the predictions' columns (see
        :attr:`PredictionsSink.no_rows`), so the folder reads as this input's predictions."""
        if self.sink.no_rows is None or any(posixpath.basename(p).startswith("part-") for p in self.fs.ls(self.folder, detail=False)):
            return
        self._write(f"part-{0:06d}.{self.sink.fmt}", self.sink.formatted(self.sink.no_rows()))

    def _write(self, name: str, table: pa.Table) -> None:
        import pyarrow.csv as csv
        import pyarrow.parquet as pq

        with self.fs.open(posixpath.join(self.folder, name), "wb") as handle:
            (pq.write_table if self.sink.fmt == "parquet" else csv.write_csv)(table, handle)
