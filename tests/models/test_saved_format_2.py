"""Models saved in format 2 (before issue #32 made the fully connected modules one) load and
predict as they did, and are written in today's format when saved again.

The fixtures under saved_format_2/ were written by commit 2f74bd6 (saved_format_2/make.py): fully
connected layers with every part that holds tensors (linear, batch and layer norm, PReLU) in
encoders, the concat combiner, decoders (an mlp_classifier's hidden layers included), a tagger and
a generator.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from plait.api import Model
from plait.models.saved import DESCRIPTION, MODEL_FORMAT_VERSION, read_model
from saved_models import assert_predictions, assert_predicts_as_saved, read_data  # beside this file

HERE = Path(__file__).parent / "saved_format_2"
MODELS = ["fc_everywhere", "sequence"]


def _data() -> pd.DataFrame:
    return read_data(HERE)


@pytest.mark.parametrize("name", MODELS)
def test_a_format_2_model_predicts_as_before(name):
    assert_predicts_as_saved(HERE / name, HERE / name)


def test_every_fully_connected_layer_is_read_into_the_one_layout():
    """Linear, norm and activation of a layer are parts 0, 1 and 2 wherever the stack is."""
    weights = read_model(HERE / "fc_everywhere")[2]
    assert not [key for key in weights if ".fc.layers." in key or ".mlp.layers." in key]
    assert {"encoders.number.fc.stack.1.layers.2.weight", "encoders.vector.fc.stack.1.layers.1.running_mean",
            "heads.out_binary.fc.stack.0.layers.2.weight", "heads.out_category.mlp.stack.0.layers.2.weight",
            "heads.out_number.fc.stack.1.layers.1.running_mean"} <= set(weights)


def test_a_format_2_model_saved_again_is_in_todays_format_and_predicts_the_same(tmp_path):
    model = Model.load(HERE / "fc_everywhere")
    model.save(tmp_path / "again")
    model.close()
    assert json.loads((tmp_path / "again" / DESCRIPTION).read_text())["format_version"] == MODEL_FORMAT_VERSION == 3
    assert_predicts_as_saved(tmp_path / "again", HERE / "fc_everywhere")


def test_a_format_2_model_with_a_matrix_initializer_for_a_bias_still_loads(tmp_path):
    """Format 2 took xavier_uniform (and the other matrix initializers) for a bias; plait refuses it
    now, as Ludwig 0.17 fails on it. A saved model's weights replace the initialization anyway."""
    shutil.copytree(HERE / "fc_everywhere", tmp_path / "model")
    path = tmp_path / "model" / "model_hyperparameters.json"
    config = json.loads(path.read_text())
    config["input_features"][0]["encoder"]["bias_initializer"] = "xavier_uniform"
    config["combiner"]["bias_initializer"] = {"type": "kaiming_uniform", "a": 0.1}
    path.write_text(json.dumps(config))
    model = Model.load(tmp_path / "model")
    try:
        config = model.config
        assert config.input_features[0].encoder.bias_initializer == config.combiner.bias_initializer == "zeros"
        assert_predictions(model.predict(_data()), HERE / "fc_everywhere")
    finally:
        model.close()
