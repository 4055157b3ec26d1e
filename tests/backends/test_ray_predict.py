"""Batch prediction and evaluation as Ray Data jobs, on the real local Ray cluster shared by the
test session, against the local backend's in-process results for the same saved model."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from plait import Model
from plait.backends.ray import batches as ray_predict
from plait.cli import main
from plait.errors import BackendError, DataError
from ray_processes import killing_one_when, session_processes  # a module beside this file
from same_statistics import assert_same_statistics  # tests/same_statistics.py

pytestmark = pytest.mark.usefixtures("ray_cluster")

INPUTS = [
    {"name": "num", "type": "number", "preprocessing": {"normalization": "iq"}},
    {"name": "num_mean", "column": "num", "type": "number", "preprocessing": {"missing_value_strategy": "fill_with_mean"}},
    {"name": "cat", "type": "category"},
    {"name": "txt", "type": "text"},
    {"name": "txt_bpe", "column": "txt", "type": "text", "preprocessing": {"tokenizer": "bpe", "most_common": 40}},
    {"name": "vec", "type": "vector", "preprocessing": {"missing_value_strategy": "fill_with_mean"}},
]
OUTPUTS = [{"name": "label", "type": "category"}, {"name": "score", "type": "number"},
           {"name": "flag", "type": "binary"}, {"name": "tags", "type": "set"}]


def every_type_frame(rows: int, seed: int = 0) -> pd.DataFrame:
    """Rows for INPUTS and OUTPUTS, with missing values in several columns."""
    rng = np.random.default_rng(seed)
    words = ["the", "cat", "sat", "on", "mat", "dog!", "Hello,", "lowest", "newer"]
    df = pd.DataFrame({
        "num": rng.normal(10, 3, rows).round(4),
        "cat": rng.choice(list("abcdefgh"), rows),
        "txt": [" ".join(rng.choice(words, rng.integers(1, 9))) for _ in range(rows)],
        "vec": [" ".join(f"{v:.3f}" for v in rng.normal(size=3)) for _ in range(rows)],
        "score": rng.normal(size=rows),
    })
    df["label"] = np.where(df.num > 11, "p", np.where(df.cat < "d", "q", "r"))
    df["flag"] = np.where(df.txt.str.contains("cat"), "yes", "no")
    df["tags"] = [" ".join(sorted(set(t.split()) & {"the", "mat", "sat"})) for t in df.txt]
    for column, every in {"num": 17, "cat": 13, "txt": 11, "vec": 19, "label": 23}.items():
        df.loc[::every, column] = None
    return df


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A model trained locally on every_type_frame, saved; its folder holds the data files too."""
    root = tmp_path_factory.mktemp("ray_predict")
    config = {"input_features": INPUTS, "output_features": OUTPUTS, "trainer": {"epochs": 2, "batch_size": 64},
              "backend": {"type": "local", "cache_dir": str(root / "cache")}}
    model = Model(config)
    model.train(dataset=every_type_frame(400), progress_bar=False)
    model.save(root / "model")
    frame = every_type_frame(1000, seed=1)
    frame.to_csv(root / "data.csv", index=False)
    frame.to_json(root / "data.jsonl", orient="records", lines=True)
    (root / "parts").mkdir()
    for i, start in enumerate(range(0, 1000, 400)):  # three files of small row groups
        frame.iloc[start : start + 400].to_parquet(root / "parts" / f"part-{i}.parquet", index=False, row_group_size=70)
    return root


@pytest.fixture
def small_batches(monkeypatch):
    """Many batches and part files, so that order and retries are exercised on small data; two
    actors (many batches would start one per logical CPU: four on this 2-core machine start
    three times as slowly, 20 s a job against 6, and prove nothing two do not)."""
    monkeypatch.setattr(ray_predict, "BATCH_ROWS", 64)
    monkeypatch.setattr(ray_predict, "PART_BYTES", 1)
    pool_of = ray_predict.actor_plan

    def two_actors(*args, **kwargs) -> dict:
        return {**(planned := pool_of(*args, **kwargs)), "num_workers": min(2, planned["num_workers"])}

    monkeypatch.setattr(ray_predict, "actor_plan", two_actors)


