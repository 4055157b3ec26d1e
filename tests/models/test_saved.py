"""Damaged saved models: one clean error naming the damaged file, never a traceback or a pickle."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import save_file

from cli_runs import train_with_the_cli

ROWS = 40


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    (root / "data.csv").write_text("x,c,y\n" + "".join(f"{i},{'ab'[i % 2]},{i % 3 == 0}\n" for i in range(ROWS)))
    train_with_the_cli(root, [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
                       [{"name": "y", "type": "binary"}], {"epochs": 1, "batch_size": 16})
    return root


def _cut_in_half(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = {
    "weights cut in half": ("model_weights.safetensors", _cut_in_half, "not readable as safetensors"),
    "weights random bytes": ("model_weights.safetensors", lambda p: p.write_bytes(bytes(range(256)) * 20),
                             "not readable as safetensors"),
    "weights of another model": ("model_weights.safetensors", lambda p: save_file({"w": torch.zeros(3)}, str(p)),
                                 "do not fit its config"),
    "config cut": ("model_hyperparameters.json", lambda p: p.write_text('{"input_feat'), "not valid JSON"),
    "metadata not an object": ("training_set_metadata.json", lambda p: p.write_text("[1, 2]"), "not an object"),
    "description garbage": ("plait_model.json", lambda p: p.write_bytes(b"\xff\xfe garbage"), "not valid JSON"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_damaged_model_file_is_one_error_naming_it(trained, tmp_path, cli_error, case, command):
    file, damage, words = DAMAGE[case]
    model = tmp_path / "model"
    shutil.copytree(trained / "runs" / "experiment_run_0" / "model", model)
    damage(model / file)
    error = cli_error(command, "--model-path", model, "--dataset", trained / "data.csv", "--output-directory", tmp_path / "out")
    assert str(model) in error and words in error
    assert file in error
