"""Shuffled mini-batches over in-memory tensors, and the lockstep that keeps workers' steps in line."""

from __future__ import annotations

from typing import Iterable, Iterator

import torch

from plait.training.sizes import batch_count


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
        """Where each batch starts (see ``batch_count``: a last batch of a single row joins the
        batch before it)."""
        return list(range(0, rows, self.batch_size))[:batch_count(rows, self.batch_size)]

    def __len__(self) -> int:
        """Batches per epoch on the worker with the largest shard (the same on every worker)."""
        return batch_count(-(-self.rows // self.world_size), self.batch_size)

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
