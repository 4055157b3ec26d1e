"""persist: false on a small scale: a dataset three times the size of Ray's object store is
preprocessed on a Ray instance of its own (started in a subprocess with a 75 MiB store, Ray's smallest), with
the same bytes as the local backend. The same path at full scale, under a memory cgroup, is
``benchmarks/preprocess.py --no-persist --memory-limit`` (see benchmarks/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from plait.config import load_config
from plait.data.engines import get_engine
from plait.data.preprocess import preprocess

pytest.importorskip("ray")

STORE_BYTES = 75 * 2**20  # Ray's smallest object store: the least data that is still three times the store

SCRIPT = """
import json, sys
import ray
ray.init(address="local", num_cpus=2, object_store_memory={store}, include_dashboard=False, log_to_driver=False)
from plait.config import load_config
from plait.data.engines import get_engine
from plait.data.preprocess import preprocess
config = load_config(json.loads(sys.argv[1]))
data = preprocess(config, sys.argv[2], engine=get_engine("dask", parallelism=12, persist=False), use_cache=False)
print(json.dumps({{"location": data.location}}))
"""


def wide_table(rows: int, width: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=rows * width)), width)
    x = rng.normal(size=rows)
    return pa.table({
        "vec": vectors.cast(pa.list_(pa.float64())),
        "x": x,
        "c": pa.array(rng.choice(["a", "b", "c"], rows)),
        "y": x + rng.normal(size=rows) > 0,
    })


def files_of(location: str) -> dict[str, bytes]:
    root = Path(location)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_dataset_three_times_the_object_store_streams_through_with_persist_false(tmp_path):
    table = wide_table(rows=38_500, width=768)
    assert table.nbytes >= 3 * STORE_BYTES
    path = tmp_path / "wide.parquet"
    pq.write_table(table, path, row_group_size=3_500)
    config = {
        "input_features": [{"name": "vec", "type": "vector"}, {"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
        "output_features": [{"name": "y", "type": "binary"}],
        "backend": {"type": "local", "cache_dir": str(tmp_path / "local")},
    }
    local = preprocess(load_config(config), str(path), engine=get_engine("local"), use_cache=False)

    ray_config = {**config, "backend": {"type": "ray", "cache_dir": str(tmp_path / "ray"), "processor": {"persist": False}}}
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(store=STORE_BYTES), json.dumps(ray_config), str(path)],
        capture_output=True, text=True, timeout=300, env={**env, "RAY_AUTH_MODE": "disabled"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    location = json.loads(result.stdout.strip().splitlines()[-1])["location"]
    assert files_of(location) == files_of(local.location)
