"""plait train / experiment / evaluate / predict through the CLI: run directories, outputs, flags,
clean errors (exit 2, one line, no traceback), resuming and interrupting."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from plait.cli import main
from plait.evaluation.statistics import history_of
from plait.training.trainer import Trainer
from same_statistics import assert_same_statistics  # tests/same_statistics.py

PLAIT = str(Path(sys.executable).with_name("plait"))


def _frame(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x1": rng.normal(size=rows), "x2": rng.normal(size=rows),
                       "c": rng.choice(["red", "green", "blue"], rows)})
    df["y"] = df.x1 + df.x2 > 0
    df["tags"] = [" ".join(t for t, on in (("p", a > 0), ("q", b > 0)) if on) for a, b in zip(df.x1, df.x2)]
    return df


def _config(cache_dir, **trainer) -> dict:
    return {
        "input_features": [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"},
                           {"name": "c", "type": "category"}],
        "output_features": [{"name": "y", "type": "binary"}, {"name": "tags", "type": "set"}],
        "trainer": {"epochs": 3, "batch_size": 32, "learning_rate": 0.01, **trainer},
        "backend": {"type": "local", "cache_dir": str(cache_dir)},
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A config, a dataset and new (unlabelled) data, in a module-wide folder."""
    root = tmp_path_factory.mktemp("cli")
    _frame(300).to_csv(root / "data.csv", index=False)
    _frame(37, seed=9).drop(columns=["y", "tags"]).to_csv(root / "new.csv", index=False)
    (root / "config.yaml").write_text(yaml.safe_dump(_config(root / "cache")))
    return root


@contextlib.contextmanager
def _plait_logger_restored():
    logger = logging.getLogger("plait")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


@pytest.fixture(scope="module")
def experiment(files):
    """One `plait experiment` run shared by the tests that only read its results."""
    out, err = io.StringIO(), io.StringIO()
    with _plait_logger_restored(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["experiment", "-c", str(files / "config.yaml"), "--dataset", str(files / "data.csv"),
                   "--output-directory", str(files / "results")])
    assert rc == 0, err.getvalue()
    return files / "results" / "experiment_run_0", out.getvalue()


def _error_line(err: str) -> str:
    """The single error line; the rest of stderr is progress logging."""
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("plait: error:")]
    assert len(errors) == 1, err
    return errors[0]


# ---- experiment, train, predict, evaluate ------------------------------------------------------

def test_experiment_writes_the_run_directory_and_prints_test_metrics(experiment):
    run, out = experiment
    assert {p.name for p in run.iterdir()} == {
        "model", "training_statistics.json", "test_statistics.json", "predictions.parquet", "checkpoints",
        "tensorboard", "config.yaml", "description.json",
    }
    assert {p.name for p in (run / "model").iterdir()} == {
        "plait_model.json", "model_hyperparameters.json", "training_set_metadata.json", "model_weights.safetensors",
    }
    stats = json.loads((run / "training_statistics.json").read_text())  # Ludwig's layout
    assert set(stats) == {"training", "validation", "test", "evaluation_frequency", "plait"}
    assert stats["plait"]["epoch"] == [1, 2, 3]
    assert len(stats["training"]["combined"]["loss"]) == 3 and stats["evaluation_frequency"]["period"] == "epoch"
    test = json.loads((run / "test_statistics.json").read_text())
    assert {"y", "tags", "combined"} <= set(test) and 0 <= test["y"]["accuracy"] <= 1
    predictions = pq.read_table(run / "predictions.parquet").to_pandas()
    assert {"y_predictions", "y_probability", "tags_predictions"} <= set(predictions.columns)
    assert len(predictions) > 0
    assert (run / "checkpoints" / "latest.json").is_file() and list((run / "tensorboard").iterdir())
    assert "Test metrics:" in out and f"{test['y']['accuracy']:.4f}" in out and str(run) in out


def test_predict_writes_one_row_per_input_row(experiment, files, cli, tmp_path):
    run, _ = experiment
    rc, out, err = cli("predict", "--model-path", run / "model", "--dataset", files / "new.csv",
                       "--output-directory", tmp_path / "preds")
    assert rc == 0, err
    path = tmp_path / "preds" / "predictions.parquet"
    assert json.loads(out) == {"predictions": str(path), "rows": 37}
    predictions = pq.read_table(path).to_pandas()
    assert len(predictions) == 37
    assert {"y_predictions", "y_probabilities_True", "tags_predictions"} <= set(predictions.columns)
    assert not [p for p in path.parent.iterdir() if ".tmp-" in p.name]


