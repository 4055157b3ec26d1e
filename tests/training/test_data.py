"""Batches: every row once per epoch, seeded shuffles, equal step counts across workers."""

from __future__ import annotations

import pytest
import torch

from plait.training.data import Batches, lockstep
from plait.training.strategies.local import LocalStrategy


def _tensors(rows: int):
    return {"x": torch.arange(rows, dtype=torch.float32), "y": torch.arange(rows) % 2}


@pytest.mark.parametrize("rows,batch_size", [(100, 32), (96, 32), (97, 32), (1, 32), (33, 32), (5, 1)])
def test_an_epoch_visits_every_row_once_in_len_batches(rows, batch_size):
    batches = Batches(_tensors(rows), batch_size, shuffle=True, seed=3)
    epoch = list(batches.epoch(0))
    assert len(epoch) == len(batches)
    seen = torch.cat([b["x"] for b in epoch]).long()
    assert sorted(seen.tolist()) == list(range(rows))
    for b in epoch:  # columns stay aligned
        assert torch.equal(b["y"], b["x"].long() % 2)


@pytest.mark.parametrize("rows", [33, 97, 161])
def test_no_training_batch_has_a_single_row_when_avoidable(rows):
    # A one-row batch breaks batch norm in training mode; it joins the batch before it.
    batches = Batches(_tensors(rows), 32, shuffle=True, seed=0)
    sizes = [len(b["x"]) for b in batches.epoch(0)]
    assert min(sizes) > 1
    assert sum(sizes) == rows and len(sizes) == len(batches)


def test_shuffles_are_seeded_per_epoch():
    a, b = Batches(_tensors(50), 8, seed=1), Batches(_tensors(50), 8, seed=1)
    assert torch.equal(a.indices(0), b.indices(0))
    assert not torch.equal(a.indices(0), a.indices(1))
    assert not torch.equal(a.indices(0), Batches(_tensors(50), 8, seed=2).indices(0))
    assert torch.equal(Batches(_tensors(50), 8, shuffle=False).indices(0), torch.arange(50))


@pytest.mark.parametrize("rows,world_size", [(100, 3), (10, 4), (7, 2)])
def test_workers_take_disjoint_rows_that_cover_the_epoch_exactly_once(rows, world_size):
    ranks = [Batches(_tensors(rows), 4, seed=5, rank=r, world_size=world_size) for r in range(world_size)]
    assert max(len(list(b.epoch(0))) for b in ranks) == len(ranks[0])
    covered = torch.cat([b.indices(0) for b in ranks])
    assert sorted(covered.tolist()) == list(range(rows))


def test_lockstep_on_one_worker_marks_the_last_batch():
    steps = list(lockstep(Batches(_tensors(10), 4, shuffle=False).epoch(0), LocalStrategy(), filler={}))
    assert [(len(b["x"]), real, last) for b, real, last in steps] == [(4, True, False), (4, True, False), (2, True, True)]
