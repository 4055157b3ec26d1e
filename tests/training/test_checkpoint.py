"""Resuming from damaged checkpoints: the previous complete one is used, with a warning; where none
reads back, one clean error naming the damaged files. Checked without unpickling anything."""

from __future__ import annotations

import json
import shutil

import pytest

from cli_runs import train_with_the_cli
from plait.cli import main
from plait.training import checkpoint as ckpt
from plait.utils.folder import Folder

ROWS = 120


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A run of 3 epochs: checkpoints of the last two epochs are kept."""
    root = tmp_path_factory.mktemp("checkpoints")
    (root / "data.csv").write_text("x,c,y\n" + "".join(f"{i % 17},{'abc'[i % 3]},{i % 17 > 8}\n" for i in range(ROWS)))
    return train_with_the_cli(root, [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
                              [{"name": "y", "type": "binary"}], {"epochs": 3, "batch_size": 32})


@pytest.fixture
def run(finished_run, tmp_path):
    """A copy of the finished run to damage."""
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    return copy


def _checkpoints(run):
    folders = sorted((run / "checkpoints").glob("step-*"))
    assert len(folders) == 2
    return folders  # older, newer


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("damage", ["optimizer.pt", "trainer.pt", "model.safetensors", "state.json"])
def test_resume_falls_back_to_the_previous_checkpoint_when_the_latest_is_damaged(run, capsys, damage):
    older, newer = _checkpoints(run)
    _truncate(newer / damage)
    assert ckpt.resumable_checkpoint(run / "checkpoints") == Folder(older)
    code = main(["train", "--resume", str(run)])
    err = capsys.readouterr().err
    assert code == 0, err
    warning = [line for line in err.splitlines() if "the newest checkpoint that reads back whole" in line]
    assert len(warning) == 1 and str(newer / damage) in warning[0] and str(older) in warning[0], err


def test_a_damaged_latest_json_falls_back_to_the_newest_whole_checkpoint(run, capsys):
    _, newer = _checkpoints(run)
    (run / "checkpoints" / "latest.json").write_text('{"checkpoint": "step-0')
    assert ckpt.resumable_checkpoint(run / "checkpoints") == Folder(newer)
    assert main(["train", "--resume", str(run)]) == 0
    assert "latest.json is damaged" in capsys.readouterr().err


def test_resume_with_every_checkpoint_damaged_is_one_error_naming_the_files(run, cli_error):
    older, newer = _checkpoints(run)
    (older / "optimizer.pt").write_bytes(b"not a zip archive")
    _truncate(newer / "optimizer.pt")
    error = cli_error("train", "--resume", run)
    assert "cannot resume" in error and str(older / "optimizer.pt") in error and str(newer / "optimizer.pt") in error


def test_a_checkpoint_check_never_unpickles(tmp_path):
    folder = tmp_path / "step-000000001"
    folder.mkdir()
    (folder / "state.json").write_text(json.dumps({"step": 1}))
    (folder / "optimizer.pt").write_bytes(b"\x80\x04cos\nsystem\n.")  # a pickle, not a torch zip archive
    assert "optimizer.pt is damaged" in ckpt.checkpoint_problem(folder)


def test_weights_written_one_tensor_at_a_time_read_back_as_safetensors(tmp_path):
    import torch

    from plait.training.checkpoint import load_weights, save_weights_streamed

    weights = {"a.weight": torch.randn(3, 5), "a.bias": torch.arange(3, dtype=torch.int64),
               "b": torch.randn(7).to(torch.bfloat16), "flag": torch.tensor([True, False])}
    layout = {name: (tensor.dtype, tuple(tensor.shape)) for name, tensor in weights.items()}
    save_weights_streamed(tmp_path / "w.safetensors", layout, iter(weights.items()))
    loaded = load_weights(tmp_path / "w.safetensors")
    assert loaded.keys() == weights.keys() and all(torch.equal(loaded[k], weights[k]) for k in weights)
    with pytest.raises(ValueError, match="got flag .* where the layout has a.weight"):
        save_weights_streamed(tmp_path / "x.safetensors", layout, iter(reversed(weights.items())))
    assert not (tmp_path / "x.safetensors").exists(), "a failed write leaves no file"
