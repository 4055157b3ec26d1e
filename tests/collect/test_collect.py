"""Ludwig's collect commands on a trained model, through the command line: the summary names the
layers and weights the other two take, and the files they write hold the model's own tensors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from plait.api import Model
from plait.synthesize import synthesize_dataset

CONFIG = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"},
                             {"name": "t", "type": "text"}],
          "output_features": [{"name": "y", "type": "binary"}],
          "trainer": {"epochs": 2, "batch_size": 32}}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(model folder, data file) of a small model trained once for this module."""
    root = tmp_path_factory.mktemp("collect")
    config = {**CONFIG, "backend": {"type": "local", "cache_dir": str(root / "cache")}}
    data = synthesize_dataset(config, 200, seed=1)
    data.to_csv(root / "data.csv", index=False)
    model = Model(config)
    model.train(data, progress_bar=False)
    return model.save(root / "model"), root / "data.csv"


def test_the_summary_lists_every_layer_and_weight_with_their_counts(trained, cli):
    path, _ = trained
    module = Model.load(path).module
    code, out, err = cli("collect_summary", "-m", path)
    assert code == 0, err
    total = sum(p.numel() for p in module.parameters())
    assert out.startswith(f"model_type ecd: {total:,} parameters, {total:,} trainable")
    layers = out.split("Layers (names for collect_activations):")[1].split("Weights")[0]
    weights = out.split("Weights (names for collect_weights):")[1].split("Config:")[0]
    listed_layers = [line.split()[0] for line in layers.strip().splitlines()[1:]]
    assert listed_layers == [name for name, _ in module.named_modules() if name]
    assert [line.split()[0] for line in weights.strip().splitlines()[1:]] == list(module.state_dict())
    assert "  input_features:" in out.split("Config:")[1]  # the resolved config, as YAML
    code, shallow, _ = cli("collect_summary", "-m", path, "--depth", "1")
    assert all("." not in line.split()[0] for line in shallow.split("Layers")[1].split("Weights")[0].strip().splitlines()[1:])


def test_collected_weights_are_the_models_tensors_in_npy_or_safetensors(trained, cli, tmp_path):
    path, _ = trained
    state = Model.load(path).module.state_dict()
    names = [n for n in state if state[n].is_floating_point()][:2]
    code, out, err = cli("collect_weights", "-m", path, "-t", *names, "-od", tmp_path / "npy")
    assert code == 0, err
    files = json.loads(out)["files"]
    for name, file in zip(names, files):
        assert np.array_equal(np.load(file, allow_pickle=False), state[name].numpy())
    code, out, err = cli("collect_weights", "-m", path, "-t", names[0], "-od", tmp_path / "st",
                         "--output_format", "safetensors")
    assert code == 0, err
    assert np.array_equal(load_file(json.loads(out)["files"][0])[names[0]], state[names[0]].numpy())


def test_an_unknown_tensor_or_layer_is_named_with_the_closest_name(trained, cli_error):
    path, data = trained
    state_name = next(iter(Model.load(path).module.state_dict()))
    error = cli_error("collect_weights", "-m", path, "-t", state_name + "x")
    assert f"{state_name + 'x'!r} is not a name of this model (did you mean {state_name!r}?)" in error
    error = cli_error("collect_activations", "-m", path, "--layers", "no_such_layer", "--dataset", data)
    assert "'no_such_layer' is not a name of this model" in error and "collect_summary" in error


def layer_outputs(model: Model, layer: str, data) -> torch.Tensor:
    """The layer's output on ``data``, by a hook of this test's own on a predictor of the model."""
    import pyarrow.csv

    from plait.inference.predictor import Predictor

    predictor = Predictor(model.config, model.metadata, model.module)
    kept = []
    module = dict(model.module.named_modules())[layer]
    # The combiner returns (hidden, auxiliary loss): its first tensor is what is collected.
    handle = module.register_forward_hook(lambda m, i, output: kept.append(output[0].detach()))
    try:
        table = pyarrow.csv.read_csv(data)
        predictor.logits(predictor.tensors(table, predictor.inputs))
    finally:
        handle.remove()
    return torch.cat(kept)


def test_activations_are_the_layers_outputs_for_every_row_or_a_split(trained, cli, tmp_path):
    path, data = trained
    model = Model.load(path)
    combiner = "combiner"
    code, out, err = cli("collect_activations", "-m", path, "-lyr", combiner, "--dataset", data, "-od", tmp_path)
    assert code == 0, err
    collected = np.load(json.loads(out)["files"][0])
    expected = layer_outputs(model, combiner, str(data)).numpy()
    assert collected.shape == expected.shape and collected.shape[0] == 200
    np.testing.assert_allclose(collected, expected, rtol=1e-5, atol=1e-6)
    code, out, err = cli("collect_activations", "-m", path, "-lyr", combiner, "--dataset", data, "-s", "test",
                         "-od", tmp_path / "test")
    assert code == 0, err
    assert 0 < np.load(json.loads(out)["files"][0]).shape[0] < 200
