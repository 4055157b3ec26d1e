"""The streaming loader: the cached splits as Ray Datasets, divided between the Ray Train
workers so that every row is seen exactly once per epoch, and batches of tensors on each worker.

On the driver, :func:`split_datasets` reads the cache's Parquet files (local or any fsspec
URL) into one Ray Dataset per split, in enough blocks for the workers to share them out.
``backend.loader.fully_executed`` materializes them once in the object store; otherwise they
are read from storage every epoch. ``window_size_bytes`` streams them and bounds both the
object store memory the reads may hold and each worker's shuffle buffer to about that size.

On a worker, :class:`ShardBatches` behaves like the in-memory :class:`Batches`: ``rows``,
``len()`` (an estimate: shards are handed out block by block as workers ask for them),
``filler()`` and ``epoch(n)``. Blocks become tensors as they arrive and are shuffled in
windows: per batch there is only a slice of tensors, as in memory. The training shard reads
the next epoch's first window while the current epoch trains.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import Iterator

import pyarrow as pa
import torch

from plait.data.tensors import table_tensors
from plait.training.batches import bucketed, row_lengths, shuffle_generator
from plait.training.sizes import batch_count

log = logging.getLogger("plait")

SPLITS = ("training", "validation")
DEFAULT_SHUFFLE_BYTES = 256 << 20
"""Without ``window_size_bytes``, each worker shuffles within about this much of its shard."""
BLOCK_BYTES = 32 << 20
"""About this much data per block: small enough to stream, large enough to read efficiently."""
MIN_BLOCK_BYTES = 1 << 20
"""Blocks of a small streaming window are no smaller: each block costs Ray a task's overhead."""


def exactly_once_data_config(window_size_bytes: int | None):
    """Ray Train's DataConfig, but with shards that keep every row: Ray Train's own splits with
    ``equal=True``, which drops up to ``world_size - 1`` rows per epoch to even them out.
    plait's training loop handles uneven shards (see ``lockstep``)."""
    from ray.data import ExecutionOptions, ExecutionResources
    from ray.train import DataConfig

    class ExactlyOnceDataConfig(DataConfig):
        def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
            output = [{} for _ in range(world_size)]
            for name, dataset in datasets.items():
                dataset = dataset.copy(dataset)
                dataset.context.execution_options = self._resolve_execution_options(name)
                for rank, shard in enumerate(dataset.streaming_split(world_size, equal=False)):
                    output[rank][name] = shard
            return output

    # Blocks in order: with one worker, a seeded run then reads exactly the same batches.
    options = ExecutionOptions(preserve_order=True)
    if window_size_bytes:
        options.resource_limits = ExecutionResources.for_limits(object_store_memory=window_size_bytes)
    return ExactlyOnceDataConfig(execution_options=options)


