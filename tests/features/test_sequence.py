"""Sequence inputs and outputs, text outputs, vector and category_distribution outputs: their
preprocessing, one partition against many, and bad data."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from plait.config import load_config
from plait.data.engines.local import LocalEngine
from plait.data.preprocess import preprocess
from plait.errors import DataError


def test_a_sequence_input_splits_on_spaces_and_keeps_punctuation_in_its_tokens(make_processor, padded_fit_transform):
    processor = make_processor("sequence")
    meta, rows = padded_fit_transform(processor, ["a b! b", "c", None])
    assert meta["vocabulary"] == ["<PAD>", "<UNK>", "a", "b", "b!", "c"]
    assert rows == [[2, 4, 3], [5, 0, 0], [0, 0, 0]]


def test_a_generated_output_ends_with_the_stop_token_and_is_cut_to_make_room(make_processor, fit, padded_transform, caplog):
    processor = make_processor("text", {"max_sequence_length": 3}, output=True)
    with caplog.at_level(logging.WARNING):
        meta = fit(processor, ["x y", "x y z w"], ["x"])
    assert meta["vocabulary"][:4] == ["<PAD>", "<UNK>", "<SOS>", "<EOS>"]
    assert meta["sequence_length"] == 4 and meta["generated"]
    assert "1 of 3 training rows have more than 3 tokens" in caplog.text
    x, y, z = (meta["vocabulary"].index(t) for t in "xyz")
    assert padded_transform(processor, ["x y", "x y z w", "q", ""], meta) == [
        [x, y, 3, 0], [x, y, z, 3], [1, 3, 0, 0], [3, 0, 0, 0]]


def test_a_tagged_output_has_no_stop_token(make_processor, padded_fit_transform):
    processor = make_processor("sequence", output=True, decoder={"type": "tagger"})
    meta, rows = padded_fit_transform(processor, ["N V", "N"])
    assert meta["sequence_length"] == 2 and not meta["generated"]
    assert rows == [[4, 5], [4, 0]]


def test_category_distributions_are_normalized_and_named_by_vocab(make_processor, padded_fit_transform):
    processor = make_processor("category_distribution", {"vocab": ["lo", "hi"]}, output=True)
    meta, rows = padded_fit_transform(processor, ["1 3", "0.5 0.5"])
    assert meta["vocabulary"] == ["lo", "hi"]
    assert np.allclose(rows, [[0.25, 0.75], [0.5, 0.5]])


@pytest.mark.parametrize("values, message", [
    (["1 -1", "1 1"], "not distributions (a negative value, or nothing above 0), such as [1.0, -1.0]"),
    (["0 0", "1 1"], "such as [0.0, 0.0]"),
])
def test_a_row_that_is_no_distribution_is_refused_with_an_example(make_processor, padded_fit_transform, values, message):
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        padded_fit_transform(make_processor("category_distribution", output=True), values)


def test_distributions_of_another_length_than_vocab_are_refused(make_processor, fit):
    with pytest.raises(DataError, match=r"have 3 values, expected 2 \(one per class of preprocessing.vocab\)"):
        fit(make_processor("category_distribution", {"vocab": ["a", "b"]}, output=True), ["0.2 0.3 0.5"])


NEW_OUTPUTS = [{"name": "rev", "type": "text"}, {"name": "tags", "type": "sequence", "column": "rev", "decoder": "tagger"},
               {"name": "vec", "type": "vector"}, {"name": "dist", "type": "category_distribution"}]


def test_partitioning_does_not_change_a_single_byte(tmp_path, make_dataset, make_config, sequence_data):
    path = make_dataset(sequence_data(), "data.csv")
    results = []
    for parts in (1, 20):
        config = make_config([{"name": "src", "type": "sequence"}], NEW_OUTPUTS)
        config["backend"]["cache_dir"] = str(tmp_path / f"cache{parts}")
        data = preprocess(load_config(config), path, engine=LocalEngine(num_partitions=parts), use_cache=False)
        files = [Path(f).read_bytes() for split in ("training", "validation", "test") for f in data.split_files(split)]
        results.append((files, (Path(data.location) / "metadata.json").read_text()))
    assert results[0] == results[1]


def test_an_all_empty_sequence_column_trains_and_predicts_through_the_cli(tmp_path, make_config, write_config,
                                                                         make_dataset, cli, one_torch_thread):
    path = make_dataset({"s": [""] * 11 + ["   "], "y": [True, False] * 6})
    config = write_config(make_config([{"name": "s", "type": "sequence"}], [{"name": "y", "type": "binary"}],
                                      trainer={"epochs": 1, "batch_size": 4}))
    code, _, err = cli("train", "--config", config, "--dataset", path, "--output-directory", tmp_path / "out")
    assert code == 0, err
    model = tmp_path / "out" / "experiment_run_0" / "model"
    code, out, err = cli("predict", "--model-path", model, "--dataset", path, "--output-directory", tmp_path / "p")
    assert code == 0, err
    assert pd.read_parquet(tmp_path / "p" / "predictions.parquet").shape[0] == 12
