"""Ludwig's command-line spellings: a script written for `ludwig` runs with only the program name
changed. Every flag of Ludwig's train, experiment, predict, evaluate, preprocess, render_config and
synthesize_dataset is accepted with its meaning, or refused by name with what to do instead."""

from __future__ import annotations

import json

import pytest
import yaml

from plait.cli import build_parser, main
from plait.config import load_config

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "trainer": {"epochs": 1, "batch_size": 16},
    "backend": {"type": "local"},
}


def parsed(*argv: str) -> dict:
    return vars(build_parser().parse_args(list(argv)))


# ---- accepted, with Ludwig's meaning: the same parse as plait's own spelling ---------------------

@pytest.mark.parametrize(("verb", "ludwig", "plait"), [
    ("train", ["--output_directory", "o", "--experiment_name", "e", "--random_seed", "7"],
     ["--output-directory", "o", "--experiment-name", "e", "--random-seed", "7"]),
    ("train", ["-rs", "7", "-b", "ray", "-l", "debug"], ["--random-seed", "7", "--backend", "ray", "--logging-level", "debug"]),
    ("train", ["--training_set", "a.csv", "--validation_set", "b.csv", "--test_set", "c.csv", "--data_format", "csv"],
     ["--training-set", "a.csv", "--validation-set", "b.csv", "--test-set", "c.csv", "--data-format", "csv"]),
    ("train", ["-ssm", "-ssts", "-ssl", "-ssp", "-sstd"],
     ["--skip-save-model", "--skip-save-training-statistics", "--skip-save-log", "--skip-save-progress",
      "--skip-save-training-description"]),
    ("train", ["--skip_save_model", "--skip_save_log", "--model_name", "run"], ["--skip-save-model", "--skip-save-log"]),
    ("train", ["-mrp", "results/experiment_run_0"], ["--resume", "results/experiment_run_0"]),
    ("train", ["--model_resume_path", "r"], ["--resume", "r"]),
    ("experiment", ["-sstp", "-sstes", "-ssuo", "-es", "validation"],
     ["--skip-save-predictions", "--skip-save-test-statistics", "--skip-save-unprocessed-output", "--eval-split",
      "validation"]),
    ("experiment", ["--skip_save_eval_stats"], ["--skip-save-test-statistics"]),
    ("predict", ["-m", "m", "--dataset", "d.csv", "-od", "o", "-sstp", "-s", "full"],
     ["--model-path", "m", "--dataset", "d.csv", "--output-directory", "o", "--skip-save-predictions"]),
    ("evaluate", ["--model_path", "m", "--dataset", "d.csv", "-s", "test", "-sses", "-scp", "-scos"],
     ["--model-path", "m", "--dataset", "d.csv", "--split", "test", "--skip-save-eval-stats", "-scp", "-scos"]),
    ("preprocess", ["-pc", "c.yaml", "--dataset", "d.csv"], ["--config", "c.yaml", "--dataset", "d.csv"]),
    ("preprocess", ["--preprocessing_config_str", "{}", "--dataset", "d.csv"], ["--config-str", "{}", "--dataset", "d.csv"]),
    ("render_config", ["-c", "c.yaml", "-o", "out.yaml"], ["--config", "c.yaml", "--output", "out.yaml"]),
    ("synthesize_dataset", ["-c", "c.yaml", "-d", "5", "-od", "d.csv"], ["--config", "c.yaml", "--rows", "5", "--output", "d.csv"]),
])
def test_a_ludwig_flag_parses_as_plaits_spelling(verb, ludwig, plait):
    config = [] if verb in ("predict", "evaluate", "preprocess", "render_config", "synthesize_dataset") else ["-c", "c.yaml"]
    assert parsed(verb, *config, *ludwig) == parsed(verb, *config, *plait)


def test_plaits_own_spellings_still_work():
    args = parsed("experiment", "--config", "c.yaml", "--dataset", "d.csv", "--output-directory", "o",
                  "--experiment-name", "e", "--random-seed", "3", "--skip-save-model", "--skip-save-predictions",
                  "--skip-save-training-statistics", "--skip-save-test-statistics", "--cache-dir", "x")
    assert (args["output_directory"], args["experiment_name"], args["random_seed"], args["cache_dir"]) == ("o", "e", 3, "x")
    assert args["skip_save_model"] and args["skip_save_predictions"] and args["skip_save_test_statistics"]


