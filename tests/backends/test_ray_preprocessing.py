"""Preprocessing on the Ray backend (Dask-on-Ray and Modin) against the local backend, on a real
local Ray cluster shared by the test session."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from plait.backends import get_backend, resolve_type
from plait.config import load_config
from plait.data.engines import get_engine
from plait.data.preprocess import preprocess

pytestmark = pytest.mark.usefixtures("ray_cluster")

SPLITS = ("training", "validation", "test")


def outputs(data) -> tuple[dict, str]:
    files = {s: [Path(f).read_bytes() for f in data.split_files(s)] for s in SPLITS}
    return files, (Path(data.location) / "metadata.json").read_text()


def without_key(result: tuple[dict, str]) -> tuple[dict, dict]:
    """Outputs of inputs that differ only in kind (a DataFrame and a Dask DataFrame of the same
    rows): the cache key differs with the input's identity, nothing else may."""
    files, metadata = result
    metadata = json.loads(metadata)
    metadata.pop("cache_key")
    return files, metadata


def parquet_parts(folder: Path, frame, rows_per_file: int) -> Path:
    """``frame`` as a folder of Parquet files ``part-<i>.parquet`` of ``rows_per_file`` rows."""
    folder.mkdir()
    for i, start in enumerate(range(0, len(frame), rows_per_file)):
        frame.iloc[start : start + rows_per_file].to_parquet(folder / f"part-{i}.parquet", index=False)
    return folder


def run(config: dict, source, engine, cache: Path):
    config = {**config, "backend": {**config.get("backend", {}), "cache_dir": str(cache)}}
    return preprocess(load_config(config), source, engine=engine, use_cache=False)


@pytest.mark.parametrize("fmt", ["data.parquet", "data.csv", "dataframe"])
@pytest.mark.parametrize("split", [{"type": "random"}, {"type": "stratify", "column": "label"}])
def test_dask_and_modin_write_the_same_bytes_as_local_for_every_feature_type(tmp_path, make_dataset, every_type_config, every_type_data, fmt, split):
    frame = every_type_data(600)
    source = frame if fmt == "dataframe" else make_dataset(frame, fmt)
    config = every_type_config(preprocessing={"split": split})
    local = outputs(run(config, source, get_engine("local", num_partitions=3), tmp_path / "local"))
    engines = {
        "dask": get_engine("dask", parallelism=4),
        "dask-streaming": get_engine("dask", parallelism=5, persist=False),
        "modin": get_engine("modin"),
    }
    for name, engine in engines.items():
        assert outputs(run(config, source, engine, tmp_path / name)) == local, f"{name} differs from local"


