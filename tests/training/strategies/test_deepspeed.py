"""The deepspeed strategy in a real two-process gloo group, on DeepSpeed's CPU accelerator.

Every worker function below runs in both processes; the tests compare what they return with
plain single-process training on both ranks' rows together (DeepSpeed averages the gradients over
the ranks, so the two agree when every rank has as many rows).
"""

from __future__ import annotations

import math
import sys

import pytest
import torch

pytest.importorskip("deepspeed")

from plait.config.backend import DeepSpeedConfig  # noqa: E402
from plait.config.trainer import TrainerConfig  # noqa: E402
from plait.errors import ConfigError  # noqa: E402
from plait.training.strategies.base import StepPlan  # noqa: E402

STEPS, ACCUMULATION, CLIP = 3, 2, 0.5
PLAN = StepPlan(batch_size=4, accumulation=ACCUMULATION, max_norm=CLIP)
"""What the trainer would tell the strategy of its steps."""


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def rows(rank: int, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The 4 rows rank ``rank`` trains on at ``micro``-step ``micro`` of optimizer step ``step``."""
    generator = torch.Generator().manual_seed(1000 * step + 10 * micro + rank)
    inputs = torch.randn(4, 3, generator=generator)
    return inputs, inputs.sum(dim=1, keepdim=True) ** 2


def strategy_for(stage: int, bf16: bool = False):
    from plait.training.strategies import get_strategy

    config = DeepSpeedConfig(zero_optimization={"stage": stage}, bf16={"enabled": bf16})
    return get_strategy("deepspeed", config=config)


def train_steps(strategy, model, optimizer, rank: int, steps: range, scheduler=None) -> list[float]:
    """The trainer's order of calls: backward per micro-batch, then clip, step, scheduler."""
    norms = []
    for step in steps:
        for micro in range(ACCUMULATION):
            inputs, targets = rows(rank, step, micro)
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            strategy.backward(loss / ACCUMULATION, sync=micro == ACCUMULATION - 1)
        norms.append(strategy.optimizer_step(optimizer, list(model.parameters()), CLIP))
        if scheduler is not None:
            scheduler.step()
    return norms


def plain_training(steps: int = STEPS) -> dict[str, torch.Tensor]:
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    for step in range(steps):
        for micro in range(ACCUMULATION):
            both = [rows(rank, step, micro) for rank in (0, 1)]
            inputs, targets = torch.cat([b[0] for b in both]), torch.cat([b[1] for b in both])
            (torch.nn.functional.mse_loss(model(inputs), targets) / ACCUMULATION).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        optimizer.zero_grad()
    return model.state_dict()


# ---- worker functions (module level: they are pickled into the workers) ----------------------------


def _train(rank: int, runs: list[tuple[int, bool]]) -> dict:
    """Train once per (ZeRO stage, bf16) in ``runs``."""
    results = {}
    for stage, bf16 in runs:
        strategy = strategy_for(stage, bf16)
        model = make_model()
        model, optimizer = strategy.prepare(model, torch.optim.AdamW(model.parameters(), lr=0.05), PLAN)
        norms = train_steps(strategy, model, optimizer, rank, range(STEPS))
        results[stage, bf16] = {"weights": strategy.state.full_weights(model), "norms": norms,
                                "written": _written_full_weights(strategy, model)}
    return results


def _written_full_weights(strategy, model) -> dict:
    """What ``save_full_weights`` writes (ZeRO-3: gathered module by module, streamed to the
    file), read back on the coordinator."""
    import tempfile
    from pathlib import Path

    from plait.training.checkpoint import load_weights

    with tempfile.TemporaryDirectory() as folder:
        strategy.state.save_full_weights(model, Path(folder) / "weights.safetensors")
        return load_weights(Path(folder) / "weights.safetensors") if strategy.is_coordinator else {}


def _resume_from_checkpoint(rank: int, folder: str, runs: list[tuple[int, bool]]) -> dict:
    """Per (ZeRO stage, bf16): 4 steps straight, and 2 steps, a checkpoint, 2 steps in a new engine."""
    from pathlib import Path

    results = {}
    for stage, bf16 in runs:
        directory = Path(folder) / f"stage{stage}{'-bf16' if bf16 else ''}"
        if rank == 0:
            directory.mkdir()
        torch.distributed.barrier()
        strategy = strategy_for(stage, bf16)
        model = make_model()
        model, optimizer = strategy.prepare(model, torch.optim.AdamW(model.parameters(), lr=0.05), PLAN)
        train_steps(strategy, model, optimizer, rank, range(2))
        strategy.state.save(directory, model, optimizer)
        torch.distributed.barrier()
        train_steps(strategy, model, optimizer, rank, range(2, 4))
        uninterrupted = strategy.state.full_weights(model)

        fresh = strategy_for(stage, bf16)
        torch.manual_seed(rank + 7)  # other initial weights: all must come from the checkpoint
        model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        model, optimizer = fresh.prepare(model, torch.optim.AdamW(model.parameters(), lr=0.05), PLAN)
        fresh.state.load(directory, model, optimizer)
        train_steps(fresh, model, optimizer, rank, range(2, 4))
        results[stage, bf16] = {"uninterrupted": uninterrupted, "resumed": fresh.state.full_weights(model)}
    return results


def _step_semantics(rank: int, stages: list[int]) -> dict:
    results = {}
    for stage in stages:
        results[stage] = {"lr": _learning_rate_from_scheduler(rank, stage), "nan": _non_finite_gradient(rank, stage)}
    return results


def _learning_rate_from_scheduler(rank: int, stage: int) -> dict:
    strategy = strategy_for(stage)
    model = make_model()
    model, optimizer = strategy.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), PLAN)
    # lr 0.1 for the first step, 0 after it: the second step must leave the weights alone.
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 if step == 0 else 0.0)
    start = strategy.state.full_weights(model)
    train_steps(strategy, model, optimizer, rank, range(1), scheduler)
    after_first = strategy.state.full_weights(model)
    train_steps(strategy, model, optimizer, rank, range(1, 2), scheduler)
    return {"start": start, "after_first": after_first, "after_second": strategy.state.full_weights(model),
            "engine_lr": model.get_lr()}


