"""The fsdp strategy in a real gloo group: training matches plain single-process training on all
workers' data, checkpoints (full and sharded) restore training exactly, and the weights it hands
out look like a plain module's."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

LR, CLIP = 0.05, 0.5
# Two optimizer steps; the first accumulates two micro-batches (sync=False, then True).
MICRO_BATCHES_PER_STEP = (2, 1)


def _plan():
    from plait.training.strategies import StepPlan

    return StepPlan(batch_size=4, accumulation=max(MICRO_BATCHES_PER_STEP), max_norm=CLIP)


class Tiny(nn.Module):
    """Child layers like plait's ECD: a ModuleDict of encoders, a block, a head, and a parameter
    of the root itself. Odd sizes: two ranks get shards of unequal length."""

    def __init__(self):
        super().__init__()
        self.encoders = nn.ModuleDict({"x": nn.Linear(3, 5)})
        self.block = nn.Sequential(nn.Linear(5, 5), nn.Tanh())
        self.head = nn.Linear(5, 1)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.head(self.block(self.encoders["x"](x))) * self.scale


def _batch(rank: int, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 * step + 10 * micro + rank)
    return torch.randn(4, 3, generator=generator), torch.randn(4, 1, generator=generator)


def _all_ranks_batch(world_size: int, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
    parts = [_batch(rank, step, micro) for rank in range(world_size)]
    return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])


def _train(strategy, model, optimizer, batch_of, steps=MICRO_BATCHES_PER_STEP, first_step=0) -> list[float]:
    """The trainer's loop in small: accumulate, clip, step. Returns the gradient norms."""
    norms = []
    for step, micro_batches in enumerate(steps, start=first_step):
        for micro in range(micro_batches):
            x, y = batch_of(step, micro)
            strategy.backward(F.mse_loss(model(x), y) / micro_batches, sync=micro + 1 == micro_batches)
        norms.append(strategy.optimizer_step(optimizer, list(model.parameters()), CLIP))
    return norms


def _plain_training(world_size: int) -> tuple[dict, list[float]]:
    """One process on every rank's data at once, from rank 0's initial weights."""
    from plait.training.strategies.local import LocalStrategy

    torch.manual_seed(0)
    model = Tiny()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    norms = _train(LocalStrategy("cpu"), model, optimizer, lambda step, micro: _all_ranks_batch(world_size, step, micro))
    return model.state_dict(), norms


def _full_weights(model) -> dict:
    """Every rank's view of the whole model (a collective)."""
    return {k: v.full_tensor().clone() for k, v in model.state_dict().items()}


def _fsdp(**options):
    from plait.config.backend import FSDPConfig
    from plait.training.strategies import get_strategy

    return get_strategy("fsdp", config=FSDPConfig(**options))


def _sharded_training(rank: int, options: dict) -> dict:
    from plait.training.strategies import unwrap

    strategy = _fsdp(**options)
    torch.manual_seed(rank)  # different initial weights: training must start from rank 0's
    model = Tiny()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model, optimizer = strategy.prepare(model, optimizer, _plan())
    norms = _train(strategy, model, optimizer, lambda step, micro: _batch(rank, step, micro))
    result = {"full": _full_weights(model), "model_state": strategy.state.full_weights(model), "norms": norms,
              "unwrapped": unwrap(model) is model}
    strategy.shutdown()
    return result


def _assert_close(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=1e-5, atol=1e-6, msg=name)


# Starting a process group costs seconds: each group's run is shared by the tests that read it.
_RUNS: dict = {}


def _once(key, run):
    if key not in _RUNS:
        _RUNS[key] = run()
    return _RUNS[key]


@pytest.fixture
def two_ranks_trained(run_workers):
    return _once("trained", lambda: run_workers(_sharded_training, 2, {}))


def test_two_ranks_train_as_one_process_on_all_their_data(two_ranks_trained):
    first, second = two_ranks_trained
    for name in first["full"]:
        assert torch.equal(first["full"][name], second["full"][name]), name
    expected, norms = _plain_training(2)
    _assert_close(first["full"], expected)
    assert first["norms"] == second["norms"]
    assert all(isinstance(norm, float) for norm in first["norms"])
    assert first["norms"] == pytest.approx(norms, rel=1e-5)
    assert norms[0] > CLIP  # clipping really changed the update that matched
    assert first["unwrapped"]


