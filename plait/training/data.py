"""Preprocessed Arrow tables as model-ready tensors, and shuffled batches over them."""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from plait.features.hf_tokens import CACHED_EMBEDDING


PARTS = {"date": 9, "h3": 19}
"""The small integers each value of these types is preprocessed into (plait.features.date, .h3)."""


def column_tensor(column: pa.ChunkedArray | pa.Array, meta: dict) -> torch.Tensor:
    """One preprocessed column as a tensor, by feature type."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = meta["type"]
    if kind == "number":
        return torch.from_numpy(column.to_numpy(zero_copy_only=False).astype(np.float32))
    if kind == "binary":
        return torch.from_numpy(column.to_numpy(zero_copy_only=False).astype(np.float32))
    if kind == "category":
        return torch.from_numpy(column.to_numpy(zero_copy_only=False).astype(np.int64))
    if kind == "text" and CACHED_EMBEDDING in meta:  # an encoder's output, computed at preprocessing
        flat = pc.list_flatten(column).to_numpy().astype(np.float32)
        return torch.from_numpy(flat.reshape(len(column), meta[CACHED_EMBEDDING]))
    if kind in ("text", "sequence"):  # token ids, 0 for padding
        return torch.from_numpy(_padded(column, meta["sequence_length"], 0, meta.get("padding") == "left", np.int64))
    if kind in ("vector", "category_distribution"):
        flat = pc.list_flatten(column).to_numpy().astype(np.float32)
        return torch.from_numpy(flat.reshape(len(column), meta["vector_size"]))
    if kind == "timeseries":  # an input's padded steps are NaN (plait.features.timeseries)
        fill = meta["padding_value"] if meta.get("output") else np.nan
        return torch.from_numpy(_padded(column, meta["timeseries_length"], fill, meta.get("padding") == "left",
                                        np.float32))
    if kind == "audio":
        matrix = _padded(column, meta["frames"] * meta["channels"], np.nan, False, np.float32)
        return torch.from_numpy(matrix.reshape(len(column), meta["frames"], meta["channels"]))
    if kind == "image":
        return _images(column, meta)
    if kind == "set":
        return _multi_hot(column, meta)
    if kind in PARTS:
        flat = pc.list_flatten(column).to_numpy().astype(np.int64)
        return torch.from_numpy(flat.reshape(len(column), PARTS[kind]))
    if kind == "bag":
        return _counts(column, meta)
    raise ValueError(f"no tensor conversion for feature type {kind!r}")


def _images(column: pa.Array, meta: dict) -> torch.Tensor:
    """Stored images (height x width x channels bytes each) as uint8 [rows, channels, height,
    width]; an output's masks (a class id per pixel) as int64 [rows, height, width]."""
    height, width = meta["height"], meta["width"]
    pixels = np.frombuffer(column.buffers()[1], np.uint8, offset=column.offset * column.type.byte_width,
                           count=len(column) * column.type.byte_width) if len(column) else np.zeros(0, np.uint8)
    if meta.get("output"):
        return torch.from_numpy(pixels.reshape(len(column), height, width).astype(np.int64))
    images = torch.from_numpy(pixels.copy()).reshape(len(column), height, width, meta["num_channels"])
    return images.permute(0, 3, 1, 2)  # channels-last in memory, which CPU convolutions prefer


def _padded(column: pa.Array, width: int, fill: float, left: bool, dtype) -> np.ndarray:
    """Rows of a list column as a [rows, width] matrix, padded with ``fill`` on the left or the
    right (a column stored padded already, as caches before lists were, is read as it is)."""
    flat = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(dtype)
    if pa.types.is_fixed_size_list(column.type):
        return flat.reshape(len(column), width)
    lengths = pc.list_value_length(column).fill_null(0).to_numpy().astype(np.int64)
    matrix = np.full((len(column), width), fill, dtype=dtype)
    columns = np.arange(width)
    matrix[columns >= (width - lengths)[:, None] if left else columns < lengths[:, None]] = flat
    return matrix


