"""plait init_config and auto_train from the command line and from Python, locally and on Ray.

Each search is small (300 rows, two trials of two epochs, then each on five folds) on the
session's Ray cluster.
"""

from __future__ import annotations

import json

import pytest
import yaml

import plait
from plait.automl.auto_config import FIRST_TRIAL, SEARCH_SPACE, TREE_SEARCH
from plait.automl.rescore import SPLIT_PATH
from plait.automl.train import _trial_config, auto_config
from plait.config import load_config
from plait.synthesize import synthesize_dataset

pytestmark = pytest.mark.usefixtures("ray_cluster")

TREE_TRIAL = {path: space["categories"][0] for path, space in TREE_SEARCH.items()}

FEATURES = {"input_features": [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"},
                               {"name": "c", "type": "category"}],
            "output_features": [{"name": "y", "type": "binary"}]}


@pytest.fixture
def data(tmp_path):
    frame = synthesize_dataset(FEATURES, 300, seed=7)
    frame["y"] = frame["y"].map({True: "yes", False: "no"})
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    return path


def test_init_config_writes_a_config_that_trains(data, tmp_path, cli, cli_error):
    written = tmp_path / "configs" / "auto.yaml"
    code, _, err = cli("init_config", "--dataset", data, "--target", "y", "--output", written, "--hyperopt",
                       "--time_limit_s", 120)
    assert code == 0, err
    text = written.read_text()
    config = load_config(yaml.safe_load(text))
    assert [(f.name, f.type) for f in config.input_features] == [("x1", "number"), ("x2", "number"), ("c", "category")]
    assert [(f.name, f.type) for f in config.output_features] == [("y", "binary")]
    assert "type: binary  # two values that read as true and false (no, yes)" in text
    assert config.hyperopt.executor.time_budget_s == 120
    assert set(config.hyperopt.parameters) == {*SEARCH_SPACE, "defaults.number.encoder.type"}  # no date, no text
    assert cli_error("init_config", "--dataset", data, "--target", "z").endswith(
        "target 'z': '" + str(data) + "' has no such column; its columns are: x1, x2, c, y")


def test_auto_train_on_the_command_line_scores_its_finalists_on_five_splits(data, tmp_path, cli, cli_error):
    # The scheduler stops both trials after their first epoch of two: each finalist is also trained
    # again to its end on the search's split, after its folds, and the winner's model is that one.
    executor = {"num_samples": 2, "scheduler": {"max_t": 1, "grace_period": 1}}
    user = json.dumps({"trainer": {"epochs": 2}, "hyperopt": {"executor": executor}})
    assert "time_limit_s: got 0.0" in cli_error("auto_train", "--dataset", data, "--target", "y", "--time_limit_s", 0)
    # a budget the two trials leave most of: both are finalists, scored on five splits
    code, out, err = cli("auto_train", "--dataset", data, "--target", "y", "--time_limit_s", 600,
                         "--user_config", user, "--output_directory", tmp_path / "out")
    assert code == 0, err
    summary = json.loads(out[out.index("{"):])
    assert summary["trials"] == 2
    search = json.loads((tmp_path / "out" / "auto_train_run_0" / "hyperopt_statistics.json").read_text())
    defaults = {**FIRST_TRIAL, "defaults.number.encoder.type": "passthrough"}
    assert defaults in [t["parameters"] for t in search["hyperopt_results"]]  # plait's defaults are a trial
    finalists = summary["finalists"]
    # the two trials and the GBM rival (Ludwig's GBM defaults: number and category inputs, a binary output)
    assert sorted([f["parameters"] == defaults, f["parameters"] == TREE_TRIAL] for f in finalists) == [
        [False, False], [False, True], [True, False]]
    assert all(len(f["fold_scores"]) == 5 and f["metric"] == "roc_auc" for f in finalists)  # Ludwig's, for binary
    assert finalists[0]["mean_score"] >= finalists[1]["mean_score"]  # best first
    assert summary["parameters"] in [f["parameters"] for f in finalists]  # the kept trial is a finalist
    folds = json.loads((tmp_path / "out" / "auto_train_finalists_run_0" / "hyperopt_statistics.json").read_text())
    assert len(folds["hyperopt_results"]) == 12  # five folds and the rerun of each
    [rerun] = [t for t in folds["hyperopt_results"] if t["model_path"] == summary["model_path"]]
    assert rerun["parameters"][SPLIT_PATH] == "auto_train_fold_search" and rerun["status"] == "completed"
    assert summary["model_source"] == "rerun"
    model = plait.Model.load(summary["model_path"])
    assert set(model.predict(str(data))["y_predictions"]) <= {True, False}  # a binary output predicts booleans
    # what plait.auto_train returns as best_config: the config the kept trial trained with
    kept = next(t for t in search["hyperopt_results"] if t["trial_id"] == summary["best_trial"])
    best_config = _trial_config(kept)
    assert [f["name"] for f in best_config["input_features"]] == ["x1", "x2", "c"]
    assert best_config["trainer"]["learning_rate"] == summary["parameters"]["trainer.learning_rate"]


def test_auto_train_on_ray_searches_without_stopping_worker_groups(data):
    """With backend ray each trial is a Ray Train worker group, which a scheduler must not stop
    (plait.search.run.check refuses it); the search itself is plait hyperopt's, whose worker-group
    trials tests/search/test_two_cpus.py runs. Here: the config auto_train hands it."""
    _, config = auto_config(str(data), "y", time_limit_s=60, backend="ray")
    assert config["hyperopt"]["executor"]["scheduler"] == {"type": "fifo"}
    _, config = auto_config(str(data), "y", time_limit_s=60, user_config={"backend": {"type": "ray"}})
    assert config["hyperopt"]["executor"]["scheduler"] == {"type": "fifo"}
    _, config = auto_config(str(data), "y", time_limit_s=60)
    assert config["hyperopt"]["executor"]["scheduler"]["type"] == "async_hyperband"
