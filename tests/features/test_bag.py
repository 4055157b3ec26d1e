"""Bag features: token counts over a vocabulary of the most common training tokens."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from plait.data.tensors import column_tensor

TARGET = {"name": "y", "type": "binary"}


def bag(make_processor, **preprocessing):
    return make_processor("bag", preprocessing or None)


def counts(processor, values, metadata) -> list[list[float]]:
    """The tensor the model reads: one row of counts per cell."""
    column = processor.transform(processor.prepare(pa.array(values)), metadata)
    return column_tensor(column, {"type": "bag", **metadata}).tolist()


def test_every_occurrence_of_a_token_is_counted(make_processor, fit):
    processor = bag(make_processor)
    meta = fit(processor, ["b a b", "c b a", "b"])
    assert meta["vocabulary"] == ["<UNK>", "b", "a", "c"]
    assert counts(processor, ["b a b", "c c c", "zz b zz", ""], meta) == [
        [0, 2, 1, 0], [0, 0, 0, 3], [2, 1, 0, 0], [0, 0, 0, 0]]


def test_most_common_and_lowercase_shape_the_vocabulary(make_processor, fit):
    processor = bag(make_processor, most_common=1, lowercase=True)
    meta = fit(processor, ["B a b", "A b"])
    assert meta["vocabulary"] == ["<UNK>", "b"]
    assert counts(processor, ["b B a"], meta) == [[1, 2]]


def test_a_missing_bag_counts_one_unknown_token_or_the_most_common_bag(make_processor, fit):
    processor = bag(make_processor)
    meta = fit(processor, ["a a", None])
    assert counts(processor, [None], meta) == [[1, 0]]
    processor = bag(make_processor, missing_value_strategy="fill_with_mode", tokenizer="comma")
    meta = fit(processor, ["a,a", "a,a", "b", None])
    assert counts(processor, [None], meta) == [[0, 2, 0]]


def test_partitioning_does_not_change_a_single_byte(preprocessed_in_parts):
    rng = np.random.default_rng(0)
    words = np.array(["red", "green", "blue", "cyan", "gold"])
    frame = pd.DataFrame({"b": [" ".join(rng.choice(words, rng.integers(0, 6))) for _ in range(200)],
                          "y": rng.random(200) < 0.5})
    frame.loc[::9, "b"] = None
    inputs = [{"name": "b", "type": "bag", "preprocessing": {"most_common": 3}}]
    assert preprocessed_in_parts(inputs, [TARGET], frame, 1) == preprocessed_in_parts(inputs, [TARGET], frame, 20)


def test_whether_a_word_appears_twice_is_learned(tmp_path):
    from plait.api import Model

    rng = np.random.default_rng(3)
    words = np.array(["spam", "ham", "eggs", "toast"])
    texts = [" ".join(rng.choice(words, rng.integers(1, 6))) for _ in range(300)]
    frame = pd.DataFrame({"words": texts, "twice": [t.split().count("spam") >= 2 for t in texts]})
    config = {"input_features": [{"name": "words", "type": "bag", "encoder": {"num_fc_layers": 1, "output_size": 16}}],
              "output_features": [{"name": "twice", "type": "binary"}],
              "trainer": {"epochs": 4, "batch_size": 32, "learning_rate": 0.03},
              "backend": {"type": "local", "cache_dir": str(tmp_path)}}
    model = Model(config)
    model.train(dataset=frame, random_seed=1, progress_bar=False)
    assert (model.predict(frame).twice_predictions == frame.twice).mean() > 0.95


def test_a_tied_bag_reads_its_counts_through_the_other_vocabulary(make_processor, fit):
    from plait.config import load_config
    from plait.models.encoders import build_encoders

    config = load_config({"input_features": [{"name": "a", "type": "bag"}, {"name": "b", "type": "bag", "tied": "a"}],
                          "output_features": [TARGET]})
    metadata = {"a": {"vocabulary": ["<UNK>", "x", "y"]}, "b": {"vocabulary": ["<UNK>", "y", "x"]}}
    encoders = build_encoders(config.input_features, metadata)
    torch.testing.assert_close(encoders["b"](torch.tensor([[0.0, 3.0, 1.0]])), encoders["a"](torch.tensor([[0.0, 1.0, 3.0]])))


def test_bad_settings_through_the_cli_are_a_clean_config_error(make_config, write_config, make_dataset, cli):
    path = make_dataset({"b": ["a b"] * 10, "y": [True, False] * 5})
    config = write_config(make_config([{"name": "b", "type": "bag", "preprocessing": {"tokenizer": "bpe"}}], [TARGET]))
    code, _, err = cli("preprocess", "--config", config, "--dataset", path)
    assert code == 2 and "Traceback" not in err
    assert "  input_features[0].preprocessing.tokenizer: unknown tokenizer 'bpe'" in err.splitlines()[1]


def test_a_nested_column_through_the_cli_is_one_clean_error(tmp_path, make_config, write_config, cli_error):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"b": [{"word": "a", "count": 2}] * 10, "y": [True, False] * 5}), tmp_path / "d.parquet")
    config = write_config(make_config([{"name": "b", "type": "bag"}], [TARGET]))
    error = cli_error("preprocess", "--config", config, "--dataset", tmp_path / "d.parquet")
    assert "input feature 'b' (bag): column 'b' has Arrow type struct<" in error
