"""Shared helpers: datasets and configs in tmp_path, feature processors fitted on Arrow arrays."""

from __future__ import annotations

import logging
import socket
from functools import reduce
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
import yaml

from plait.config import load_config
from plait.features import processors_for

# ---- three processes at once (scripts/test.sh) ------------------------------------------------------

PROCESS_MODULES = ("tests/backends/", "tests/search/", "tests/serving/test_ray_serve.py",
                   "tests/benchmarks/test_device_kit.py", "tests/training/strategies/")
"""Modules whose tests start clusters, launchers or process groups of their own (or time them)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "cluster: uses the session's Ray cluster (scripts/test.sh runs these in a "
                                       "process of their own)")
    config.addinivalue_line("markers", "processes: starts clusters, launchers or process groups of its own "
                                       "(scripts/test.sh runs these in a third process)")


def pytest_itemcollected(item):
    """Mark each test for one of scripts/test.sh's three processes: the tests of the session's Ray
    cluster (``cluster``), those of PROCESS_MODULES that start processes of their own
    (``processes``), and the rest. Each process runs its tests one after another. (A second
    session cluster in the ``processes`` process, for the LLM tests on Ray, ended no sooner: two
    Ray instances on two cores slowed each other's tests by as much as they moved.)"""
    where = Path(item.path).relative_to(item.config.rootpath).as_posix()
    if "ray_cluster" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.cluster)
    elif where.startswith(PROCESS_MODULES):
        item.add_marker(pytest.mark.processes)


# ---- datasets and configs ----------------------------------------------------------------------

def write_dataset(path: Path, rows: Any) -> str:
    """Write rows (a list of dicts, a dict of columns or a DataFrame) in the format the file name
    says: .csv, .tsv, .parquet, .json (an array of records) or .jsonl."""
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        df.to_csv(path, index=False)
    elif suffix == ".tsv":
        df.to_csv(path, sep="\t", index=False)
    elif suffix == ".parquet":
        df.to_parquet(path, index=False)
    elif suffix == ".json":
        df.to_json(path, orient="records")
    elif suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        raise ValueError(f"no writer for {path.name}")
    return str(path)


@pytest.fixture
def make_dataset(tmp_path):
    """make_dataset(rows, name="data.csv") -> the path of a file holding ``rows`` in tmp_path."""

    def make(rows: Any, name: str = "data.csv") -> str:
        return write_dataset(tmp_path / name, rows)

    return make


@pytest.fixture
def cache_dir(tmp_path) -> str:
    return str(tmp_path / "cache")


@pytest.fixture
def make_config(cache_dir):
    """make_config(inputs, outputs, **sections) -> a config dict whose cache is in tmp_path.

    The backend is local unless a test says otherwise: the session's Ray cluster (started by
    the Ray tests) would otherwise be detected and used by every later test."""

    def make(inputs: list[dict], outputs: list[dict], **sections) -> dict:
        backend = {"type": "local", "cache_dir": cache_dir, **sections.pop("backend", {})}
        return {"input_features": inputs, "output_features": outputs, "backend": backend, **sections}

    return make


@pytest.fixture
def write_config(tmp_path):
    """write_config(config_dict_or_yaml_text, name="config.yaml") -> the path of the YAML file."""

    def write(config: dict | str, name: str = "config.yaml") -> str:
        path = tmp_path / name
        path.write_text(config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False))
        return str(path)

    return write


# ---- feature processors ----------------------------------------------------------------------

def _processor(ftype: str, preprocessing: dict | None = None, output: bool = False, **feature):
    spec = {"name": "f", "type": ftype, **feature}
    if preprocessing is not None:
        spec["preprocessing"] = preprocessing
    other = {"name": "other", "type": "binary"}
    config = load_config({"input_features": [other if output else spec], "output_features": [spec if output else other]})
    processors = processors_for(config)
    return processors[-1] if output else processors[0]


def _as_array(values) -> pa.Array:
    return values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)


def _fit(processor, *partitions) -> dict:
    """Metadata fitted the way an engine does it: prepare and partial_stats per partition,
    merge_stats across them, finalize once."""
    stats = [processor.partial_stats(processor.prepare(_as_array(p))) for p in partitions]
    return processor.finalize(reduce(processor.merge_stats, stats))