def test_predict_writes_csv_with_set_predictions_as_text(experiment, files, cli, tmp_path):
    run, _ = experiment
    rc, out, err = cli("predict", "--model-path", run / "model", "--dataset", files / "new.csv",
                       "--output-directory", tmp_path, "--output-format", "csv")
    assert rc == 0, err
    predictions = pd.read_csv(tmp_path / "predictions.csv", keep_default_na=False)
    assert len(predictions) == 37
    assert set(" ".join(predictions.tags_predictions).split()) <= {"p", "q"}
    assert set(predictions.y_predictions.astype(str).str.lower()) <= {"true", "false"}


def test_evaluate_prints_and_saves_metrics(experiment, files, cli, tmp_path):
    run, _ = experiment
    rc, out, err = cli("evaluate", "--model-path", run / "model", "--dataset", files / "data.csv",
                       "--output-directory", tmp_path)
    assert rc == 0, err
    printed = json.loads(out)
    assert set(printed) == {"y", "tags"} and printed["y"]["accuracy"] > 0.8
    saved = json.loads((tmp_path / "evaluation_statistics.json").read_text())
    # The file has Ludwig's dataset-level entries too; the printed summary, the numbers alone.
    assert {k: v for k, v in saved["y"].items() if k in printed["y"]} == printed["y"]
    assert {"confusion_matrix", "overall_stats", "per_class_stats"} <= set(saved["y"]) - set(printed["y"])


def test_evaluate_on_the_test_split_matches_the_experiments_test_statistics(experiment, files, cli, tmp_path):
    run, _ = experiment
    rc, out, err = cli("evaluate", "--model-path", run / "model", "--dataset", files / "data.csv",
                       "--split", "test", "--output-directory", tmp_path)
    assert rc == 0, err
    test = json.loads((run / "test_statistics.json").read_text())
    assert_same_statistics(json.loads((tmp_path / "evaluation_statistics.json").read_text())["y"], test["y"])


def test_train_numbers_runs_under_the_experiment_name(files, cli, tmp_path):
    args = ["train", "-c", files / "config.yaml", "--dataset", files / "data.csv",
            "--output-directory", tmp_path / "out", "--experiment-name", "wine"]
    for _ in range(2):
        rc, out, err = cli(*args)
        assert rc == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["wine_run_0", "wine_run_1"]
    assert "Last validation metrics:" in out and "wine_run_1" in out
    assert not (tmp_path / "out" / "wine_run_1" / "test_statistics.json").exists()  # train does not test


