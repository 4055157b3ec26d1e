"""A search folder is restored by Ray Tune (which unpickles its state) only if plait wrote it here."""

from __future__ import annotations

import logging

import pytest
import yaml

from plait.errors import UsageError
from plait.run_directory import RunDirectory
from plait.search import seal


@pytest.fixture(autouse=True)
def own_key(tmp_path, monkeypatch):
    """This environment's key in a folder of the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-here"))


def a_search(tmp_path, search_config=None) -> RunDirectory:
    """A search folder as plait leaves it: its description and config, a seal, Tune's state."""
    run = RunDirectory(tmp_path / "hyperopt_run_0")
    run.write_start(yaml.safe_dump(search_config or {}), {"dataset": "data.csv"}, 42, "hyperopt")
    seal.start(run)
    (run.tune_state.local() / "trial_1").mkdir(parents=True)
    (run.tune_state.local() / "tuner.pkl").write_bytes(b"pickled by Ray Tune")
    (run.tune_state.local() / "trial_1" / "result.json").write_text("{}")
    return run


def test_a_search_this_environment_sealed_is_resumed(tmp_path):
    run = a_search(tmp_path)
    seal.close(run)
    seal.check(run, "here")


def test_a_search_killed_before_it_could_seal_is_resumed_with_a_warning(tmp_path, caplog):
    run = a_search(tmp_path)
    with caplog.at_level(logging.WARNING, logger="plait"):
        seal.check(run, "here")
    assert "ended without sealing Ray Tune's state" in caplog.text


def test_a_search_folder_from_another_environment_is_refused(tmp_path, monkeypatch):
    run = a_search(tmp_path)
    seal.close(run)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-elsewhere"))  # another machine, or another user
    with pytest.raises(UsageError, match=r"not written by plait in this environment .* unpickling a folder from "
                                         r"elsewhere runs the code it holds"):
        seal.check(run, "theirs")


@pytest.mark.parametrize("change", ["edited", "added"])
def test_tune_state_changed_after_plait_sealed_it_is_refused(tmp_path, change):
    run = a_search(tmp_path)
    seal.close(run)
    name = "tuner.pkl" if change == "edited" else "trial_1/params.pkl"
    (run.tune_state.local() / name).write_bytes(b"cos\nsystem\n(S'touch /tmp/owned'\ntR.")
    with pytest.raises(UsageError, match=rf"Ray Tune's saved state changed since plait sealed it \({name}\)"):
        seal.check(run, "here")


def test_the_cli_refuses_a_folder_without_a_seal_in_one_line(tmp_path, search_config, table, cli_error):
    run = a_search(tmp_path, search_config({"trainer.learning_rate": {"space": "uniform", "lower": 0.01,
                                                                     "upper": 0.1}}))
    run.root.remove_file(seal.SEAL)  # a folder written by hand, or by a plait before seals
    assert "this search folder was not written by plait in this environment (its search_seal.json is missing)" in (
        cli_error("hyperopt", "--resume", run.root.url))
