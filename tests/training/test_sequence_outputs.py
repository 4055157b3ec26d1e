"""Sequence, text, vector and category_distribution outputs learn synthetic tasks end to end, and
their predictions keep Ludwig's columns."""

from __future__ import annotations

import pandas as pd
import pytest

from plait.api import Model
from plait.config.metrics import METRICS_BY_OUTPUT_TYPE

REVERSE = {"input_features": [{"name": "src", "type": "sequence",
                               "encoder": {"type": "rnn", "reduce_output": "last", "state_size": 48}}],
           "output_features": [{"name": "rev", "type": "text", "decoder": {"type": "generator", "beam_width": 2}}],
           "trainer": {"epochs": 30, "batch_size": 32, "learning_rate": 0.01}}


@pytest.fixture
def frame(sequence_data) -> pd.DataFrame:
    return sequence_data(800, seed=1).dropna()


def test_the_generator_learns_to_reverse_a_sequence(frame, make_config):
    model = Model({**REVERSE, "backend": make_config([], [])["backend"]})
    model.train(frame.iloc[:700])
    metrics = model.evaluate(frame.iloc[700:])["rev"]
    assert metrics["token_accuracy"] >= 0.7 and metrics["sequence_accuracy"] >= 0.5, metrics
    assert set(metrics) == set(METRICS_BY_OUTPUT_TYPE["text"])
    predictions = model.predict(frame.iloc[700:705])
    assert list(predictions.columns) == ["rev_predictions", "rev_probabilities", "rev_probability"]
    assert all(isinstance(text, str) for text in predictions["rev_predictions"])
    assert [len(p) for p in predictions["rev_probabilities"]] == [len(t.split()) for t in predictions["rev_predictions"]]


def test_the_tagger_labels_each_token(frame, make_config):
    config = make_config([{"name": "src", "type": "sequence", "encoder": {"type": "rnn", "reduce_output": None,
                                                                         "state_size": 16}}],
                         [{"name": "tags", "type": "sequence", "decoder": "tagger"}],
                         combiner={"type": "sequence_concat"}, trainer={"epochs": 4, "learning_rate": 0.01})
    model = Model(config)
    model.train(frame.iloc[:700])
    assert model.evaluate(frame.iloc[700:])["tags"]["sequence_accuracy"] >= 0.95
    predicted = model.predict(frame.iloc[700:720])["tags_predictions"]
    assert [list(p) for p in predicted] == [s.split() for s in frame["tags"].iloc[700:720]]
    assert list(model.predict(frame.iloc[:0]).columns) == ["tags_predictions", "tags_probabilities", "tags_probability"]


def test_vector_and_distribution_outputs_learn_counts(frame, make_config, tmp_path, cli, write_config, make_dataset):
    config = make_config([{"name": "src", "type": "sequence"}],
                         [{"name": "vec", "type": "vector"},
                          {"name": "dist", "type": "category_distribution", "preprocessing": {"vocab": ["a", "b"]}}],
                         trainer={"epochs": 10, "learning_rate": 0.01})
    model = Model(config)
    model.train(frame.iloc[:700])
    metrics = model.evaluate(frame.iloc[700:])
    assert metrics["vec"]["r2"] >= 0.5 and metrics["dist"]["kl_divergence"] <= 0.05, metrics
    assert set(metrics["vec"]) == set(METRICS_BY_OUTPUT_TYPE["vector"])
    assert set(metrics["dist"]) == set(METRICS_BY_OUTPUT_TYPE["category_distribution"])
    model.save(tmp_path / "model")
    code, _, err = cli("predict", "--model-path", tmp_path / "model", "--dataset", make_dataset(frame.iloc[700:710]),
                       "--output-directory", tmp_path / "out", "--output-format", "csv")
    assert code == 0, err
    written = pd.read_csv(tmp_path / "out" / "predictions.csv")
    assert list(written.columns) == ["vec_predictions", "dist_predictions", "dist_probability",
                                     "dist_probabilities_a", "dist_probabilities_b"]
    assert all(len(v.split()) == 3 for v in written["vec_predictions"])


@pytest.mark.parametrize("output, data, problem", [
    ({"name": "t", "type": "sequence", "decoder": "tagger"}, {"x": ["a b"] * 20, "t": ["N V"] * 20},
     "the tagger labels each step of a sequence, but the combiner gives one vector per row"),
    ({"name": "t", "type": "category_distribution"}, {"x": ["a b"] * 20, "t": ["1 -2"] * 20},
     "category_distribution feature 't': 20 row(s) of column 't' are not distributions"),
])
def test_bad_outputs_are_refused_through_the_cli(tmp_path, cli, write_config, make_dataset, make_config, output,
                                                 data, problem):
    config = write_config(make_config([{"name": "x", "type": "sequence"}], [output]))
    code, _, err = cli("train", "--config", config, "--dataset", make_dataset(data), "--output-directory",
                       tmp_path / "results")
    assert code == 2 and problem in err and "Traceback" not in err, err


def test_an_output_longer_than_max_sequence_length_is_cut_and_counted_in_the_log(tmp_path, cli, write_config,
                                                                                make_dataset, make_config, frame):
    config = write_config(make_config([{"name": "src", "type": "sequence"}],
                                      [{"name": "rev", "type": "text", "preprocessing": {"max_sequence_length": 3}}],
                                      trainer={"epochs": 1}))
    code, _, err = cli("train", "--config", config, "--dataset", make_dataset(frame.iloc[:200]),
                       "--output-directory", tmp_path / "results")
    longer = int((frame["rev"].iloc[:200].str.split().str.len() > 3).sum())
    assert code == 0 and longer > 0
    assert "training rows have more than 3 tokens (preprocessing.max_sequence_length); they are cut to that length" in err
