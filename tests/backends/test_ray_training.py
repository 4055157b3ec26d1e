"""Training on the Ray backend: Ray Train workers with each strategy (gloo on CPU), on the real
local Ray cluster shared by the test session."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from plait import Model
from plait.errors import TrainingError
from plait.evaluation.statistics import history_of
from distributed_rule import rule_config, rule_data  # modules beside this file
from ray_processes import killing_one_when

pytestmark = pytest.mark.usefixtures("ray_cluster")


# fsdp and deepspeed train on Ray Train in test_ray_llm.py (a language model sharded across two
# workers), and with this model on gloo process groups in tests/training/strategies: runs here
# would repeat them at 30 s each of the suite's time.
@pytest.mark.parametrize("strategy", ["ddp", "horovod"])
def test_two_workers_learn_a_simple_rule_with_each_strategy(tmp_path, strategy, request):
    if strategy == "ddp":
        run = request.getfixturevalue("ray_ddp_rule_run")  # shared with the torchrun test
        result, run_dir, accuracy = run.result, run.run_dir, run.accuracy
    else:
        pytest.importorskip("horovod.torch")
        config = rule_config(tmp_path, workers=2)
        config["backend"]["trainer"]["strategy"] = strategy
        model = Model(config)
        result, run_dir = model.train(dataset=rule_data(), run_dir=tmp_path / "run", progress_bar=False), tmp_path / "run"
        accuracy = model.evaluate(rule_data(), split="test")["y"]["accuracy"]
    assert [r["epoch"] for r in result.training_statistics] == list(range(1, 7))
    training_rows = result.preprocessed.rows("training")
    assert all(r["rows"] == training_rows for r in result.training_statistics), "every row once per epoch"
    logs = sorted(p.name for p in (run_dir / "logs").iterdir())
    assert logs == ["rank-0.log", "rank-1.log"] and "Training on" in (run_dir / "logs" / "rank-0.log").read_text()
    assert accuracy > 0.9
    assert (run_dir / "checkpoints" / "latest.json").is_file()
    if strategy == "ddp":
        _check_relayed_callbacks(run.recorder, result)
        _check_tracked_in_mlflow(run.mlflow_uri, result)


def _check_tracked_in_mlflow(uri: str, result) -> None:
    """The run's tracker, called in this process with rank 0's relayed events, logged every
    evaluation and each worker's speed."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    [run] = client.search_runs([client.get_experiment_by_name("plait").experiment_id])
    history = client.get_metric_history(run.info.run_id, "validation/y/accuracy")
    assert sorted(m.step for m in history) == [r["step"] for r in result.training_statistics]
    assert len(client.get_metric_history(run.info.run_id, "speed/worker_1/rows_per_s")) == 6


def _check_relayed_callbacks(recorder, result) -> None:
    """Rank 0's events reach the callbacks in this process, each once, in order; the epochs'
    speeds are each worker's too."""
    assert recorder.processes == {os.getpid()}
    assert recorder.hooks()[:4] == ["on_train_init", "on_preprocess_start", "on_preprocess_end", "on_train_start"]
    assert recorder.hooks()[-1] == "on_train_end"
    assert [a["epoch"] for name, a in recorder.calls if name == "on_epoch_start"] == list(range(1, 7))
    assert [a["record"] for name, a in recorder.calls if name == "on_eval_end"] == result.training_statistics
    speeds = [a["speed"] for name, a in recorder.calls if name == "on_epoch_end"]
    assert len(speeds) == 6 and all(len(s["data_wait_fraction_per_worker"]) == 2 for s in speeds)
    per_worker = result.ludwig_statistics()["plait"]["rows_per_s_per_worker"]
    assert len(per_worker) == 6 and all(len(v) == 2 and min(v) > 0 for v in per_worker)