def test_model_state_is_a_plain_module_state_dict_on_rank_0(two_ranks_trained):
    first, second = two_ranks_trained
    assert list(first["model_state"]) == list(Tiny().state_dict())
    assert second["model_state"] == {}  # gathered on the coordinator alone
    fresh = Tiny()
    fresh.load_state_dict(first["model_state"])  # strict: same names and shapes
    _assert_close(fresh.state_dict(), first["full"])


def test_one_rank_works_and_ignores_cpu_offload_on_cpu(run_workers):
    (only,) = run_workers(_sharded_training, 1, {"cpu_offload": True})
    expected, norms = _plain_training(1)
    _assert_close(only["full"], expected)
    _assert_close(only["model_state"], expected)
    assert only["norms"] == pytest.approx(norms, rel=1e-5)


def _resumed_training(rank: int, directory: str) -> dict:
    """For each state_dict_type: train, save into ``directory``/<type>, train on; then a fresh
    model and optimizer load the checkpoint and train the same steps."""
    from pathlib import Path

    def prepared(strategy, seed):
        torch.manual_seed(seed)
        model = Tiny()
        return strategy.prepare(model, torch.optim.AdamW(model.parameters(), lr=LR), _plan())

    def batch_of(step, micro):
        return _batch(rank, step, micro)

    results = {}
    for state_dict_type in ("full", "sharded"):
        strategy = _fsdp(state_dict_type=state_dict_type)
        folder = Path(directory) / state_dict_type
        if strategy.is_coordinator:
            folder.mkdir()
        strategy.barrier()
        model, optimizer = prepared(strategy, rank)
        _train(strategy, model, optimizer, batch_of)  # AdamW now has moments to save
        strategy.state.save(folder, model, optimizer)
        strategy.barrier()
        saved = _full_weights(model)
        _train(strategy, model, optimizer, batch_of, steps=(1, 2), first_step=2)
        continued = _full_weights(model)

        model, optimizer = prepared(strategy, rank + 7)  # a fresh run: other weights, no optimizer state
        strategy.state.load(folder, model, optimizer)
        loaded = _full_weights(model)
        _train(strategy, model, optimizer, batch_of, steps=(1, 2), first_step=2)
        results[state_dict_type] = {"saved": saved, "loaded": loaded, "continued": continued, "resumed": _full_weights(model)}
        strategy.shutdown()
    return results


@pytest.fixture
def checkpointed(run_workers, tmp_path_factory):
    directory = tmp_path_factory.mktemp("checkpoints")
    return _once("checkpointed", lambda: (directory, run_workers(_resumed_training, 2, str(directory))))


@pytest.mark.parametrize("state_dict_type", ["full", "sharded"])
def test_checkpoint_restores_weights_and_optimizer(checkpointed, state_dict_type):
    directory, by_rank = checkpointed
    written = {p.name for p in (directory / state_dict_type).iterdir()}
    assert written == ({"model.safetensors", "optimizer.pt"} if state_dict_type == "full" else {"sharded"})
    first, second = (result[state_dict_type] for result in by_rank)
    for result in (first, second):
        _assert_close(result["loaded"], result["saved"])
        # Equal after two more steps only if AdamW's moments and step count came back too.
        _assert_close(result["resumed"], result["continued"])
    _assert_close(first["resumed"], second["resumed"])


def test_a_pretrained_transformer_is_sharded_layer_by_layer():
    # One unit for a whole pretrained model would gather all of it in every forward and backward.
    from plait.models.hf_encoders import import_transformers
    from plait.training.strategies.fsdp import _shard_units

    transformers = import_transformers()
    config = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                                      num_attention_heads=2, num_key_value_heads=2)
    outer = nn.Module()  # as plait's LLM holds it: the transformers model, and heads
    outer.model = transformers.LlamaForCausalLM(config)
    outer.heads = nn.ModuleDict({"answer": nn.Linear(2, 2)})
    units = _shard_units(outer)
    layers = list(outer.model.model.layers)
    assert units[:3] == layers[::-1]  # each decoder layer, before anything that holds it
    assert units[3:] == [outer.model, outer.heads["answer"]]
