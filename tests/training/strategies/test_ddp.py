"""The ddp strategy in a real two-process gloo group."""

from __future__ import annotations

import torch


def _replicas_after_steps(rank: int) -> dict:
    from plait.training.strategies import StepPlan, get_strategy

    strategy = get_strategy("ddp")
    torch.manual_seed(rank)  # different initial weights: DDP must broadcast rank 0's
    model = torch.nn.Linear(3, 1)
    model, optimizer = strategy.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), StepPlan(batch_size=4))
    inputs = torch.full((4, 3), float(rank + 1))
    for sync in (False, True):  # one accumulation micro-step, then a synchronizing one
        strategy.backward(model(inputs).sum(), sync=sync)
    strategy.optimizer_step(optimizer, list(model.parameters()))
    weights = strategy.state.full_weights(model)
    strategy.shutdown()
    return {k: v.clone() for k, v in weights.items()}


def test_replicas_stay_equal_after_accumulated_steps(run_workers):
    first, second = run_workers(_replicas_after_steps, 2)
    for name in first:
        assert torch.equal(first[name], second[name]), name
    # rank 0's inputs are 1s and rank 1's are 2s: the averaged gradient of the weights is (2*4 + 2*8)/2 = 12
    torch.manual_seed(0)
    start = torch.nn.Linear(3, 1).weight.detach()
    assert torch.allclose(first["weight"], start - 0.1 * 12.0)