def split_datasets(data, loader, columns: list[str], world_size: int) -> dict:
    """``{"training": Dataset, "validation": Dataset}`` over the cache's files (empty splits
    are left out), materialized when the loader is fully executed."""
    _quiet_ray_data()
    streamed = not loader.fully_executed or loader.window_size_bytes is not None
    datasets = {}
    for split in SPLITS:
        if not data.rows(split):
            continue
        # Half a CPU per read: reads must find room beside training workers that reserve most CPUs.
        dataset = read_cached_parquet(data.split_files(split), data.fs, num_cpus=0.5)
        # A streaming (not all-to-all) cut into blocks: a cache file is one block otherwise, and
        # a worker's shard is made of whole blocks.
        rows_per_block = -(-data.rows(split) // _block_count(data, split, world_size, loader.window_size_bytes))
        dataset = dataset.select_columns(columns).repartition(target_num_rows_per_block=rows_per_block)
        datasets[split] = dataset if streamed else dataset.materialize()
    log.info("Ray Data loader: %s.", "streamed from the cache every epoch" +
             (f", in windows of {loader.window_size_bytes / 2**20:,.0f} MiB" if loader.window_size_bytes else "")
             if streamed else "materialized once in the object store")
    return datasets


WHOLE_SPLITS_BYTES = 64 << 20
"""Training and validation splits to materialize that are smaller than this together (in
memory) go to every worker whole; larger ones are read by Ray Data's tasks, in parallel, on any
node, and streamed."""
TRAINED_SPLITS = ("training", "validation")
"""The splits a training worker reads (the test split is evaluated after training)."""


def whole_splits(data, loader, columns: list[str]) -> dict | None:
    """``{split: object reference to its table}`` of TRAINED_SPLITS when the loader materializes
    them and they are small (``WHOLE_SPLITS_BYTES``): each worker then takes its shard of them in
    memory, as the local backend and torchrun do (the same batches: one worker's are the local
    run's), without a Ray Data job, whose start costs seconds, and without its coordination every
    epoch (a small run waited on data 80% of its epochs). None: the Ray Data loader streams them."""
    import ray

    if not loader.fully_executed or loader.window_size_bytes is not None:
        return None
    if sum(data.rows(s) * bytes_per_row(data, s) for s in TRAINED_SPLITS if data.rows(s)) > WHOLE_SPLITS_BYTES:
        return None
    return {split: ray.put(data.read_split(split).select(columns)) for split in TRAINED_SPLITS}


def _quiet_ray_data() -> None:
    """No progress bars or per-dataset start banners in the driver's terminal: plait reports
    training progress itself, once per evaluation."""
    from ray.data import DataContext

    context = DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


def filler_table(dataset) -> pa.Table:
    """Two real rows, for a worker whose shard runs out before the others' (see ``lockstep``)."""
    return dataset.take_batch(2, batch_format="pyarrow")


def bytes_per_row(data, split: str) -> float:
    """In-memory bytes per row, from the Parquet footers (no data is read)."""
    import pyarrow.parquet as pq

    first = data.split_files(split)[0]
    with data.fs.open(first, "rb") as handle:
        metadata = pq.ParquetFile(handle).metadata
    total = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    return max(1.0, total / max(1, metadata.num_rows))


def _block_count(data, split: str, world_size: int, window_size_bytes: int | None = None) -> int:
    """At least four blocks per worker, so that the workers' shards come out about even, and
    blocks of at most a quarter of a streaming window: several blocks of a window are in flight
    at once, and blocks that crowd the object store are spilled to disk (an image dataset
    streamed through a small store waited on data 95% of the time with 32 MiB blocks)."""
    size = data.rows(split) * bytes_per_row(data, split)
    block_bytes = min(BLOCK_BYTES, max(MIN_BLOCK_BYTES, window_size_bytes // 4)) if window_size_bytes else BLOCK_BYTES
    return max(4 * world_size, math.ceil(size / block_bytes))


FOOTER_READERS = "2"
"""Ray Data's Parquet reader reads the files' footers on a pool of actors, 32 by default, each a
process started for that one read and ended after it. A cache split is a few files, and two
actors (each with its own I/O threads) read their footers as fast; on a small machine the 32
processes cost more than the read itself (five reads of three files on a 4-CPU local Ray: 32
worker processes started and 26.7 s against 8 and 12.0 s, the machine busy). A user's
RAY_DATA_PARQUET_FOOTER_NUM_ACTORS wins."""


def read_cached_parquet(files: list[str], fs, **read_args):
    """A Ray Dataset of cache files. The footer-reader count is read by the process that plans
    the read (a driver, a search trial, a training worker), from its environment, so it is set
    here, where every such process reads."""
    import ray.data

    os.environ.setdefault("RAY_DATA_PARQUET_FOOTER_NUM_ACTORS", FOOTER_READERS)
    return ray.data.read_parquet(files, filesystem=arrow_filesystem(fs), **read_args)


def arrow_filesystem(fs):
    """The cache's fsspec filesystem as a pyarrow one (Ray's Parquet reader takes those)."""
    from pyarrow.fs import FSSpecHandler, LocalFileSystem, PyFileSystem

    from plait.utils.fs import is_local

    return LocalFileSystem() if is_local(fs) else PyFileSystem(FSSpecHandler(fs))


class ShardBatches:
    """This worker's shard of a split as batches of tensors, shuffled within windows of
    ``shuffle_rows`` rows (no shuffle when None).

    With ``read_ahead``, once an epoch's last block has arrived the next epoch's first window is
    read, turned into tensors and shuffled on a background thread while this epoch's batches
    train: otherwise each epoch would start by waiting for Ray to hand out its first blocks.
    The price: near an epoch's end a worker holds two windows, not one. ``epochs`` (when known)
    stops it reading past the last epoch; a run that stops early reads one window it never uses.
    """

    def __init__(self, shard, rows: int, world_size: int, batch_size: int, features: dict, names: list[str],
                 filler: pa.Table, shuffle_rows: int | None = None, seed: int = 0, rank: int = 0,
                 read_ahead: bool = False, epochs: int | None = None, bucketing_field: str | None = None):
        self.shard, self.rows, self.world_size = shard, rows, world_size
        self.batch_size, self.features, self.names = batch_size, features, names
        self.shuffle_rows, self.seed, self.rank = shuffle_rows, seed, rank
        self.read_ahead, self.epochs = read_ahead, epochs
        self.bucketing_field = bucketing_field
        self._filler = filler
        self._ahead: dict[int, _FirstAhead] = {}

    def __len__(self) -> int:
        """Batches per epoch of an even shard: an estimate (shards are uneven), the schedule's."""
        return batch_count(-(-self.rows // self.world_size), self.batch_size)

    def filler(self) -> dict:
        return table_tensors(self._filler, self.features, self.names)

    def epoch(self, epoch: int = 0) -> Iterator[dict]:
        """Windows cut into batches. Rows left short of a batch join the next window's first
        batch, and the epoch's last batch takes a lone last row (batch norm cannot train on one
        row)."""
        windows = self._ahead.pop(epoch, None) or self._windows(epoch)
        yield from _join_lone_last_row(self._cut(self._reading_ahead_after(windows, epoch)), self.batch_size)

    def _reading_ahead_after(self, windows: Iterator, epoch: int) -> Iterator[dict]:
        """The windows, starting the next epoch's read once this one's blocks have all arrived."""
        for window, blocks_done in windows:
            if blocks_done and self.read_ahead and (self.epochs is None or epoch + 1 < self.epochs):
                self._ahead[epoch + 1] = _FirstAhead(self._windows(epoch + 1))
            if window is not None:
                yield window

    def _windows(self, epoch: int) -> Iterator[tuple[dict | None, bool]]:
        """``(window, blocks_done)``: blocks turned into tensors as they arrive (cheaper than
        batch by batch), gathered into windows, each shuffled. The last item comes after the
        last block, with what is left (or None)."""
        generator = shuffle_generator(self.seed, epoch, self.rank)
        window_rows = max(self.shuffle_rows or 0, self.batch_size)
        parts, rows = [], 0
        for block in self.shard.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=2):
            if block.num_rows:
                parts.append(table_tensors(block, self.features, self.names))
                rows += block.num_rows
            if rows >= window_rows:
                yield self._shuffled(parts, generator), False
                parts, rows = [], 0
        yield (self._shuffled(parts, generator) if rows else None), True

    def _shuffled(self, parts: list[dict], generator) -> dict:
        tensors = _concat(parts)
        if not self.shuffle_rows:
            return tensors
        order = torch.randperm(_rows(tensors), generator=generator)
        if self.bucketing_field:  # rows of similar length together, as in plait.training.batches.Batches
            order = bucketed(order, row_lengths(tensors[self.bucketing_field]), self.batch_size)
        return {name: tensor.index_select(0, order) for name, tensor in tensors.items()}

    def _cut(self, windows: Iterator[dict]) -> Iterator[dict]:
        """Batches of ``batch_size`` rows across windows, then what is left."""
        size, short = self.batch_size, None
        for window in windows:
            start, rows = 0, _rows(window)
            if short is not None:
                start = min(rows, size - _rows(short))
                short = _concat([short, _take(window, slice(0, start))])
                if _rows(short) < size:
                    continue
                yield short
            cut = start + (rows - start) // size * size
            for first in range(start, cut, size):
                yield _take(window, slice(first, first + size))
            short = _take(window, slice(cut, rows)) if cut < rows else None
        if short is not None:
            yield short


class _FirstAhead:
    """A generator whose first item is computed on a background thread, started at once; the
    rest come on the consumer's thread. A daemon thread: a read ahead of an epoch that never
    runs (early stopping) must not hold up the worker's exit."""

    _END = object()

    def __init__(self, items: Iterator):
        self._items, self._first, self._error = items, self._END, None
        self._thread = threading.Thread(target=self._read_first, name="plait-read-ahead", daemon=True)
        self._thread.start()

    def _read_first(self) -> None:
        try:
            self._first = next(self._items, self._END)
        except BaseException as error:  # handed to the consumer, on its thread
            self._error = error

    def __iter__(self) -> Iterator:
        self._thread.join()
        if self._error is not None:
            raise self._error
        if self._first is not self._END:
            yield self._first
            yield from self._items


def _join_lone_last_row(batches: Iterator[dict], batch_size: int) -> Iterator[dict]:
    """The batches, but a last batch of one row joins the batch before it."""
    previous = None
    for batch in batches:
        if previous is not None:
            if batch_size > 1 and _rows(batch) == 1:
                batch = _concat([previous, batch])
            else:
                yield previous
        previous = batch
    if previous is not None:
        yield previous


def _rows(tensors: dict) -> int:
    return len(next(iter(tensors.values())))


def _concat(parts: list[dict]) -> dict:
    return parts[0] if len(parts) == 1 else {name: torch.cat([part[name] for part in parts]) for name in parts[0]}


def _take(tensors: dict, rows: slice) -> dict:
    return {name: tensor[rows] for name, tensor in tensors.items()}


def shuffle_rows(data, loader, batch_size: int) -> int:
    """Rows in a worker's shuffle buffer: about a window (or 256 MiB) of data, at least a batch."""
    window = loader.window_size_bytes or DEFAULT_SHUFFLE_BYTES
    return max(batch_size, int(window / bytes_per_row(data, "training")))
