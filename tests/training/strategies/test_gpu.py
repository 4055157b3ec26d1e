"""GPU paths: the ddp and fsdp strategies over NCCL, bf16 autocast, on every GPU this machine has.
Every test here carries the ``gpu`` marker and skips cleanly without CUDA."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _nccl_steps(rank: int, strategy_name: str) -> dict:
    import torch.distributed as dist

    from plait.config.backend import DeepSpeedConfig
    from plait.training.strategies import StepPlan, get_strategy

    # DeepSpeed runs bf16 through its own config, not through an autocast around the engine.
    deepspeed = strategy_name == "deepspeed"
    options = {"config": DeepSpeedConfig(bf16={"enabled": True})} if deepspeed else {}
    # The worker's own GPU, as the backends choose it (Ray Train's assignment, a launcher's local
    # rank): a strategy is told its device, and without one it trains on the CPU.
    strategy = get_strategy(strategy_name, device=f"cuda:{rank}", **options)
    assert strategy.device.type == "cuda" and dist.get_backend() == "nccl"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    model, optimizer = strategy.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-2), StepPlan(batch_size=64))
    inputs = torch.randn(64, 16, device=strategy.device)
    for _ in range(3):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=not deepspeed):
            loss = model(inputs).float().pow(2).mean()
        strategy.backward(loss)
        strategy.optimizer_step(optimizer, list(model.parameters()), None if deepspeed else 1.0)  # no trainer: DeepSpeed has no clip set
    weights = {k: v.float().cpu() for k, v in strategy.state.full_weights(model).items()}
    strategy.shutdown()
    return weights


@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "deepspeed"])
def test_a_strategy_trains_over_nccl_with_bf16_autocast(run_workers, strategy):
    if strategy == "deepspeed":
        pytest.importorskip("deepspeed")
    workers = torch.cuda.device_count()
    results = run_workers(_nccl_steps, workers, strategy, backend="nccl")
    assert results[0] and all(torch.isfinite(v).all() for v in results[0].values())


def test_local_training_on_the_gpu_with_bf16_learns(tmp_path):
    import numpy as np
    import pandas as pd

    from plait import Model

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x1": rng.normal(size=2000), "x2": rng.normal(size=2000)})
    df["y"] = df.x1 + df.x2 > 0
    model = Model({"input_features": [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"}],
                   "output_features": [{"name": "y", "type": "binary"}],
                   "trainer": {"epochs": 5, "batch_size": 64, "use_mixed_precision": True},
                   "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}})
    model.train(dataset=df, progress_bar=False)
    assert next(model.module.parameters()).device.type == "cpu"  # returned for saving and prediction
    assert model.evaluate(df, split="test")["y"]["accuracy"] > 0.9
