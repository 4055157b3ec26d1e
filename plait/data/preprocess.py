"""Preprocessing: read, split, fit feature metadata on training rows, transform, cache.

The per-partition steps live in :class:`PartitionSteps`, plain functions of one Arrow table, so
every data engine runs the same code; :func:`preprocess` only orders them and handles the cache.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import plait
from plait.config import PlaitConfig
from plait.data import layout
from plait.data import split as sp
from plait.data.balance import Balancer, balance
from plait.data.cache import Cache, cache_key, dataset_identity, default_cache_dir, entry_name
from plait.data.engines import ROW_NUMBER, DataEngine, Source, get_engine
from plait.data.io import is_url
from plait.data.layout import SPLIT_COLUMN
from plait.errors import DataError, UsageError
from plait.features import FeatureProcessor, data_directory, processors_for
from plait.features.base import check_unique_columns, table_column
from plait.utils import fs as fsu

log = logging.getLogger("plait")

SPLIT = SPLIT_COLUMN
SPLIT_KEY = "__split_key__"
"""The column a stratified or datetime split reads until its codes are assigned."""


@dataclass
class PreprocessedData:
    """A cache entry: metadata plus a folder of Parquet files per split."""

    metadata: dict
    location: str
    fs: Any = field(repr=False)
    from_cache: bool = False

    def split_files(self, split: str) -> list[str]:
        return [f"{self.location}/{f['file']}" for f in self.metadata["splits"][split]["files"]]

    def rows(self, split: str) -> int:
        return self.metadata["splits"][split]["rows"]

    def read_split(self, split: str) -> pa.Table:
        import pyarrow.parquet as pq

        return pa.concat_tables([pq.read_table(f, filesystem=self.fs) for f in self.split_files(split)])


class PartitionSteps:
    """The per-partition functions of preprocessing (picklable, engine-independent)."""

    def __init__(self, processors: list[FeatureProcessor], config: PlaitConfig, seed: int):
        self.processors = processors
        self.split = config.preprocessing.split
        self.sample_ratio = config.preprocessing.sample_ratio
        self.sample_size = config.preprocessing.sample_size or None  # 0, as in Ludwig: no sampling
        self.balancing = config.preprocessing.balancing
        self.seed = seed

    def clean(self, part: pa.Table) -> pa.Table:
        """Cast feature columns, drop rows per drop_row, sample, and assign split codes
        (random, fixed and hash splits; stratified and datetime codes come later, after their
        reduce). ``sample_ratio`` is by then a share, or the threshold that sample_size gives."""
        rows = part[ROW_NUMBER].to_numpy()
        columns = {p.name: p.prepare_raw(p.read(part)) for p in self.processors}
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
            codes = sp.fixed_split(table_column(part, self.split.column), self.split.column)
        elif self.split.type == "hash":
            codes = sp.hash_split(table_column(part, self.split.column), self.split.probabilities)
        elif self.split.type == "kfold":
            codes = sp.kfold_split(rows, self.split.folds, self.split.fold, self.seed)
        else:
            codes = np.full(part.num_rows, -1, dtype=np.int8)
            columns[SPLIT_KEY] = self._split_key(table_column(part, self.split.column))
        table = pa.table({**columns, ROW_NUMBER: rows, SPLIT: pa.array(codes, pa.int8())})
        return table if keep.all() else table.filter(pa.array(keep))

    def _split_key(self, column: pa.Array) -> pa.Array:
        """What a split that needs a reduce reads: the stratum, or the row's time."""
        return pa.array(sp.time_keys(column, self.split.column)) if self.split.type == "datetime" else column

    @property
    def split_needs_reduce(self) -> bool:
        return self.split.type in ("stratify", "datetime")

    def split_stats(self, part: pa.Table):
        rows = part[ROW_NUMBER].to_numpy()
        if self.split.type == "datetime":
            return sp.order_stats(part[SPLIT_KEY].to_numpy(), rows)
        return sp.stratify_stats(part[SPLIT_KEY], rows, self.seed)

    def split_thresholds(self, engine: DataEngine, data):
        if self.split.type == "datetime":
            return sp.order_thresholds(engine.reduce(data, self.split_stats, sp.merge_order_stats), self.split.probabilities)
        return sp.stratify_thresholds(engine.reduce(data, self.split_stats, sp.merge_stratify_stats), self.split.probabilities)

    def assign_split(self, part: pa.Table, thresholds) -> pa.Table:
        rows = part[ROW_NUMBER].to_numpy()
        if self.split.type == "datetime":
            codes = sp.ordered_split(part[SPLIT_KEY].to_numpy(), rows, thresholds)
        else:
            codes = sp.stratified_split(part[SPLIT_KEY], rows, self.seed, thresholds)
        part = part.drop_columns([SPLIT_KEY])
        return part.set_column(part.schema.get_field_index(SPLIT), SPLIT, pa.array(codes, pa.int8()))

    def sample_size_threshold(self, engine: DataEngine, data) -> None:
        """With sample_size: the sampling hash below which exactly that many rows fall, taken as
        the sample ratio (a reduce of each partition's smallest hashes, exact on every engine)."""
        if self.sample_size is None:
            return
        size = self.sample_size
        smallest = engine.reduce(data, lambda part: sp.smallest_sample_hashes(part[ROW_NUMBER].to_numpy(), size, self.seed),
                                 sp.merge_smallest(size))
        self.sample_ratio = sp.sample_threshold(smallest, size)

    def drop_after_fit(self, part: pa.Table, metadata: dict) -> pa.Table:
        """Rows that a fitted feature drops (outliers with outlier_strategy drop_row)."""
        drop = np.zeros(part.num_rows, dtype=bool)
        for p in self.processors:
            mask = p.dropped_after_fit(part[p.name], metadata[p.name])
            if mask is not None:
                drop |= mask
        return part.filter(pa.array(~drop)) if drop.any() else part

    @property
    def drops_after_fit(self) -> bool:
        return any(getattr(p.preprocessing, "outlier_strategy", None) == "drop_row" for p in self.processors)

    def balancer(self, metadata: dict) -> Balancer:
        """Class balancing of the one output (binary: the config checks it), with its fitted labels."""
        output = next(p for p in self.processors if p.is_output)
        return Balancer(output, metadata[output.name], self.balancing, self.seed)

    @staticmethod
    def split_counts(part: pa.Table) -> np.ndarray:
        return np.bincount(part[SPLIT].to_numpy(), minlength=3)

    def partial_stats(self, part: pa.Table) -> dict:
        training = part.filter(pc.equal(part[SPLIT], sp.TRAINING))
        rows = training[ROW_NUMBER].to_numpy()
        return {p.name: p.partial_stats(training[p.name], rows=rows) if p.stats_read_row_numbers
                else p.partial_stats(training[p.name]) for p in self.processors}

    def merge_stats(self, a: dict, b: dict) -> dict:
        return {p.name: p.merge_stats(a[p.name], b[p.name]) for p in self.processors}

    def output_schema(self, metadata: dict) -> pa.Schema:
        """The schema of transformed rows (for writing a split that has no rows)."""
        empty = pa.table({p.name: pa.array([], p.prepare(pa.array([], pa.string())).type) for p in self.processors})
        empty = empty.append_column(SPLIT, pa.array([], pa.int8()))
        return self.transform(empty, metadata).drop_columns([SPLIT]).schema

    def transform(self, part: pa.Table, metadata: dict) -> pa.Table:
        columns = {p.name: p.transform(part[p.name], metadata[p.name]) for p in self.processors}
        return pa.table({**columns, SPLIT: part[SPLIT]})


