"""Class balancing of the training split (oversample_minority, undersample_majority): the ratio
reached, the other splits untouched, and the same rows on every partitioning and on Dask."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from plait.config import load_config
from plait.data.engines import get_engine
from plait.data.preprocess import preprocess
from plait.errors import DataError

SPLITS = ("training", "validation", "test")
ID = {"name": "id", "type": "number", "preprocessing": {"normalization": "none", "clip_to_training_range": False}}
TARGET = {"name": "y", "type": "binary"}


def imbalanced(n: int, rare_share: float = 0.15, seed: int = 5) -> pd.DataFrame:
    """Rows labelled yes (rare) and no, with an id column that names each row."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"id": np.arange(n), "y": np.where(rng.random(n) < rare_share, "yes", "no")})


def run(make_config, data, preprocessing: dict, engine=None, cache=None):
    config = make_config([ID], [TARGET], preprocessing=preprocessing)
    if cache is not None:
        config["backend"] = {"cache_dir": str(cache)}
    return preprocess(load_config(config), data, engine=engine, use_cache=False)


def rows_of(data, split: str) -> list[tuple[int, bool]]:
    table = data.read_split(split)
    return list(zip((int(v) for v in table["id"].to_pylist()), table["y"].to_pylist()))


def labels(rows) -> Counter:
    return Counter(label for _, label in rows)


@pytest.mark.parametrize("ratio", [0.5, 0.26, 1.0])
def test_oversampling_repeats_rare_training_rows_up_to_the_ratio(make_config, ratio):
    data = imbalanced(1000)
    before = run(make_config, data, {})
    after = run(make_config, data, {"oversample_minority": ratio})
    original, balanced = rows_of(before, "training"), rows_of(after, "training")
    counts = labels(balanced)
    assert abs(counts[True] - ratio * counts[False]) <= 0.5  # within one row of the ratio
    assert counts[False] == labels(original)[False]
    # Every rare row is kept, each repeated the same number of times give or take one, in place.
    copies = Counter(balanced)
    rare = [row for row in original if row[1]]
    assert {copies[row] for row in rare} <= {counts[True] // len(rare), counts[True] // len(rare) + 1}
    assert [row for row, _ in balanced] == sorted(row for row, _ in balanced)
    for split in ("validation", "test"):
        assert rows_of(after, split) == rows_of(before, split)


@pytest.mark.parametrize("ratio", [0.5, 0.7, 1.0])
def test_undersampling_keeps_a_share_of_common_training_rows(make_config, ratio):
    data = imbalanced(1000)
    before = run(make_config, data, {})
    after = run(make_config, data, {"undersample_majority": ratio})
    original, balanced = rows_of(before, "training"), rows_of(after, "training")
    counts = labels(balanced)
    assert abs(counts[True] / ratio - counts[False]) < 1  # within one row of the ratio
    assert [row for row in original if row[1]] == [row for row in balanced if row[1]]
    assert set(balanced) <= set(original) and len(set(balanced)) == len(balanced)
    for split in ("validation", "test"):
        assert rows_of(after, split) == rows_of(before, split)


def test_a_split_that_already_has_the_ratio_is_left_alone(make_config):
    data = imbalanced(400, rare_share=0.45)
    before = rows_of(run(make_config, data, {}), "training")
    assert rows_of(run(make_config, data, {"oversample_minority": 0.5}), "training") == before
    assert rows_of(run(make_config, data, {"undersample_majority": 0.5}), "training") == before
    assert rows_of(run(make_config, data, {"oversample_minority": 0}), "training") == before


def test_the_seed_chooses_the_rows(make_config):
    data = imbalanced(1000)
    config = load_config(make_config([ID], [TARGET], preprocessing={"undersample_majority": 0.5}))
    chosen = [rows_of(preprocess(config, data, seed=seed, use_cache=False), "training") for seed in (1, 1, 2)]
    assert chosen[0] == chosen[1] and chosen[0] != chosen[2]


def test_a_training_split_with_one_class_is_refused(make_config):
    data = pd.DataFrame({"id": np.arange(30), "y": ["no"] * 27 + ["yes"] * 3, "split": [0] * 27 + [2] * 3})
    with pytest.raises(DataError, match="preprocessing.oversample_minority: the training split has only false labels"):
        run(make_config, data, {"oversample_minority": 0.5, "split": {"type": "fixed"}})


def test_balancing_settings_are_part_of_the_cache_key(make_config):
    data = imbalanced(300)
    configs = [load_config(make_config([ID], [TARGET], preprocessing=p))
               for p in ({}, {"oversample_minority": 0.5}, {"oversample_minority": 0.6}, {"undersample_majority": 0.5})]
    keys = {preprocess(c, data).metadata["cache_key"] for c in configs}
    assert len(keys) == 4


def outputs(data) -> tuple[dict, dict]:
    files = {s: [Path(f).read_bytes() for f in data.split_files(s)] for s in SPLITS}
    return files, json.loads((Path(data.location) / "metadata.json").read_text())


@pytest.mark.parametrize("setting", [{"oversample_minority": 0.6}, {"oversample_minority": 0.5}, {"undersample_majority": 0.2}])
def test_partitionings_give_the_same_rows(tmp_path, make_config, make_dataset, setting):
    path = make_dataset(imbalanced(900), "data.parquet")
    results = [outputs(run(make_config, path, setting, get_engine("local", num_partitions=k), tmp_path / f"local{k}"))
               for k in (1, 7)]
    assert results[0] == results[1]


def test_dask_and_modin_write_the_same_bytes_as_local(tmp_path, make_config, make_dataset, ray_cluster):
    path = make_dataset(imbalanced(900), "data.parquet")
    setting = {"oversample_minority": 0.45, "split": {"type": "stratify", "column": "y"}}
    local = outputs(run(make_config, path, setting, get_engine("local", num_partitions=5), tmp_path / "local"))
    unbalanced = run(make_config, path, {"split": setting["split"]}, cache=tmp_path / "unbalanced")
    assert local[1]["splits"]["training"]["rows"] > unbalanced.rows("training")
    engines = {
        "dask": get_engine("dask", parallelism=4),
        "dask-streaming": get_engine("dask", parallelism=5, persist=False),
        "modin": get_engine("modin"),
    }
    for name, engine in engines.items():
        assert outputs(run(make_config, path, setting, engine, tmp_path / name)) == local, f"{name} differs from local"
