"""Reductions of the learning rate on a plateau and the regularization penalty with two workers
(gloo): every worker takes the same decisions and ends with the same learning rate and weights,
though each trains on its own shard."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from plait.models.base import TrainableModel


class Regression(TrainableModel):
    """The smallest model of the surface the trainer uses: inputs and outputs by name, and a loss."""

    input_names, output_names, target_readers, batch_padded = ["x"], ["y"], [], []

    def __init__(self):
        super().__init__()
        self.encoders = nn.ModuleDict({"x": nn.Linear(3, 4)})
        self.out = nn.Linear(4, 1)

    def forward(self, inputs):
        return {"y": self.out(torch.tanh(self.encoders["x"](inputs["x"])))}

    def loss(self, logits, targets):
        return nn.functional.mse_loss(logits["y"].squeeze(1), targets["y"]), {}


def _train(rank: int, strategy_name: str) -> dict:
    from plait.config import load_config
    from plait.training.batches import Batches
    from plait.training.sizes import TrainingSizes
    from plait.training.strategies import get_strategy
    from plait.training.trainer import Trainer

    trainer = load_config({
        "input_features": [{"name": "x", "type": "vector"}], "output_features": [{"name": "y", "type": "number"}],
        "trainer": {"epochs": 4, "batch_size": 8, "learning_rate": 1e-6, "learning_rate_scaling": "constant",
                    "regularization_type": "l1_l2", "regularization_lambda": 0.001,
                    "learning_rate_scheduler": {"reduce_on_plateau": 2, "reduce_on_plateau_patience": 0}}}).trainer
    strategy = get_strategy(strategy_name)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    data = {"x": torch.randn(64, 3, generator=generator), "y": torch.randn(64, generator=generator)}
    # Each worker trains on its shard: their mean training losses differ.
    batches = Batches(data, 8, shuffle=True, seed=0, rank=rank, world_size=2)
    run = Trainer(SimpleNamespace(trainer=trainer), Regression(), strategy, TrainingSizes.of(trainer, 64), seed=0,
                  progress_bar=False)
    progress = run.fit(batches, None)
    result = {"losses": [r["training"]["combined"]["loss"] for r in progress.history],
              "reductions": progress.lr_reductions, "lr": run.optimizer.param_groups[0]["lr"],
              "weights": {k: v.clone() for k, v in strategy.state.full_weights(run.model).items()}}
    strategy.shutdown()
    return result


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_workers_agree_on_reductions_on_a_plateau(run_workers, strategy):
    first, second = run_workers(_train, 2, strategy)
    assert first["losses"] == second["losses"]  # the mean over both workers' shards
    assert first["reductions"] == second["reductions"] > 0
    assert first["lr"] == second["lr"] == pytest.approx(1e-6 * 0.1 ** first["reductions"])
    if strategy == "ddp":  # fsdp gathers the full weights on the coordinator only
        for name, weight in first["weights"].items():
            assert torch.equal(weight, second["weights"][name]), name
