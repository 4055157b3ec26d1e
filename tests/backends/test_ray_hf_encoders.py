"""Pretrained Hugging Face text encoders on Ray: tokenizing, and the frozen encoder's cached
output, run in Dask tasks and write the bytes the local backend writes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from hf_models import write_tiny_bert
from plait.config import load_config
from plait.data.engines import get_engine
from plait.data.preprocess import preprocess

pytest.importorskip("ray")
pytestmark = pytest.mark.usefixtures("ray_cluster")


def digest(location: str) -> str:
    files = sorted(Path(location).rglob("*.parquet"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()


def texts(rows: int) -> pd.DataFrame:
    words = ["good", "bad", "movie", "plot", "was", "very", "not", "fun", "slow", "the"]
    return pd.DataFrame({"tokens": [" ".join(words[(i * k) % 10] for k in range(1, 2 + i % 9)) for i in range(rows)],
                         "embedded": [" ".join(words[(i + k) % 10] for k in range(i % 5)) for i in range(rows)],
                         "label": [i % 3 == 0 for i in range(rows)]})


def hf_config(make_config, folder: Path) -> dict:
    encoder = {"type": "bert", "pretrained_model_name_or_path": str(folder), "reduce_output": "mean"}
    return make_config([{"name": "tokens", "type": "text", "encoder": {**encoder, "trainable": True}},
                        {"name": "embedded", "type": "text", "encoder": encoder,
                         "preprocessing": {"cache_encoder_embeddings": True}}],
                       [{"name": "label", "type": "binary"}], trainer={"epochs": 1, "batch_size": 16})


def test_dask_on_ray_writes_the_tokens_and_embeddings_the_local_backend_writes(tmp_path, make_config):
    config = load_config(hf_config(make_config, write_tiny_bert(tmp_path / "bert")))
    frame = texts(150)
    local = preprocess(config, frame, use_cache=False)
    dask = preprocess(config, frame, engine=get_engine("dask", parallelism=5), use_cache=False)
    assert local.metadata["features"] == dask.metadata["features"]
    assert local.metadata["features"]["embedded"]["cached_embedding_size"] == 32
    assert digest(local.location) == digest(dask.location)