def with_other_inputs(frame, seed: int = 0):
    """``frame`` with a date, an H3 cell, a bag of words and a series per row (some missing)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = len(frame)
    digits = np.where(np.arange(15) < 4, rng.integers(0, 7, (n, 15)), 7).astype(np.int64)
    cells = (1 << 59) | (4 << 52) | (rng.integers(0, 122, n).astype(np.int64) << 45) | (
        digits << (42 - 3 * np.arange(15))).sum(1)
    days = rng.integers(0, 3000, n)
    frame = frame.assign(
        when=[str(np.datetime64("2015-01-01") + int(d)) + (" 10:30" if d % 3 else "") for d in days],
        cell=cells, words=[" ".join(rng.choice(list("xyz"), rng.integers(0, 6))) for _ in range(n)],
        series=[" ".join(f"{v:.3f}" for v in rng.normal(size=rng.integers(1, 9))) for _ in range(n)])
    frame.loc[::19, "when"] = None
    frame.loc[::29, "series"] = None
    return frame


def test_dask_and_modin_write_the_same_bytes_as_local_for_the_other_feature_types(tmp_path, make_dataset, make_config,
                                                                                  sequence_data):
    source = make_dataset(with_other_inputs(sequence_data(600)), "data.parquet")
    config = make_config([{"name": "src", "type": "sequence"}, {"name": "when", "type": "date"},
                          {"name": "cell", "type": "h3"}, {"name": "words", "type": "bag"},
                          {"name": "series", "type": "timeseries"}],
                         [{"name": "rev", "type": "text"}, {"name": "tags", "type": "sequence", "decoder": "tagger"},
                          {"name": "vec", "type": "vector"}, {"name": "dist", "type": "category_distribution"}])
    local = outputs(run(config, source, get_engine("local", num_partitions=3), tmp_path / "local"))
    for name, engine in {"dask": get_engine("dask", parallelism=4), "modin": get_engine("modin")}.items():
        assert outputs(run(config, source, engine, tmp_path / name)) == local, f"{name} differs from local"


@pytest.mark.parametrize("row_group_rows, parallelism", [(1000, None), (1000, 6), (70, None), (70, 4), (25, None)])
def test_parquet_row_groups_are_read_and_cut_in_parallel(tmp_path, every_type_config, every_type_data, row_group_rows, parallelism):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pandas(every_type_data(500), preserve_index=False), path, row_group_size=row_group_rows)
    config = every_type_config()
    local = outputs(run(config, str(path), get_engine("local"), tmp_path / "local"))
    engine = get_engine("dask", parallelism=parallelism, rows_per_partition=120)
    assert outputs(run(config, str(path), engine, tmp_path / "dask")) == local


def test_a_text_bpe_feature_is_identical_on_ray(tmp_path, make_dataset, make_config, every_type_data):
    path = make_dataset(every_type_data(300), "data.parquet")
    config = make_config([{"name": "txt", "type": "text", "preprocessing": {"tokenizer": "bpe", "most_common": 40}}],
                         [{"name": "label", "type": "category"}])
    local = outputs(run(config, path, get_engine("local"), tmp_path / "local"))
    assert outputs(run(config, path, get_engine("dask", parallelism=3), tmp_path / "dask")) == local


def test_directories_of_parquet_files_are_read_in_parallel(tmp_path, every_type_config, every_type_data):
    folder = parquet_parts(tmp_path / "parts", every_type_data(500), rows_per_file=100)
    config = every_type_config()
    local = outputs(run(config, str(folder), get_engine("local"), tmp_path / "local"))
    assert outputs(run(config, str(folder), get_engine("dask"), tmp_path / "dask")) == local


def test_dask_dataframes_are_accepted_as_input(tmp_path, every_type_config, every_type_data):
    import dask.dataframe as dd

    frame = every_type_data(300)
    config = every_type_config()
    local = without_key(outputs(run(config, frame, get_engine("local"), tmp_path / "local")))
    ddf = dd.from_pandas(frame, npartitions=3, sort=False)
    assert without_key(outputs(run(config, ddf, get_engine("dask"), tmp_path / "dask"))) == local


def test_an_empty_partition_is_handled(tmp_path, every_type_config, every_type_data):
    import dask.dataframe as dd
    import pandas as pd

    frame = every_type_data(200)
    parts = [dd.from_pandas(frame.iloc[:100], npartitions=1), dd.from_pandas(frame.iloc[:0], npartitions=1),
             dd.from_pandas(frame.iloc[100:], npartitions=1)]
    config = every_type_config()
    local = without_key(outputs(run(config, frame, get_engine("local"), tmp_path / "local")))
    assert without_key(outputs(run(config, dd.concat(parts), get_engine("dask"), tmp_path / "dask"))) == local
    assert isinstance(frame, pd.DataFrame)


# ---- choosing the backend --------------------------------------------------------------------------

def test_a_running_ray_is_detected_when_no_backend_is_named(every_type_config, caplog):
    caplog.set_level("INFO", logger="plait")
    assert resolve_type(load_config(every_type_config(backend={"type": "auto"}))) == "ray"
    assert "using the ray backend" in caplog.text


def test_an_explicit_local_backend_wins_over_a_running_cluster(every_type_config):
    config = load_config(every_type_config(backend={"type": "local"}))
    assert get_backend(config).name == "local"


def test_the_ray_backend_uses_the_configured_processor(every_type_config):
    config = load_config(every_type_config(backend={"type": "ray", "processor": {"type": "modin"}}))
    backend = get_backend(config)
    assert backend.data_engine().name == "modin"
    backend.shutdown()  # joined, not started, by this backend: the session cluster keeps running
    import ray

    assert ray.is_initialized()


def test_cli_preprocess_on_ray_matches_local(tmp_path, make_dataset, every_type_config, every_type_data, write_config):
    from plait.cli import main

    path = make_dataset(every_type_data(300), "data.parquet")
    config = write_config(every_type_config())
    results = []
    for backend in ("local", "ray"):
        assert main(["preprocess", "--config", config, "--dataset", path, "--backend", backend,
                     "--cache-dir", str(tmp_path / backend)]) == 0
    local, ray_ = (next((tmp_path / b).iterdir()) for b in ("local", "ray"))
    for entry in (local, ray_):
        results.append(sorted((p.relative_to(entry).as_posix(), p.read_bytes()) for p in entry.rglob("*") if p.is_file()))
    assert results[0] == results[1]


def test_an_unreachable_ray_address_fails_fast_with_the_address(tmp_path, make_dataset, every_type_config, every_type_data, write_config):
    path = make_dataset(every_type_data(50), "data.csv")
    config = write_config(every_type_config(backend={"type": "auto"}))
    env = {"RAY_ADDRESS": "127.0.0.1:9", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "plait", "preprocess", "--config", config, "--dataset", path],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2
    assert "127.0.0.1:9" in result.stderr and "--backend local" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(params=["a bare socket", "an HTTP server"])
def not_ray(request):
    """host:port of a loopback listener that accepts connections but is no Ray cluster."""
    if request.param == "a bare socket":  # the kernel completes the TCP handshake; nothing ever answers
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(8)
            yield f"127.0.0.1:{listener.getsockname()[1]}"
        return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_ray_address_where_something_else_listens_fails_with_the_address(not_ray, make_dataset, every_type_config,
                                                                           every_type_data, write_config):
    """Ray would retry such an address forever. In a subprocess: this session's Ray stays as it is."""
    path = make_dataset(every_type_data(50), "data.csv")
    config = write_config(every_type_config(backend={"type": "ray"}))
    env = {"RAY_ADDRESS": not_ray, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[2])}
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "plait", "preprocess", "--config", config, "--dataset", path,
                             "--backend", "ray"], capture_output=True, text=True, env=env, timeout=60)
    assert time.monotonic() - started < 60
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.count("plait: error:") == 1 and result.stderr.startswith("plait: error: ")
    assert f"the address {not_ray} accepts connections but does not answer as a Ray cluster" in result.stderr
    assert "RAY_ADDRESS" in result.stderr and "--backend local" in result.stderr


