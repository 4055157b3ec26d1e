"""Training on from a trained model (``--model_load_path``, ``Model.load(...).train``): its weights
are the start and its vocabularies and normalization preprocess the new data; a config whose
features or shapes are not the model's is refused with the reason."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from plait.api import Model
from plait.synthesize import synthesize_dataset

INPUTS = [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}]
OUTPUTS = [{"name": "y", "type": "binary"}]


def config(cache_dir: str, **trainer) -> dict:
    return {"input_features": [dict(f) for f in INPUTS], "output_features": [dict(f) for f in OUTPUTS],
            "trainer": {"epochs": 2, "batch_size": 32, **trainer}, "backend": {"type": "local", "cache_dir": cache_dir}}


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """(model folder, its config) trained on one table."""
    root = tmp_path_factory.mktemp("first")
    settings = config(str(root / "cache"))
    model = Model(settings)
    model.train(synthesize_dataset(settings, 300, seed=1), progress_bar=False)
    return model.save(root / "model"), settings


def new_rows(settings: dict):
    """Other rows: a category value the model never saw, numbers on another scale."""
    rows = synthesize_dataset(settings, 200, seed=2)
    rows.loc[:20, "c"] = "never-seen"
    rows["x"] = rows["x"] * 10 + 5
    return rows


def test_a_loaded_model_trains_on_from_its_weights_with_its_metadata(first, tmp_path):
    path, settings = first
    loaded = Model.load(path)
    start = {k: v.clone() for k, v in loaded.module.state_dict().items()}
    # A learning rate too small to move the weights: what training ends with is what it started from.
    still = loaded.with_config(config(settings["backend"]["cache_dir"], epochs=1, learning_rate=1e-12))
    still.train(new_rows(settings), progress_bar=False)
    for name, tensor in still.module.state_dict().items():
        np.testing.assert_allclose(tensor.numpy(), start[name].numpy(), atol=1e-6, err_msg=name)
    assert still.metadata["features"] == loaded.metadata["features"], "the new data fitted nothing"


def test_the_command_line_trains_on_with_the_models_own_config_or_one_with_its_features(first, tmp_path, cli,
                                                                                        make_dataset):
    path, settings = first
    data = make_dataset(new_rows(settings))
    code, _, err = cli("train", "--model_load_path", path, "--dataset", data, "--output-directory", tmp_path / "own")
    assert code == 0, err
    given = tmp_path / "config.yaml"
    given.write_text(yaml.safe_dump(config(settings["backend"]["cache_dir"], epochs=1)))
    code, _, err = cli("train", "--model_load_path", path, "--config", given, "--dataset", data,
                       "--output-directory", tmp_path / "given")
    assert code == 0, err
    trained_on = Model.load(tmp_path / "given" / "experiment_run_0" / "model")
    assert trained_on.metadata["features"] == Model.load(path).metadata["features"]
    assert trained_on.config.trainer.epochs == 1  # the given config's trainer


@pytest.mark.parametrize("change, message", [
    (lambda c: c["input_features"].append({"name": "z", "type": "number"}),
     "the config's features (x, c, z, y) are not the model's (x, c, y)"),
    (lambda c: c["input_features"][0].update(preprocessing={"normalization": "minmax"}),
     "feature 'x': the config's preprocessing differs from the model's"),
    (lambda c: c.update(combiner={"type": "concat", "output_size": 7, "num_fc_layers": 1}),
     "in the config's model and"),
])
def test_a_config_that_does_not_fit_the_model_is_refused(change, message, first, tmp_path, cli_error, make_dataset):
    path, settings = first
    changed = config(settings["backend"]["cache_dir"])
    change(changed)
    given = tmp_path / "config.yaml"
    given.write_text(yaml.safe_dump(changed))
    error = cli_error("train", "--model_load_path", path, "--config", given, "--dataset",
                      make_dataset(new_rows(settings)), "--output-directory", tmp_path / "out")
    assert "--model_load_path" in error and message in error
