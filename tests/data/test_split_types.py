"""Ludwig's datetime and hash splits, k-fold's folds, sample_size, and outliers dropped after
fitting: exact on every partitioning, and identical on Dask."""

from __future__ import annotations

import json
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


def frame(n: int, **columns) -> pd.DataFrame:
    rng = np.random.default_rng(n)
    return pd.DataFrame({"id": np.arange(n), "y": rng.choice(["yes", "no"], n), **columns})


def run(make_config, data, preprocessing: dict, inputs=None, engine=None, cache=None):
    config = make_config(inputs or [ID], [TARGET], preprocessing=preprocessing)
    if cache is not None:
        config["backend"] = {"cache_dir": str(cache)}
    return preprocess(load_config(config), data, engine=engine, use_cache=False)


def ids(data) -> dict[str, list[int]]:
    return {s: sorted(int(v) for v in data.read_split(s)["id"].to_pylist()) for s in SPLITS}


def test_datetime_split_trains_on_the_oldest_rows_and_tests_on_the_newest(make_config):
    n = 20
    days = pd.date_range("2024-01-01", periods=n, freq="D")
    shuffled = np.random.default_rng(1).permutation(n)  # row order is not time order
    data = frame(n, day=[str(days[i].date()) for i in shuffled])
    split = {"type": "datetime", "column": "day", "probabilities": [0.7, 0.1, 0.2]}
    got = ids(run(make_config, data, {"split": split}))
    by_age = [int(np.flatnonzero(shuffled == i)[0]) for i in range(n)]  # row ids, oldest first
    assert got == {"training": sorted(by_age[:14]), "validation": sorted(by_age[14:16]), "test": sorted(by_age[16:])}


def test_datetime_split_reads_timestamps_and_refuses_text_that_is_no_date(make_config):
    data = frame(10, when=pd.date_range("2024-01-01", periods=10, freq="h"))
    got = ids(run(make_config, data, {"split": {"type": "datetime", "column": "when"}}))
    assert got == {"training": list(range(7)), "validation": [7], "test": [8, 9]}
    bad = frame(4, when=["2024-01-01", "soon", "2024-01-03", "2024-01-04"])
    with pytest.raises(DataError, match="split column 'when' holds 'soon', which is not a date"):
        run(make_config, bad, {"split": {"type": "datetime", "column": "when"}})


def test_hash_split_gives_rows_with_one_id_one_split_whatever_the_other_rows(make_config):
    users = [f"user{i % 50}" for i in range(400)]
    data = frame(400, user=users)
    split = {"type": "hash", "column": "user"}
    got = ids(run(make_config, data, {"split": split}))
    split_of_user = {}
    for s, rows in got.items():
        for row in rows:
            assert split_of_user.setdefault(users[row], s) == s
    fewer = ids(run(make_config, data.iloc[::3].reset_index(drop=True).assign(id=lambda d: d.index * 3), {"split": split}))
    assert all(split_of_user[users[row]] == s for s, rows in fewer.items() for row in rows)
    assert {len(rows) for rows in got.values()} != {0}


def test_kfold_folds_partition_the_rows_and_each_fold_is_one_runs_test_set(make_config):
    from plait.kfold import split_indices

    data = frame(300)
    tests = [ids(run(make_config, data, {"split": {"type": "kfold", "folds": 3, "fold": fold}})) for fold in range(3)]
    assert all(not t["validation"] for t in tests), "no validation rows, as in Ludwig's k-fold"
    assert sorted(sum((t["test"] for t in tests), [])) == list(range(300)), "every row in one fold's test set"
    for t in tests:
        assert sorted(t["training"] + t["test"]) == list(range(300)) and 70 < len(t["test"]) < 130
    indices = split_indices(300, 3, seed=42)
    assert [indices[f"fold_{n + 1}"]["test_indices"] for n in range(3)] == [t["test"] for t in tests]


def test_sample_size_keeps_exactly_that_many_rows(make_config):
    data = frame(1000)
    kept = run(make_config, data, {"sample_size": 123})
    assert sum(kept.rows(s) for s in SPLITS) == 123
    assert sum(run(make_config, data, {"sample_size": 5000}).rows(s) for s in SPLITS) == 1000


def test_outliers_are_dropped_after_fitting_with_drop_row(make_config):
    x = [0.0, 1.0, -1.0] * 20 + [1000.0]
    data = frame(len(x), x=x, split=0)
    inputs = [ID, {"name": "x", "type": "number", "preprocessing": {"outlier_strategy": "drop_row", "outlier_threshold": 3}}]
    kept = run(make_config, data, {"split": {"type": "fixed"}}, inputs=inputs)
    assert ids(kept)["training"] == list(range(60))


def outputs(data) -> tuple[dict, dict]:
    files = {s: [Path(f).read_bytes() for f in data.split_files(s)] for s in SPLITS}
    return files, json.loads((Path(data.location) / "metadata.json").read_text())


SETTINGS = {
    "datetime": ({"split": {"type": "datetime", "column": "day"}, "sample_size": 250},
                 {"outlier_strategy": "drop_row", "outlier_threshold": 1.5, "normalization": "log1p"}),
    "hash": ({"split": {"type": "hash", "column": "user"}},
             {"outlier_strategy": "fill_with_mode", "outlier_threshold": 1.0}),
    "kfold": ({"split": {"type": "kfold", "folds": 5, "fold": 3}}, {}),
}


@pytest.mark.parametrize("case", sorted(SETTINGS))
def test_local_partitionings_and_dask_write_the_same_bytes(tmp_path, make_config, make_dataset, case, ray_cluster):
    # ray_cluster as an argument, not looked up inside: the suite runs the tests that name it in
    # the process that holds the session's cluster; a lookup would start a second Ray instance in
    # the process of the other tests, kept running (and costing CPU) until its last test.
    rng = np.random.default_rng(3)
    n = 400
    data = frame(n, day=[f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:00" for i in rng.permutation(n)],
                 user=[f"u{i % 37}" for i in range(n)], x=rng.exponential(2.0, n).round(3))
    preprocessing, number = SETTINGS[case]
    inputs = [ID, {"name": "x", "type": "number", "preprocessing": number}]
    path = make_dataset(data, "data.parquet")
    results = [outputs(run(make_config, path, preprocessing, inputs, get_engine("local", num_partitions=k), tmp_path / f"local{k}"))
               for k in (1, 7)]
    assert results[0] == results[1]
    dask = outputs(run(make_config, path, preprocessing, inputs, get_engine("dask", parallelism=4), tmp_path / "dask"))
    assert dask == results[0]


@pytest.mark.parametrize("split", [{"type": "random"}, {"type": "stratify", "column": "y"},
                                   {"type": "datetime", "column": "day"}])
def test_split_codes_name_the_rows_each_split_gets(make_config, split):
    """What auto_train re-deals into folds: the rows the run trains and validates on."""
    from plait.data.preprocess import split_codes

    n = 60
    data = frame(n, day=[str(d.date()) for d in pd.date_range("2024-01-01", periods=n, freq="D")])
    data.loc[3, "y"] = None  # a row without a target is dropped, in both
    config = make_config([ID], [TARGET], preprocessing={"split": split})
    rows, codes = split_codes(load_config(config), data, 42)
    assert 3 not in rows
    assert {s: sorted(rows[codes == i].tolist()) for i, s in enumerate(SPLITS)} == ids(run(make_config, data, {"split": split}))
