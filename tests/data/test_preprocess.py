"""Preprocessing end to end: partition invariance, splits, sampling, pre-split sets, file formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from plait.config import load_config
from plait.data.engines.local import LocalEngine
from plait.data.preprocess import preprocess
from plait.errors import DataError

SPLITS = ("training", "validation", "test")
ID = {"name": "id", "type": "number", "preprocessing": {"normalization": "none", "clip_to_training_range": False}}
TARGET = {"name": "y", "type": "binary"}


def ids_by_split(data) -> dict[str, list[int]]:
    return {split: sorted(int(v) for v in data.read_split(split)["id"].to_pylist()) for split in SPLITS}


def rows_by_split(data) -> dict[str, int]:
    return {split: data.rows(split) for split in SPLITS}


@pytest.fixture
def id_frame():
    def make(n: int, **columns) -> pd.DataFrame:
        rng = np.random.default_rng(n)
        return pd.DataFrame({"id": np.arange(n), "y": rng.choice(["yes", "no"], n), **columns})

    return make


@pytest.fixture
def run(make_config):
    """run(dataset, inputs=[ID], outputs=[TARGET], sections={}, **preprocess kwargs)."""

    def go(dataset=None, inputs=None, outputs=None, sections=None, **kwargs):
        config = load_config(make_config(inputs or [ID], outputs or [TARGET], **(sections or {})))
        return preprocess(config, dataset, **kwargs)

    return go


# ---- partition invariance ---------------------------------------------------------------------

@pytest.mark.parametrize(
    "preprocessing",
    [
        {},
        {"split": {"type": "stratify", "column": "label", "probabilities": [0.6, 0.2, 0.2]}},
        {"split": {"type": "random", "probabilities": [0.5, 0.3, 0.2]}, "sample_ratio": 0.7},
    ],
    ids=["random", "stratify", "sampled"],
)
def test_partitioning_does_not_change_a_single_byte(tmp_path, make_dataset, every_type_config, every_type_data, preprocessing):
    path = make_dataset(every_type_data(), "data.csv")
    results = []
    for parts in (1, 20):
        config = load_config(every_type_config(preprocessing=preprocessing, backend={"cache_dir": str(tmp_path / f"cache{parts}")}))
        data = preprocess(config, path, engine=LocalEngine(num_partitions=parts), use_cache=False)
        files = {split: [Path(f).read_bytes() for f in data.split_files(split)] for split in SPLITS}
        results.append((files, (Path(data.location) / "metadata.json").read_text()))
    assert results[0][1] == results[1][1]
    for split in SPLITS:
        assert results[0][0][split] == results[1][0][split], f"{split}.parquet differs"
    assert all(results[0][0].values())


@pytest.mark.parametrize("rows", [5, 30])
def test_more_partitions_than_rows_gives_the_same_bytes(tmp_path, every_type_config, every_type_data, rows):
    mode = {"missing_value_strategy": "fill_with_mode"}
    config = every_type_config(preprocessing={"split": {"type": "stratify", "column": "label"}})
    for feature in config["input_features"]:
        if feature["type"] in ("category", "text", "set", "binary"):
            feature["preprocessing"] = {**feature.get("preprocessing", {}), **mode}
    df = every_type_data(rows, seed=rows)
    results = []
    for parts in (1, 7, 50):
        config["backend"]["cache_dir"] = str(tmp_path / f"cache{parts}")
        data = preprocess(load_config(config), df, engine=LocalEngine(num_partitions=parts))
        results.append([[Path(f).read_bytes() for f in data.split_files(split)] for split in SPLITS] + [data.metadata])
    assert results[0] == results[1] == results[2]


def test_metadata_describes_every_feature_and_split(every_type_data, every_type_config):
    data = preprocess(load_config(every_type_config()), every_type_data())
    features = data.metadata["features"]
    assert list(features) == ["num", "num_mean", "cat", "txt", "txt_bpe", "flag", "tags", "vec", "label", "score"]
    assert features["txt_bpe"]["column"] == "txt" and features["txt_bpe"]["type"] == "text"
    assert features["label"]["output"] and not features["cat"]["output"]
    assert sum(data.rows(split) for split in SPLITS) == 400 - len(range(0, 400, 23))  # missing labels dropped
    assert data.read_split("training").column_names == list(features)


# ---- random split ---------------------------------------------------------------------------

def test_random_split_proportions_are_roughly_the_probabilities(run, id_frame):
    n = 3000
    data = run(id_frame(n), sections={"preprocessing": {"split": {"probabilities": [0.6, 0.3, 0.1]}}})
    ids = ids_by_split(data)
    assert sorted(sum(ids.values(), [])) == list(range(n))  # every row in exactly one split
    for split, share in zip(SPLITS, (0.6, 0.3, 0.1)):
        assert abs(len(ids[split]) / n - share) < 0.03


def test_random_split_is_the_same_for_the_same_seed(run, id_frame):
    df = id_frame(500)
    first = run(df, seed=7)
    again = run(df, seed=7, use_cache=False)
    assert not again.from_cache
    assert ids_by_split(first) == ids_by_split(again)


def test_a_different_seed_gives_a_different_split(run, id_frame):
    df = id_frame(500)
    assert ids_by_split(run(df, seed=1)) != ids_by_split(run(df, seed=2))


# ---- fixed split ----------------------------------------------------------------------------

def test_fixed_split_by_numbers(run, id_frame):
    df = id_frame(6, split=[0, 1, 2, 0, 0, 2])
    data = run(df, sections={"preprocessing": {"split": {"type": "fixed"}}})
    assert ids_by_split(data) == {"training": [0, 3, 4], "validation": [1], "test": [2, 5]}


def test_fixed_split_by_words_in_any_case(run, id_frame, make_dataset):
    words = ["training", "validation", "test", "train", " VAL ", "Test"]
    path = make_dataset(id_frame(6, fold=words))
    data = run(path, sections={"preprocessing": {"split": {"type": "fixed", "column": "fold"}}})
    assert ids_by_split(data) == {"training": [0, 3], "validation": [1, 4], "test": [2, 5]}


def test_fixed_split_with_an_unknown_value_names_it(run, id_frame):
    with pytest.raises(DataError) as info:
        run(id_frame(3, split=["training", "holdout", "test"]), sections={"preprocessing": {"split": {"type": "fixed"}}})
    assert str(info.value) == (
        "split column 'split' holds 'holdout'; a fixed split needs 0/1/2 or training/validation/test in every row"
    )


def test_fixed_split_column_is_not_needed_as_a_feature(run, id_frame):
    data = run(id_frame(4, split=[0, 0, 1, 2]), sections={"preprocessing": {"split": {"type": "fixed"}}})
    assert data.read_split("training").column_names == ["id", "y"]


# ---- stratified split ---------------------------------------------------------------------------

def test_stratified_split_keeps_each_class_share_in_every_split(run, id_frame):
    n = 2000
    label = np.where(np.arange(n) % 10 == 0, "rare", "common")
    outputs = [{"name": "label", "type": "category"}]
    data = run(
        id_frame(n, label=label), outputs=outputs,
        sections={"preprocessing": {"split": {"type": "stratify", "column": "label", "probabilities": [0.6, 0.2, 0.2]}}},
    )
    vocabulary = data.metadata["features"]["label"]["vocabulary"]
    for split, share in zip(SPLITS, (0.6, 0.2, 0.2)):
        counts = pd.Series(data.read_split(split)["label"].to_pylist()).map(lambda i: vocabulary[i]).value_counts()
        assert counts["rare"] == round(200 * share)
        assert counts["common"] == round(1800 * share)


# ---- sampling and dropped rows ---------------------------------------------------------------

def test_sample_ratio_keeps_about_that_fraction_of_rows(run, id_frame):
    n = 4000
    df = id_frame(n)
    data = run(df, sections={"preprocessing": {"sample_ratio": 0.25}})
    kept = sum(ids_by_split(data).values(), [])
    assert abs(len(kept) - n * 0.25) < n * 0.03
    assert ids_by_split(run(df, sections={"preprocessing": {"sample_ratio": 0.25}}, use_cache=False)) == ids_by_split(data)


def test_rows_with_a_missing_target_are_dropped(run):
    df = pd.DataFrame({"id": range(6), "y": ["yes", None, "no", None, "yes", "no"], "split": 0})
    data = run(df, sections={"preprocessing": {"split": {"type": "fixed"}}})
    assert ids_by_split(data)["training"] == [0, 2, 4, 5]


def test_drop_row_on_an_input_drops_rows_where_it_is_missing(run):
    df = pd.DataFrame({"id": range(5), "x": [1.0, None, 3.0, None, 5.0], "y": "yes", "split": 0})
    x = {"name": "x", "type": "number", "preprocessing": {"missing_value_strategy": "drop_row"}}
    data = run(df, inputs=[ID, x], sections={"preprocessing": {"split": {"type": "fixed"}}})
    assert ids_by_split(data)["training"] == [0, 2, 4]


def test_an_output_may_fill_missing_targets_instead(run):
    df = pd.DataFrame({"id": range(3), "y": ["yes", None, "no"], "split": 0})
    y = {"name": "y", "type": "binary", "preprocessing": {"missing_value_strategy": "fill_with_true"}}
    data = run(df, outputs=[y], sections={"preprocessing": {"split": {"type": "fixed"}}})
    assert data.read_split("training")["y"].to_pylist() == [True, True, False]


def test_statistics_come_from_training_rows_only(run):
    df = pd.DataFrame({"id": range(4), "c": ["a", "a", "b", "c"], "y": "yes", "split": [0, 0, 1, 2]})
    data = run(df, inputs=[ID, {"name": "c", "type": "category"}], sections={"preprocessing": {"split": {"type": "fixed"}}})
    assert data.metadata["features"]["c"]["vocabulary"] == ["<UNK>", "a"]
    assert data.read_split("validation")["c"].to_pylist() == [0]


# ---- pre-split sets ------------------------------------------------------------------------

def test_pre_split_sets_go_to_their_splits_and_only_training_is_fitted(run, make_dataset):
    train = make_dataset({"id": [0, 1, 2], "c": ["a", "a", "b"], "y": ["yes", "no", "yes"]}, "train.csv")
    valid = make_dataset({"id": [10, 11], "c": ["z", "a"], "y": ["no", "no"]}, "valid.parquet")
    test = make_dataset({"id": [20], "c": ["b"], "y": ["yes"]}, "test.jsonl")
    data = run(training_set=train, validation_set=valid, test_set=test, inputs=[ID, {"name": "c", "type": "category"}])
    assert ids_by_split(data) == {"training": [0, 1, 2], "validation": [10, 11], "test": [20]}
    assert data.metadata["features"]["c"]["vocabulary"] == ["<UNK>", "a", "b"]
    assert data.read_split("validation")["c"].to_pylist() == [0, 1]


def test_training_set_alone_leaves_validation_and_test_empty(run, make_dataset):
    train = make_dataset({"id": [0, 1], "y": ["yes", "no"]}, "train.csv")
    assert rows_by_split(run(training_set=train)) == {"training": 2, "validation": 0, "test": 0}


def test_dataset_and_training_set_together_is_an_error(run, make_dataset):
    path = make_dataset({"id": [0], "y": ["yes"]})
    with pytest.raises(DataError, match="either a dataset or training/validation/test sets, not both"):
        run(path, training_set=path)


def test_no_data_at_all_is_an_error(run):
    with pytest.raises(DataError, match="no data"):
        run()


# ---- file formats -------------------------------------------------------------------------

FORMAT_ROWS = {
    "id": [0, 1, 2, 3],
    "x": [1.5, None, 3.0, -4.0],
    "c": ["red", "blue", None, "red"],
    "t": ["Hello world", "hi", "a b c", None],
    "y": ["yes", "no", "no", "yes"],
    "split": [0, 0, 1, 2],
}
FORMAT_FEATURES = [ID, {"name": "x", "type": "number"}, {"name": "c", "type": "category"}, {"name": "t", "type": "text"}]


@pytest.mark.parametrize("name", ["data.csv", "data.tsv", "data.parquet", "data.json", "data.jsonl", "data.csv.gz", "dataframe"])
def test_every_input_format_gives_the_same_preprocessed_data(run, make_dataset, tmp_path, name):
    def preprocessed(dataset, cache):
        sections = {"preprocessing": {"split": {"type": "fixed"}}, "backend": {"cache_dir": str(tmp_path / cache)}}
        data = run(dataset, inputs=FORMAT_FEATURES, sections=sections)
        return {split: data.read_split(split) for split in SPLITS}, data.metadata["features"]

    expected = preprocessed(pd.DataFrame(FORMAT_ROWS), "reference")
    if name == "dataframe":
        dataset = pd.DataFrame(FORMAT_ROWS)
    elif name.endswith(".gz"):
        dataset = str(tmp_path / name)
        pd.DataFrame(FORMAT_ROWS).to_csv(dataset, index=False)
    else:
        dataset = make_dataset(FORMAT_ROWS, name)
    tables, features = preprocessed(dataset, "cache")
    assert features == expected[1]
    for split in SPLITS:
        assert tables[split].equals(expected[0][split]), split
    assert tables["training"]["id"].to_pylist() == [0.0, 1.0]


def test_a_directory_of_files_is_one_dataset(run, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    pd.DataFrame({"id": [0, 1], "y": ["yes", "no"]}).to_parquet(folder / "part-0.parquet")
    pd.DataFrame({"id": [2], "y": ["no"]}).to_parquet(folder / "part-1.parquet")
    (folder / "_SUCCESS").write_text("")
    assert sum(run(str(folder)).rows(split) for split in SPLITS) == 3


def test_dataframe_mixing_numbers_and_text_in_a_column_is_read_as_text(run):
    df = pd.DataFrame({"id": [0, 1, 2], "c": [1, "two", 3.5], "y": ["yes", "no", "yes"], "split": 0})
    data = run(df, inputs=[ID, {"name": "c", "type": "category"}], sections={"preprocessing": {"split": {"type": "fixed"}}})
    assert sorted(data.metadata["features"]["c"]["vocabulary"]) == sorted(["<UNK>", "1", "two", "3.5"])


def test_a_column_the_config_names_but_the_data_lacks_lists_the_columns(run, make_dataset):
    path = make_dataset({"id": [0], "y": ["yes"], "other": [1]})
    with pytest.raises(DataError) as info:
        run(path, inputs=[ID, {"name": "age", "type": "number"}])
    assert str(info.value) == f"{path} has no column 'age' (for input feature 'age'). Its columns are: id, y, other"


# ---- columns a feature cannot read: one clean error naming the column ------------------------

@pytest.mark.parametrize(("ftype", "column", "arrow_type"), [("number", "scores", "list<element: int64>"),
                                                             ("category", "address", "struct<city: string"),
                                                             ("text", "scores", "list<element: int64>")])
def test_a_nested_parquet_column_read_as_a_scalar_feature_is_refused_by_name(
        tmp_path, make_config, write_config, cli_error, ftype, column, arrow_type):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 20
    pq.write_table(pa.table({"scores": [[i, i + 1] for i in range(rows)], "address": [{"city": "Oslo", "zip": i} for i in range(rows)],
                             "y": [i % 2 == 0 for i in range(rows)]}), tmp_path / "nested.parquet")
    config = write_config(make_config([{"name": column, "type": ftype}], [TARGET]))
    error = cli_error("preprocess", "--config", config, "--dataset", tmp_path / "nested.parquet")
    assert f"input feature {column!r} ({ftype}): column {column!r} has Arrow type {arrow_type}" in error


def test_a_duplicated_csv_header_that_a_feature_reads_is_refused_by_name(tmp_path, make_config, write_config, cli_error):
    (tmp_path / "dup.csv").write_text("id,id,y\n" + "".join(f"{i},{2 * i},{i % 2}\n" for i in range(20)))
    config = write_config(make_config([ID], [TARGET]))
    error = cli_error("preprocess", "--config", config, "--dataset", tmp_path / "dup.csv")
    assert "appear more than once" in error and "'id'" in error


def test_a_duplicated_csv_header_that_no_feature_reads_is_fine(tmp_path, make_config):
    (tmp_path / "dup.csv").write_text("id,note,note,y\n" + "".join(f"{i},a,b,{i % 2}\n" for i in range(20)))
    data = preprocess(load_config(make_config([ID], [TARGET])), dataset=str(tmp_path / "dup.csv"))
    assert sum(rows_by_split(data).values()) == 20


# ---- storage endpoints that cannot be reached ----------------------------------------------

@pytest.fixture
def refusing_endpoint():
    """An http URL whose port refuses connections (bound, never listening)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("where", ["cache", "dataset"])
def test_an_unreachable_s3_endpoint_is_one_error_naming_it_and_the_setting(
        where, refusing_endpoint, make_dataset, make_config, write_config, cli_error, cache_dir):
    import time

    credentials = {"key": "AKIA-SHOULD-NOT-SHOW", "secret": "SECRET-SHOULD-NOT-SHOW", "endpoint_url": refusing_endpoint}
    backend = {"cache_dir": "s3://bucket/cache" if where == "cache" else cache_dir, "cache_credentials": credentials}
    config = write_config(make_config([ID], [TARGET], backend=backend))
    dataset = make_dataset({"id": range(20), "y": [i % 2 for i in range(20)]}) if where == "cache" else "s3://bucket/data.csv"
    started = time.monotonic()
    error = cli_error("preprocess", "--config", config, "--dataset", dataset)
    assert time.monotonic() - started < 30
    assert refusing_endpoint in error and "backend.cache_credentials.endpoint_url" in error
    assert "SHOULD-NOT-SHOW" not in error