def _storage_endpoint_named(function):
    """A storage endpoint that cannot be reached (the cache's, or a dataset URL's, which uses the
    same backend.cache_credentials) is one error naming it, not a botocore traceback."""

    @functools.wraps(function)
    def wrapper(config: PlaitConfig, *args, **kwargs):
        with fsu.endpoint_errors(fsu.storage_options(config.backend.cache_credentials), "backend.cache_credentials"):
            return function(config, *args, **kwargs)

    return wrapper


@_storage_endpoint_named
def preprocess(
    config: PlaitConfig,
    dataset: Any = None,
    *,
    training_set: Any = None,
    validation_set: Any = None,
    test_set: Any = None,
    seed: int = 42,
    engine: DataEngine | Callable[[], DataEngine] | None = None,
    use_cache: bool = True,
    features: dict | None = None,
) -> PreprocessedData:
    """Preprocess a dataset (or pre-split sets) into the cache, or find it there.

    ``engine`` may be a function that returns one, called only on a cache miss (starting Ray
    costs seconds that a cache hit should not pay). ``features``: a trained model's feature
    metadata (vocabularies, normalization) to transform with, instead of fitting new metadata on
    this data's training split (a model that trains on)."""
    seed = sp.check_seed(seed)
    sources = _sources(dataset, training_set, validation_set, test_set)
    options = fsu.storage_options(config.backend.cache_credentials)
    first = next(iter(sources.values()))
    processors = processors_for(config, data_directory(first))
    signature = preprocessing_signature(config, processors)
    before_seed = 4 if config.preprocessing.balancing else 3  # the order keys were always made in
    key = cache_key(
        {name: dataset_identity(src, options if is_url(src) else {}) for name, src in sources.items()},
        *signature[:before_seed], seed, *signature[before_seed:],
        *([{"fitted_before": features}] if features is not None else []),
    )
    cache = Cache(config.backend.cache_dir or default_cache_dir(first), options)
    name = entry_name(first, key)
    if use_cache and (metadata := cache.lookup(name, key)) is not None:
        log.info("Using cached preprocessed data at %s (key %s).", cache.path(name), key)
        return PreprocessedData(metadata, cache.path(name), cache.fs, from_cache=True)

    engine = engine() if callable(engine) else engine or get_engine("local")
    if any(p.decodes_files for p in processors):
        engine.expect_costly_rows()
    started = time.perf_counter()
    splits_given = "dataset" not in sources
    data, columns = engine.read(
        [Source(src, None if name == "dataset" else sp.SPLIT_NAMES.index(name)) for name, src in sources.items()],
        options,
    )
    check_columns(columns, processors, first, None if splits_given else config)
    steps = PartitionSteps(processors, config, seed)

    def write(fs, directory: str) -> dict:
        return _run(engine, steps, data, splits_given, fs, directory, key, seed, features)

    metadata = cache.build(name, write)
    rows = sum(s["rows"] for s in metadata["splits"].values())
    log.info("Preprocessed %d rows in %.1fs into %s.", rows, time.perf_counter() - started, cache.path(name))
    return PreprocessedData(metadata, cache.path(name), cache.fs)


