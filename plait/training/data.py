"""Preprocessed Arrow tables as model-ready tensors, and shuffled batches over them."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch


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
    if kind == "text":
        flat = pc.list_flatten(column).to_numpy().astype(np.int64)
        return torch.from_numpy(flat.reshape(len(column), meta["sequence_length"]))
    if kind == "vector":
        flat = pc.list_flatten(column).to_numpy().astype(np.float32)
        return torch.from_numpy(flat.reshape(len(column), meta["vector_size"]))
    if kind == "set":
        multi_hot = np.zeros((len(column), max(1, len(meta["vocabulary"]))), dtype=np.float32)
        rows = pc.list_parent_indices(column).to_numpy()
        multi_hot[rows, pc.list_flatten(column).to_numpy()] = 1.0
        return torch.from_numpy(multi_hot)
    raise ValueError(f"no tensor conversion for feature type {kind!r}")


def table_tensors(table: pa.Table, features: dict, names: list[str]) -> dict[str, torch.Tensor]:
    return {name: column_tensor(table[name], features[name]) for name in names}


class Batches:
    """Mini-batches over in-memory tensors; each epoch a new seeded permutation.

    With several workers each rank takes every ``world_size``-th row of the permutation. For
    training (``pad``) the shards are padded by wrapping, so every rank runs the same number of
    steps (the gradient all-reduce must line up); for evaluation they are not, so every row
    counts exactly once.
    """

    def __init__(self, tensors: dict[str, torch.Tensor], batch_size: int, shuffle: bool = True, seed: int = 0,
                 rank: int = 0, world_size: int = 1, pad: bool = True):
        self.tensors = tensors
        self.rows = len(next(iter(tensors.values())))
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.rank, self.world_size, self.pad = rank, world_size, pad

    def indices(self, epoch: int) -> torch.Tensor:
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
            order = torch.randperm(self.rows, generator=generator)
        else:
            order = torch.arange(self.rows)
        if self.world_size > 1:
            if self.pad and self.rows:
                order = order.repeat(2)[: self._per_rank() * self.world_size]
            order = order[self.rank :: self.world_size]
        return order

    def _per_rank(self) -> int:
        if self.pad:
            return -(-self.rows // self.world_size)
        return len(range(self.rank, self.rows, self.world_size))

    def _starts(self, rows: int) -> list[int]:
        """Where each batch starts. A last batch of a single row joins the batch before it: batch
        norm cannot train on one row."""
        starts = list(range(0, rows, self.batch_size))
        if len(starts) > 1 and self.batch_size > 1 and rows - starts[-1] == 1:
            starts.pop()
        return starts

    def __len__(self) -> int:
        per_rank = self._per_rank()
        batches = -(-per_rank // self.batch_size)
        return batches - 1 if batches > 1 and per_rank % self.batch_size == 1 else batches  # as _starts

    def epoch(self, epoch: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        order = self.indices(epoch)
        starts = self._starts(len(order))
        for start, end in zip(starts, starts[1:] + [len(order)]):
            index = order[start:end]
            yield {name: tensor.index_select(0, index) for name, tensor in self.tensors.items()}