# ---- the cache on S3 (a real S3 server on loopback) --------------------------------------------------

@pytest.mark.parametrize("engine", ["local", "dask"])
def test_the_cache_on_s3_with_credentials_from_a_dict(s3_bucket, every_type_config, every_type_data, engine, caplog):
    bucket, credentials = s3_bucket
    config = load_config(every_type_config(backend={"cache_dir": f"s3://{bucket}/cache", "cache_credentials": credentials}))
    frame = every_type_data(200)
    first = preprocess(config, frame, engine=get_engine(engine))
    assert first.location.startswith(f"{bucket}/cache/") and not first.from_cache
    assert first.read_split("training").num_rows == first.rows("training")
    caplog.set_level("INFO", logger="plait")
    assert preprocess(config, frame, engine=get_engine(engine)).from_cache
    for secret in (credentials["secret"], credentials["key"]):
        assert secret not in caplog.text


def test_the_cache_on_s3_with_credentials_from_a_json_file(tmp_path, s3_bucket, every_type_config, every_type_data):
    bucket, credentials = s3_bucket
    path = tmp_path / "creds.json"
    path.write_text(json.dumps(credentials))
    config = load_config(every_type_config(backend={"cache_dir": f"s3://{bucket}/c", "cache_credentials": str(path)}))
    data = preprocess(config, every_type_data(100), engine=get_engine("dask"))
    assert data.rows("training") > 0 and data.fs.exists(f"{data.location}/metadata.json")


def test_a_dataset_on_s3_is_read_by_the_workers(s3_bucket, tmp_path, every_type_config, every_type_data):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import s3fs

    bucket, credentials = s3_bucket
    fs = s3fs.S3FileSystem(key=credentials["key"], secret=credentials["secret"],
                           client_kwargs={"endpoint_url": credentials["endpoint_url"]})
    table = pa.Table.from_pandas(every_type_data(300), preserve_index=False)
    for i in range(2):  # a folder of two files, several row groups each
        with fs.open(f"{bucket}/data/part-{i}.parquet", "wb") as handle:
            pq.write_table(table.slice(150 * i, 150), handle, row_group_size=40)
    config = every_type_config(backend={"cache_credentials": credentials})
    url = f"s3://{bucket}/data"
    local = outputs(run(config, url, get_engine("local"), tmp_path / "local"))
    assert outputs(run(config, url, get_engine("dask", parallelism=5), tmp_path / "dask")) == local


def test_a_missing_bucket_names_the_bucket_not_the_secret(s3_bucket, every_type_config, every_type_data):
    from plait.errors import CacheError

    _, credentials = s3_bucket
    config = load_config(every_type_config(backend={"cache_dir": "s3://no-such-bucket/x", "cache_credentials": credentials}))
    with pytest.raises(CacheError) as info:
        preprocess(config, every_type_data(50))
    assert "no-such-bucket" in str(info.value)
    assert credentials["secret"] not in str(info.value)