def _fitted(engine: DataEngine, steps: PartitionSteps, data) -> dict:
    """Each feature's metadata, fitted on the training split."""
    stats = engine.reduce(data, steps.partial_stats, steps.merge_stats)
    return {
        p.name: {"type": p.type, "column": p.column, "output": p.is_output,
                 **({"training_only": True} if p.training_only else {}), **p.finalize(stats[p.name])}
        for p in steps.processors
    }


def preprocessing_signature(config: PlaitConfig, processors: list[FeatureProcessor] | None = None) -> list:
    """The config's part of the cache key: two configs with the same signature preprocess the
    same data into the same cache entry."""
    processors = processors if processors is not None else processors_for(config)
    return [
        [p.config.model_dump(mode="json", include={"name", "type", "column", "preprocessing"}) for p in processors],
        [p.is_output for p in processors],
        config.preprocessing.model_dump(mode="json", include={"split", "sample_ratio", "sample_size"}),
        *([config.preprocessing.balancing] if config.preprocessing.balancing else []),
        *([[p.cache_inputs() for p in processors]] if any(p.cache_inputs() for p in processors) else []),
    ]


def _run(engine: DataEngine, steps: PartitionSteps, data, splits_given: bool, fs, directory: str, key: str, seed: int,
         fitted: dict | None = None) -> dict:
    data = _cleaned(engine, steps, data, splits_given)
    counts, split_rows = _split_rows(engine, steps, data)
    features = fitted if fitted is not None else _fitted(engine, steps, data)
    if steps.drops_after_fit:
        data = engine.persist(engine.map(data, lambda part: steps.drop_after_fit(part, features)))
        counts, split_rows = _split_rows(engine, steps, data)
    if steps.balancing:  # after fitting, as in Ludwig: feature statistics describe the rows as they came
        balanced = balance(engine, data, steps.balancer(features))
        if balanced is not data:
            data = engine.persist(balanced)
            counts, split_rows = _split_rows(engine, steps, data)
    transformed = engine.map(data, lambda part: steps.transform(part, features))
    schema = steps.output_schema(features)
    per_file = layout.rows_per_file(schema)
    tasks = [t for code, split in enumerate(sp.SPLIT_NAMES) for t in layout.plan(counts, code, f"{directory}/{split}", per_file)]
    sizes = engine.write(transformed, tasks, fs, schema)
    splits = {split: {"rows": int(split_rows[code]), "files": []} for code, split in enumerate(sp.SPLIT_NAMES)}
    for task, size in zip(tasks, sizes):
        relative = task.path[len(directory) + 1 :]
        splits[sp.SPLIT_NAMES[task.split]]["files"].append({"file": relative, "rows": task.rows, "bytes": size})
    return {
        "format_version": 1,
        "plait_version": plait.__version__,
        "cache_key": key,
        "seed": seed,
        "features": features,
        "splits": splits,
    }