def _multi_hot(column: pa.Array, meta: dict) -> torch.Tensor:
    """A set column as a multi-hot matrix, one column per vocabulary item. An output's matrix has
    one more, trailing column: how many of the row's items training never saw (the transform writes
    them as the id ``len(vocabulary)``). The loss ignores that column; the metrics count those
    items as missed."""
    vocabulary = len(meta["vocabulary"])
    width = max(1, vocabulary)
    output = bool(meta.get("output"))
    multi_hot = np.zeros((len(column), width + output), dtype=np.float32)
    rows = pc.list_parent_indices(column).to_numpy()
    ids = pc.list_flatten(column).to_numpy()
    seen = ids < vocabulary
    multi_hot[rows[seen], ids[seen]] = 1.0
    if output:
        multi_hot[:, width] = np.bincount(rows[~seen], minlength=len(column))
    return torch.from_numpy(multi_hot)


def _counts(column: pa.Array, meta: dict) -> torch.Tensor:
    """A bag column (token ids, one per occurrence) as a [rows, vocabulary] matrix of counts."""
    width = max(1, len(meta["vocabulary"]))
    keys = pc.list_parent_indices(column).to_numpy().astype(np.int64) * width + pc.list_flatten(column).to_numpy()
    cells, counts = np.unique(keys, return_counts=True)
    matrix = np.zeros((len(column), width), dtype=np.float32)
    matrix.reshape(-1)[cells] = counts
    return torch.from_numpy(matrix)


def trim_padding(batch: dict[str, torch.Tensor], names) -> dict[str, torch.Tensor]:
    """``batch`` with the token matrices of ``names`` (padded on the right) cut after the batch's
    longest row: per-batch padding, so a batch of short texts costs what short texts cost."""
    trimmed = dict(batch)
    for name in names:
        tokens = batch[name]
        used = torch.nonzero(tokens.any(0))
        length = int(used[-1]) + 1 if used.numel() else 1
        if length < tokens.shape[1]:
            trimmed[name] = tokens[:, :length]
    return trimmed


def table_tensors(table: pa.Table, features: dict, names: list[str]) -> dict[str, torch.Tensor]:
    return {name: column_tensor(table[name], features[name]) for name in names}


def shuffle_generator(seed: int, epoch: int, rank: int = 0) -> torch.Generator:
    """The random generator of one epoch's shuffle. A new seed each epoch: the same rows must
    not meet in the same batches epoch after epoch. Rank 0's is the in-memory order's, so a
    single Ray worker whose window holds its whole shard shuffles exactly as the local backend
    does (same batches, same metrics); other ranks shuffle their own shards differently."""
    return torch.Generator().manual_seed(seed * 100_003 + epoch + rank * 1_000_000_007)


BUCKET_BATCHES = 32
"""With bucketing, rows are sorted by length within runs of this many batches of the shuffled
order: batches of similar lengths, still drawn from all over the data."""


def bucketed(order: torch.Tensor, lengths: torch.Tensor, batch_size: int) -> torch.Tensor:
    """``order`` (a shuffled order of rows) with each run of BUCKET_BATCHES batches sorted by the
    rows' ``lengths`` (stable, so the shuffle breaks ties)."""
    run = batch_size * BUCKET_BATCHES
    pieces = []
    for start in range(0, len(order), run):
        piece = order[start:start + run]
        pieces.append(piece[torch.argsort(lengths[piece], stable=True)])
    return torch.cat(pieces) if pieces else order


def row_lengths(tokens: torch.Tensor) -> torch.Tensor:
    """The number of tokens (not padding) in each row of a token matrix."""
    return (tokens != 0).sum(1)


