"""`plait synthesize-dataset` and plait.synthesize: data that fits a config's features, seeded,
learnable, written whole."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from plait import Model
from plait.cli import main
from plait.config import load_config
from plait.errors import UsageError
from plait.synthesize import synthesize_dataset, write_dataset
from plait.evaluation.statistics import history_of

EVERY_INPUT = [
    {"name": "n", "type": "number"},
    {"name": "b", "type": "binary"},
    {"name": "c", "type": "category", "preprocessing": {"most_common": 3}},
    {"name": "t", "type": "text", "preprocessing": {"max_sequence_length": 4}},
    {"name": "t_bpe", "column": "t", "type": "text", "preprocessing": {"tokenizer": "bpe", "most_common": 30}},
    {"name": "s", "type": "set", "preprocessing": {"tokenizer": "comma"}},
    {"name": "v", "type": "vector", "preprocessing": {"vector_size": 4}},
]
EVERY_OUTPUT = [
    {"name": "yb", "type": "binary", "column": "label", "preprocessing": {"fallback_true_label": "spam"}},
    {"name": "yc", "type": "category"},
    {"name": "yn", "type": "number"},
    {"name": "ys", "type": "set"},
]


def every_type(**sections) -> dict:
    return {"input_features": EVERY_INPUT, "output_features": EVERY_OUTPUT, **sections}


def test_one_column_per_feature_column_with_values_its_preprocessing_reads():
    frame = synthesize_dataset(every_type(preprocessing={"split": {"type": "fixed"}}), rows=300)
    assert list(frame.columns) == ["n", "b", "c", "t", "s", "v", "label", "yc", "yn", "ys", "split"]
    assert len(frame) == 300
    assert frame.n.dtype == float and frame.yn.dtype == float
    assert set(frame.b) == {True, False}
    assert set(frame.c) <= {"alpha", "bravo", "charlie"}  # most_common 3
    assert max(len(t.split(" ")) for t in frame.t) == 4  # max_sequence_length
    assert all("," in s or s.isalpha() for s in frame.s) and not any(" " in s for s in frame.s)  # comma tokenizer
    assert {len(v.split(" ")) for v in frame.v} == {4}  # vector_size
    assert set(frame.label) == {"spam", "not_spam"}  # the binary's labels, in its column
    assert set(frame.split) == {0, 1, 2}  # the fixed split's column
    assert all(frame.ys.str.len() > 0)  # never an empty set, which an output would drop


def test_the_same_seed_gives_the_same_data():
    config = load_config(every_type())
    assert synthesize_dataset(config, 50, seed=3).equals(synthesize_dataset(config, 50, seed=3))
    assert not synthesize_dataset(config, 50, seed=3).equals(synthesize_dataset(config, 50, seed=4))


def test_the_outputs_are_learnable(tmp_path):
    """A binary output of a mix of a number and a category: a few epochs beat the majority class."""
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}],
              "trainer": {"epochs": 5, "batch_size": 32, "learning_rate": 0.01},
              "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}}
    frame = synthesize_dataset(config, rows=800, seed=1)
    model = Model(config)
    model.train(dataset=frame, progress_bar=False)
    accuracy = model.evaluate(frame)["y"]["accuracy"]
    majority = frame.y.value_counts(normalize=True).max()
    assert majority < 0.6 and accuracy > 0.8


@pytest.mark.parametrize("name", ["data.csv", "data.tsv", "data.parquet"])
def test_write_dataset_by_suffix(tmp_path, name):
    frame = synthesize_dataset(every_type(), rows=20)
    path = tmp_path / "sub" / name
    write_dataset(frame, path)
    read = pd.read_parquet(path) if name.endswith("parquet") else pd.read_csv(path, sep="\t" if "tsv" in name else ",")
    assert list(read.columns) == list(frame.columns) and len(read) == 20
    assert [p.name for p in path.parent.iterdir()] == [name]  # no temporary file left


def test_bad_rows_and_suffix_are_refused(tmp_path):
    with pytest.raises(UsageError, match="rows: got 0"):
        synthesize_dataset(every_type(), rows=0)
    with pytest.raises(UsageError, match=r"name a \.csv, \.tsv or \.parquet file"):
        write_dataset(synthesize_dataset(every_type(), rows=2), tmp_path / "data.xlsx")


def test_cli_data_for_every_feature_type_validates_and_trains(tmp_path, capsys):
    # The set with the default tokenizer: the comma tokenizer fails on a column read in several
    # chunks (plait.features.text_ops._arrow_tokenize), a bug outside this module.
    inputs = [f if f["type"] != "set" else {"name": "s", "type": "set"} for f in EVERY_INPUT]
    config = {"input_features": inputs, "output_features": EVERY_OUTPUT, "trainer": {"epochs": 1, "batch_size": 32},
              "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["synthesize-dataset", "--config", str(tmp_path / "c.yaml"), "--rows", "120",
                 "--output", str(tmp_path / "data.csv")]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 120
    assert main(["train", "-c", str(tmp_path / "c.yaml"), "--dataset", str(tmp_path / "data.csv"),
                 "--output-directory", str(tmp_path / "runs")]) == 0
    history = history_of(json.loads((tmp_path / "runs" / "experiment_run_0" / "training_statistics.json").read_text()))
    assert [record["epoch"] for record in history] == [1]


def test_ludwig_spelling_of_the_command(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(every_type()))
    assert main(["synthesize_dataset", "-c", str(tmp_path / "c.yaml"), "--dataset_size", "7",
                 "--output_path", str(tmp_path / "d.parquet")]) == 0
    assert len(pd.read_parquet(tmp_path / "d.parquet")) == 7
    assert main(["synthesize_dataset", "-c", str(tmp_path / "c.yaml"), "-f", "[]", "-od", str(tmp_path / "e.csv")]) == 2
    assert "-f: plait synthesizes data for a config's features" in capsys.readouterr().err


def test_series_as_the_tokenizer_splits_them_and_tone_files_for_audio(fit):
    from plait.features import processors_for

    config = load_config({"input_features": [{"name": "t", "type": "timeseries", "preprocessing": {"tokenizer": "comma"}},
                                             {"name": "a", "type": "audio"}],
                          "output_features": [{"name": "y", "type": "binary"}]})
    frame = synthesize_dataset(config, rows=40, seed=3)
    assert frame.equals(synthesize_dataset(config, rows=40, seed=3))  # the tone files keep their paths
    assert frame.t.str.contains(",").all() and not frame.t.str.contains(" ").any()
    series, clip, _ = processors_for(config)
    assert 8 <= fit(series, frame.t.tolist())["timeseries_length"] <= 16
    assert fit(clip, frame.a.tolist())["sample_rate"] == 8000 and frame.a.nunique() == 4