def local_predictions(saved: Path, dataset) -> pd.DataFrame:
    return Model.load(saved / "model", backend="local").predict(dataset)


def assert_same_predictions(on_ray: pd.DataFrame, local: pd.DataFrame) -> None:
    """Row for row: labels exactly, numbers to float32 rounding (the model sees other batch
    sizes on Ray, and matrix products round differently with the batch size)."""
    pd.testing.assert_frame_equal(on_ray, local, check_exact=False, rtol=1e-5, atol=1e-6)


def read_parts(folder: Path, fmt: str) -> pd.DataFrame:
    """The part files in name order, as one frame."""
    parts = sorted(folder.glob(f"part-*.{fmt}"))
    read = pd.read_parquet if fmt == "parquet" else (lambda p: pd.read_csv(p, keep_default_na=False))
    return pd.concat([read(p) for p in parts], ignore_index=True)


def test_model_predict_on_ray_equals_local_row_for_row(saved, small_batches):
    dataset = saved / "parts"  # a directory: three files, 18 row groups, 16 batches
    on_ray = Model.load(saved / "model", backend="ray").predict(dataset)
    assert_same_predictions(on_ray, local_predictions(saved, dataset))
    frame = every_type_frame(300, seed=2)  # a DataFrame goes through the same job
    assert_same_predictions(Model.load(saved / "model", backend="ray").predict(frame), local_predictions(saved, frame))


