"""The Ray Data loader on the session's real Ray cluster: shards that hold every row exactly once
per epoch, for two consumers reading at the same time, materialized, streamed and windowed."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from plait.backends.ray.loader import (ShardBatches, exactly_once_data_config, filler_table, shuffle_rows,
                                       split_datasets)
from plait.config import load_config
from plait.config.backend import LoaderConfig
from plait.data.preprocess import preprocess

pytestmark = pytest.mark.usefixtures("ray_cluster")

ROWS = 3001  # odd, and not a multiple of the batch size: the shards cannot come out even


def cache_of(folder, rows: int):
    """A preprocessed cache of ``rows`` rows whose ``row_id`` feature (not normalized) names each row."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"row_id": np.arange(rows, dtype=float), "x": rng.normal(size=rows), "y": rng.random(rows) > 0.5})
    config = load_config({
        "input_features": [{"name": "row_id", "type": "number", "preprocessing": {"normalization": "none"}},
                           {"name": "x", "type": "number"}],
        "output_features": [{"name": "y", "type": "binary"}],
        "preprocessing": {"split": {"probabilities": [0.9, 0.1, 0.0]}},
        "backend": {"type": "local", "cache_dir": str(folder / "cache")},
    })
    return config, preprocess(config, df, seed=1)


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    return cache_of(tmp_path_factory.mktemp("loader"), ROWS)


def read_batches(config, data, loader: dict, workers: int, epochs: int = 2, batch_size: int = 64,
                 read_ahead: bool = False) -> list[list[list[list[int]]]]:
    """Row ids of each batch each worker got, per epoch: ``[epoch][worker][batch] -> ids``,
    read concurrently as Ray Train workers read them."""
    settings = LoaderConfig(**loader)  # the ray backend's loader section
    # Only the training split is read: configuring the validation split too would start a
    # streaming-split coordinator actor (a Ray worker process) that nothing reads from.
    datasets = {"training": split_datasets(data, settings, ["row_id", "x", "y"], workers)["training"]}
    shards = exactly_once_data_config(settings.window_size_bytes).configure(datasets, workers, None, None)
    features = data.metadata["features"]
    filler = filler_table(datasets["training"])
    batches = [ShardBatches(shards[rank]["training"], data.rows("training"), workers, batch_size, features,
                            ["row_id", "x", "y"], filler, shuffle_rows(data, settings, batch_size), seed=3, rank=rank,
                            read_ahead=read_ahead, epochs=epochs)
               for rank in range(workers)]
    seen = [[[] for _ in range(workers)] for _ in range(epochs)]

    def consume(rank: int) -> None:
        for epoch in range(epochs):
            for batch in batches[rank].epoch(epoch):
                seen[epoch][rank].append(batch["row_id"].long().tolist())
        assert not batches[rank]._ahead, "read ahead past the last epoch"

    threads = [threading.Thread(target=consume, args=(rank,)) for rank in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a consumer hung"
    return seen


def read_epochs(*args, **kwargs) -> list[list[list[int]]]:
    """Row ids each worker got, per epoch: ``[epoch][worker] -> ids``."""
    return [[sum(worker, []) for worker in epoch] for epoch in read_batches(*args, **kwargs)]


def training_ids(data) -> list[int]:
    return sorted(int(v) for v in data.read_split("training")["row_id"].to_pylist())


@pytest.mark.parametrize("loader", [
    {"fully_executed": True},
    {"fully_executed": False},
    {"fully_executed": False, "window_size_bytes": 4096},  # a window of a few hundred rows
], ids=["materialized", "streamed", "windowed"])
def test_two_workers_see_every_training_row_exactly_once_per_epoch(cached, loader):
    config, data = cached
    for epoch in read_epochs(config, data, loader, workers=2, read_ahead=True):
        assert sorted(epoch[0] + epoch[1]) == training_ids(data)
        assert epoch[0] and epoch[1], "both workers got a share"


def test_epochs_are_shuffled_differently_and_the_same_on_every_run(cached):
    config, data = cached
    first, second = read_epochs(config, data, {"fully_executed": True}, workers=1)
    assert sorted(first[0]) == sorted(second[0]) == training_ids(data)
    assert first[0] != second[0]
    assert read_epochs(config, data, {"fully_executed": True}, workers=1, epochs=1) == [first], "another run"


def test_windowed_batches_are_full_and_the_same_when_read_ahead(tmp_path):
    """Windows of a few hundred rows rarely hold whole batches: rows left over join the next
    window's first batch. Every batch but the last is full and none has a single row (batch
    norm); reading the next epoch ahead changes no batch. (A thousand rows: each small batch is
    a step of Ray Data's, and three thousand cost the suite half a minute.)"""
    config, data = cache_of(tmp_path, 1001)
    rows = len(training_ids(data))
    loader = {"fully_executed": False, "window_size_bytes": 4096}
    batch_size = next(size for size in range(7, rows) if rows % size == 1)  # leaves one row over (rows - 1 does)
    read_ahead = read_batches(config, data, loader, workers=1, batch_size=batch_size, read_ahead=True)
    for epoch in read_ahead:
        sizes = [len(batch) for batch in epoch[0]]
        assert sizes[:-1] == [batch_size] * (len(sizes) - 1)
        assert 1 < sizes[-1] <= batch_size + 1
        assert sum(sizes) == len(training_ids(data))
    assert read_batches(config, data, loader, workers=1, batch_size=batch_size) == read_ahead


def test_bucketed_windows_pad_less_and_still_hold_every_row_once(tmp_path):
    """trainer.bucketing_field on the Ray loader: each shuffled window sorted by length in runs."""
    from plait.data.tensors import trim_padding

    rng = np.random.default_rng(2)
    lengths = rng.integers(1, 40, 1500)
    df = pd.DataFrame({"row_id": np.arange(1500, dtype=float), "t": [" ".join(["w"] * n) + f" v{n}" for n in lengths],
                       "y": rng.random(1500) > 0.5})
    config = load_config({
        "input_features": [{"name": "row_id", "type": "number", "preprocessing": {"normalization": "none"}},
                           {"name": "t", "type": "text", "encoder": "embed"}],
        "output_features": [{"name": "y", "type": "binary"}],
        "preprocessing": {"split": {"probabilities": [1.0, 0.0, 0.0]}},
        "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")},
    })
    data = preprocess(config, df, seed=1)
    settings = LoaderConfig(fully_executed=True)
    names = ["row_id", "t", "y"]
    datasets = split_datasets(data, settings, names, 1)
    shard = exactly_once_data_config(settings.window_size_bytes).configure(datasets, 1, None, None)[0]["training"]
    padding, ids = {}, {}
    for field in (None, "t"):
        loader = ShardBatches(shard, 1500, 1, 32, data.metadata["features"], names, filler_table(datasets["training"]),
                              shuffle_rows(data, settings, 32), seed=3, bucketing_field=field)
        batches = [trim_padding(b, ["t"]) for b in loader.epoch(0)]
        ids[field] = sorted(int(i) for b in batches for i in b["row_id"].tolist())
        padding[field] = 1 - sum(int((b["t"] != 0).sum()) for b in batches) / sum(b["t"].numel() for b in batches)
    assert ids[None] == ids["t"] == list(range(1500))
    assert padding["t"] < 0.1 < 0.3 < padding[None]