@pytest.mark.parametrize("command", ["train", "experiment", "hyperopt"])
def test_the_tracker_flags_name_the_tools_a_training_run_logs_to(command):
    args = parsed(command, "--config", "c.yaml", "--mlflow", "--wandb", "--comet", "--aim")
    assert args["trackers"] == ["mlflow", "wandb", "comet", "aim"]  # added to the config's tracking list


# ---- refused by name, with what to do ---------------------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    (["train", "-g", "0", "1"], "-g: plait uses the GPUs it is shown; choose them in the environment: CUDA_VISIBLE_DEVICES"),
    (["train", "--gpus", "0"], "--gpus: plait uses the GPUs it is shown"),
    (["train", "-gml", "0.5"], "-gml: plait does not cap GPU memory"),
    (["train", "--disable_parallel_threads"], "--disable_parallel_threads: set OMP_NUM_THREADS=1"),
    (["train", "-dpt"], "-dpt: set OMP_NUM_THREADS=1"),
    (["predict", "-m", "m", "--dataset", "d.csv", "--mlflow"], "--mlflow: experiment trackers follow training runs"),
    (["evaluate", "-m", "m", "--dataset", "d.csv", "--comet"], "--comet: experiment trackers follow training runs"),
    (["train", "--training_set_metadata", "m.json"], "--training_set_metadata: plait keeps the preprocessing metadata"),
    (["train", "-sspi"], "-sspi: plait trains from its preprocessed cache"),
    (["predict", "-m", "m", "--dataset", "d.csv", "-bs", "64"], "-bs: plait sizes prediction batches itself"),
    (["evaluate", "-m", "m", "--dataset", "d.csv", "--batch_size", "64"], "--batch_size: plait sizes prediction batches"),
    (["hyperopt", "-c", "c.yaml", "--skip_save_model"], "--skip_save_model: a search keeps every trial's checkpoints"),
    (["upload"], "Ludwig's upload command is not part of plait"),
    (["visualize", "-v", "confidence_thresholding_2thresholds_3d"],
     "Ludwig's confidence_thresholding_2thresholds_3d is not part of plait"),
])
def test_a_ludwig_flag_plait_does_not_have_is_refused_by_name(cli, argv, message):
    config = ["-c", "c.yaml"] if argv[0] in ("train", "experiment") else []
    code, out, err = cli(*argv, *config)
    assert (code, out) == (2, "")
    assert err.startswith("plait: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message in err


def test_several_refused_flags_are_named_in_one_error(cli):
    code, _, err = cli("train", "-c", "c.yaml", "-g", "0", "-dpt")
    assert code == 2 and err.count("plait: error:") == 1
    assert "-g: plait uses the GPUs" in err and "; -dpt: set OMP_NUM_THREADS=1" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--backend", "dask"], "--backend dask: Ludwig lists it but has no such backend; use --backend ray"),
    (["--model_name", "mymodel"], "--model_name 'mymodel': plait names a run <experiment_name>_run_<n>"),
    (["--data_format", "excel"], "--data_format excel: plait reads csv, tsv, parquet, json, jsonl"),
    (["--data_format", "parquet"], "--data_format parquet: plait reads '{data}' as csv, from its name"),
])
def test_ludwig_values_plait_cannot_honour_are_refused(cli, write_config, make_dataset, argv, message):
    data = make_dataset({"x": [1.0, 2.0], "c": ["a", "b"], "y": [True, False]})
    code, _, err = cli("train", "-c", write_config(CONFIG), "--dataset", data, *argv)
    assert code == 2
    assert message.format(data=data) in err


def test_predict_on_a_split_and_experiment_on_every_row_say_what_to_use(cli, write_config):
    code, _, err = cli("predict", "-m", "m", "--dataset", "d.csv", "--split", "test")
    assert code == 2 and "use plait evaluate --split test" in err
    code, _, err = cli("experiment", "-c", write_config(CONFIG), "--dataset", "d.csv", "--eval_split", "full")
    assert code == 2 and "run plait evaluate --split full afterwards" in err


# ---- render_config --------------------------------------------------------------------------------

