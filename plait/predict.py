"""Prediction and evaluation on raw data, streamed in chunks so memory stays bounded.

The saved preprocessing metadata is applied to each chunk with the same feature code that
preprocessed the training data.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import torch

from plait.data.io import data_format, from_pandas, is_dataframe, read_table
from plait.errors import DataError
from plait.training.data import table_tensors

CHUNK_ROWS = 100_000


def iter_chunks(source: Any, chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
    """Raw data in chunks of about ``chunk_rows`` rows, without reading it all at once."""
    if isinstance(source, CachedSplit):
        yield from _cached_chunks(source, chunk_rows)
        return
    if is_dataframe(source):
        source = from_pandas(source)
    if isinstance(source, pa.Table):
        for start in range(0, max(source.num_rows, 1), chunk_rows):
            yield source.slice(start, chunk_rows)
        return
    path = os.fspath(source)
    if not os.path.exists(path) and "://" not in path:
        raise DataError(f"dataset {path!r} does not exist")
    fmt = data_format(path) if not os.path.isdir(path) else "directory"
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            for batch in pq.ParquetFile(path).iter_batches(batch_size=chunk_rows):
                yield pa.Table.from_batches([batch])
        elif fmt in ("csv", "tsv") and not path.endswith(".gz"):
            import pyarrow.csv as csv

            parse = csv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",", newlines_in_values=True)
            reader = csv.open_csv(path, parse_options=parse, convert_options=csv.ConvertOptions(strings_can_be_null=True),
                                  read_options=csv.ReadOptions(block_size=16 << 20))
            for batch in reader:
                yield pa.Table.from_batches([batch])
        else:
            yield from iter_chunks(read_table(path), chunk_rows)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"cannot read {path!r}: {str(exc).splitlines()[0]}") from None


def _cached_chunks(source: "CachedSplit", chunk_rows: int) -> Iterator[pa.Table]:
    import pyarrow.parquet as pq

    for path in source.data.split_files(source.split):
        with source.data.fs.open(path, "rb") as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=chunk_rows):
                yield pa.Table.from_batches([batch])


class Predictor:
    """Applies saved preprocessing and a model to raw chunks."""

    def __init__(self, config, metadata: dict, module: torch.nn.Module, batch_size: int = 8192, cached: bool = False):
        """``cached``: the tables are rows of the preprocessing cache (features already
        transformed, columns named after the features), not raw data."""
        from plait.features import processors_for

        self.cached = cached
        self.features = metadata["features"]
        self.processors = processors_for(config)
        self.inputs = [p for p in self.processors if not p.is_output]
        self.outputs = [p for p in self.processors if p.is_output]
        self.module = module.eval()
        self.batch_size = batch_size

    def check_columns(self, table: pa.Table, with_outputs: bool) -> None:
        wanted = self.processors if with_outputs else self.inputs
        missing = [self.column(p) for p in wanted if self.column(p) not in table.column_names]
        if missing:
            raise DataError(
                f"the data lacks column(s) {', '.join(repr(m) for m in missing)} that this model needs "
                f"({'input and output' if with_outputs else 'input'} features). Its columns are: {', '.join(table.column_names)}"
            )

    def column(self, processor) -> str:
        """Where a feature is in the tables: its raw column, or, in cached rows, its name."""
        return processor.name if self.cached else processor.column

    def tensors(self, table: pa.Table, processors) -> dict[str, torch.Tensor]:
        if self.cached:
            return table_tensors(table, self.features, [p.name for p in processors])
        columns = {}
        for p in processors:
            raw = table[p.column].combine_chunks() if isinstance(table[p.column], pa.ChunkedArray) else table[p.column]
            columns[p.name] = p.transform(p.prepare(raw), self.features[p.name])
        return table_tensors(pa.table(columns), self.features, list(columns))

    @torch.no_grad()
    def logits(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        rows = len(next(iter(inputs.values())))
        parts = [self.module({k: v[i : i + self.batch_size] for k, v in inputs.items()}) for i in range(0, rows, self.batch_size)]
        return {name: torch.cat([p[name] for p in parts]) for name in parts[0]} if parts else {}

    def predict_chunk(self, table: pa.Table) -> pa.Table:
        logits = self.logits(self.tensors(table, self.inputs))
        columns: dict[str, Any] = {}
        for p in self.outputs:
            columns.update(_postprocess(p, self.module.heads[p.name].predict(logits[p.name]), self.features[p.name]))
        return pa.table(columns)


def _postprocess(processor, out: dict, meta: dict) -> dict:
    """Model outputs as user-facing columns: labels, probabilities per class, numbers."""
    name, kind = processor.name, processor.type
    if kind == "number":
        return {f"{name}_predictions": out["prediction"].numpy()}
    if kind == "binary":
        p = out["probability"].numpy()
        return {f"{name}_predictions": out["prediction"].numpy(), f"{name}_probability": np.maximum(p, 1 - p),
                f"{name}_probabilities_False": 1 - p, f"{name}_probabilities_True": p}
    vocab = np.asarray(meta["vocabulary"], dtype=object)
    probabilities = out["probabilities"].numpy()
    if kind == "category":
        columns = {f"{name}_predictions": vocab[out["prediction"].numpy()].astype(str), f"{name}_probability": out["probability"].numpy()}
    else:  # set: the labels above the threshold
        chosen = out["prediction"].numpy()
        # Typed: a chunk where every set is empty would otherwise be list<null>, and the chunks or
        # part files of one output must share one schema.
        columns = {f"{name}_predictions": pa.array([list(vocab[row]) for row in chosen], type=pa.list_(pa.string()))}
    if len(vocab) <= 100:
        columns.update({f"{name}_probabilities_{label}": probabilities[:, i] for i, label in enumerate(vocab)})
    return columns


# ---- shared by every backend's prediction and evaluation ---------------------------------------

@dataclass(frozen=True)
class CachedSplit:
    """A split of the preprocessing cache, as data to predict on or evaluate (the experiment's
    test split): its rows are already preprocessed."""

    data: Any
    split: str


@dataclass(frozen=True)
class WrittenPredictions:
    """Where predictions were written (a file, or a folder of part files) and how many rows."""

    path: str
    rows: int


def add_statistics(predictor, metrics, chunk: pa.Table, stats: dict) -> int:
    """Add a raw chunk's metric statistics to ``stats``; the rows counted (those with every target)."""
    import pyarrow.compute as pc

    predictor.check_columns(chunk, with_outputs=True)
    for p in predictor.outputs:
        chunk = chunk.filter(pc.is_valid(chunk[predictor.column(p)]))
    if chunk.num_rows:
        tensors = predictor.tensors(chunk, predictor.processors)
        logits = predictor.logits({n: tensors[n] for n in predictor.module.input_names})
        metrics.update(stats, logits, {n: tensors[n] for n in predictor.module.output_names})
    return chunk.num_rows


