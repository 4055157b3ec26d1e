"""Batches: every row once per epoch, seeded shuffles, equal step counts across workers."""

from __future__ import annotations

import pytest
import torch

from plait.data.tensors import trim_padding
from plait.training.batches import Batches, lockstep
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


def token_rows(rows: int, seed: int = 0) -> torch.Tensor:
    """Token matrices of random lengths 1..40, padded on the right to 40."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 41, (rows,), generator=g)
    return (torch.arange(40)[None, :] < lengths[:, None]).long() * torch.randint(2, 50, (rows, 40), generator=g)


def padding_share(batches, name: str = "t") -> float:
    real = padded = 0
    for batch in batches:
        tokens = trim_padding(batch, [name])[name]
        real, padded = real + int((tokens != 0).sum()), padded + tokens.numel()
    return 1 - real / padded


def test_bucketing_pads_far_less_and_still_visits_every_row_once():
    tokens = token_rows(2000)
    plain = Batches({"t": tokens, "i": torch.arange(2000)}, 32, seed=3)
    bucketed = Batches({"t": tokens, "i": torch.arange(2000)}, 32, seed=3, bucketing_field="t")
    assert sorted(torch.cat([b["i"] for b in bucketed.epoch(0)]).tolist()) == list(range(2000))
    assert padding_share(bucketed.epoch(0)) < 0.1 < 0.3 < padding_share(plain.epoch(0))
    first, second = (torch.cat([b["i"] for b in bucketed.epoch(e)]) for e in (0, 1))
    assert not torch.equal(first, second)  # still shuffled, epoch by epoch


def test_bucketing_shares_rows_between_workers_exactly_once():
    tokens = token_rows(500)
    shards = [Batches({"t": tokens, "i": torch.arange(500)}, 16, seed=1, rank=r, world_size=2, bucketing_field="t")
              for r in range(2)]
    seen = sorted(i for shard in shards for b in shard.epoch(0) for i in b["i"].tolist())
    assert seen == list(range(500))