def test_sequence_text_vector_and_distribution_outputs_predict_on_ray_as_locally(tmp_path, sequence_data):
    frame = sequence_data(300, seed=4).dropna()
    config = {"input_features": [{"name": "src", "type": "sequence", "encoder": "embed"}],
              "output_features": [{"name": "rev", "type": "text", "decoder": {"beam_width": 2}}, {"name": "vec", "type": "vector"},
                                  {"name": "dist", "type": "category_distribution"}],
              "trainer": {"epochs": 2}, "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}}
    model = Model(config)
    model.train(dataset=frame, progress_bar=False)
    model.save(tmp_path / "model")
    on_ray = Model.load(tmp_path / "model", backend="ray").predict(frame)
    local = Model.load(tmp_path / "model", backend="local").predict(frame)
    assert on_ray["rev_predictions"].tolist() == local["rev_predictions"].tolist()
    for column in ("rev_probabilities", "vec_predictions"):
        np.testing.assert_allclose(np.concatenate(on_ray[column].to_list()), np.concatenate(local[column].to_list()),
                                   rtol=1e-5, atol=1e-6)
    assert_same_predictions(on_ray.drop(columns=["rev_predictions", "rev_probabilities", "vec_predictions"]),
                            local.drop(columns=["rev_predictions", "rev_probabilities", "vec_predictions"]))


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_cli_predict_on_ray_writes_part_files_in_input_order(saved, small_batches, tmp_path, fmt, capsys):
    rc = main(["predict", "--model-path", str(saved / "model"), "--dataset", str(saved / "data.csv"), "--backend", "ray",
               "--output-directory", str(tmp_path / "ray"), "--output-format", fmt])
    assert rc == 0, capsys.readouterr().err
    out = tmp_path / "ray" / f"predictions.{fmt}"
    assert json.loads(capsys.readouterr().out) == {"predictions": str(out), "rows": 1000}
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == [out.name], "no temporary folder is left"
    assert (out / "_SUCCESS").is_file() and len(list(out.glob("part-*"))) > 1
    assert main(["predict", "--model-path", str(saved / "model"), "--dataset", str(saved / "data.csv"), "--backend", "local",
                 "--output-directory", str(tmp_path / "local"), "--output-format", fmt]) == 0
    local_file = tmp_path / "local" / f"predictions.{fmt}"
    local = pd.read_parquet(local_file) if fmt == "parquet" else pd.read_csv(local_file, keep_default_na=False)
    assert_same_predictions(read_parts(out, fmt), local)
    if fmt == "parquet":
        assert_same_predictions(pd.read_parquet(out), local)  # the folder as one dataset: the same order
    if fmt == "csv":
        assert set(" ".join(local.tags_predictions).split()) <= {"the", "mat", "sat"}, "set predictions as text"


def test_evaluate_on_ray_merges_batch_statistics_into_the_local_metrics(saved, small_batches, tmp_path, capsys):
    """Rows without a label are skipped on both; every metric agrees to float rounding."""
    local = Model.load(saved / "model", backend="local").evaluate(saved / "data.jsonl")
    on_ray = Model.load(saved / "model", backend="ray").evaluate(saved / "data.jsonl")
    # Every entry, Ludwig's confusion matrices, per-class tables and binary curves included.
    assert {"confusion_matrix", "per_class_stats", "roc_curve", "precision_recall_curve"} <= set(local["flag"])
    assert_same_statistics(on_ray, local)
    assert main(["evaluate", "--model-path", str(saved / "model"), "--dataset", str(saved / "parts"), "--backend", "ray",
                 "--output-directory", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    wanted = Model.load(saved / "model").evaluate(saved / "parts")["label"]
    assert printed["label"] == pytest.approx({k: v for k, v in wanted.items() if k in printed["label"]}, rel=1e-6)


def test_data_without_the_models_columns_fails_before_the_job_naming_them(saved, tmp_path):
    every_type_frame(50).drop(columns=["cat", "vec"]).to_parquet(tmp_path / "other.parquet")
    with pytest.raises(DataError, match="lacks column\\(s\\) 'cat', 'vec'"):
        Model.load(saved / "model", backend="ray").predict(tmp_path / "other.parquet")


def test_a_failing_job_leaves_no_output_and_keeps_the_earlier_one(saved, small_batches, tmp_path, capsys):
    """The second file lacks a column: the job fails on the actors after parts were written."""
    (tmp_path / "data").mkdir()
    frame = every_type_frame(600)
    frame.to_csv(tmp_path / "data" / "a.csv", index=False)
    frame.drop(columns=["num"]).to_csv(tmp_path / "data" / "b.csv", index=False)
    earlier = tmp_path / "out" / "predictions.parquet"
    earlier.mkdir(parents=True)
    (earlier / "part-000000.parquet").write_bytes(b"earlier output")
    rc = main(["predict", "--model-path", str(saved / "model"), "--dataset", str(tmp_path / "data"), "--backend", "ray",
               "--output-directory", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "plait: error: the data lacks column(s) 'num' that" in err and "Traceback" not in err  # once: two features read it
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["predictions.parquet"], "the temporary folder is gone"
    assert [p.name for p in earlier.iterdir()] == ["part-000000.parquet"]
    assert (earlier / "part-000000.parquet").read_bytes() == b"earlier output"
    # The failed job's actors do not outlive the next job's start (left, they held CPUs that the
    # next job's pool, or an actor it restarted, waited for: a killed actor's job hung on it).
    with ray_predict._ray_job("the next job"):
        deadline = time.monotonic() + 10
        while prediction_actor_pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not prediction_actor_pids()


def prediction_actor_pids() -> list[int]:
    return session_processes(b"MapBatches(BatchActor)")


def test_a_killed_prediction_actor_loses_and_repeats_no_row(saved, small_batches, tmp_path):
    frame = pd.concat([every_type_frame(1000, seed=s) for s in range(4)], ignore_index=True)  # 63 batches of 64
    frame.to_parquet(tmp_path / "big.parquet", row_group_size=500)
    model = Model.load(saved / "model", backend="ray")
    # A prediction actor dies without a word once the job's temporary folder holds a part file.
    parts_written = lambda: any((tmp_path / "out").glob(".predictions.parquet.tmp-*/part-*"))  # noqa: E731
    with killing_one_when(parts_written, b"MapBatches(BatchActor)", pick=0) as killed:
        written = model.write_predictions(tmp_path / "big.parquet", tmp_path / "out")
    assert killed, "no actor was killed: the job ended before its first part file"
    assert written.rows == len(frame)
    on_ray = read_parts(tmp_path / "out" / "predictions.parquet", "parquet")
    assert_same_predictions(on_ray, local_predictions(saved, tmp_path / "big.parquet"))


def test_ray_datas_actor_tracker_made_in_a_trials_placement_group_outlives_the_trial():
    """A Tune trial's placement group captures the actors its code starts. Ray Data's one shared
    ActorLocationTracker, first made there, died with the trial, under the jobs of other trials
    (k-fold's folds at once failed with a SystemException): plait's job makes it outside."""
    import contextlib

    import ray
    from ray.data._internal.execution.node_trackers import get_or_create_actor_location_tracker
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    with contextlib.suppress(ValueError):  # made by an earlier test: start without it
        ray.kill(ray.get_actor("ActorLocationTracker", namespace="ActorLocationTracker"))

    @ray.remote(num_cpus=0.1)
    def a_trials_job_starts():
        with ray_predict._ray_job("a trial's job"):
            get_or_create_actor_location_tracker()  # what Ray Data's actor pool does

    group = placement_group([{"CPU": 0.1}])
    ray.get(group.ready(), timeout=60)
    in_the_group = PlacementGroupSchedulingStrategy(group, placement_group_capture_child_tasks=True)
    ray.get(a_trials_job_starts.options(scheduling_strategy=in_the_group).remote(), timeout=60)
    remove_placement_group(group)  # the trial ends
    time.sleep(1)
    tracker = ray.get_actor("ActorLocationTracker", namespace="ActorLocationTracker")
    assert ray.get(tracker.get_actor_locations.remote(["a"]), timeout=30) == {"a": None}


def test_the_actor_pool_fills_the_cluster_unless_told():
    from plait.backends.ray.batches import actor_plan
    from plait.config.backend import DistributedTrainerConfig

    pool = actor_plan(DistributedTrainerConfig(), {"CPU": 8})
    assert {k: pool[k] for k in ("num_workers", "use_gpu", "resources_per_worker")} == {
        "num_workers": 8, "use_gpu": False, "resources_per_worker": {"CPU": 0.88}}, "a CPU left for reading and writing"
    assert actor_plan(DistributedTrainerConfig(), {"CPU": 2})["resources_per_worker"] == {"CPU": 0.5}
    on_gpus = actor_plan(DistributedTrainerConfig(), {"CPU": 16, "GPU": 2})
    assert on_gpus["num_workers"] == 2 and on_gpus["use_gpu"] and on_gpus["resources_per_worker"]["GPU"] == 1.0
    told = actor_plan(DistributedTrainerConfig(num_workers=3, resources_per_worker={"CPU": 2}), {"CPU": 8})
    assert {k: told[k] for k in ("num_workers", "use_gpu", "resources_per_worker")} == {
        "num_workers": 3, "use_gpu": False, "resources_per_worker": {"CPU": 2}}


def test_the_actor_pool_needs_room_for_one_actor_only():
    from plait.backends.ray.batches import actor_plan
    from plait.backends.ray.cluster import Unschedulable
    from plait.config.backend import DistributedTrainerConfig

    many = DistributedTrainerConfig(num_workers=8, resources_per_worker={"CPU": 1})
    assert actor_plan(many, {"CPU": 4}, nodes=[{"CPU": 4.0}])["num_workers"] == 3  # the room there is, beside a read
    too_big = DistributedTrainerConfig(num_workers=2, resources_per_worker={"CPU": 4})
    with pytest.raises(Unschedulable, match=r"the Ray Data actor pool needs 1 x \(4 CPU\), but this Ray cluster "
                                            r"has room for 0: .* 2 nodes with 2 CPU"):
        actor_plan(too_big, {"CPU": 4}, nodes=[{"CPU": 2.0}, {"CPU": 2.0}])


def test_actors_that_would_take_every_cpu_leave_room_for_the_reads_or_are_refused():
    """A model trained with two workers of one CPU each, predicted on a 2-CPU cluster: two such
    actors would hold both CPUs and the 0.5-CPU read task would wait for one forever."""
    from plait.backends.ray.batches import actor_plan
    from plait.config.backend import DistributedTrainerConfig

    trained_with = DistributedTrainerConfig(num_workers=2, resources_per_worker={"CPU": 1})
    assert actor_plan(trained_with, {"CPU": 2}, nodes=[{"CPU": 2.0}])["num_workers"] == 1
    whole_node = DistributedTrainerConfig(num_workers=1, resources_per_worker={"CPU": 2})
    with pytest.raises(BackendError, match=r"resources_per_worker: a Ray Data actor of 2 CPU leaves no room for the "
                                           r"0.5-CPU tasks that read its data, on a cluster with 1 node with 2 CPU"):
        actor_plan(whole_node, {"CPU": 2}, nodes=[{"CPU": 2.0}])


# `plait experiment` on Ray, whose test split is evaluated and predicted by Ray Data jobs: in
# tests/test_run_directory_s3.py, with its run directory in a bucket.


@pytest.mark.parametrize("backend", ["ray", "local"])
@pytest.mark.parametrize("name", ["empty.csv", "empty.parquet"])
def test_cli_predict_on_an_input_without_rows_writes_the_usual_columns_and_no_rows(saved, tmp_path, backend, name, capsys):
    import pyarrow.parquet as pq

    empty = tmp_path / name
    header = every_type_frame(5).drop(columns=["label", "score", "flag", "tags"]).head(0)
    header.to_csv(empty, index=False) if name.endswith(".csv") else header.to_parquet(empty, index=False)
    assert main(["predict", "--model-path", str(saved / "model"), "--dataset", str(saved / "data.csv"),
                 "--backend", "local", "--output-directory", str(tmp_path / "some")]) == 0
    usual = pq.read_schema(tmp_path / "some" / "predictions.parquet")
    capsys.readouterr()
    rc = main(["predict", "--model-path", str(saved / "model"), "--dataset", str(empty), "--backend", backend,
               "--output-directory", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert json.loads(out) == {"predictions": str(tmp_path / "out" / "predictions.parquet"), "rows": 0}
    written = pq.read_table(tmp_path / "out" / "predictions.parquet")
    assert written.num_rows == 0 and written.schema.equals(usual)


def test_explanations_on_ray_equal_the_local_ones_row_for_row(saved, small_batches):
    """Integrated gradients as a Ray Data job, every class of each row: a DataFrame in one block,
    cut into batches of 64 whose outputs Ray streams back joined into one table (each batch
    numbered its rows from 0: offsetting them by the table gave rows 0-63 three times)."""
    frame = every_type_frame(150, seed=2)  # three batches
    # Feature-level only: tokens and heat maps (tests/explain/test_tokens.py) run the same batch
    # function, and on this model of every type they cost most of the test's time.
    options = {"output_feature_name": "label", "every_class": True, "steps": 10, "parts": False}
    local = Model.load(saved / "model", backend="local").explain(frame, **options)
    on_ray = Model.load(saved / "model", backend="ray").explain(frame, **options)
    assert on_ray.rows["row"].tolist() == [i // 3 for i in range(450)]
    pd.testing.assert_frame_equal(on_ray.rows, local.rows, check_exact=False, rtol=1e-5, atol=1e-5)
    assert on_ray.summary.keys() == local.summary.keys()
    for key, value in local.summary.items():
        assert on_ray.summary[key] == (pytest.approx(value, rel=1e-5, abs=1e-6) if key in ("importance", "max_abs_delta")
                                       else value), key


def test_collect_activations_on_ray_is_a_ray_data_job_with_the_local_rows_in_order(saved, small_batches):
    from plait.collect import collect_activations

    dataset = saved / "parts"
    names = [name for name, _ in Model.load(saved / "model").module.named_modules()]
    layers = ["combiner", next(name for name in names if name.startswith("heads."))]
    on_ray = collect_activations(Model.load(saved / "model", backend="ray"), layers, dataset)
    local = collect_activations(Model.load(saved / "model", backend="local"), layers, dataset)
    for (name, ray_array), (_, local_array) in zip(on_ray, local):
        assert ray_array.shape == local_array.shape and ray_array.shape[0] == 1000, name
        np.testing.assert_allclose(ray_array, local_array, rtol=1e-5, atol=1e-5, err_msg=name)
