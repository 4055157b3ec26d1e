"""Preprocessing: read, split, fit feature metadata on training rows, transform, cache.

The per-partition steps live in :class:`PartitionSteps`, plain functions of one Arrow table, so
every data engine runs the same code; :func:`preprocess` only orders them and handles the cache.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import plait
from plait.config import PlaitConfig
from plait.data import split as sp
from plait.data.cache import Cache, cache_key, dataset_identity, default_cache_dir, entry_name
from plait.data.engines import ROW_NUMBER, DataEngine, get_engine
from plait.data.io import read_table
from plait.errors import DataError
from plait.features import FeatureProcessor, processors_for
from plait.utils import fs as fsu

log = logging.getLogger("plait")

SPLIT = "__plait_split__"


@dataclass
class PreprocessedData:
    """A cache entry: metadata plus one Parquet file per split."""

    metadata: dict
    location: str
    fs: Any = field(repr=False)
    from_cache: bool = False

    def split_path(self, split: str) -> str:
        return f"{self.location}/{self.metadata['splits'][split]['file']}"

    def rows(self, split: str) -> int:
        return self.metadata["splits"][split]["rows"]

    def read_split(self, split: str) -> pa.Table:
        import pyarrow.parquet as pq

        return pq.read_table(self.split_path(split), filesystem=self.fs)


class PartitionSteps:
    """The per-partition functions of preprocessing (picklable, engine-independent)."""

    def __init__(self, processors: list[FeatureProcessor], config: PlaitConfig, seed: int):
        self.processors = processors
        self.split = config.preprocessing.split
        self.sample_ratio = config.preprocessing.sample_ratio
        self.seed = seed

    def clean(self, part: pa.Table) -> pa.Table:
        """Cast feature columns, drop rows per drop_row, sample, and assign split codes
        (random and fixed splits; stratified codes come later, after their reduce)."""
        rows = part[ROW_NUMBER].to_numpy()
        columns = {p.name: p.prepare(_column(part, p.column)) for p in self.processors}
        keep = np.ones(part.num_rows, dtype=bool)
        for p in self.processors:
            if p.drops_missing_rows:
                keep &= pc.is_valid(columns[p.name]).to_numpy(zero_copy_only=False)
        if self.sample_ratio < 1:
            keep &= sp.sample_mask(rows, self.sample_ratio, self.seed)
        if SPLIT in part.column_names:  # pre-split input (training_set/validation_set/test_set)
            codes = part[SPLIT].to_numpy()
        elif self.split.type == "random":
            codes = sp.random_split(rows, self.split.probabilities, self.seed)
        elif self.split.type == "fixed":
            codes = sp.fixed_split(_column(part, self.split.column), self.split.column)
        else:
            codes = np.full(part.num_rows, -1, dtype=np.int8)
            columns["__stratum__"] = _column(part, self.split.column)
        table = pa.table({**columns, ROW_NUMBER: rows, SPLIT: pa.array(codes, pa.int8())})
        return table if keep.all() else table.filter(pa.array(keep))

    def stratify_stats(self, part: pa.Table) -> dict:
        return sp.stratify_stats(part["__stratum__"], part[ROW_NUMBER].to_numpy(), self.seed)

    def assign_strata(self, part: pa.Table, thresholds: dict) -> pa.Table:
        codes = sp.stratified_split(part["__stratum__"], part[ROW_NUMBER].to_numpy(), self.seed, thresholds)
        part = part.drop_columns(["__stratum__"])
        return part.set_column(part.schema.get_field_index(SPLIT), SPLIT, pa.array(codes, pa.int8()))

    def partial_stats(self, part: pa.Table) -> dict:
        counts = np.bincount(part[SPLIT].to_numpy(), minlength=3)
        training = part.filter(pc.equal(part[SPLIT], sp.TRAINING))
        stats = {p.name: p.partial_stats(training[p.name]) for p in self.processors}
        return {"split_rows": counts, "features": stats}

    def merge_stats(self, a: dict, b: dict) -> dict:
        merged = {p.name: p.merge_stats(a["features"][p.name], b["features"][p.name]) for p in self.processors}
        return {"split_rows": a["split_rows"] + b["split_rows"], "features": merged}

    def transform(self, part: pa.Table, metadata: dict) -> pa.Table:
        columns = {p.name: p.transform(part[p.name], metadata[p.name]) for p in self.processors}
        return pa.table({**columns, SPLIT: part[SPLIT]})


def _column(part: pa.Table, name: str) -> pa.Array:
    column = part[name]
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def preprocess(
    config: PlaitConfig,
    dataset: Any = None,
    *,
    training_set: Any = None,
    validation_set: Any = None,
    test_set: Any = None,
    seed: int = 42,
    engine: DataEngine | None = None,
    use_cache: bool = True,
) -> PreprocessedData:
    """Preprocess a dataset (or pre-split sets) into the cache, or find it there."""
    sources = _sources(dataset, training_set, validation_set, test_set)
    options = fsu.storage_options(config.backend.cache_credentials)
    processors = processors_for(config)
    first = next(iter(sources.values()))
    key = cache_key(
        {name: dataset_identity(src, options if _is_url(src) else {}) for name, src in sources.items()},
        [p.config.model_dump(mode="json", include={"name", "type", "column", "preprocessing"}) for p in processors],
        [p.is_output for p in processors],
        config.preprocessing.model_dump(mode="json", include={"split", "sample_ratio"}),
        seed,
    )
    cache = Cache(config.backend.cache_dir or default_cache_dir(first), options)
    name = entry_name(first, key)
    if use_cache and (metadata := cache.lookup(name, key)) is not None:
        log.info("Using cached preprocessed data at %s (key %s).", cache.path(name), key)
        return PreprocessedData(metadata, cache.path(name), cache.fs, from_cache=True)

    engine = engine or get_engine("local")
    started = time.perf_counter()
    table = _read_sources(sources, config, processors, options)
    steps = PartitionSteps(processors, config, seed)

    def write(fs, directory: str) -> dict:
        return _run(engine, steps, table, fs, directory, key, seed)

    metadata = cache.build(name, write)
    log.info(
        "Preprocessed %d rows in %.1fs into %s.", table.num_rows, time.perf_counter() - started, cache.path(name)
    )
    return PreprocessedData(metadata, cache.path(name), cache.fs)


def _run(engine: DataEngine, steps: PartitionSteps, table: pa.Table, fs, directory: str, key: str, seed: int) -> dict:
    data = engine.map(engine.from_table(table), steps.clean)
    if steps.split.type == "stratify" and SPLIT not in table.column_names:
        thresholds = sp.stratify_thresholds(
            engine.reduce(data, steps.stratify_stats, sp.merge_stratify_stats), steps.split.probabilities
        )
        data = engine.map(data, lambda part: steps.assign_strata(part, thresholds))
    stats = engine.reduce(data, steps.partial_stats, steps.merge_stats)
    split_rows = stats["split_rows"]
    if split_rows[sp.TRAINING] == 0:
        raise DataError(
            f"the training split is empty ({int(split_rows.sum())} rows after dropping rows with "
            f"missing values and sampling; split {int(split_rows[0])}/{int(split_rows[1])}/"
            f"{int(split_rows[2])}). Check preprocessing.split and missing_value_strategy."
        )
    features = {p.name: {"type": p.type, "column": p.column, "output": p.is_output, **p.finalize(stats["features"][p.name])} for p in steps.processors}
    transformed = engine.map(data, lambda part: steps.transform(part, features))
    splits = {}
    for code, split in enumerate(sp.SPLIT_NAMES):
        only = engine.map(transformed, lambda part, code=code: part.filter(pc.equal(part[SPLIT], code)).drop_columns([SPLIT]))
        path = f"{directory}/{split}.parquet"
        rows = engine.write_parquet(only, fs, path)
        splits[split] = {"file": f"{split}.parquet", "rows": rows, "bytes": fs.info(path)["size"]}
    return {
        "format_version": 1,
        "plait_version": plait.__version__,
        "cache_key": key,
        "seed": seed,
        "features": features,
        "splits": splits,
    }


def _sources(dataset, training_set, validation_set, test_set) -> dict:
    if dataset is not None and training_set is not None:
        raise DataError("give either a dataset or training/validation/test sets, not both")
    if dataset is not None:
        return {"dataset": dataset}
    if training_set is None:
        raise DataError("no data: give a dataset (--dataset) or a training set (--training-set)")
    sets = {"training": training_set, "validation": validation_set, "test": test_set}
    return {k: v for k, v in sets.items() if v is not None}


def _is_url(source: Any) -> bool:
    return isinstance(source, str) and "://" in source


def _read_sources(sources: dict, config: PlaitConfig, processors, options: dict) -> pa.Table:
    tables = []
    for name, source in sources.items():
        table = read_table(source, options if _is_url(source) else None)
        check_columns(table, processors, source, config if name == "dataset" else None)
        if name != "dataset":
            code = sp.SPLIT_NAMES.index(name)
            table = table.append_column(SPLIT, pa.array(np.full(table.num_rows, code, dtype=np.int8)))
        tables.append(table.select([c for c in table.column_names if c in _needed(processors, config)]))
    if len(tables) == 1:
        return tables[0]
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DataError(f"the training, validation and test sets do not share column types: {exc}") from None


def _needed(processors, config) -> set[str]:
    needed = {p.column for p in processors} | {SPLIT}
    if config.preprocessing.split.type in ("fixed", "stratify"):
        needed.add(config.preprocessing.split.column)
    return needed


def check_columns(table: pa.Table, processors, source: Any, config: PlaitConfig | None) -> None:
    """Every column the config names must be in the data; say which ones are."""
    present = set(table.column_names)
    wanted = [(p.column, f"{'output' if p.is_output else 'input'} feature {p.name!r}") for p in processors]
    if config is not None and config.preprocessing.split.type in ("fixed", "stratify"):
        wanted.append((config.preprocessing.split.column, "preprocessing.split.column"))
    missing = [(column, who) for column, who in wanted if column not in present]
    if missing:
        described = "; ".join(f"{column!r} (for {who})" for column, who in missing)
        label = source if isinstance(source, str) else "the dataset"
        raise DataError(
            f"{label} has no column {described}. Its columns are: {', '.join(table.column_names)}"
        )
