"""plait export_mlflow: an MLflow pyfunc model that predicts as the plait model does, loaded by
mlflow.pyfunc, served by `mlflow models serve`, and registered in a tracking store.

One tiny model is trained and exported once for the module (the whole module runs in seconds)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")

from plait.api import Model  # noqa: E402
from plait.cli import main  # noqa: E402
from plait.export.mlflow import export_mlflow  # noqa: E402

INPUTS = [{"name": "size", "type": "number"}, {"name": "colour", "type": "category"},
          {"name": "fresh", "type": "binary"}]
OUTPUTS = [{"name": "grade", "type": "category"}, {"name": "price", "type": "number"}]


def rows(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    size = rng.normal(5, 2, n).round(3)
    colour = rng.choice(["red", "green", "blue", "green"], n)  # green the most common
    fresh = rng.random(n) < 0.6
    return pd.DataFrame({"size": size, "colour": colour, "fresh": fresh,
                         "grade": np.where(size > 5, "big", np.where(fresh, "fresh", "small")),
                         "price": size * 2 + fresh + rng.normal(0, 0.1, n)})


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """.model_dir (the saved plait model), .mlflow_dir (its export), .new (rows it never saw)."""
    root = tmp_path_factory.mktemp("export_mlflow")
    model = Model({"input_features": INPUTS, "output_features": OUTPUTS, "trainer": {"epochs": 1},
                   "backend": {"type": "local", "cache_dir": str(root / "cache")}})
    model.train(dataset=rows(200, seed=0), progress_bar=False)
    mlflow_dir = model.export_mlflow(root / "mlflow")  # trained in memory, never saved
    model_dir = model.save(root / "model")
    new = rows(20, seed=1)[["size", "colour", "fresh"]]
    return SimpleNamespace(model_dir=model_dir, mlflow_dir=Path(mlflow_dir), new=new)


def assert_same_predictions(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert list(got.columns) == list(expected.columns)
    for column in expected.columns:
        if expected[column].dtype.kind == "f":
            np.testing.assert_allclose(got[column].to_numpy(float), expected[column].to_numpy(float), atol=1e-6)
        else:
            assert got[column].tolist() == expected[column].tolist(), column


def test_the_pyfunc_predicts_as_the_plait_model(exported):
    loaded = mlflow.pyfunc.load_model(str(exported.mlflow_dir))
    expected = Model.load(exported.model_dir).predict(exported.new)
    assert_same_predictions(loaded.predict(exported.new), expected)
    assert set(expected.columns) == {"grade_predictions", "grade_probability", "grade_probabilities_big",
                                     "grade_probabilities_fresh", "grade_probabilities_small", "price_predictions"}


def test_the_signature_and_example_come_from_the_training_metadata(exported):
    info = mlflow.models.get_model_info(str(exported.mlflow_dir))
    assert {(c["name"], c["type"]) for c in info.signature.inputs.to_dict()} == {
        ("size", "double"), ("colour", "string"), ("fresh", "boolean")}
    assert [c["name"] for c in info.signature.outputs.to_dict()] == list(
        Model.load(exported.model_dir).predict(exported.new).columns)
    example = json.loads((exported.mlflow_dir / "input_example.json").read_text())
    metadata = json.loads((exported.model_dir / "training_set_metadata.json").read_text())["features"]
    assert example == {"columns": ["size", "colour", "fresh"], "data": [[metadata["size"]["mean"], "green", True]]}
    # Models from code: the pyfunc is a code file and the plait folder, with no pickle anywhere.
    assert (exported.mlflow_dir / "mlflow_model.py").is_file()
    assert (exported.mlflow_dir / "artifacts" / "model" / "model_weights.safetensors").is_file()
    assert not list(exported.mlflow_dir.rglob("*.pkl"))


def test_the_cli_exports_once_and_refuses_a_folder_that_is_not_empty(exported, tmp_path, capsys):
    output = tmp_path / "exported"
    assert main(["export_mlflow", "--model_path", str(exported.model_dir), "--output_path", str(output)]) == 0
    assert json.loads(capsys.readouterr().out)["mlflow_model"] == str(output)
    assert (output / "MLmodel").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["exported"]  # no temporary folder left beside it

    assert main(["export_mlflow", "--model-path", str(exported.model_dir), "--output-path", str(output)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plait: error: ") and err.count("\n") == 1
    assert str(output) in err and "not an empty folder" in err


def test_the_cli_refuses_a_folder_that_is_not_a_plait_model(tmp_path, capsys):
    assert main(["export_mlflow", "-m", str(tmp_path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"plait: error: {str(tmp_path)!r} is not a plait model: it has no plait_model.json\n"
    assert not (tmp_path / "out").exists()


def test_an_export_that_fails_halfway_leaves_nothing_at_the_output_path(exported, tmp_path, monkeypatch):
    def write_half_then_fail(path, **_):
        (Path(path) / "MLmodel").write_text("flavors: {}\n")
        raise OSError("No space left on device")

    monkeypatch.setattr(mlflow.pyfunc, "save_model", write_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        export_mlflow(exported.model_dir, tmp_path / "exported")
    assert list(tmp_path.iterdir()) == []


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_up(url: str, server: subprocess.Popen, log: Path, limit_s: float = 240) -> None:
    # A server's start, not a speed: under the suite's load its imports took over 60 s once.
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"mlflow models serve exited with {server.returncode}: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"mlflow models serve did not answer {url} within {limit_s} s: {log.read_text()[-2000:]}")


def test_mlflow_models_serve_answers_with_the_plait_predictions(exported, tmp_path):
    port, log = free_port(), tmp_path / "serve.log"
    # MLflow's server runs `uvicorn` from PATH: this interpreter's environment's.
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with log.open("w") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "models", "serve", "-m", str(exported.mlflow_dir), "--env-manager",
             "local", "-h", "127.0.0.1", "-p", str(port)],
            env=environment, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/ping", server, log)
        body = json.dumps({"dataframe_split": exported.new.to_dict(orient="split")}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            served = pd.DataFrame(json.load(answer)["predictions"])
    finally:
        with contextlib.suppress(ProcessLookupError):  # the server and the uvicorn it started: one group
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
    assert_same_predictions(served, Model.load(exported.model_dir).predict(exported.new))


def test_a_registered_model_name_registers_it_in_the_tracking_store(exported, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.chdir(tmp_path)  # the store's default experiment keeps artifacts in ./mlruns
    Model.load(exported.model_dir).export_mlflow(tmp_path / "exported", registered_model_name="fruit")

    client = mlflow.MlflowClient()
    assert client.get_registered_model("fruit").name == "fruit"
    assert client.get_model_version("fruit", "1").status == "READY"
    registered = mlflow.pyfunc.load_model("models:/fruit/1")
    assert_same_predictions(registered.predict(exported.new), Model.load(exported.model_dir).predict(exported.new))