def test_one_ray_worker_gives_the_local_metrics(tmp_path, monkeypatch):
    """One worker's shard is the whole split in the cache's order, and its shuffle window holds
    it all: it is permuted with the local backend's generator, so the batches are the same and
    the metrics differ only by float rounding (torch runs on fewer threads in the worker)."""
    data = rule_data()
    ray_model = Model(rule_config(tmp_path, workers=1, epochs=3))
    # The driver's temporary folders go to one this test owns: the suite's other groups run Ray
    # training at the same time, and theirs would show in the machine's temporary folder.
    own_temp = tmp_path / "temp"
    own_temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_temp))
    ray_stats = ray_model.train(dataset=data, progress_bar=False).training_statistics
    # Without a run directory the checkpoints go to a temporary one, removed when training ends.
    assert list(own_temp.glob("plait-ray-run-*")) == []
    local_config = {**rule_config(tmp_path, workers=None, epochs=3), "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}}
    local_stats = Model(local_config).train(dataset=data, progress_bar=False).training_statistics
    for ray_record, local_record in zip(ray_stats, local_stats, strict=True):
        ray_metrics, local_metrics = ray_record["validation"]["y"], local_record["validation"]["y"]
        assert ray_metrics["loss"] == pytest.approx(local_metrics["loss"], rel=1e-4)
        assert ray_metrics["accuracy"] == pytest.approx(local_metrics["accuracy"], abs=1e-9)
        assert ray_metrics["roc_auc"] == pytest.approx(local_metrics["roc_auc"], abs=1e-4)


def test_a_loaded_model_trains_on_from_its_weights_on_two_workers(tmp_path, ray_ddp_rule_run):
    """--model_load_path on Ray: the workers start from the saved weights (a learning rate too
    small to move them leaves them as saved) and the data is preprocessed with its metadata."""
    ray_ddp_rule_run.model.save(tmp_path / "model")
    loaded = Model.load(tmp_path / "model")
    config = rule_config(tmp_path, workers=2, epochs=1, learning_rate=1e-12)
    config["backend"]["trainer"]["strategy"] = "ddp"
    trained_on = loaded.with_config(config)
    trained_on.train(dataset=rule_data(), progress_bar=False)
    assert trained_on.metadata["features"] == loaded.metadata["features"]
    for name, tensor in trained_on.module.state_dict().items():
        assert tensor.allclose(loaded.module.state_dict()[name], atol=1e-6), name


def test_an_error_on_the_workers_reaches_the_driver_with_its_message_and_is_not_retried(tmp_path):
    """A diverging loss is plait's own error: it would come back on every restart, so the run
    stops with it at once (the default three retries are not spent training again)."""
    from ray.util.placement_group import placement_group_table

    config = rule_config(tmp_path, workers=2, learning_rate=1e12)
    before = set(placement_group_table())
    started = time.monotonic()
    with pytest.raises(TrainingError) as info:
        Model(config).train(dataset=rule_data(), progress_bar=False, run_dir=tmp_path / "run")
    assert "loss became" in str(info.value) or "gradient norm became" in str(info.value)
    assert "(worker " in str(info.value)
    assert (tmp_path / "run" / "logs" / "rank-0.log").read_text().count("Training on") == 1
    assert time.monotonic() - started < 60
    # The failed group's placement group goes with it: left behind, it would hold its CPUs from
    # every later group (a search's next trial waited on one forever).
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(
            pg["state"] != "REMOVED" for key, pg in placement_group_table().items() if key not in before):
        time.sleep(0.5)
    assert all(pg["state"] == "REMOVED" for key, pg in placement_group_table().items() if key not in before)


def killing_a_worker_when(appears: Path, unless: Path | None = None):
    """Within the block, SIGKILL one Ray Train worker (a crash: it dies without a word) once
    ``appears`` exists, unless ``unless`` exists by then; yields the killed pids."""
    return killing_one_when(appears.exists, b"ray::RayTrainWorker",
                            unless=(unless.exists if unless else lambda: False))


# A worker killed after a checkpoint, the group replaced and training resumed from that checkpoint:
# test_ray_llm.py kills a worker of a DeepSpeed ZeRO-3 group (a sharded checkpoint, the harder
# case) and checks every epoch is recorded once; the driver's own death is tested below.


def test_a_worker_killed_before_the_first_checkpoint_starts_the_group_over(tmp_path):
    run = tmp_path / "run"
    # Small batches: the first epoch (70 steps) outlasts the kill by far. Two epochs show the
    # started-over group records each epoch once, as more would.
    model = Model(rule_config(tmp_path, workers=2, epochs=2, batch_size=8))
    with killing_a_worker_when(run / "logs" / "rank-0.log", unless=run / "checkpoints" / "latest.json") as killed:
        result = model.train(dataset=rule_data(), run_dir=run, progress_bar=False)
    assert killed
    assert result.restarts == [{"resumed_from_step": None}]
    assert [r["epoch"] for r in result.training_statistics] == [1, 2]


def test_cli_train_on_ray_with_relative_paths(tmp_path, monkeypatch, capsys):
    """Ray workers run in a working directory of their own: relative paths must still work."""
    import yaml

    from plait.cli import main

    monkeypatch.chdir(tmp_path)
    rule_data(400).to_csv("data.csv", index=False)
    config = rule_config(Path("."), workers=2, epochs=2, learning_rate=0.01)  # few steps: a brisk rate
    config["backend"] = {"trainer": config["backend"]["trainer"]}  # default cache_dir: beside data.csv
    Path("config.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", "--config", "config.yaml", "--dataset", "data.csv", "--backend", "ray",
                 "--output-directory", "out"]) == 0
    err = capsys.readouterr().err
    assert "Ray Train: 2 worker(s)" in err
    assert "epoch 2 | step" in err, "the coordinator's evaluation lines are shown by the driver"
    model = Model.load(tmp_path / "out" / "experiment_run_0" / "model")
    assert model.evaluate(rule_data(400), split="test")["y"]["accuracy"] > 0.7