def test_results_default_to_results_experiment_run_n(files, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli("train", "-c", files / "config.yaml", "--dataset", files / "data.csv")
    assert rc == 0, err
    assert (tmp_path / "results" / "experiment_run_0" / "model" / "plait_model.json").is_file()


def test_skip_flags_leave_their_files_out(files, cli, tmp_path):
    rc, out, err = cli("experiment", "-c", files / "config.yaml", "--dataset", files / "data.csv",
                       "--output-directory", tmp_path, "--skip-save-model", "--skip-save-predictions",
                       "--skip-save-training-statistics", "--skip-save-test-statistics")
    assert rc == 0, err
    run = tmp_path / "experiment_run_0"
    written = {p.name for p in run.iterdir()}
    assert not written & {"model", "predictions.parquet", "training_statistics.json", "test_statistics.json"}
    assert "Test metrics:" in out  # still printed
    assert str(run / "model") not in out  # no claim of a saved model


def test_skip_save_predictions_alone_keeps_the_rest(files, cli, tmp_path):
    rc, _, err = cli("experiment", "-c", files / "config.yaml", "--dataset", files / "data.csv",
                     "--output-directory", tmp_path, "--skip-save-predictions")
    assert rc == 0, err
    written = {p.name for p in (tmp_path / "experiment_run_0").iterdir()}
    assert "predictions.parquet" not in written
    assert {"model", "test_statistics.json", "training_statistics.json"} <= written


# ---- errors: exit 2, one line, no traceback --------------------------------------------------

def test_predict_with_a_path_that_is_not_a_model(files, cli, tmp_path):
    rc, _, err = cli("predict", "--model-path", tmp_path, "--dataset", files / "new.csv")
    assert rc == 2
    assert "is not a plait model" in _error_line(err)


def test_predict_with_a_run_directory_suggests_its_model_folder(experiment, files, cli, tmp_path):
    run, _ = experiment
    rc, _, err = cli("predict", "--model-path", run, "--dataset", files / "new.csv", "--output-directory", tmp_path)
    assert rc == 2
    assert "use its model/ folder" in _error_line(err)


def test_predict_with_an_incompatible_model_format(experiment, files, cli, tmp_path):
    import shutil

    run, _ = experiment
    model = tmp_path / "model"
    shutil.copytree(run / "model", model)
    (model / "plait_model.json").write_text(json.dumps({"format_version": 999, "plait_version": "9.9"}))
    rc, _, err = cli("predict", "--model-path", model, "--dataset", files / "new.csv", "--output-directory", tmp_path)
    assert rc == 2
    line = _error_line(err)
    assert "format version 999" in line and "9.9" in line


def test_predict_on_data_missing_an_input_column(experiment, files, cli, tmp_path):
    run, _ = experiment
    pd.read_csv(files / "new.csv").drop(columns=["c"]).to_csv(tmp_path / "bad.csv", index=False)
    rc, _, err = cli("predict", "--model-path", run / "model", "--dataset", tmp_path / "bad.csv",
                     "--output-directory", tmp_path)
    assert rc == 2
    assert "'c'" in _error_line(err)
    assert not (tmp_path / "predictions.parquet").exists()


def test_training_that_diverges_is_a_clean_error(files, cli, tmp_path):
    config = _config(files / "cache", learning_rate=1e30)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    rc, _, err = cli("train", "-c", tmp_path / "config.yaml", "--dataset", files / "data.csv",
                     "--output-directory", tmp_path)
    assert rc == 2
    line = _error_line(err)
    assert "at step" in line and "learning_rate" in line


def test_a_missing_dataset_is_a_clean_error(files, cli, tmp_path):
    rc, _, err = cli("train", "-c", files / "config.yaml", "--dataset", tmp_path / "nope.csv",
                     "--output-directory", tmp_path)
    assert rc == 2
    assert "nope.csv" in _error_line(err)


def test_resume_of_a_folder_that_is_not_a_run(cli, tmp_path):
    rc, _, err = cli("train", "--resume", tmp_path)
    assert rc == 2
    assert "not a plait run directory" in _error_line(err)


def test_resume_of_a_run_whose_saved_config_hides_inline_credentials(files, cli, tmp_path):
    """A run's config.yaml shows inline cache credentials as ***: resuming from it alone would
    hand *** to the object store, so plait asks for the original config."""
    config = _config("s3://bucket/cache")
    config["backend"]["cache_credentials"] = {"key": "id", "secret": "a-secret-value"}
    (tmp_path / "original.yaml").write_text(yaml.safe_dump(config))
    saved = yaml.safe_load(_out_of(cli, "validate", "-c", tmp_path / "original.yaml"))
    assert saved["backend"]["cache_credentials"] == {"key": "***", "secret": "***"}
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(saved))
    (run / "description.json").write_text(json.dumps({"data": {"dataset": str(files / "data.csv")}, "random_seed": 1}))
    rc, _, err = cli("train", "--resume", run)
    assert rc == 2
    assert "hides the credentials it was given inline" in _error_line(err) and "a-secret-value" not in err


def _out_of(cli, *args) -> str:
    rc, out, err = cli(*args)
    assert rc == 0, err
    return out