def _non_finite_gradient(rank: int, stage: int) -> dict:
    strategy = strategy_for(stage)
    model = make_model()
    model, optimizer = strategy.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), PLAN)
    start = strategy.state.full_weights(model)
    inputs, _ = rows(rank, 0, 0)
    for micro in range(ACCUMULATION):
        strategy.backward(model(inputs).sum() * float("nan"), sync=micro == ACCUMULATION - 1)
    norm = strategy.optimizer_step(optimizer, list(model.parameters()), CLIP)
    return {"norm": norm, "start": start, "after": strategy.state.full_weights(model)}


def _fit_with_ddp_then_zero_3(rank: int, job, run_dirs: dict) -> dict:
    """plait's own loop (evaluation and checkpoints included) under ddp, then under ZeRO-3."""
    from dataclasses import replace

    from plait.training.run import fit
    from plait.training.strategies import build_strategy, get_strategy

    zero_3 = DeepSpeedConfig(zero_optimization={"stage": 3})
    histories = {}
    for name, strategy in (("ddp", get_strategy("ddp")), ("zero-3", build_strategy(zero_3))):
        histories[name] = fit(replace(job, run_dir=run_dirs[name]), strategy).history
        strategy.shutdown()
    return histories


# ---- the tests -----------------------------------------------------------------------------------


def assert_close(first: dict, second: dict, atol: float, what: str) -> None:
    assert first.keys() == second.keys(), what
    for name in first:
        assert first[name].dtype == second[name].dtype, f"{what}: {name}"
        assert torch.allclose(first[name], second[name], atol=atol), f"{what}: {name}: {first[name]} != {second[name]}"


TRAINED = [(stage, False) for stage in (0, 1, 2, 3)] + [(2, True)]
RESUMED = [(0, False), (1, False), (3, False), (0, True)]  # stage 0 bf16: DeepSpeed's half-precision optimizer
STEPPED = [0, 1, 2, 3]


def _every_part(rank: int, folder: str) -> tuple[dict, dict, dict]:
    """The three checks below in one process group: each group's start (two processes importing
    torch and DeepSpeed) costs about 6 s of the suite."""
    return _train(rank, TRAINED), _resume_from_checkpoint(rank, folder, RESUMED), _step_semantics(rank, STEPPED)


@pytest.fixture(scope="module")
def group_results(run_workers, tmp_path_factory):
    """[(trained, resumed, stepped) of rank 0, ... of rank 1] and the checkpoints' folder."""
    folder = tmp_path_factory.mktemp("deepspeed")
    return run_workers(_every_part, 2, str(folder)), folder


def test_every_zero_stage_and_bf16_train_as_one_process_on_all_rows(group_results):
    (first, _, _), (second, _, _) = group_results[0]
    expected = plain_training()
    for stage, bf16 in first:
        what = f"stage {stage}{' bf16' if bf16 else ''}"
        weights = first[stage, bf16]["weights"]
        assert_close(first[stage, bf16]["written"], weights, 0.0, f"{what}: the weights written to a file")
        if stage == 3:  # gathered onto the coordinator alone
            assert second[stage, bf16]["weights"] == {}, what
        else:
            assert_close(weights, second[stage, bf16]["weights"], 0.0, f"{what}: ranks differ")
        # Weights come back in the module's own float32; bf16 rounds activations to about 1e-2.
        assert_close(weights, expected, 5e-2 if bf16 else 1e-5, f"{what} vs one process")
        norms = first[stage, bf16]["norms"]
        assert all(math.isfinite(n) for n in norms) and max(norms) > CLIP, f"{what}: {norms}"  # clipping was on


