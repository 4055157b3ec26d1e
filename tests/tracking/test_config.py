"""The tracking section and the CLI's tracker flags."""

from __future__ import annotations

import sys

import pytest

from tracked_runs import FEATURES  # tests/tracking/tracked_runs.py
from plait.config import load_config
from plait.config.tracking import with_trackers
from plait.errors import ConfigError, UsageError
from plait.tracking import build, trackers
from plait.tracking.mlflow import MLflowTracker


def test_a_flag_adds_its_tool_and_the_configs_settings_win():
    source = {**FEATURES, "tracking": [{"type": "mlflow", "experiment_name": "mine"}]}
    config = load_config(with_trackers(source, ["mlflow", "wandb", "wandb"]))
    assert [(t.type, getattr(t, "experiment_name", None)) for t in config.tracking] == [("mlflow", "mine"),
                                                                                       ("wandb", None)]
    assert [type(t) for t in trackers(config, given=[MLflowTracker(config.tracking[0])])] == [build(
        config.tracking[1]).__class__]  # a tracker given by the caller replaces the config's of its tool


@pytest.mark.parametrize("item, message", [
    ({"type": "mlflow", "tracking_uri": "https://me:pa55@mlflow.example.com"}, "holds credentials"),
    ({"type": "mlfow"}, "did you mean mlflow"),
    ({"type": "wandb", "mode": "disabled"}, "mode"),
])
def test_a_bad_item_is_refused_with_the_fix(item, message):
    with pytest.raises(ConfigError, match=message):
        load_config({**FEATURES, "tracking": [item]})
    with pytest.raises(ConfigError, match="listed more than once"):
        load_config({**FEATURES, "tracking": [{"type": "aim"}, {"type": "aim"}]})


def test_the_flags_are_refused_where_nothing_trains(cli):
    code, _, err = cli("predict", "--model-path", "m", "--dataset", "d.csv", "--mlflow")
    assert code == 2 and "use the flag with plait train, experiment or hyperopt" in err


def test_a_missing_package_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    tracker = build(load_config({**FEATURES, "tracking": [{"type": "mlflow"}]}).tracking[0])
    with pytest.raises(UsageError, match=r"needs `pip install plait\[mlflow\]`"):
        tracker.on_train_init(config={}, run_directory=str(tmp_path), resume=False)