def _transform(processor, values, metadata: dict) -> list:
    return processor.transform(processor.prepare(_as_array(values)), metadata).to_pylist()


@pytest.fixture
def make_processor():
    """make_processor(type, preprocessing=None, output=False, **feature) -> a FeatureProcessor
    for feature ``f`` built through load_config, so config defaults apply."""
    return _processor


@pytest.fixture
def fit():
    """fit(processor, *partitions) -> finalized metadata."""
    return _fit


@pytest.fixture
def fit_transform():
    """fit_transform(processor, training_values, values=None) -> (metadata, transformed list);
    ``values`` defaults to the training values."""

    def run(processor, training, values=None):
        metadata = _fit(processor, training)
        return metadata, _transform(processor, training if values is None else values, metadata)

    return run


@pytest.fixture
def transform():
    """transform(processor, values, metadata) -> the transformed values as a list."""
    return _transform


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test: tiny layers train fastest so, and do not fight other
    processes for the cores (on a busy machine, two threads made a small convolution forty times
    slower than one)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _restore_plait_logger():
    """plait.cli.main configures the 'plait' logger (own handler, no propagation); undo it so
    caplog sees records in later tests."""
    logger = logging.getLogger("plait")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


# ---- a dataset with every feature type -------------------------------------------------------

EVERY_TYPE_INPUTS = [
    {"name": "num", "type": "number", "preprocessing": {"normalization": "iq"}},
    {"name": "num_mean", "column": "num", "type": "number", "preprocessing": {"missing_value_strategy": "fill_with_mean"}},
    {"name": "cat", "type": "category", "preprocessing": {"most_common": 5}},
    {"name": "txt", "type": "text"},
    {"name": "txt_bpe", "column": "txt", "type": "text", "preprocessing": {"tokenizer": "bpe", "most_common": 40}},
    {"name": "flag", "type": "binary"},
    {"name": "tags", "type": "set"},
    {"name": "vec", "type": "vector", "preprocessing": {"missing_value_strategy": "fill_with_mean"}},
]
EVERY_TYPE_OUTPUTS = [{"name": "label", "type": "category"}, {"name": "score", "type": "number"}]


def every_type_frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Random rows for EVERY_TYPE_INPUTS/OUTPUTS, with missing values in several columns."""
    import numpy as np

    rng = np.random.default_rng(seed)
    words = ["the", "cat", "sat", "on", "mat", "dog!", "Hello,", "lowest", "newer"]
    df = pd.DataFrame({
        "num": rng.normal(10, 3, n).round(4),
        "cat": rng.choice(list("abcdefgh"), n),
        "txt": [" ".join(rng.choice(words, rng.integers(1, 9))) for _ in range(n)],
        "flag": rng.choice(["yes", "no"], n),
        "tags": [" ".join(rng.choice(list("wxyz"), rng.integers(0, 4), replace=False)) for _ in range(n)],
        "vec": [" ".join(f"{v:.3f}" for v in rng.normal(size=3)) for _ in range(n)],
        "label": rng.choice(["p", "q", "r"], n),
        "score": rng.normal(size=n),
    })
    df.loc[::17, "num"] = None
    df.loc[::13, "cat"] = None
    df.loc[::11, "txt"] = None
    df.loc[::19, "vec"] = None
    df.loc[::23, "label"] = None
    return df


@pytest.fixture
def every_type_config(make_config):
    """every_type_config(**sections) -> a config dict for every_type_frame's columns."""

    def make(**sections) -> dict:
        return make_config([dict(f) for f in EVERY_TYPE_INPUTS], [dict(f) for f in EVERY_TYPE_OUTPUTS], **sections)

    return make


@pytest.fixture
def every_type_data():
    """every_type_data(n=400, seed=0) -> a DataFrame with a column for every feature type."""
    return every_type_frame


# ---- real engines: one local Ray cluster and one S3 server per test session --------------------