def metrics_of(metrics, stats: dict, rows: int) -> dict:
    if rows == 0:
        raise DataError("no rows to evaluate (every row lacks a target value)")
    return metrics.compute(stats)


def lists_as_text(table: pa.Table, config) -> pa.Table:
    """CSV has no list type: set predictions become their elements joined as the set feature's
    tokenizer splits them (space, or comma)."""
    import pyarrow.compute as pc

    separators = {f"{f.name}_predictions": "," if f.preprocessing.tokenizer == "comma" else " "
                  for f in config.output_features if f.type == "set"}
    for i, name in enumerate(table.column_names):
        if pa.types.is_list(table.schema.field(i).type):
            table = table.set_column(i, name, pc.binary_join(table[name], separators.get(name, " ")))
    return table


def write_chunks(chunks, fs, path: str, fmt: str) -> int:
    """Stream tables into one file (local or any fsspec filesystem) under a temporary name,
    renamed when complete. No tables, no file."""
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    from plait.utils.fs import atomic_open

    tables = iter(chunks)
    first = next(tables, None)
    if first is None:
        return 0
    rows = 0
    with atomic_open(fs, path, "wb") as handle:
        writer = pq.ParquetWriter(handle, first.schema) if fmt == "parquet" else csv.CSVWriter(handle, first.schema)
        try:
            for table in itertools.chain([first], tables):
                writer.write_table(table)
                rows += table.num_rows
        finally:  # also on an error: the temporary file is removed, not left to the writer's finalizer
            writer.close()
    return rows