class Batches:
    """Mini-batches over in-memory tensors; each epoch a new seeded permutation.

    With several workers each rank takes every ``world_size``-th row of the permutation, so each
    row is seen exactly once per epoch. The shards may differ by a row: :func:`lockstep` keeps
    the workers' steps in line.
    """

    def __init__(self, tensors: dict[str, torch.Tensor], batch_size: int, shuffle: bool = True, seed: int = 0,
                 rank: int = 0, world_size: int = 1, bucketing_field: str | None = None):
        self.tensors = tensors
        self.rows = len(next(iter(tensors.values())))
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.rank, self.world_size = rank, world_size
        self.lengths = row_lengths(tensors[bucketing_field]) if bucketing_field and shuffle else None

    def indices(self, epoch: int) -> torch.Tensor:
        if self.shuffle:
            order = torch.randperm(self.rows, generator=shuffle_generator(self.seed, epoch))
        else:
            order = torch.arange(self.rows)
        if self.lengths is not None:  # each worker's batch takes every world_size-th row of a sorted run
            order = bucketed(order, self.lengths, self.batch_size * self.world_size)
        return order[self.rank :: self.world_size] if self.world_size > 1 else order

    def _starts(self, rows: int) -> list[int]:
        """Where each batch starts. A last batch of a single row joins the batch before it: batch
        norm cannot train on one row."""
        starts = list(range(0, rows, self.batch_size))
        if len(starts) > 1 and self.batch_size > 1 and rows - starts[-1] == 1:
            starts.pop()
        return starts

    def __len__(self) -> int:
        """Batches per epoch on the worker with the largest shard (the same on every worker)."""
        return len(self._starts(-(-self.rows // self.world_size)))

    def filler(self) -> dict[str, torch.Tensor]:
        """A small batch of real rows, for a worker whose shard ran out before the others'."""
        return {name: tensor[:2] for name, tensor in self.tensors.items()}

    def epoch(self, epoch: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        order = self.indices(epoch)
        starts = self._starts(len(order))
        for start, end in zip(starts, starts[1:] + [len(order)]):
            index = order[start:end]
            yield {name: tensor.index_select(0, index) for name, tensor in self.tensors.items()}


def lockstep(batches: Iterable[dict], strategy, filler: dict, stop=None) -> Iterator[tuple[dict, bool, bool]]:
    """This worker's batches as ``(batch, is_real, is_last)``, for as many steps as the worker
    with the most batches has.

    Shards that hold every row exactly once differ in length, but a collective in each step (the
    gradient all-reduce, a sharded forward pass) must be run by every worker. A worker whose
    shard ran out runs ``filler`` (real rows) and discards the result, until all are done. Each
    step costs one all-reduce of two numbers, which also tells every worker which step is the
    last (where a partial gradient accumulation still makes an optimizer step) and, given
    ``stop`` (a :class:`~plait.training.interrupt.StopRequest`), whether any worker was
    interrupted: every worker then sees ``stop.agreed`` from the same step on.
    """
    iterator = iter(batches)
    current = next(iterator, None)
    active = _count_active(strategy, current is not None, stop)
    while active:
        upcoming = next(iterator, None) if current is not None else None
        active = _count_active(strategy, upcoming is not None, stop)
        yield (current if current is not None else filler), current is not None, active == 0
        current = upcoming


def _count_active(strategy, has_batch: bool, stop) -> int:
    """How many workers have a batch; the same all-reduce carries whether any asked to stop, or
    for a checkpoint."""
    asked = stop is not None
    active, stopping, checkpointing = count_flags(strategy, [has_batch, asked and stop.requested,
                                                             asked and stop.checkpoint_requested])
    if stopping:
        stop.agreed = True
    if checkpointing:
        stop.checkpoint_agreed = True
    return active


def count_flags(strategy, flags: list[bool]) -> list[int]:
    """How many workers have each flag set, in one all-reduce (one worker: no collective, and no
    tensor)."""
    if strategy.world_size == 1:
        return [int(flag) for flag in flags]
    counts = strategy.all_reduce_sum(torch.tensor([int(flag) for flag in flags], device=strategy.device))
    return [int(count) for count in counts.tolist()]
