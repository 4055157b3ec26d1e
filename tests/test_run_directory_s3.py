"""Run directories on object storage: a real S3 server (moto's, on loopback) holds everything a
run writes; nothing of the run is written to a local folder; resume, predict and evaluate read
it back from the bucket; credentials never appear in the output."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from plait.cli import main
from plait.evaluation.statistics import history_of
from same_statistics import assert_same_statistics  # tests/same_statistics.py

SECRET = "plait-test-secret-value"


@pytest.fixture
def bucket_fs(s3_bucket):
    import s3fs

    name, credentials = s3_bucket
    fs = s3fs.S3FileSystem(key=credentials["key"], secret=credentials["secret"],
                           client_kwargs={"endpoint_url": credentials["endpoint_url"]})
    return name, credentials, fs


def _data(tmp_path, rows: int = 200) -> str:
    rng = np.random.default_rng(0)
    x = rng.normal(size=rows)
    frame = pd.DataFrame({"x": x, "c": rng.choice(["a", "b", "c"], rows), "y": x + rng.normal(scale=0.3, size=rows) > 0})
    path = tmp_path / "data" / "data.csv"
    path.parent.mkdir()
    frame.to_csv(path, index=False)
    return str(path)


def _config(tmp_path, credentials: dict, epochs: int = 2) -> str:
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}],
              "trainer": {"epochs": epochs, "batch_size": 32, "early_stop": -1},
              "backend": {"type": "local", "cache_dir": str(tmp_path / "cache"), "artifacts_credentials": credentials}}
    path = tmp_path / f"config-{epochs}.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _run(capsys, *args) -> tuple[str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert SECRET not in out and SECRET not in err
    return out, err


def test_an_experiment_writes_its_whole_run_directory_to_the_bucket(bucket_fs, tmp_path, capsys, monkeypatch):
    name, credentials, fs = bucket_fs
    monkeypatch.chdir(tmp_path)
    _run(capsys, "experiment", "--config", _config(tmp_path, credentials), "--dataset", _data(tmp_path),
         "--output-directory", f"s3://{name}/results")
    run = f"{name}/results/experiment_run_0"
    files = {path[len(run) + 1:] for path in fs.find(run)}
    for expected in ("config.yaml", "description.json", "training_statistics.json", "test_statistics.json",
                     "model/plait_model.json", "model/model_weights.safetensors", "checkpoints/latest.json",
                     "predictions.parquet"):
        assert expected in files, sorted(files)
    assert any(f.startswith("tensorboard/events.out.tfevents") for f in files), sorted(files)
    latest = json.loads(fs.cat(f"{run}/checkpoints/latest.json"))
    assert f"checkpoints/{latest['checkpoint']}/state.json" in files
    assert SECRET not in fs.cat(f"{run}/config.yaml").decode()  # the saved config hides the credentials
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "config-2.yaml", "data"]  # nothing local


def test_a_run_in_the_bucket_resumes_and_its_model_predicts_from_there(bucket_fs, tmp_path, capsys, monkeypatch,
                                                                      env_s3fs):
    name, credentials, fs = bucket_fs
    data = _data(tmp_path)
    _run(capsys, "train", "--config", _config(tmp_path, credentials, epochs=2), "--dataset", data,
         "--output-directory", f"s3://{name}/results")
    run = f"s3://{name}/results/experiment_run_0"
    # Resume with a longer schedule: the run goes on from its checkpoint in the bucket.
    _, err = _run(capsys, "train", "--resume", run, "--config", _config(tmp_path, credentials, epochs=4))
    assert f"Resumed from {run}/checkpoints/step-" in err
    history = history_of(json.loads(fs.cat(f"{run}/training_statistics.json")))
    assert [record["epoch"] for record in history] == [1, 2, 3, 4]

    # predict and evaluate take no config: the storage's own credentials come from the environment.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", credentials["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", credentials["secret"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", credentials["endpoint_url"])
    out, _ = _run(capsys, "predict", "--model-path", f"{run}/model", "--dataset", data,
                  "--output-directory", f"s3://{name}/predicted")
    assert json.loads(out)["rows"] == 200
    fs.get(f"{name}/results/experiment_run_0/model", str(tmp_path / "model"), recursive=True)
    _run(capsys, "predict", "--model-path", tmp_path / "model", "--dataset", data, "--output-directory", tmp_path / "local")
    with fs.open(f"{name}/predicted/predictions.parquet", "rb") as handle:
        from_bucket = pd.read_parquet(handle)
    pd.testing.assert_frame_equal(from_bucket, pd.read_parquet(tmp_path / "local" / "predictions.parquet"))
    out, _ = _run(capsys, "evaluate", "--model-path", f"{run}/model", "--dataset", data,
                  "--output-directory", tmp_path / "evaluated")
    assert 0.0 <= json.loads(out)["y"]["accuracy"] <= 1.0


def test_a_model_path_in_the_bucket_that_is_no_model_is_one_clear_error(bucket_fs, tmp_path, cli_error, monkeypatch,
                                                                        env_s3fs):
    name, credentials, _ = bucket_fs
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", credentials["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", credentials["secret"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", credentials["endpoint_url"])
    line = cli_error("predict", "--model-path", f"s3://{name}/nothing/model", "--dataset", _data(tmp_path))
    assert line == (f"plait: error: 's3://{name}/nothing/model' is not a plait model: it has no plait_model.json "
                    "(or the location does not exist)")
    line = cli_error("train", "--resume", f"s3://{name}/nothing")
    assert line == f"plait: error: --resume 's3://{name}/nothing': not a plait run directory (no description.json)"


@pytest.mark.slow
def test_an_experiment_on_ray_writes_its_run_directory_to_the_bucket(ray_cluster, bucket_fs, tmp_path, capsys):
    """Workers write their logs and checkpoints, Ray Train its result, and Ray Data jobs the
    predictions' part files, all to the bucket; the test split's metrics and predictions come
    from Ray Data jobs over the cache, and agree with the same computed in this process."""
    from plait import Model
    from plait.data.preprocess import preprocess

    name, credentials, fs = bucket_fs
    config = yaml.safe_load(open(_config(tmp_path, credentials)))
    config["backend"] = {**config["backend"], "type": "ray", "trainer": {"num_workers": 2}}
    (tmp_path / "ray.yaml").write_text(yaml.safe_dump(config))
    data = _data(tmp_path)
    _, err = _run(capsys, "experiment", "--config", tmp_path / "ray.yaml", "--dataset", data,
                  "--output-directory", f"s3://{name}/results")
    assert "Ray Data evaluation" in err
    run = f"{name}/results/experiment_run_0"
    files = {path[len(run) + 1:] for path in fs.find(run)}
    for expected in ("model/plait_model.json", "checkpoints/latest.json", "logs/rank-0.log", "logs/rank-1.log",
                     "predictions.parquet/_SUCCESS", "test_statistics.json"):
        assert expected in files, sorted(files)
    assert any(f.startswith("ray/") for f in files), sorted(files)  # Ray Train's own storage
    assert b"worker rank 1 of 2 on node" in fs.cat(f"{run}/logs/rank-1.log")
    fs.get(f"{run}/model", str(tmp_path / "model"), recursive=True)
    model = Model.load(tmp_path / "model", backend="local")
    test_split = preprocess(model.config, data, seed=42)
    predictions = pd.concat(pd.read_parquet(fs.open(f)) for f in sorted(fs.glob(f"{run}/predictions.parquet/part-*")))
    assert len(predictions) == test_split.rows("test")
    local = model.evaluate_preprocessed(test_split, "test")
    stats = json.loads(fs.cat(f"{run}/test_statistics.json"))
    # Every entry, Ludwig's confusion matrix, per-class table and curves included.
    assert_same_statistics(stats, local)
    model.close()
    fs.get(run, str(tmp_path / "ray_run"), recursive=True)
    _every_visualization_of_one_run(tmp_path / "ray_run", data, tmp_path / "figures", capsys)


def _every_visualization_of_one_run(run, data: str, figures, capsys) -> None:
    """Each plot a single run's files can give (not a search's), drawn from them."""
    from plait.visualize import VISUALIZATIONS

    for name, visualization in VISUALIZATIONS.items():
        if {"hyperopt_statistics", "explanation_summary"} & set(visualization.needs):  # a search's, plait explain's
            continue
        if "training_statistics" in visualization.needs:
            flags = ["-trs", run / "training_statistics.json"]
        elif "test_statistics" in visualization.needs:
            flags = ["-tes", run / "test_statistics.json", "-gm", run / "model"]
        else:
            kind = "-prob" if "probabilities" in visualization.needs else "-pred"
            flags = [kind, run / "predictions.parquet", "-g", data, "-gm", run / "model", "-ofn", "y"]
        code = main([str(a) for a in ["visualize", "-v", name, *flags, "-od", figures / name, "-ff", "png"]])
        out, err = capsys.readouterr()
        if code == 2 and "plots category outputs" in err:  # this run's output is binary
            continue
        assert code == 0 and json.loads(out)["files"], (name, err)


def test_a_bucket_that_does_not_exist_is_one_line(bucket_fs, tmp_path, cli_error):
    _, credentials, _ = bucket_fs
    line = cli_error("train", "--config", _config(tmp_path, credentials), "--dataset", _data(tmp_path),
                     "--output-directory", "s3://no-such-bucket/runs")
    assert line.startswith("plait: error: the bucket 'no-such-bucket' does not exist on the storage endpoint "
                           f"{credentials['endpoint_url']}; create it")


@pytest.mark.parametrize("setting", ["artifacts_credentials", "cache_credentials"])
def test_credentials_the_storage_refuses_are_one_line_naming_the_setting_never_the_secret(
        bucket_fs, tmp_path, cli_error, setting):
    from moto.core import set_initial_no_auth_action_count

    name, credentials, _ = bucket_fs
    wrong = {**credentials, "key": "nobody", "secret": "not-the-secret-at-all"}
    config = yaml.safe_load(open(_config(tmp_path, credentials)))
    caching = setting == "cache_credentials"  # then the run directory is local, and only the cache is in the bucket
    config["backend"].update({setting: wrong, "cache_dir": f"s3://{name}/cache", "artifacts_credentials": None}
                             if caching else {setting: wrong})
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(config))
    data, runs = _data(tmp_path), tmp_path / "runs" if caching else f"s3://{name}/runs"

    @set_initial_no_auth_action_count(0)  # the server checks credentials while this runs
    def train() -> str:
        return cli_error("train", "--config", path, "--dataset", data, "--output-directory", runs)

    line = train()
    assert (f"cannot read the cache at 's3://{name}/cache': access denied (Forbidden). Check backend.cache_credentials"
            in line) if caching else ("refused the credentials of backend.artifacts_credentials (InvalidAccessKeyId"
                                      in line)
    assert wrong["secret"] not in line and wrong["key"] not in line