def test_rejected_credentials_name_the_bucket_not_the_secret(s3_server, s3_bucket, every_type_config, every_type_data):
    import urllib.request

    from plait.errors import CacheError

    bucket, _ = s3_bucket
    wrong = {"key": "not-a-key", "secret": "not-the-secret-value", "endpoint_url": s3_server}
    config = load_config(every_type_config(backend={"cache_dir": f"s3://{bucket}/x", "cache_credentials": wrong}))

    def require_auth(count: str) -> None:  # moto's switch: requests after `count` must be signed by a known user
        request = urllib.request.Request(f"{s3_server}/moto-api/reset-auth", data=count.encode(), method="POST",
                                         headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(request).close()

    require_auth("0")
    try:
        with pytest.raises(CacheError) as info:
            preprocess(config, every_type_data(50))
    finally:
        require_auth("inf")
    assert bucket in str(info.value) and "cache_credentials" in str(info.value)
    assert wrong["secret"] not in str(info.value) and wrong["key"] not in str(info.value)


# ---- failures ---------------------------------------------------------------------------------

class KillWorkerOnce:
    """Wraps a per-partition function; the first call anywhere kills its Ray worker process."""

    def __init__(self, fn, marker: str):
        self.fn, self.marker = fn, marker

    def __call__(self, part):
        import os

        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)  # a crash, not an exception: the worker process dies
        return self.fn(part)


def test_a_worker_dying_mid_preprocessing_is_retried_and_the_cache_is_complete(tmp_path, every_type_config, every_type_data):
    from ray import cloudpickle

    from plait.data.engines.dask import DaskEngine

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import tests/
    marker = str(tmp_path / "killed")

    class DyingEngine(DaskEngine):
        def map(self, data, fn):
            return super().map(data, KillWorkerOnce(fn, marker))

    frame = every_type_data(300)
    config = every_type_config()
    local = outputs(run(config, frame, get_engine("local"), tmp_path / "local"))
    assert outputs(run(config, frame, DyingEngine(parallelism=3), tmp_path / "dask")) == local
    assert Path(marker).exists()


def test_globs_and_ray_datasets_are_accepted_as_input(tmp_path, every_type_config, every_type_data):
    import ray.data

    frame = every_type_data(300)
    folder = parquet_parts(tmp_path / "parts", frame, rows_per_file=100)
    (folder / "notes.txt").write_text("not data")
    config = every_type_config()
    glob = str(folder / "*.parquet")
    local = outputs(run(config, glob, get_engine("local"), tmp_path / "local"))
    assert outputs(run(config, glob, get_engine("dask"), tmp_path / "dask")) == local
    dataset = ray.data.from_pandas([frame.iloc[:150], frame.iloc[150:]])
    assert without_key(outputs(run(config, dataset, get_engine("dask"), tmp_path / "ray-data"))) == without_key(local)


@pytest.mark.parametrize("engine", ["dask", "modin"])
@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_files_that_disagree_on_columns_are_refused_by_every_engine(tmp_path, engine, suffix):
    import pandas as pd

    from plait.errors import DataError

    folder = tmp_path / "parts"
    folder.mkdir()
    for i, frame in enumerate([pd.DataFrame({"x1": [1.0, 2.0], "y": [0, 1]}), pd.DataFrame({"X1": [3.0], "y": [1]})]):
        path = folder / f"part-{i}.{suffix}"
        frame.to_parquet(path) if suffix == "parquet" else frame.to_csv(path, index=False)
    config = {"input_features": [{"name": "x1", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}]}
    with pytest.raises(DataError, match=r"part-0\.\w+' alone has 'x1', .*part-1\.\w+' alone has 'X1'"):
        run(config, str(folder), get_engine(engine), tmp_path / "cache")


@pytest.mark.parametrize(("engine", "name"), [("modin", "data.csv"), ("modin", "data.parquet"), ("dask", "data.csv")])
def test_inline_cache_credentials_go_to_the_cache_only_not_to_a_local_dataset(
        tmp_path, make_dataset, make_config, s3_bucket, engine, name):
    bucket, credentials = s3_bucket
    rows = 40
    path = make_dataset({"x": [float(i) for i in range(rows)], "y": [i % 2 for i in range(rows)]}, name)
    config = make_config([{"name": "x", "type": "number"}], [{"name": "y", "type": "binary"}],
                         backend={"cache_dir": f"s3://{bucket}/cache", "cache_credentials": credentials})
    data = preprocess(load_config(config), path, engine=get_engine(engine), use_cache=False)
    assert data.location.startswith(f"{bucket}/cache/") or data.location.startswith(f"s3://{bucket}/cache/")
    assert sum(data.rows(split) for split in SPLITS) == rows