def test_cli_errors_from_a_real_process_print_one_line(tmp_path):
    result = subprocess.run([PLAIT, "predict", "--model-path", str(tmp_path), "--dataset", "x.csv"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert result.stderr.startswith("plait: error:") and result.stdout == ""


# ---- resuming and interrupting ----------------------------------------------------------------

def test_resume_of_a_completed_run_keeps_its_history(files, cli, tmp_path):
    rc, _, err = cli("train", "-c", files / "config.yaml", "--dataset", files / "data.csv", "--output-directory", tmp_path)
    assert rc == 0, err
    run = tmp_path / "experiment_run_0"
    before = json.loads((run / "training_statistics.json").read_text())
    # As a run written before Ludwig's layout left it: a list of records (resume reads the
    # checkpoint's history, and writes the file in Ludwig's layout again).
    (run / "training_statistics.json").write_text(json.dumps(history_of(before)))
    rc, out, err = cli("train", "--resume", run)
    assert rc == 0, err
    assert json.loads((run / "training_statistics.json").read_text()) == before
    assert (run / "model" / "plait_model.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["experiment_run_0"]  # no new run directory


def test_interrupted_training_saves_a_checkpoint_and_resumes(files, cli, tmp_path, monkeypatch):
    original, calls = Trainer._train_step, {"n": 0}

    def interrupt_in_second_epoch(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "_train_step", interrupt_in_second_epoch)
    rc, _, err = cli("train", "-c", files / "config.yaml", "--dataset", files / "data.csv", "--output-directory", tmp_path)
    assert rc == 130
    run = tmp_path / "experiment_run_0"
    line = _error_line(err)
    assert "interrupted" in line and f"plait train --resume {run}" in line
    latest = json.loads((run / "checkpoints" / "latest.json").read_text())
    assert latest["step"] == 9  # the last completed step, saved on interrupt
    assert not (run / "model").exists()

    monkeypatch.setattr(Trainer, "_train_step", original)
    rc, _, err = cli("train", "--resume", run)
    assert rc == 0, err
    stats = json.loads((run / "training_statistics.json").read_text())["plait"]
    assert stats["epoch"] == [1, 2, 3]
    per_epoch = stats["step"][0]
    assert stats["step"] == [per_epoch, 2 * per_epoch, 3 * per_epoch]
    assert (run / "model" / "plait_model.json").is_file()


def _default_sigint() -> None:
    """Ctrl-C's default handling in the child, whatever the tests inherited: a shell ignores
    SIGINT in the commands it starts in the background (``cmd &``), and a child inherits that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_during_training_exits_130_with_a_checkpoint_and_resume_hint(tmp_path):
    _frame(3000, seed=1).to_csv(tmp_path / "big.csv", index=False)
    config = _config(tmp_path / "cache", epochs=1000, steps_per_checkpoint=10, early_stop=-1)  # still training at the signal
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    run = tmp_path / "out" / "sig_run_0"
    latest = run / "checkpoints" / "latest.json"
    process = subprocess.Popen(
        [PLAIT, "train", "-c", str(tmp_path / "config.yaml"), "--dataset", str(tmp_path / "big.csv"),
         "--output-directory", str(tmp_path / "out"), "--experiment-name", "sig"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 120
        while not latest.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert latest.exists(), "no checkpoint appeared"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    line = _error_line(err)
    assert "interrupted" in line and f"plait train --resume {run}" in line
    pointer = json.loads(latest.read_text())
    checkpoint = run / "checkpoints" / pointer["checkpoint"]
    assert {"model.safetensors", "optimizer.pt", "trainer.pt", "state.json"} <= {p.name for p in checkpoint.iterdir()}
    assert json.loads((checkpoint / "state.json").read_text())["step"] == pointer["step"] >= 10
    assert not [p for p in run.rglob("*") if ".tmp-" in p.name]


# ---- output directories on object storage ------------------------------------------------------

def test_predict_and_evaluate_write_to_an_s3_url(experiment, files, cli, s3_bucket, monkeypatch):
    """On the local backend too: the output directory may be any fsspec URL (credentials from
    the environment, as for the data)."""
    import s3fs

    bucket, credentials = s3_bucket
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", credentials["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", credentials["secret"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", credentials["endpoint_url"])
    run, _ = experiment
    rc, out, err = cli("predict", "--model-path", run / "model", "--dataset", files / "new.csv",
                       "--output-directory", f"s3://{bucket}/preds")
    assert rc == 0, err
    assert json.loads(out) == {"predictions": f"s3://{bucket}/preds/predictions.parquet", "rows": 37}
    rc, out, err = cli("evaluate", "--model-path", run / "model", "--dataset", files / "data.csv",
                       "--output-directory", f"s3://{bucket}/eval")
    assert rc == 0, err
    s3 = s3fs.S3FileSystem(key=credentials["key"], secret=credentials["secret"],
                           client_kwargs={"endpoint_url": credentials["endpoint_url"]})
    assert sorted(s3.find(bucket)) == [f"{bucket}/eval/evaluation_statistics.json", f"{bucket}/preds/predictions.parquet"]
    with s3.open(f"{bucket}/preds/predictions.parquet", "rb") as handle:
        assert pq.read_table(handle).num_rows == 37
    with s3.open(f"{bucket}/eval/evaluation_statistics.json") as handle:
        printed = json.loads(out)["y"]
        assert {k: v for k, v in json.load(handle)["y"].items() if k in printed} == printed


def test_an_unreachable_output_directory_is_one_error_naming_the_endpoint_before_any_work(files, cli, tmp_path,
                                                                                         monkeypatch, env_s3fs):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "plait-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "plait-test-secret-value")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    rc, _, err = cli("train", "-c", files / "config.yaml", "--dataset", files / "data.csv",
                     "--output-directory", "s3://bucket/runs")
    assert rc == 2
    line = _error_line(err)
    assert "cannot connect to the storage endpoint http://127.0.0.1:9" in line and "plait-test-secret" not in err
    assert list(tmp_path.iterdir()) == []  # no local folder named "s3:"


def test_predict_on_a_dataset_behind_an_unreachable_endpoint_is_one_error_naming_it(experiment, cli_error,
                                                                                     monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "plait-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "plait-test-secret-value")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # one made by an earlier test would still reach its server
    run, _ = experiment
    started = time.monotonic()
    error = cli_error("predict", "--model-path", run / "model", "--dataset", "s3://no-bucket/new.csv")
    assert "http://127.0.0.1:9" in error and "AWS_ENDPOINT_URL" in error
    assert "plait-test-secret-value" not in error
    assert time.monotonic() - started < 60