def test_checkpoint_resumes_into_a_fresh_engine(group_results):
    results, tmp_path = [resumed for _, resumed, _ in group_results[0]], group_results[1]
    for rank, result in enumerate(results):
        for run, weights in result.items():
            assert_close(weights["resumed"], weights["uninterrupted"], 0.0, f"rank {rank}, (stage, bf16) {run}")
    # ZeRO-3 gathers no full weights for a checkpoint: the optimizer files restore them.
    assert sorted(p.name for p in (tmp_path / "stage3").iterdir()) == [
        "deepspeed.json", "frozen.safetensors", "optimizer-rank0.pt", "optimizer-rank1.pt"]


def test_step_uses_the_scheduled_learning_rate_and_skips_a_non_finite_gradient(group_results):
    results = group_results[0][0][2]
    for stage, result in results.items():
        lr = result["lr"]
        assert lr["engine_lr"] == [0.0], stage
        assert not torch.equal(lr["start"]["0.weight"], lr["after_first"]["0.weight"]), stage
        assert_close(lr["after_second"], lr["after_first"], 0.0, f"stage {stage}: a step at lr 0 moved")
        nan = result["nan"]
        assert not math.isfinite(nan["norm"]), stage  # the trainer stops on it
        assert_close(nan["after"], nan["start"], 0.0, f"stage {stage}: stepped on a NaN gradient")


def test_resuming_with_another_world_size_is_refused(tmp_path):
    import json

    from plait.training.strategies.deepspeed import LAYOUT_FILE, DeepSpeedStrategy

    (tmp_path / LAYOUT_FILE).write_text(json.dumps({"world_size": 4, "zero_stage": 2, "fp16": False, "bf16": False}))
    strategy = DeepSpeedStrategy.__new__(DeepSpeedStrategy)  # no process group needed to read a layout
    strategy.config, strategy.stage, strategy.world_size = DeepSpeedConfig(), 2, 2
    with pytest.raises(ConfigError, match=r"backend.trainer.num_workers: .* written with 4 \(now 2\)"):
        strategy.state.check_layout(tmp_path)


def test_settings_deepspeed_would_ignore_are_refused():
    from plait.training.strategies.deepspeed import check_supported

    zero_with_clipvalue = (DeepSpeedConfig(zero_optimization={"stage": 2}), StepPlan(batch_size=4, clip_value=1.0))
    offload_param = {"stage": 2, "offload_param": {"device": "cpu"}}
    param_offload_below_stage_3 = (DeepSpeedConfig(zero_optimization=offload_param), None)
    for config, steps in (zero_with_clipvalue, param_offload_below_stage_3):
        with pytest.raises(ConfigError):
            check_supported(config, steps)


def test_engine_config_follows_the_trainer():
    from plait.training.sizes import TrainingSizes
    from plait.training.strategies.deepspeed import deepspeed_config

    trainer = TrainerConfig(batch_size="auto", gradient_accumulation_steps=4)
    steps = StepPlan.of(TrainingSizes.of(trainer, 1000), trainer.gradient_clipping)
    config = deepspeed_config(DeepSpeedConfig(zero_optimization={"stage": 3, "offload_optimizer": {"device": "cpu"}}),
                              steps)
    assert config["gradient_accumulation_steps"] == 4
    assert config["gradient_clipping"] == 0.5  # the trainer's default clipglobalnorm
    assert config["train_micro_batch_size_per_gpu"] == 64  # "auto" for 1000 rows
    assert config["zero_optimization"]["offload_optimizer"] == {"device": "cpu"}


def test_plait_training_loop_under_zero_3_follows_ddp(run_workers, train_config, tabular_df, tmp_path):
    from plait.api import Model
    from plait.training.run import FitJob

    config = train_config(epochs=2, gradient_accumulation_steps=2)
    model = Model(config)
    data = model.preprocess(tabular_df)
    metadata = {"features": data.metadata["features"], "splits": data.metadata["splits"], "seed": 42}
    job = FitJob(model.config, metadata, data, 42, progress_bar=False)
    run_dirs = {"ddp": tmp_path / "ddp", "zero-3": tmp_path / "zero-3"}
    histories, _ = run_workers(_fit_with_ddp_then_zero_3, 2, job, run_dirs)
    assert len(histories["ddp"]) == 2  # one evaluation per epoch
    for ddp, zero in zip(histories["ddp"], histories["zero-3"], strict=True):
        assert ddp["step"] == zero["step"]
        assert zero["training"]["combined"]["loss"] == pytest.approx(ddp["training"]["combined"]["loss"], rel=1e-4)
        assert zero["validation"]["combined"]["loss"] == pytest.approx(ddp["validation"]["combined"]["loss"], rel=1e-4)
    assert {"optimizer-rank0.pt", "optimizer-rank1.pt"} <= {p.name for p in (tmp_path / "zero-3").rglob("*.pt")}


def test_missing_deepspeed_names_the_extra(monkeypatch):
    from plait.errors import BackendError
    from plait.training.strategies.deepspeed import import_deepspeed

    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # makes `import deepspeed` fail
    with pytest.raises(BackendError, match=r"pip install plait\[deepspeed\]"):
        import_deepspeed(torch.device("cpu"))
