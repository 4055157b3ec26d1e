"""k-fold cross-validation (``plait experiment --k_fold``, ``plait.kfold.kfold_cross_validate``):
Ludwig's statistics layout, the same numbers as k separate runs, and a rerun that redoes only the
folds that had not finished."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import yaml

from plait.api import Model
from plait.kfold import kfold_cross_validate
from plait.synthesize import synthesize_dataset

INPUTS = [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"}, {"name": "c", "type": "category"}]
OUTPUTS = [{"name": "y", "type": "binary"}]


@pytest.fixture
def setup(cache_dir):
    config = {"input_features": INPUTS, "output_features": OUTPUTS, "trainer": {"epochs": 2, "batch_size": 32},
              "backend": {"type": "local", "cache_dir": cache_dir}}
    return config, synthesize_dataset(config, 250, seed=4)


def test_five_folds_give_the_mean_and_spread_of_five_separate_runs(setup, tmp_path):
    config, data = setup
    statistics, indices = kfold_cross_validate(5, config, data, tmp_path / "out", random_seed=7)
    assert set(statistics) == {"fold_1", "fold_2", "fold_3", "fold_4", "fold_5", "overall"}
    separate = []
    for fold in range(5):
        run = Model({**config, "preprocessing": {"split": {"type": "kfold", "folds": 5, "fold": fold}}})
        result = run.train(data, random_seed=7, progress_bar=False)
        separate.append(run.evaluate_preprocessed(result.preprocessed, "test")["y"]["accuracy"])
        assert statistics[f"fold_{fold + 1}"]["fold_eval_stats"]["y"]["accuracy"] == separate[-1]
        assert len(indices[f"fold_{fold + 1}"]["test_indices"]) == result.preprocessed.rows("test")
    overall = statistics["overall"]["y"]
    assert overall["accuracy_mean"] == pytest.approx(np.mean(separate))
    assert overall["accuracy_std"] == pytest.approx(np.std(separate))
    written = json.loads((tmp_path / "out" / "kfold_training_statistics.json").read_text())
    assert written["overall"] == statistics["overall"] and "training" in written["fold_1"]  # Ludwig's layout
    assert json.loads((tmp_path / "out" / "kfold_split_indices.json").read_text()) == indices


def test_the_same_command_again_runs_only_the_folds_that_had_not_finished(setup, tmp_path, caplog):
    config, data = setup
    first, _ = kfold_cross_validate(3, config, data, tmp_path, random_seed=1)
    (tmp_path / "kfold" / "fold_2.json").unlink()  # as if the run had died during fold 2
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="plait"):
        again, _ = kfold_cross_validate(3, config, data, tmp_path, random_seed=1)
    trained = [r.getMessage() for r in caplog.records if r.getMessage().startswith("k-fold: training fold")]
    assert trained == ["k-fold: training fold 2 of 3."]
    assert again["overall"] == first["overall"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="plait"):
        kfold_cross_validate(3, config, data, tmp_path, random_seed=2)  # another seed: every fold again
    assert sum(r.getMessage().startswith("k-fold: training fold") for r in caplog.records) == 3


def test_experiment_k_fold_on_the_command_line(setup, tmp_path, cli, make_dataset, write_config):
    config, data = setup
    code, out, err = cli("experiment", "--config", write_config(config), "--dataset", make_dataset(data),
                         "--k_fold", "2", "--output_directory", tmp_path / "runs", "-skfsi")
    assert code == 0, err
    assert "accuracy_mean" in json.loads(out)["y"]
    assert (tmp_path / "runs" / "kfold_training_statistics.json").is_file()
    assert not (tmp_path / "runs" / "kfold_split_indices.json").exists()


def test_k_fold_needs_a_dataset_and_two_folds(setup, cli_error, write_config, tmp_path):
    config, data = setup
    error = cli_error("experiment", "--config", write_config(config), "--training_set", "t.csv", "--k_fold", "3")
    assert "--k_fold deals the rows of --dataset into folds" in error
    error = cli_error("experiment", "--config", write_config(config), "--dataset", "d.csv", "--k_fold", "1")
    assert "k_fold: got 1; give a whole number of folds, 2 or more" in error


@pytest.mark.processes  # starts a Ray instance of its own
def test_with_a_ray_cluster_the_folds_run_at_once_as_trials_and_give_the_local_numbers(setup, tmp_path, caplog):
    """backend auto finds a running Ray: the folds run as Ray Tune trials sized as a search's (one
    process and 1 CPU each: two at once on two CPUs), each trained as the local run trains it, so
    every fold's test metrics are the local run's (to rounding: the trial process runs torch on
    other threads)."""
    ray = pytest.importorskip("ray")
    config, data = setup
    local, _ = kfold_cross_validate(2, config, data, tmp_path / "local", random_seed=3)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="plait"):
            statistics, _ = kfold_cross_validate(2, {**config, "backend": {"cache_dir": config["backend"]["cache_dir"]}},
                                                 data, tmp_path / "ray", random_seed=3)
    finally:
        ray.shutdown()
    [plan] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("k-fold on Ray")]
    assert "folds 1, 2 as Ray Tune trials; each trial trains in its own process (1 CPU); up to 2 at once" in plan
    ran = [json.loads((tmp_path / "ray" / "kfold" / f"fold_{n}.json").read_text())["ran"] for n in (1, 2)]
    assert max(r["started"] for r in ran) < min(r["finished"] for r in ran), "the folds trained at the same time"
    for output, metrics in statistics["overall"].items():
        assert metrics == pytest.approx(local["overall"][output], rel=1e-6)


@pytest.mark.processes  # starts a Ray instance of its own
def test_with_backend_ray_each_fold_is_a_worker_group_trial_that_preprocesses_outside_it(setup, tmp_path):
    """No cache yet: each fold's preprocessing (Dask-on-Ray tasks of a CPU each) is built by the
    search's broker, since the trial's placement group holds only its driver's quarter CPU."""
    pytest.importorskip("ray")
    config, data = setup
    on_ray = {**config, "trainer": {"epochs": 1, "batch_size": 32},
              "backend": {"type": "ray", "cache_dir": str(tmp_path / "fresh_cache"),
                          "trainer": {"num_workers": 1, "resources_per_worker": {"CPU": 0.25}}},
              "hyperopt": {"executor": {"trial_driver_resources": {"CPU": 0.25}}}}  # two trials on two CPUs
    statistics, _ = kfold_cross_validate(2, on_ray, data, tmp_path / "ray", random_seed=3)
    assert 0 <= statistics["overall"]["y"]["accuracy_mean"] <= 1
    ran = [json.loads((tmp_path / "ray" / "kfold" / f"fold_{n}.json").read_text())["ran"] for n in (1, 2)]
    assert max(r["started"] for r in ran) < min(r["finished"] for r in ran), "the folds trained at the same time"


def test_a_fold_that_is_a_worker_group_sets_its_workers_share_and_one_process_trains_locally(cache_dir):
    """What each fold's trial changes in the backend (the only difference between the two kinds)."""
    from plait.config import load_config
    from plait.kfold import fold_backend
    from plait.search.plan import TrialPlan

    config = load_config({"input_features": INPUTS, "output_features": OUTPUTS, "backend": {
        "type": "ray", "cache_dir": cache_dir, "trainer": {"num_workers": 2, "strategy": "ddp"}}})
    group = fold_backend(config, TrialPlan(True, {"CPU": 0.5}, {"CPU": 0.25}, 2, 3))
    assert group["type"] == "ray" and group["cache_dir"] == cache_dir
    assert (group["trainer"]["num_workers"], group["trainer"]["resources_per_worker"]) == (2, {"CPU": 0.25})
    one_process = fold_backend(config, TrialPlan(False, {"CPU": 1.0}, None, 1, 2))
    assert one_process["type"] == "local" and one_process["cache_dir"] == cache_dir
