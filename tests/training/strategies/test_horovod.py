"""The horovod strategy in a real two-process gloo torch group: the way it runs on Ray Train
workers, where plait does Horovod's rendezvous through the torch group. Skipped without Horovod
(``bash scripts/build_horovod.sh`` builds it)."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("horovod.torch")


def _strategy():
    from plait.training.strategies import get_strategy

    return get_strategy("horovod")


def _steps(accumulation: int = 1):
    from plait.training.strategies import StepPlan

    return StepPlan(batch_size=4, accumulation=accumulation)


def _inputs(rank: int, step: int) -> torch.Tensor:
    """Different on each rank and at each step, the same in every run."""
    generator = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(4, 3, generator=generator)


def _replicas_after_steps(rank: int) -> dict:
    strategy = _strategy()
    torch.manual_seed(rank)  # different initial weights: the strategy must broadcast rank 0's
    model = torch.nn.Linear(3, 1)
    model, optimizer = strategy.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), _steps(accumulation=2))
    inputs = torch.full((4, 3), float(rank + 1))
    norms = []
    for _ in range(3):
        for sync in (False, True):  # one accumulation micro-step, then the exchanging one
            strategy.backward(model(inputs).sum(), sync=sync)
        norms.append(strategy.optimizer_step(optimizer, list(model.parameters()), 1e6))
    weights = {k: v.clone() for k, v in strategy.state.full_weights(model).items()}
    strategy.shutdown()
    return {"weights": weights, "norms": norms}


def test_replicas_stay_equal_with_the_averaged_gradient_update(group_results):
    first, second = (replicas for replicas, _, _ in group_results)
    for name in first["weights"]:
        assert torch.equal(first["weights"][name], second["weights"][name]), name
    # The loss is the sum of 4 rows, over 2 micro-steps: rank 0's inputs are 1s, rank 1's 2s, so
    # the averaged gradient is (8 + 16) / 2 = 12 for each weight and (8 + 8) / 2 = 8 for the bias.
    torch.manual_seed(0)
    start = torch.nn.Linear(3, 1)
    assert torch.allclose(first["weights"]["weight"], start.weight.detach() - 3 * 0.1 * 12.0)
    assert torch.allclose(first["weights"]["bias"], start.bias.detach() - 3 * 0.1 * 8.0)
    # Clipping sees the averaged gradients (the exchange is complete before it), on both ranks.
    assert first["norms"] == pytest.approx([math.sqrt(3 * 12.0**2 + 8.0**2)] * 3)
    assert second["norms"] == first["norms"]


def _collectives(rank: int) -> dict:
    strategy = _strategy()
    value = torch.tensor([rank + 1.0, 10.0])
    total = strategy.all_reduce_sum(value)
    strategy.barrier()
    # A different type on each rank (as a worker with nothing to say passes None): Horovod's
    # default name for the broadcast is the type's, which would never match.
    result = {"total": total, "input": value, "broadcast": strategy.broadcast_object({"from": rank} if rank == 0 else None),
              "rank": strategy.rank, "world_size": strategy.world_size}
    strategy.shutdown()
    return result


def test_all_reduce_sum_and_broadcast_object(group_results):
    results = [collectives for _, collectives, _ in group_results]
    for rank, result in enumerate(results):
        assert (result["rank"], result["world_size"]) == (rank, 2)
        assert torch.equal(result["total"], torch.tensor([3.0, 20.0]))
        assert torch.equal(result["input"], torch.tensor([rank + 1.0, 10.0]))  # not reduced in place
        assert result["broadcast"] == {"from": 0}


def _fresh(strategy, seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    model, optimizer = strategy.prepare(model, torch.optim.AdamW(model.parameters(), lr=0.05), _steps())
    return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))


def _train(strategy, model, optimizer, scheduler, steps: range) -> None:
    for step in steps:
        strategy.backward(model(_inputs(strategy.rank, step)).pow(2).mean())
        strategy.optimizer_step(optimizer, list(model.parameters()))
        scheduler.step()


def _resume_continues_identically(rank: int, directory: str) -> dict:
    from pathlib import Path

    from plait.training.checkpoint import load_checkpoint, save_checkpoint

    strategy = _strategy()
    model, optimizer, scheduler = _fresh(strategy, seed=rank)
    _train(strategy, model, optimizer, scheduler, range(0, 3))
    saved = save_checkpoint(Path(directory), strategy, model, optimizer, scheduler, {"step": 3})
    _train(strategy, model, optimizer, scheduler, range(3, 6))
    uninterrupted = {k: v.clone() for k, v in strategy.state.full_weights(model).items()}
    strategy.shutdown()

    # A new Horovod job in the same processes, as a restarted worker group would start.
    strategy = _strategy()
    model, optimizer, scheduler = _fresh(strategy, seed=10 + rank)
    load_checkpoint(saved.local(), strategy, model, optimizer, scheduler)
    _train(strategy, model, optimizer, scheduler, range(3, 6))
    resumed = {k: v.clone() for k, v in strategy.state.full_weights(model).items()}
    strategy.shutdown()
    return {"uninterrupted": uninterrupted, "resumed": resumed}


def _every_part(rank: int, directory: str) -> tuple[dict, dict, dict]:
    """The three checks' work in one process group, each a Horovod job of its own (as a
    restarted worker group's would be): a group's start costs about 2 s of the suite."""
    return _replicas_after_steps(rank), _collectives(rank), _resume_continues_identically(rank, directory)


@pytest.fixture(scope="module")
def group_results(run_workers, tmp_path_factory) -> list:
    """[(replicas, collectives, resumed) of rank 0, ... of rank 1]."""
    return run_workers(_every_part, 2, str(tmp_path_factory.mktemp("horovod")))


def test_checkpoint_resumes_identically(group_results):
    first, second = (resumed for _, _, resumed in group_results)
    for name, value in first["uninterrupted"].items():
        assert torch.equal(first["resumed"][name], value), name
        assert torch.equal(second["resumed"][name], value), name
        assert torch.equal(second["uninterrupted"][name], value), name