def test_render_config_writes_the_resolved_config_which_validates_again(cli, write_config, tmp_path):
    out_path = tmp_path / "out" / "rendered.yaml"
    code, out, err = cli("render_config", "--config", write_config(CONFIG), "--output", out_path)
    assert code == 0, err
    rendered = yaml.safe_load(out_path.read_text())
    assert rendered["trainer"]["epochs"] == 1 and rendered["combiner"]["type"] == "concat"
    assert rendered["input_features"][0]["preprocessing"]["normalization"] == "auto"
    again = load_config(rendered)
    assert load_config(yaml.safe_load(yaml.safe_dump(again.model_dump(mode="json")))) == again
    assert [p.name for p in out_path.parent.iterdir()] == ["rendered.yaml"]  # written whole, no temporary file


def test_render_config_prints_without_output_and_takes_a_config_string(cli):
    code, out, err = cli("render-config", "--config_str", json.dumps(CONFIG))
    assert code == 0, err
    assert yaml.safe_load(out)["output_features"][0]["name"] == "y"
    code, _, err = cli("render_config", "-cs", "[1, 2]")
    assert code == 2 and "--config_str must hold a config" in err


# ---- a Ludwig script, run by plait ----------------------------------------------------------------

@pytest.fixture(scope="module")
def ludwig_run(tmp_path_factory):
    """`ludwig experiment` as a Ludwig user writes it, with `plait` in its place."""
    import contextlib
    import io
    import logging

    import numpy as np
    import pandas as pd

    root = tmp_path_factory.mktemp("ludwig")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=120), "c": rng.choice(["a", "b"], 120)})
    frame["y"] = frame.x > 0
    frame.to_csv(root / "data.csv", index=False)
    config = {**CONFIG, "backend": {"type": "local", "cache_dir": str(root / "cache")}}
    logger = logging.getLogger("plait")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(["experiment", "--config_str", json.dumps(config), "--dataset", str(root / "data.csv"),
                         "--data_format", "csv", "--output_directory", str(root / "results"), "--experiment_name",
                         "ludwig", "--model_name", "run", "--random_seed", "3", "-ssl", "-ssp", "-sstd", "-ssuo",
                         "--eval_split", "validation", "--logging_level", "warning"])
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
    assert code == 0
    return root, root / "results" / "ludwig_run_0"


def test_a_ludwig_experiment_runs_with_its_flags_honoured(ludwig_run):
    _, run = ludwig_run
    kept = {p.name for p in run.iterdir()}
    assert {"model", "training_statistics.json", "test_statistics.json", "predictions.parquet", "config.yaml"} <= kept
    assert not kept & {"tensorboard", "checkpoints", "description.json"}  # -ssl, -ssp, -sstd


def test_the_eval_split_is_the_one_evaluated(ludwig_run, cli):
    import pyarrow.parquet as pq

    root, run = ludwig_run
    code, out, err = cli("preprocess", "-c", run / "config.yaml", "--dataset", root / "data.csv", "-rs", "3")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert json.loads(out)["from_cache"] and rows["validation"] != rows["test"]
    assert pq.read_table(run / "predictions.parquet").num_rows == rows["validation"]


def test_predict_and_evaluate_with_ludwig_flags(ludwig_run, cli, tmp_path):
    root, run = ludwig_run
    code, out, err = cli("predict", "--model_path", run / "model", "--dataset", root / "data.csv",
                         "--output_directory", tmp_path / "p", "-ssuo")
    assert code == 0, err
    assert json.loads(out)["rows"] == 120 and (tmp_path / "p" / "predictions.parquet").is_file()
    code, out, err = cli("predict", "-m", run / "model", "--dataset", root / "data.csv", "-od", tmp_path / "q", "-sstp")
    assert code == 0, err
    assert json.loads(out) == {"predictions": None, "rows": 120} and not (tmp_path / "q").exists()
    code, out, err = cli("evaluate", "-m", run / "model", "--dataset", root / "data.csv", "-od", tmp_path / "e",
                         "--split", "full", "--skip_save_eval_stats", "--skip_collect_predictions")
    assert code == 0, err
    assert "accuracy" in json.loads(out)["y"] and not (tmp_path / "e").exists()
    code, out, err = cli("predict", "-m", run / "model", "--dataset", root / "data.csv", "-gc", "{max_new_tokens: 8}")
    assert code == 2 and "--generation_config" not in err and "only an LLM (model_type: llm) generates text" in err
