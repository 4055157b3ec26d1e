"""Searches on the session's Ray cluster: what a user of plait hyperopt sees.

Each search is small (300 rows, a few epochs); trials train in their own processes unless the
config's backend is ray, where each trial is a Ray Train worker group.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plait.api import Model
from plait import hyperopt

pytestmark = pytest.mark.usefixtures("ray_cluster")

LR = "trainer.learning_rate"


def cache_entries(cache_dir: str) -> list[str]:
    return sorted(p.name for p in Path(cache_dir).iterdir() if p.is_dir() and not p.name.startswith("."))


def test_a_grid_search_runs_every_point_once_on_one_cache_entry(search_config, table, tmp_path, cache_dir, capsys):
    config = search_config({LR: {"space": "grid_search", "values": [0.003, 0.03]},
                            "combiner.output_size": {"space": "grid_search", "values": [8, 16]}})
    config["tracking"] = [{"type": "mlflow", "tracking_uri": (tmp_path / "mlruns").as_uri()}]  # see the end
    result = hyperopt(config, table, output_directory=str(tmp_path / "out"))

    tried = sorted((t["parameters"][LR], t["parameters"]["combiner.output_size"]) for t in result.trials)
    assert tried == sorted(itertools.product([0.003, 0.03], [8, 16]))
    assert [t["status"] for t in result.trials] == ["completed"] * 4
    assert all(len(t["history"]) == 2 for t in result.trials)  # one report per epoch
    scores = [t["metric_score"] for t in result.trials]
    assert scores == sorted(scores, reverse=True) and result.best == result.trials[0]  # maximize: best first
    # a trial's score is its best evaluation, whose weights its model keeps
    assert all(t["metric_score"] == max(h["metric_score"] for h in t["history"]) for t in result.trials)
    assert cache_entries(cache_dir) == cache_entries(cache_dir)[:1]  # preprocessed once, for every trial
    written = json.loads((result.run.root.local() / "hyperopt_statistics.json").read_text())
    assert written["best"]["trial_id"] == result.best["trial_id"]
    assert written["metric"] == {"output_feature": "y", "metric": "accuracy", "split": "validation", "goal": "maximize"}
    trial_config = Model.load(result.best["model_path"]).config
    assert trial_config.trainer.learning_rate == result.best["parameters"][LR]
    assert trial_config.combiner.output_size == result.best["parameters"]["combiner.output_size"]
    assert "Search: 4 trials; validation y accuracy (maximize)" in capsys.readouterr().out
    _check_trials_nested_in_the_searchs_mlflow_run(tmp_path / "mlruns", result)


def _check_trials_nested_in_the_searchs_mlflow_run(store, result) -> None:
    """The search is an MLflow run, and each trial a run nested under it (tracking, on the grid
    search's trials rather than a search of its own: a search costs seconds)."""
    import mlflow

    client = mlflow.MlflowClient(store.as_uri())
    runs = client.search_runs([client.get_experiment_by_name("hyperopt").experiment_id])
    [search] = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    trials = [r for r in runs if r is not search]
    assert search.info.run_name == result.run.root.name and search.info.status == "FINISHED"
    assert search.data.metrics["hyperopt/best_metric_score"] == pytest.approx(result.best["metric_score"])
    assert {r.data.tags["mlflow.parentRunId"] for r in trials} == {search.info.run_id}
    assert sorted(r.info.run_name for r in trials) == sorted(t["trial_id"] for t in result.trials)
    assert sorted(float(r.data.params[f"hyperopt.{LR}"]) for r in trials) == [0.003, 0.003, 0.03, 0.03]
    assert all(r.info.status == "FINISHED" and len(client.get_metric_history(r.info.run_id, "validation/y/accuracy"))
               == 2 for r in trials)


def test_asha_stops_hopeless_trials_which_keep_a_model(search_config, table, tmp_path):
    # One trial at a time, in grid order: the first one sets each rung, the hopeless ones fall below it.
    config = search_config({LR: {"space": "grid_search", "values": [0.05, 1e-7, 1e-7]}}, trainer={"epochs": 5},
                           executor={"max_concurrent_trials": 1, "scheduler": {
                               "type": "async_hyperband", "time_attr": "training_iteration", "max_t": 5,
                               "grace_period": 1, "reduction_factor": 2}})
    result = hyperopt(config, table, output_directory=str(tmp_path / "out"))

    by_lr = sorted(result.trials, key=lambda t: -t["parameters"][LR])
    assert by_lr[0]["status"] == "completed" and len(by_lr[0]["history"]) == 5
    stopped = [t for t in by_lr[1:] if t["status"] == "stopped"]
    assert stopped and all(len(t["history"]) < 5 for t in stopped)
    for trial in stopped:  # Ludwig #1866: a stopped trial's best model is there all the same
        model = Model.load(trial["model_path"])
        assert len(model.predict(table)) == 300


def test_under_a_scheduler_early_stopping_is_off_unless_the_config_sets_it(search_config):
    from plait.config import load_config
    from plait.search.run import _scheduler_stops_trials

    asha = {"executor": {"scheduler": {"type": "async_hyperband"}}}
    for trainer, hyperopt_section, off in (({}, asha, True), ({"early_stop": 20}, asha, False), ({}, {}, False)):
        source = search_config({LR: {"space": "choice", "categories": [0.1]}}, trainer=trainer, **hyperopt_section)
        assert _scheduler_stops_trials(load_config(source).hyperopt, source) is off, (trainer, hyperopt_section)


def test_pbt_continues_a_lagging_trial_from_the_leaders_checkpoint(search_config, table, tmp_path):
    config = search_config({LR: {"space": "grid_search", "values": [1e-5, 0.05]}}, trainer={"epochs": 4, "batch_size": 16},
                           executor={"max_concurrent_trials": 2, "scheduler": {
                               "type": "pbt", "time_attr": "training_iteration", "perturbation_interval": 2,
                               "quantile_fraction": 0.5, "synch": True}})
    result = hyperopt(config, table, output_directory=str(tmp_path / "out"))

    assert list((result.run.root.local() / "tune").glob("pbt_policy_*.txt"))  # Tune's record of an exploit
    for trial in result.trials:  # every report kept, across the restart from the other's checkpoint
        assert [h["epoch"] for h in trial["history"]] == [1, 2, 3, 4] and trial["status"] == "completed"
    assert {t["parameters"][LR] for t in result.trials} <= {1e-5, 0.05}  # mutations stay in the grid


def test_a_searched_preprocessing_setting_is_built_once_per_value(search_config, table, tmp_path, cache_dir):
    config = search_config({"x1.preprocessing.normalization": {"space": "grid_search", "values": ["zscore", "minmax"]},
                            LR: {"space": "grid_search", "values": [0.01, 0.02]}})
    config["input_features"][0]["preprocessing"] = {"normalization": "zscore"}
    result = hyperopt(config, table, output_directory=str(tmp_path / "out"))

    assert len(result.trials) == 4 and {t["status"] for t in result.trials} == {"completed"}
    assert len(cache_entries(cache_dir)) == 2  # the config's own (zscore, shared) and minmax
    for trial in result.trials:
        wanted = trial["parameters"]["x1.preprocessing.normalization"]
        assert Model.load(trial["model_path"]).config.input_features[0].preprocessing.normalization == wanted


def test_resume_after_the_driver_is_killed_keeps_the_finished_trials(search_config, table, tmp_path, ray_cluster,
                                                                     write_config, cli):
    config = search_config({LR: {"space": "grid_search", "values": [0.001, 0.003, 0.01, 0.03]}},
                           trainer={"epochs": 30, "batch_size": 8}, executor={"max_concurrent_trials": 1})
    out = tmp_path / "out"
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address}
    driver = subprocess.Popen([sys.executable, "-m", "plait.cli", "hyperopt", "--config", write_config(config),
                               "--dataset", table, "--output-directory", str(out)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    search = out / "hyperopt_run_0"
    try:
        deadline = time.monotonic() + 240
        while len(list(search.glob("trials/*/model"))) < 2 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    finished = {p.parts[-3]: p.stat().st_mtime_ns for p in search.glob("trials/*/model/model_weights.safetensors")}
    assert len(finished) >= 2

    code, out_text, err = cli("hyperopt", "--resume", search)
    assert code == 0, err
    stats = json.loads((search / "hyperopt_statistics.json").read_text())
    assert sorted(t["parameters"][LR] for t in stats["hyperopt_results"]) == [0.001, 0.003, 0.01, 0.03]
    assert {t["status"] for t in stats["hyperopt_results"]} == {"completed"}
    assert all(t["metric_score"] is not None for t in stats["hyperopt_results"])
    for trial, mtime in finished.items():  # finished trials were not trained again
        assert (search / "trials" / trial / "model" / "model_weights.safetensors").stat().st_mtime_ns == mtime


GOOD = {LR: {"space": "uniform", "lower": 0.01, "upper": 0.1}}


@pytest.mark.parametrize(("parameters", "section", "backend", "message"), [
    ({"trainer.learning_rat": GOOD[LR]}, {}, {},
     "hyperopt.parameters.trainer.learning_rat: names nothing in the config; the nearest valid path is "
     "trainer.learning_rate"),
    ({LR: {"space": "uniform", "lower": 0.01}}, {}, {}, "hyperopt.parameters.trainer.learning_rate.uniform.upper: "
                                                        "required field is missing"),
    (GOOD, {"metric": "r2"}, {}, "hyperopt.metric: got 'r2', which output feature y does not report"),
    (GOOD, {"executor": {"scheduler": {"type": "pb2"}}}, {}, "pb2 needs the package 'GPy', which is not installed"),
    (GOOD, {"search_alg": {"type": "optuna"}}, {}, "optuna needs the package 'optuna', which is not installed"),
    (GOOD, {"executor": {"gpu_resources_per_trial": 1}}, {}, "gpu_resources_per_trial: got 1, but this Ray cluster "
                                                             "has no GPU"),
    (GOOD, {"executor": {"cpu_resources_per_trial": 64}}, {}, "a trial needs 64 CPU, but no node of this Ray cluster "
                                                              "has room for one"),
    (GOOD, {"executor": {"max_concurrent_trials": 9}}, {"type": "ray", "trainer": {"num_workers": 1}},
     "max_concurrent_trials: got 9, but this Ray cluster holds"),
    (GOOD, {"search_alg": {"type": "random", "points_to_evaluate": [{"trainer.learning_rte": 0.1}]}}, {},
     "points_to_evaluate: 'trainer.learning_rte' is not a searched parameter; they are: trainer.learning_rate"),
    (GOOD, {"executor": {"scheduler": {"type": "asha"}}}, {"type": "ray"},
     "asha stops or restarts running trials, and a trial that is a Ray Train worker group"),
])
def test_a_bad_search_is_one_error_before_any_trial(search_config, table, tmp_path, write_config, cli,
                                                    parameters, section, backend, message):
    config = search_config(parameters, backend=backend, **section)
    code, out, err = cli("hyperopt", "--config", write_config(config), "--dataset", table,
                         "--output-directory", tmp_path / "out")
    assert code == 2 and "Traceback" not in err and err.count("plait: error:") == 1
    assert message in " ".join(err.split())
    assert not (tmp_path / "out").exists()  # nothing started


def test_inline_credentials_are_hidden_in_the_search_directory_and_resume_asks_for_the_config(
        search_config, tmp_path, cli):
    from plait.run_directory import RunDirectory
    from plait.search.run import _without_secrets

    config = search_config(GOOD, backend={"cache_credentials": {"key": "k", "secret": "s3cr3t"}})
    shown = _without_secrets(config)
    assert shown["backend"]["cache_credentials"] == {"key": "***", "secret": "***"}
    assert config["backend"]["cache_credentials"]["secret"] == "s3cr3t"  # the config itself is left as it was
    run = RunDirectory.create(tmp_path, "hyperopt")
    run.write_start(json.dumps(shown), {"dataset": "d.csv"}, 42, "hyperopt")
    code, _, err = cli("hyperopt", "--resume", run)
    assert code == 2 and "hides the credentials it was given inline; resume with the original config" in err
    code, _, err = cli("train", "--resume", run)
    assert code == 2 and f"a search, not a training run; continue it with plait hyperopt --resume {run}" in err


def test_resume_of_a_training_run_is_refused_with_the_command_that_continues_it(tmp_path, cli):
    from plait.run_directory import RunDirectory

    run = RunDirectory.create(tmp_path, "experiment")
    run.write_start("{}", {"dataset": "d.csv"}, 42, "train")
    code, _, err = cli("hyperopt", "--resume", run)
    assert code == 2 and f"a train run, not a search; continue it with plait train --resume {run}" in err


def test_an_llm_config_searches_its_adapter_through_the_cli(tmp_path, cache_dir, write_config, make_dataset, cli):
    from hf_models import colour_rows, llm_config, write_colour_llama

    lora = {"type": "lora", "target_modules": ["q_proj", "v_proj", "lm_head"]}
    config = llm_config(write_colour_llama(tmp_path / "llama"), adapter=lora,
                        trainer={"type": "finetune", "epochs": 1, "batch_size": 16, "learning_rate": 0.02},
                        defaults={"text": {"preprocessing": {"max_sequence_length": 16}}},
                        backend={"type": "local", "cache_dir": cache_dir},
                        hyperopt={"parameters": {"adapter.r": {"space": "grid_search", "values": [4, 8]}},
                                  "goal": "minimize", "metric": "loss", "output_feature": "french"})
    code, out, err = cli("hyperopt", "--config", write_config(config), "--dataset", make_dataset(colour_rows(10)),
                         "--output-directory", tmp_path / "out")
    assert code == 0, err
    statistics = json.loads((tmp_path / "out" / "hyperopt_run_0" / "hyperopt_statistics.json").read_text())
    trials = statistics["hyperopt_results"]
    assert sorted(t["parameters"]["adapter.r"] for t in trials) == [4, 8]
    assert all(t["metric_score"] > 0 for t in trials)