def _cleaned(engine: DataEngine, steps: PartitionSteps, data, splits_given: bool):
    """The rows cast, sampled and dropped per drop_row, each with its split code."""
    steps.sample_size_threshold(engine, data)
    data = engine.persist(engine.map(data, steps.clean))
    if steps.split_needs_reduce and not splits_given:
        thresholds = steps.split_thresholds(engine, data)
        data = engine.persist(engine.map(data, lambda part: steps.assign_split(part, thresholds)))
    return data


def _split_rows(engine: DataEngine, steps: PartitionSteps, data) -> tuple[list, np.ndarray]:
    """Rows per split in each partition, and in all; an empty training split is an error."""
    counts = engine.collect(data, steps.split_counts)
    split_rows = np.sum(counts, axis=0) if counts else np.zeros(3, dtype=np.int64)
    if split_rows[sp.TRAINING] == 0:
        raise DataError(
            f"the training split is empty ({int(split_rows.sum())} rows after dropping rows with "
            f"missing values or outliers and sampling; split {int(split_rows[0])}/{int(split_rows[1])}/"
            f"{int(split_rows[2])}). Check preprocessing.split, missing_value_strategy and outlier_strategy."
        )
    return counts, split_rows


def transform_split(config: PlaitConfig, features: dict, source: Any, seed: int, split: str) -> pa.Table:
    """The rows of raw data that a run with this config and seed put in ``split``, transformed
    with saved feature metadata (to evaluate a saved model on exactly its test set, say);
    ``split="full"``: every row the cleaning keeps, in order."""
    if split not in (*sp.SPLIT_NAMES, "full"):
        raise UsageError(f"split {split!r}: give one of {', '.join(sp.SPLIT_NAMES)} (or full, for every row)")
    engine, steps, data = _cleaned_source(config, source, seed)
    if steps.drops_after_fit:
        data = engine.map(data, lambda part: steps.drop_after_fit(part, features))

    def rows(part):
        return part if split == "full" else part.filter(pc.equal(part[SPLIT], sp.SPLIT_NAMES.index(split)))

    parts = engine.map(data, lambda part: steps.transform(rows(part), features))
    return pa.concat_tables(parts).drop_columns([SPLIT])


def split_codes(config: PlaitConfig, source: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(row numbers, split codes)`` of the rows of raw data a run with this config and seed
    keeps, before any feature is fitted (a row that drop_row drops as an outlier is still there):
    which rows it trains and validates on, say."""
    engine, _, data = _cleaned_source(config, source, seed)
    parts = engine.collect(data, lambda part: (part[ROW_NUMBER].to_numpy(), part[SPLIT].to_numpy()))
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8)
    return np.concatenate([rows for rows, _ in parts]), np.concatenate([codes for _, codes in parts])


def _cleaned_source(config: PlaitConfig, source: Any, seed: int):
    """The local engine, the partition steps and the cleaned rows of ``source`` (each with its row
    number and split code), as a run with this config and seed deals them."""
    seed = sp.check_seed(seed)
    processors = processors_for(config, data_directory(source))
    engine = get_engine("local")
    data, columns = engine.read([Source(source)])
    check_columns(columns, processors, source, config)
    steps = PartitionSteps(processors, config, seed)
    return engine, steps, _cleaned(engine, steps, data, splits_given=False)


def _sources(dataset, training_set, validation_set, test_set) -> dict:
    if dataset is not None and training_set is not None:
        raise DataError("give either a dataset or training/validation/test sets, not both")
    if dataset is not None:
        return {"dataset": dataset}
    if training_set is None:
        raise DataError("no data: give a dataset (--dataset) or a training set (--training-set)")
    sets = {"training": training_set, "validation": validation_set, "test": test_set}
    return {k: v for k, v in sets.items() if v is not None}


def check_columns(columns: list[str], processors, source: Any, config: PlaitConfig | None) -> None:
    """Every column the config names must be in the data; say which ones are."""
    label = source if isinstance(source, str) else "the dataset"
    split_column = []
    if config is not None and config.preprocessing.split.type in ("fixed", "stratify", "datetime", "hash"):
        split_column = [(config.preprocessing.split.column, "preprocessing.split.column")]
    check_unique_columns(columns, processors, label, also=tuple(column for column, _ in split_column))
    present = set(columns)
    wanted = [(column, p.described) for p in processors for column in p.columns] + split_column
    missing = [(column, who) for column, who in wanted if column not in present]
    if missing:
        described = "; ".join(f"{column!r} (for {who})" for column, who in missing)
        raise DataError(
            f"{label} has no column {described}. Its columns are: {', '.join(columns)}"
        )