@pytest.fixture(scope="session")
def ray_cluster():
    """A real local Ray instance shared by every test that needs one, shut down at the end.

    Four logical CPUs on this 2-core machine: Ray's CPU count is a scheduling token, and tasks
    that wait on other tasks (Dask-on-Ray reductions, Ray Data reads beside training workers)
    must not starve each other of tokens.
    """
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Ray's workers get this environment when they start: search trials tracked by the tests
    # log to MLflow's file store, which MLflow 3 opens only when allowed (tests/search/test_run.py).
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    # Idle workers kept for the next test's tasks: Ray keeps as many as it has CPUs and ends the
    # rest after a second, so each test's read, Dask and Ray Data tasks started processes that
    # imported plait again (scripts/profile_suite.py: Ray's workers spent about 530 of the suite's
    # 2,635 CPU-seconds before their first task).
    os.environ.setdefault("RAY_num_workers_soft_limit", "16")
    os.environ.setdefault("RAY_idle_worker_killing_time_threshold_ms", "600000")
    # Ray Train starts a preemption-watcher actor for every worker group (a process, ~2 CPU-s
    # under the suite's load); plait's workers watch their own nodes for drains
    # (plait.backends.ray.preemption), and the one test of a drain, tests/backends/test_ray_multinode.py,
    # runs on a cluster of its own, with Ray's watcher on as users have it.
    os.environ.setdefault("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=4, object_store_memory=1 << 30, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (moto in server mode) on loopback; yields its endpoint URL."""
    server_module = pytest.importorskip("moto.server")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{server._server.server_port}"
    server.stop()


@pytest.fixture
def env_s3fs():
    """s3fs filesystems made from the environment afresh in this test, and after it: fsspec
    keeps one instance per set of arguments, so an instance an earlier test made with other
    AWS_* variables would still reach that test's server."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh bucket on the loopback S3 server; yields (bucket name, credentials dict)."""
    import uuid

    import boto3

    credentials = {"key": "plait-test-key", "secret": "plait-test-secret-value", "endpoint_url": s3_server}
    name = f"plait-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_server, aws_access_key_id=credentials["key"],
                 aws_secret_access_key=credentials["secret"], region_name="us-east-1").create_bucket(Bucket=name)
    return name, credentials


@pytest.fixture
def cli_error(capsys):
    """cli_error(*args) -> the error line of `plait ARGS`, after checking that it exits 2 with a
    single `plait: error:` line and no traceback (other stderr lines are progress logging)."""
    from plait.cli import main

    def run(*args) -> str:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        assert code == 2, err
        errors = [line for line in err.splitlines() if line.startswith("plait: error: ")]
        assert "Traceback" not in err and err.count("plait: error:") == 1 and len(errors) == 1, err
        return errors[0]

    return run


@pytest.fixture
def cli(capsys):
    """cli(*args) -> (exit code, stdout, stderr) of plait.cli.main, in this process."""
    from plait.cli import main

    def run(*args) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


# ---- token sequences, and outputs computed from them ------------------------------------------------

def sequence_frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """Sequences of letters (some missing) with their reverse, letter counts, a distribution from
    two of the counts, and each letter tagged vowel (V) or consonant (C)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    src = [" ".join(rng.choice(list("abcdef"), rng.integers(1, 7))) for _ in range(n)]
    frame = pd.DataFrame({"src": src, "rev": [" ".join(s.split()[::-1]) for s in src],
                          "vec": [" ".join(str(s.count(c)) for c in "abc") for s in src],
                          "dist": [" ".join(str(s.count(c) + 1) for c in "ab") for s in src],
                          "tags": [" ".join("V" if t in "ae" else "C" for t in s.split()) for s in src]})
    frame.loc[::17, "src"] = None
    frame.loc[::23, "rev"] = None
    return frame


@pytest.fixture
def sequence_data():
    """sequence_data(n=300, seed=0) -> a DataFrame of sequences and outputs computed from them."""
    return sequence_frame


# ---- a finished run, for the tests of what reads one (plait visualize, plait report) ----------------

CLASSIFIER_RUN_CONFIG = {
    "input_features": [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"},
                       {"name": "c", "type": "category"}],
    "output_features": [{"name": "label", "type": "category"}, {"name": "flag", "type": "binary"}],
    "trainer": {"epochs": 3, "batch_size": 32},
}


@pytest.fixture(scope="session")
def classifier_run(tmp_path_factory) -> Path:
    """A plait experiment of a category and a binary output on 200 synthesized rows (trained
    once per session, in about 3 s): its run directory, whose data.csv is beside runs/."""
    from cli_runs import experiment_with_the_cli

    return experiment_with_the_cli(tmp_path_factory.mktemp("classifier_run"), CLASSIFIER_RUN_CONFIG)