def test_resume_after_the_driver_is_killed(tmp_path, ray_cluster, monkeypatch, capsys):
    """The driver (a `plait train` process joined to the session's cluster) is killed after the
    first checkpoint; `plait train --resume` on the run directory finishes the run. The resume
    runs in this process (which never saw the killed run): a second interpreter would only add
    its start, torch and Ray imported again, to the test's time."""
    import subprocess
    import sys

    import yaml

    from plait.cli import main

    rule_data(1600).to_csv(tmp_path / "data.csv", index=False)
    # Killed at its first checkpoint (epoch 1): the epochs after it are what the resumed run trains.
    config = rule_config(tmp_path, workers=2, epochs=4, early_stop=-1)
    config["backend"]["type"] = "ray"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address}
    plait = [sys.executable, "-m", "plait.cli"]
    run = tmp_path / "out" / "experiment_run_0"
    driver = subprocess.Popen([*plait, "train", "--config", "config.yaml", "--dataset", "data.csv", "--output-directory", "out"],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while not (run / "checkpoints" / "latest.json").exists() and driver.poll() is None:
        time.sleep(0.05)  # no deadline: a slow machine only delays the kill (the driver ends on its own)
    assert driver.poll() is None, driver.stderr.read().decode()[-2000:]
    driver.send_signal(signal.SIGKILL)  # the driver dies without a word; its workers go with its job
    driver.wait()
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main(["train", "--resume", str(run)])
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    assert "Trained 4 epochs" in out + err
    import json

    epochs = [r["epoch"] for r in history_of(json.loads((run / "training_statistics.json").read_text()))]
    assert epochs == list(range(1, 5))


def test_a_worker_group_the_cluster_cannot_hold_is_refused_at_once(tmp_path):
    """8 workers of 1 CPU on the 4-CPU session cluster: Ray Train would wait forever."""
    from plait.errors import BackendError

    config = rule_config(tmp_path, workers=8)
    config["backend"]["trainer"]["resources_per_worker"] = {"CPU": 1}
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        Model(config).train(dataset=rule_data(), run_dir=tmp_path / "run", progress_bar=False)
    assert time.monotonic() - started < 60
    assert "the worker group needs 8 x (1 CPU), but this Ray cluster has room for 4" in str(info.value)
    assert "1 node with 4 CPU" in str(info.value) and "Lower backend.trainer.num_workers" in str(info.value)


def test_with_a_scheduling_timeout_the_driver_waits_for_room_then_says_how_long():
    """What an autoscaling cluster gets (600 s unless set); the session cluster is fixed, so the
    room never comes and the driver gives up after the timeout."""
    from functools import partial

    from plait.backends.ray.cluster import is_autoscaling, plan_with_room
    from plait.backends.ray.train import plan
    from plait.config.backend import DistributedTrainerConfig
    from plait.errors import BackendError

    assert not is_autoscaling()
    settings = DistributedTrainerConfig(num_workers=8, resources_per_worker={"CPU": 1}, scheduling_timeout_s=1.5)
    started = time.monotonic()
    with pytest.raises(BackendError, match=r"room for 4: .*\(after waiting 1.5 s for nodes: "
                                           r"backend.trainer.scheduling_timeout_s\)"):
        plan_with_room(partial(plan, settings), settings.scheduling_timeout_s)
    assert 1.5 <= time.monotonic() - started < 30
    fits = DistributedTrainerConfig(num_workers=4, resources_per_worker={"CPU": 1}, scheduling_timeout_s=1.5)
    assert plan_with_room(partial(plan, fits), fits.scheduling_timeout_s)["num_workers"] == 4
