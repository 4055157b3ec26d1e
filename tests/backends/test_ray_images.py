"""Images on Ray: decoding in Dask tasks writes the bytes the local backend writes; a folder of
new images predicted as a Ray Data job gives the local predictions; and an image dataset three
times the size of Ray's object store streams through training on Ray Train, augmented on the
worker (a Ray instance of its own, in a subprocess, with a 75 MiB store: Ray's smallest)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from image_data import png_bytes, shapes
from plait.api import Model
from plait.config import load_config
from plait.data.engines import get_engine
from plait.data.preprocess import preprocess

pytest.importorskip("ray")

STORE_BYTES = 75 * 2**20  # Ray's smallest object store: the least data that is still twice the store
IMAGE_SIDE = 128


def digest(location: str) -> str:
    files = sorted(Path(location).rglob("*.parquet"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()


@pytest.mark.usefixtures("ray_cluster")
def test_dask_on_ray_writes_the_image_cache_the_local_backend_writes(tmp_path, make_config):
    frame = shapes(tmp_path / "images", rows=60, size=20)
    frame.to_csv(tmp_path / "data.csv", index=False)
    config = load_config(make_config([{"name": "image", "type": "image", "preprocessing": {"infer_image_sample_size": 9}}],
                                     [{"name": "shape", "type": "category"}]))
    local = preprocess(config, str(tmp_path / "data.csv"), use_cache=False)
    dask = preprocess(config, str(tmp_path / "data.csv"), engine=get_engine("dask", parallelism=7), use_cache=False)
    assert local.metadata["features"] == dask.metadata["features"]
    assert digest(local.location) == digest(dask.location)


@pytest.mark.usefixtures("ray_cluster")
def test_a_folder_of_images_is_predicted_as_a_ray_data_job_as_locally(tmp_path, make_config):
    shapes(tmp_path / "images", rows=60, size=20).to_csv(tmp_path / "data.csv", index=False)
    config = make_config([{"name": "image", "type": "image"}], [{"name": "shape", "type": "category"}],
                         trainer={"epochs": 1, "batch_size": 16})
    local = Model(config)
    local.train(dataset=str(tmp_path / "data.csv"), progress_bar=False)
    local.save(tmp_path / "model")
    shapes(tmp_path / "new", rows=7, size=20, seed=3)
    on_ray = Model.load(tmp_path / "model", backend="ray").predict(str(tmp_path / "new"))
    assert on_ray["image"].tolist() == sorted(str(p) for p in (tmp_path / "new").iterdir())
    pd.testing.assert_frame_equal(on_ray, local.predict(str(tmp_path / "new")), check_exact=False, atol=1e-6)


SCRIPT = """
import json, sys
import ray
ray.init(address="local", num_cpus=2, object_store_memory={store}, include_dashboard=False, log_to_driver=False)
from plait.api import Model
model = Model(json.loads(sys.argv[1]))
result = model.train(dataset=sys.argv[2], progress_bar=False)
print(json.dumps({{"epochs": len(result.training_statistics), "from_cache": result.preprocessed.from_cache}}))
"""


def gradients(rows: int, side: int, levels: int = 8) -> pd.DataFrame:
    """Images that brighten left to right or right to left (label ``y``), at a few brightness
    levels, as PNG bytes (each distinct image encoded once)."""
    ramp = np.broadcast_to(np.linspace(0, 255, side), (side, side))
    encoded = {(rising, level): png_bytes(np.repeat(((ramp if rising else ramp[:, ::-1]) * (0.5 + level / (2 * levels))
                                                     ).astype(np.uint8)[:, :, None], 3, axis=2))
               for rising in (False, True) for level in range(levels)}
    keys = [(bool(i % 2), (i // 2) % levels) for i in range(rows)]
    return pd.DataFrame({"image": [encoded[k] for k in keys], "y": [k[0] for k in keys]})


def test_an_image_dataset_twice_the_object_store_streams_through_training(tmp_path):
    rows = 2 * STORE_BYTES // (IMAGE_SIDE * IMAGE_SIDE * 3) + 200
    path = tmp_path / "images.parquet"
    pq.write_table(pa.Table.from_pandas(gradients(rows, IMAGE_SIDE)), path, row_group_size=1000)
    config = {
        "input_features": [{"name": "image", "type": "image", "encoder": {
            "type": "stacked_cnn", "conv_layers": [{"out_channels": 4, "kernel_size": 8, "stride": 8,
                                                    "pool_kernel_size": 4}], "output_size": 8},
            # Drawn on the training worker, for every image of every batch.
            "augmentation": [{"type": "random_horizontal_flip"}, {"type": "random_contrast", "min": 0.8, "max": 1.2}]}],
        "output_features": [{"name": "y", "type": "binary"}],
        "preprocessing": {"split": {"probabilities": [1.0, 0.0, 0.0]}},  # every row streams through training
        "trainer": {"epochs": 1, "batch_size": 128},
        "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")},
    }
    # Preprocessed here, by the local backend: the run on Ray finds the cache and only trains.
    data = preprocess(load_config(config), str(path))
    assert data.rows("training") * IMAGE_SIDE * IMAGE_SIDE * 3 >= 2 * STORE_BYTES
    ray_config = {**config, "backend": {"type": "ray", "cache_dir": str(tmp_path / "cache"),
                                        "trainer": {"num_workers": 1},
                                        "loader": {"fully_executed": False, "window_size_bytes": 8 * 2**20}}}
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2]), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(store=STORE_BYTES), json.dumps(ray_config), str(path)],
                            capture_output=True, text=True, timeout=400, cwd=tmp_path,
                            env={**env, "RAY_AUTH_MODE": "disabled"})
    assert result.returncode == 0, result.stderr[-4000:]
    outcome = json.loads(next(line for line in reversed(result.stdout.splitlines()) if line.startswith("{")))
    assert outcome == {"epochs": 1, "from_cache": True}
